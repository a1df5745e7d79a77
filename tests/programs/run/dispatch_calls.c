/* A loop calling through a table whose target changes on every turn (an
   interpreter's dispatch), for run_backends.rs: handlers that are leaves,
   that call on (directly, through libc's PLT, and through the table again,
   nested), that recurse through the table, and that jump on into another
   function (a tail call); the order of the targets repeats with a period
   of odd and of even length, and some targets come only now and then. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef long (*handler)(long, int);

static const handler *table;

__attribute__((noinline)) static long leaf(long x, int depth)
{
    return x * 3 + depth;
}

__attribute__((noinline)) static long branchy(long x, int depth)
{
    if (x & 4)
        return x + 7 - depth;
    return x / 2 + 1;
}

__attribute__((noinline)) static long with_libc(long x, int depth)
{
    char text[32];
    snprintf(text, sizeof text, "%ld", x & 0xffff);
    return x + (long)strlen(text) + depth;
}

__attribute__((noinline)) static long nested(long x, int depth)
{
    if (depth > 2)
        return x + 1;
    return table[x & 3](x + 1, depth + 1) + table[(x >> 2) & 3](x, depth + 1);
}

__attribute__((noinline)) static long recursive(long x, int depth)
{
    if (depth > 3 || (x & 1))
        return x - depth;
    return table[5](x >> 1, depth + 1) + 1;
}

__attribute__((noinline)) long tail_target(long x, int depth)
{
    return branchy(x ^ 9, depth) + 2;
}

__attribute__((noinline)) long tail(long x, int depth)
{
    return tail_target(x + 1, depth);
}

static const handler handlers[] = {leaf, branchy, with_libc, nested, tail, recursive, leaf, branchy};

__attribute__((noinline)) static long run(const unsigned char *code, int length, long x)
{
    for (int pc = 0; pc < length; pc++)
        x = table[code[pc]](x, 0) & 0xffffff;
    return x;
}

int main(int argc, char **argv)
{
    int turns = argc > 1 ? atoi(argv[1]) : 120;
    static const unsigned char odd[] = {0, 1, 2, 3, 4, 5, 1, 0, 2};
    static const unsigned char even[] = {1, 0, 3, 2, 5, 4, 7, 6};
    table = handlers;
    long x = 1;
    for (int turn = 0; turn < turns; turn++) {
        x = run(odd, sizeof odd, x);
        x = run(even, sizeof even, x);
        if (turn % 17 == 0)
            x += handlers[6](x, 1);
    }
    printf("%ld\n", x);
    return 0;
}
