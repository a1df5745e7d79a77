/* Cachegrind 3.22's client requests CACHEGRIND_START_INSTRUMENTATION and
   CACHEGRIND_STOP_INSTRUMENTATION (raw, as Valgrind 3.19 has no cachegrind.h)
   in a -static -nostdlib program: `before` runs before the start request,
   `counted` between the two, `after` after the stop. */
#include "nolibc.h"
#include <valgrind/valgrind.h>

/* Cachegrind's request codes ('C', 'G' and 0, 1). */
#define CG_START 0x43470000
#define CG_STOP 0x43470001

__attribute__((noipa)) static u64 sum_to(u64 n)
{
    u64 sum = 0;
    for (u64 i = 0; i < n; i++)
        sum += i ^ nolibc_data;
    return sum;
}

__attribute__((noipa)) static u64 before(void) { return sum_to(300); }
__attribute__((noipa)) static u64 counted(void) { return sum_to(200); }
__attribute__((noipa)) static u64 after(void) { return sum_to(100); }

__attribute__((noreturn)) void start(long *stack)
{
    (void)stack;
    u64 total = before();
    VALGRIND_DO_CLIENT_REQUEST_STMT(CG_START, 0, 0, 0, 0, 0);
    total += counted();
    VALGRIND_DO_CLIENT_REQUEST_STMT(CG_STOP, 0, 0, 0, 0, 0);
    total += after();
    nolibc_data = total;
    put_u64(total);
    sys_exit(0);
}
