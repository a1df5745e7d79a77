/* A store to a read-only page in the middle of a block of loads: the
 * SIGSEGV handler makes the page writable and returns, and the store runs
 * again, then the rest of the block. Ten rounds; exits 0 when each faulted
 * once. */
#include "sys.h"

#define ROUNDS 10

static volatile long data[64];
static volatile long *page;
static volatile long faults;

static void on_segv(int signal) {
    (void)signal;
    faults++;
    sys3(10 /* mprotect */, page, 4096, 3 /* PROT_READ | PROT_WRITE */);
}

/* Loads, the store that faults, more loads: one block. */
__attribute__((noinline)) static long straight(void) {
    long sum = data[0] + data[8] + data[16] + data[24];
    *page = sum;
    return sum + data[32] + data[40] + data[48] + data[56];
}

void _start(void) {
    /* mmap(NULL, 4096, PROT_READ|PROT_WRITE, MAP_PRIVATE|MAP_ANONYMOUS) */
    page = (volatile long *)sys6(9, 0, 4096, 3, 0x22, -1, 0);
    catch_signal(11 /* SIGSEGV */, on_segv);
    long sum = 0;
    for (int round = 0; round < ROUNDS; round++) {
        data[round] = round;
        sys3(10 /* mprotect */, page, 4096, 1 /* PROT_READ */);
        sum += straight();
    }
    sys_exit_group(faults == ROUNDS && sum > 0 ? 0 : 1);
}
