/* A -static -nostdlib program long enough (about 9 million instructions)
   that its records fill cgx's record buffer several times: the drains then
   have many chunks, and the simulations run ahead of the collector on the
   other thread. Every figure must still equal Valgrind's. It recurses
   (fib), calls through a jump table, sweeps an array bigger than small
   caches with loads, stores and read-modify-writes, sums it in a loop of
   one block, and copies with a REP string instruction. noipa keeps gcc from inlining the calls. */
#include "nolibc.h"

static u64 table[4096];

__attribute__((noipa)) static u64 fib(u64 n)
{
    return n < 2 ? n : fib(n - 1) + fib(n - 2);
}

__attribute__((noipa)) static u64 apply(unsigned op, u64 x)
{
    switch (op) {
    case 0: return x + 7;
    case 1: return x * 3;
    case 2: return x ^ 0x55;
    case 3: return x << 2;
    case 4: return x >> 1;
    case 5: return x - 11;
    case 6: return x * x;
    case 7: return ~x;
    default: return 0;
    }
}

/* Loads, stores and read-modify-writes with a stride of 9 words. */
__attribute__((noipa)) static u64 sweep(u64 seed)
{
    u64 sum = 0;
    for (u64 i = 0; i < 4096; i++) {
        u64 at = (i * 9 + seed) % 4096;
        table[at] += apply((unsigned)(i % 9), table[(at + 1) % 4096]);
        sum ^= table[i];
    }
    return sum;
}

/* A loop of one block: thousands of its runs in a row. */
__attribute__((noipa)) static u64 total_of(const u64 *from, u64 n)
{
    u64 sum = 0;
    for (u64 i = 0; i < n; i++)
        sum += from[i] ^ i;
    return sum;
}

__attribute__((noipa)) static void copy(void *to, const void *from, u64 n)
{
    __asm__ volatile("rep movsb" : "+D"(to), "+S"(from), "+c"(n) : : "memory");
}

__attribute__((noreturn)) void start(long *stack)
{
    u64 total = fib(22);
    for (u64 round = 0; round < 40; round++) {
        total += sweep(round) + total_of(table, 4096);
        copy(table + 2048, table, 1024 * 8);
    }
    put_u64(total);
    (void)stack;
    sys_exit(5);
}
