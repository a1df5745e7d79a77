/* The shapes of call graph the formats must carry: recursion (fib), mutual
   recursion (is_even/is_odd), calls through function pointers (ops) and a
   function inlined from a header (mix). noipa keeps gcc -O2 from inlining,
   cloning or turning the recursion into loops. */
#include <stdio.h>
#include "mix.h"

static volatile unsigned sink;

__attribute__((noipa)) static unsigned fib(unsigned n)
{
    return n < 2 ? n : fib(n - 1) + fib(n - 2);
}

__attribute__((noipa)) static int is_odd(unsigned n);

__attribute__((noipa)) static int is_even(unsigned n)
{
    return n == 0 ? 1 : is_odd(n - 1);
}

__attribute__((noipa)) static int is_odd(unsigned n)
{
    return n == 0 ? 0 : is_even(n - 1);
}

__attribute__((noipa)) static unsigned square(unsigned x)
{
    return mix(x) * x;
}

__attribute__((noipa)) static unsigned twice(unsigned x)
{
    return mix(x) + x;
}

int main(void)
{
    unsigned (*ops[])(unsigned) = {square, twice};
    unsigned total = fib(15);
    for (unsigned i = 0; i < 40; i++)
        total += ops[i % 2](i) + (unsigned)is_even(i);
    sink = mix(total);
    printf("%u\n", sink);
    return 0;
}
