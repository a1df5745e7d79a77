/* Writes functions into a writable and executable mapping, runs them, rewrites
 * them in place (no system call in between, as JITs do) and runs them again.
 * Each function is `nops` no-ops then `mov eax, imm32; ret`; round r of slot s
 * stores imm = r * 7 + s. Prints the sum of what the calls returned; with a
 * thread count, each thread rewrites its own slots in the shared mapping. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define SLOTS 4
#define SLOT_BYTES 512

static unsigned char *code;
static long rounds = 100000;
static const int sizes[SLOTS] = {0, 3, 70, 200}; /* no-ops before the mov */

typedef int (*fn)(void);

static void write_slot(unsigned char *at, int nops, int32_t imm) {
    memset(at, 0x90, nops);
    at[nops] = 0xb8; /* mov eax, imm32 */
    memcpy(at + nops + 1, &imm, 4);
    at[nops + 5] = 0xc3; /* ret */
}

static void *worker(void *arg) {
    long thread = (long)arg;
    long sum = 0;
    for (long r = 0; r < rounds; r++) {
        for (int s = 0; s < SLOTS; s++) {
            unsigned char *at = code + (thread * SLOTS + s) * SLOT_BYTES;
            if (r == 0) write_slot(at, sizes[s], 0);
            else memcpy(at + sizes[s] + 1, &(int32_t){(int32_t)(r * 7 + s)}, 4);
            sum += ((fn)at)();
        }
    }
    return (void *)sum;
}

int main(int argc, char **argv) {
    long threads = argc > 1 ? atol(argv[1]) : 0;
    if (argc > 2) rounds = atol(argv[2]);
    long slots = (threads ? threads : 1) * SLOTS;
    code = mmap(NULL, slots * SLOT_BYTES, PROT_READ | PROT_WRITE | PROT_EXEC,
                MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (code == MAP_FAILED) { perror("mmap"); return 1; }
    long total = 0;
    if (threads == 0) {
        total = (long)worker((void *)0);
    } else {
        pthread_t ids[64];
        for (long t = 0; t < threads && t < 64; t++) pthread_create(&ids[t], NULL, worker, (void *)t);
        for (long t = 0; t < threads && t < 64; t++) { void *r; pthread_join(ids[t], &r); total += (long)r; }
    }
    printf("%ld\n", total);
    return 0;
}
