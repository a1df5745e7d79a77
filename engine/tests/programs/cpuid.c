/* `cpuid` in the middle of blocks, run several times: exits with the low
 * byte of the vendor's first four letters (leaf 0's ebx) plus the number
 * of leaves, so the exit code tells which processor answered. */
#include "sys.h"

__attribute__((noinline)) static unsigned vendor(unsigned *leaves) {
    unsigned eax = 0, ebx, ecx = 0, edx;
    __asm__ volatile("add $0, %%rsp\n"
                     "cpuid\n"
                     "add $0, %%rsp\n"
                     : "+a"(eax), "=b"(ebx), "+c"(ecx), "=d"(edx)
                     :
                     : "cc");
    *leaves = eax;
    return ebx;
}

void _start(void) {
    unsigned leaves = 0, first = 0;
    for (int i = 0; i < 5; i++)
        first = vendor(&leaves);
    sys_exit_group((long)((first & 0xff) + leaves) & 0xff);
}
