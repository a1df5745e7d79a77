/* Remapped code: each version of a function (smc.h) is written to a memfd by
 * the kernel (pwrite), never by a store of the program, and mapped at the
 * same address: after munmap, by mmap with MAP_FIXED over the old mapping,
 * and by mremap moving another mapping there. Calls each; exits with the
 * sum of the results, 28. */
#include "smc.h"

#define PROT_RX 5
#define MAP_PRIVATE 2
#define MAP_FIXED 0x10

static long map(unsigned char *at, long fd, long offset) {
    return sys6(9, (long)at, PAGE_SIZE, PROT_RX, MAP_PRIVATE | (at ? MAP_FIXED : 0), fd, offset);
}

static void put(long fd, int v, long offset) {
    sys4(18 /* pwrite64 */, fd, versions[v], CODE_SIZE, offset);
}

void _start(void) {
    static const char name[] = "code";
    long fd = sys2(319 /* memfd_create */, name, 0);
    sys2(77 /* ftruncate */, fd, 2 * PAGE_SIZE);
    put(fd, 0, 0);
    unsigned char *page = (unsigned char *)map(0, fd, 0);
    long sum = call_code(page);
    /* munmap, then mmap at the same address. */
    sys2(11 /* munmap */, page, PAGE_SIZE);
    put(fd, 1, 0);
    map(page, fd, 0);
    sum += call_code(page);
    /* mmap with MAP_FIXED over the mapping. */
    for (int v = 2; v < VERSIONS - 1; v++) {
        put(fd, v, 0);
        map(page, fd, 0);
        sum += call_code(page);
    }
    /* mremap another mapping over it. */
    put(fd, VERSIONS - 1, PAGE_SIZE);
    long other = map(0, fd, PAGE_SIZE);
    sys6(25 /* mremap */, other, PAGE_SIZE, PAGE_SIZE, 3 /* MAYMOVE|FIXED */, (long)page, 0);
    sum += call_code(page);
    sys_exit_group(sum);
}
