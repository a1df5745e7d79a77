/* Acceptance 3 of `cgx run`: Valgrind's client requests from callgrind.h in a
   -static -nostdlib program (the macros are inline assembly). It prints what
   RUNNING_ON_VALGRIND returns (0 natively, non-zero under a profiler), then works
   in phases: one outside instrumentation (STOP/START_INSTRUMENTATION), one whose
   costs are zeroed (ZERO_STATS), one collected only inside TOGGLE_COLLECT, and
   three dumps (DUMP_STATS, DUMP_STATS_AT, and the final one at exit). */
#include "nolibc.h"
#include <valgrind/callgrind.h>

__attribute__((noipa)) static u64 fib(u64 n)
{
    return n < 2 ? n : fib(n - 1) + fib(n - 2);
}

__attribute__((noipa)) static u64 sum_to(u64 n)
{
    u64 sum = 0;
    for (u64 i = 0; i < n; i++)
        sum += i ^ nolibc_data;
    return sum;
}

__attribute__((noipa)) static u64 unseen(void) { return sum_to(300) + fib(8); }
__attribute__((noipa)) static u64 zeroed(void) { return sum_to(200); }
__attribute__((noipa)) static u64 toggled(void) { return fib(7) + sum_to(50); }
__attribute__((noipa)) static u64 first(void) { return fib(9) + sum_to(100); }
__attribute__((noipa)) static u64 second(void) { return fib(10); }
__attribute__((noipa)) static u64 last(void) { return sum_to(150); }

__attribute__((noreturn)) void start(long *stack)
{
    (void)stack;
    put_str("running on valgrind: ");
    put_u64((u64)RUNNING_ON_VALGRIND);
    u64 total = 0;

    CALLGRIND_STOP_INSTRUMENTATION;
    total += unseen();
    CALLGRIND_START_INSTRUMENTATION;

    total += zeroed();
    CALLGRIND_ZERO_STATS;

    CALLGRIND_TOGGLE_COLLECT;
    total += toggled();
    CALLGRIND_TOGGLE_COLLECT;
    total += toggled();

    total += first();
    CALLGRIND_DUMP_STATS;
    total += second();
    CALLGRIND_DUMP_STATS_AT("after second");
    total += last();

    nolibc_data = total;
    put_u64(total);
    sys_exit(0);
}
