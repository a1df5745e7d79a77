/* Writes to address 0: killed by SIGSEGV. */
#include "sys.h"

void _start(void) {
    work(10);
    *(volatile long *)0 = 1;
    sys_exit_group(0);
}
