/* A JIT's pattern: each version of a function (smc.h) is written by stores
 * of the program into a page while it is read-write, then the page is made
 * executable with mprotect and called; then mprotect makes it writable
 * again for the next version. Also a madvise(MADV_DONTNEED) that zeroes
 * the page between two versions. Exits with the sum of the results, 28. */
#include "smc.h"

#define PROT_RW 3
#define PROT_RX 5
#define MAP_PRIVATE_ANONYMOUS 0x22

static void put(unsigned char *page, int v) {
    for (int i = 0; i < CODE_SIZE; i++)
        ((volatile unsigned char *)page)[i] = versions[v][i];
}

void _start(void) {
    unsigned char *page =
        (unsigned char *)sys6(9, 0, PAGE_SIZE, PROT_RW, MAP_PRIVATE_ANONYMOUS, -1, 0);
    long sum = 0;
    for (int v = 0; v < VERSIONS; v++) {
        if (v == 4)
            sys3(28 /* madvise */, page, PAGE_SIZE, 4 /* MADV_DONTNEED */);
        sys3(10 /* mprotect */, page, PAGE_SIZE, PROT_RW);
        put(page, v);
        sys3(10 /* mprotect */, page, PAGE_SIZE, PROT_RX);
        sum += call_code(page);
    }
    sys_exit_group(sum);
}
