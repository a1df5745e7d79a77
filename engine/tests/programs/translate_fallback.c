/* Blocks the translate backend's first slice does not translate, between
 * translated ones: a `loop` instruction (a side exit in the middle of a
 * VEX block) and a client request (RUNNING_ON_VALGRIND; exits with its
 * answer). */
#include <valgrind/valgrind.h>
#include "sys.h"

__attribute__((noinline)) static long count_down(long n) {
    long total = 0;
    __asm__ volatile("1: add %%rcx, %0\n"
                     "   loop 1b\n"
                     "   add $1, %0\n"
                     : "+r"(total), "+c"(n)
                     :
                     : "cc");
    return total;
}

void _start(void) {
    work(50);
    sink_value = count_down(20);
    work(10);
    long running = (long)VALGRIND_DO_CLIENT_REQUEST_EXPR(0, VG_USERREQ__RUNNING_ON_VALGRIND, 0, 0, 0, 0, 0);
    work(10);
    sys_exit_group(running);
}
