/* Calls nested deeper than a few levels, repeated in a loop, for
   run_backends.rs: a chain of 30 functions each calling the next; a
   recursion 40 deep calling a leaf at each level, and one 70 deep (past
   the calls that may be pending at once); two functions calling each
   other 30 deep, each calling libc's strlen through the PLT; and a
   recursion with two call sites (each level's two calls from different
   places). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static volatile int sink;

__attribute__((noinline)) static int leaf(int x)
{
    sink = x;
    return x & 3;
}

__attribute__((noinline)) static int chain0(int x) { return leaf(x) + 1; }
__attribute__((noinline)) static int chain1(int x) { return chain0(x + 1) + 1; }
__attribute__((noinline)) static int chain2(int x) { return chain1(x + 1) + 1; }
__attribute__((noinline)) static int chain3(int x) { return chain2(x + 1) + 1; }
__attribute__((noinline)) static int chain4(int x) { return chain3(x + 1) + 1; }
__attribute__((noinline)) static int chain5(int x) { return chain4(x + 1) + 1; }
__attribute__((noinline)) static int chain6(int x) { return chain5(x + 1) + 1; }
__attribute__((noinline)) static int chain7(int x) { return chain6(x + 1) + 1; }
__attribute__((noinline)) static int chain8(int x) { return chain7(x + 1) + 1; }
__attribute__((noinline)) static int chain9(int x) { return chain8(x + 1) + 1; }
__attribute__((noinline)) static int chain10(int x) { return chain9(x + 1) + 1; }
__attribute__((noinline)) static int chain11(int x) { return chain10(x + 1) + 1; }
__attribute__((noinline)) static int chain12(int x) { return chain11(x + 1) + 1; }
__attribute__((noinline)) static int chain13(int x) { return chain12(x + 1) + 1; }
__attribute__((noinline)) static int chain14(int x) { return chain13(x + 1) + 1; }
__attribute__((noinline)) static int chain15(int x) { return chain14(x + 1) + 1; }
__attribute__((noinline)) static int chain16(int x) { return chain15(x + 1) + 1; }
__attribute__((noinline)) static int chain17(int x) { return chain16(x + 1) + 1; }
__attribute__((noinline)) static int chain18(int x) { return chain17(x + 1) + 1; }
__attribute__((noinline)) static int chain19(int x) { return chain18(x + 1) + 1; }
__attribute__((noinline)) static int chain20(int x) { return chain19(x + 1) + 1; }
__attribute__((noinline)) static int chain21(int x) { return chain20(x + 1) + 1; }
__attribute__((noinline)) static int chain22(int x) { return chain21(x + 1) + 1; }
__attribute__((noinline)) static int chain23(int x) { return chain22(x + 1) + 1; }
__attribute__((noinline)) static int chain24(int x) { return chain23(x + 1) + 1; }
__attribute__((noinline)) static int chain25(int x) { return chain24(x + 1) + 1; }
__attribute__((noinline)) static int chain26(int x) { return chain25(x + 1) + 1; }
__attribute__((noinline)) static int chain27(int x) { return chain26(x + 1) + 1; }
__attribute__((noinline)) static int chain28(int x) { return chain27(x + 1) + 1; }
__attribute__((noinline)) static int chain29(int x) { return chain28(x + 1) + 1; }

__attribute__((noinline)) static int down(int depth, int x)
{
    if (depth == 0)
        return x;
    return down(depth - 1, x + 1) + leaf(depth);
}

static const char *words[] = {"a", "bb", "ccc", "dddd"};

__attribute__((noinline)) static int odd(int depth);

__attribute__((noinline)) static int even(int depth)
{
    if (depth == 0)
        return 0;
    return odd(depth - 1) + (int)strlen(words[depth & 3]);
}

__attribute__((noinline)) static int odd(int depth)
{
    if (depth == 0)
        return 1;
    return even(depth - 1) + (int)strlen(words[(depth + 1) & 3]) * 2;
}

__attribute__((noinline)) static int fib(int n)
{
    if (n < 2)
        return n;
    return fib(n - 1) + fib(n - 2);
}

int main(int argc, char **argv)
{
    int rounds = argc > 1 ? atoi(argv[1]) : 60;
    long sum = 0;
    for (int round = 0; round < rounds; round++) {
        sum += chain29(round);
        sum += down(40, round);
        sum += down(70, round);
        sum += even(30 + (round & 1));
        sum += fib(10);
    }
    printf("%ld\n", sum);
    return 0;
}
