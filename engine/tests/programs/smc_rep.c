/* Self-modifying code by REP stores: copies each version of a function
 * (smc.h) over the previous one with `rep movsb` (every other one
 * backwards, with the direction flag set) and calls it; exits with the sum
 * of the results, 28. */
#include "smc.h"

static void copy_forward(unsigned char *to, const unsigned char *from, unsigned long n) {
    __asm__ volatile("rep movsb" : "+D"(to), "+S"(from), "+c"(n) : : "memory");
}

static void copy_backward(unsigned char *to, const unsigned char *from, unsigned long n) {
    to += n - 1;
    from += n - 1;
    __asm__ volatile("std; rep movsb; cld" : "+D"(to), "+S"(from), "+c"(n) : : "memory", "cc");
}

void _start(void) {
    /* mmap(NULL, 4096, PROT_READ|PROT_WRITE|PROT_EXEC, MAP_PRIVATE|MAP_ANONYMOUS) */
    unsigned char *page = (unsigned char *)sys6(9, 0, PAGE_SIZE, 7, 0x22, -1, 0);
    long sum = 0;
    for (int v = 0; v < VERSIONS; v++) {
        if (v % 2)
            copy_backward(page, versions[v], CODE_SIZE);
        else
            copy_forward(page, versions[v], CODE_SIZE);
        sum += call_code(page);
    }
    sys_exit_group(sum);
}
