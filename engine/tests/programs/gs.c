/* Reads through the gs segment when built with EXIT_CODE 1 (a crash when run
 * alone: the GS base is 0), else only has such a read in a branch it never
 * takes; exits 0. */
#include "sys.h"

static volatile long use_gs = EXIT_CODE;

void _start(void) {
    work(10);
    if (use_gs) {
        long value;
        __asm__ volatile("mov %%gs:0, %0" : "=r"(value));
        sink_value = value;
    }
    sys_exit_group(0);
}
