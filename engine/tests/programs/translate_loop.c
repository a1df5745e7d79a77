/* A loop-heavy program without libc for the translate backend (~10 million
 * instructions): direct and indirect calls, returns, conditional jumps, a
 * switch through a jump table, REP string instructions, a system call. */

#include "sys.h"

#ifndef EXIT_CODE
#define EXIT_CODE 0
#endif

static char buffer[512];
static volatile long rounds = 37000;

__attribute__((noinline)) static long add(long a, long b) { return a + b; }
__attribute__((noinline)) static long mul(long a, long b) { return a * b; }
__attribute__((noinline)) static long sub(long a, long b) { return a - b; }

static long (*const operations[3])(long, long) = {add, mul, sub};

__attribute__((noinline)) static long classify(long x) {
    switch (x & 7) {
    case 0: return x + 3;
    case 1: return x ^ 5;
    case 2: return x * 7;
    case 3: return x - 11;
    case 4: return x >> 1;
    case 5: return x << 2;
    case 6: return ~x;
    default: return x;
    }
}

__attribute__((noinline)) static void fill(char *to, int byte, unsigned long n) {
    __asm__ volatile("rep stosb" : "+D"(to), "+c"(n) : "a"(byte) : "memory");
}

__attribute__((noinline)) static unsigned long find(const char *in, int byte, unsigned long n) {
    __asm__ volatile("repne scasb" : "+D"(in), "+c"(n) : "a"(byte) : "memory", "cc");
    return n;
}

__attribute__((noinline)) static long round_of(long i) {
    long total = 0;
    for (long j = 0; j < 8; j++) {
        total += operations[(i + j) % 3](i, j);
        total += classify(total + j);
    }
    return total;
}

void _start(void) {
    long total = 0;
    long n = rounds;
    for (long i = 0; i < n; i++) {
        total += round_of(i);
        if ((i & 255) == 0) {
            fill(buffer, 'a' + (i & 7), 300);
            buffer[200] = 'z';
            total += (long)find(buffer, 'z', 400);
        }
    }
    total += sys0(39 /* getpid */) > 0;
    sink_value = total;
    sys_exit_group(EXIT_CODE);
}
