/* What Cachegrind's cache simulation filtered in the program's thread must
   get right, single-threaded so that every figure is the same under any
   backend: sweeps whose lines fall out of D1 and back, accesses across two
   lines, REP string instructions (passes that iterate and the last one),
   blocks the translate backend steps (a client request, a load with 32-bit
   addressing between loads of one set's lines, after which its tables
   must forget what they knew: a line claimed still first in its set would
   be evicted one load too early), a signal handler that evicts lines, and
   a fork (each process writes a profile; the child's starts with the
   parent's, up to the fork). */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
#include <valgrind/valgrind.h>

static volatile unsigned long sink, requested;
static unsigned char big[1 << 16];
static unsigned char copy[4096];

__attribute__((noipa)) static void sweep(int stride, int rounds)
{
    for (int round = 0; round < rounds; round++)
        for (int i = 0; i < (int)sizeof big; i += stride) sink += big[i];
}

__attribute__((noipa)) static void across_lines(void)
{
    /* 8-byte loads at every offset: some cross a line's end. */
    for (int i = 0; i < 1024; i++) {
        unsigned long word;
        memcpy(&word, big + 4096 + i, sizeof word);
        sink += word;
    }
}

__attribute__((noipa)) static void strings(void)
{
    unsigned long count = sizeof copy;
    void *to = copy, *from = big + 8192;
    __asm__ volatile("rep movsb" : "+D"(to), "+S"(from), "+c"(count) : : "memory");
    count = 300;
    to = big + 100;
    __asm__ volatile("rep stosb" : "+D"(to), "+c"(count) : "a"(7) : "memory");
    count = 0;
    __asm__ volatile("rep stosb" : "+D"(to), "+c"(count) : "a"(7) : "memory");
}

__attribute__((noipa)) static unsigned touch(volatile unsigned char *line)
{
    return *line;
}

/* A load through a 32-bit address (the translate backend steps its block). */
__attribute__((noipa)) static unsigned low_load(unsigned address)
{
    unsigned value;
    __asm__ volatile("movl (%k1), %0" : "=r"(value) : "r"(address) : "memory");
    return value;
}

/* Lines 4 KiB apart share a set of D1 (64 sets of 64-byte lines, 8 ways):
   after `low`, the stepped load of a second line, `low` again and seven
   more, `low` is the set's eighth line: it hits. */
__attribute__((noipa)) static void stepped_between(void)
{
    unsigned char *low = mmap(0, 1 << 16, PROT_READ | PROT_WRITE,
                              MAP_PRIVATE | MAP_ANONYMOUS | MAP_32BIT, -1, 0);
    if (low == MAP_FAILED) exit(2);
    sink += touch(low);
    sink += low_load((unsigned)(unsigned long)(low + 4096));
    sink += touch(low);
    for (int k = 2; k <= 8; k++) sink += touch(low + k * 4096);
    sink += touch(low);
}

static void on_usr1(int signal)
{
    (void)signal;
    for (int i = 0; i < (int)sizeof big; i += 64) big[i]++;
}

int main(void)
{
    signal(SIGUSR1, on_usr1);
    sweep(64, 3);
    across_lines();
    strings();
    requested += RUNNING_ON_VALGRIND;
    stepped_between();
    sweep(64, 1);
    raise(SIGUSR1);
    sweep(32, 1);
    fflush(stdout);
    pid_t child = fork();
    if (child == 0) {
        sweep(128, 2);
        printf("child %lu\n", sink & 0xff);
        return 0;
    }
    waitpid(child, 0, 0);
    strings();
    printf("parent %lu\n", sink & 0xff);
    return 0;
}
