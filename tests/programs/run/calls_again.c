/* Calls that repeat the last call of their arc, for run_backends.rs: a
   loop calling leaf functions directly (one whose path changes from call
   to call), through a table whose target changes every few turns, two in
   a row, nested, and libc's through the PLT (bound at the first call),
   from two call sites in turn; calls whose callee jumps on into another
   function (a tail call: a wrapper of ours, and libc's strcoll through the
   PLT, which jumps on to __strcoll_l; one that calls first, so the call's
   return goes on to the tail jump, from its first block or after a
   check); and a switch through a jump table
   whose cases are first reached one after another, long after the jump's
   first runs, each followed by a tail call through a pointer; and a
   function called from two call sites in turn that calls libc's memcpy
   through the PLT, its size (and so memcpy's path) the call site's; and
   one called from four call sites in turn (more callers' segments than a
   call's two cache entries hold) that calls libc's strlen through the PLT
   and, on some call sites' paths, a leaf; and calls with arguments on
   the stack, which the caller pops after the call and then calls on; and
   libc's strndup, whose address the program takes, through its stub in
   .plt.got (which Callgrind does not skip), and libc's malloc from it
   through libc's own. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef int (*step_fn)(int);

__attribute__((noinline)) static int leaf(int x) { return x * 3 + 1; }

__attribute__((noinline)) static int branchy(int x)
{
    if (x & 2)
        return x + 5;
    if (x % 7 == 0)
        return x * 2;
    return x - 1;
}

__attribute__((noinline)) static int twice(step_fn f, int x) { return f(x) + f(x + 1); }

__attribute__((noinline)) static long measure(const char *text) { return (long)strlen(text) + 1; }

__attribute__((noinline)) int wrapper(int x) { return branchy(x ^ 5); }

__attribute__((noinline)) static int via(step_fn f, int x) { return f(x); }

__attribute__((noinline)) int call_then_jump(int x) { return branchy(leaf(x) ^ 3); }

__attribute__((noinline)) int jumped_to(int x)
{
    if ((x & 15) == 15)
        return (int)getuid() & 1;
    return x - 2;
}

__attribute__((noinline)) int check_call_then_jump(int x)
{
    if (x < 0)
        return 0;
    return jumped_to(leaf(x) ^ 3);
}

__attribute__((noinline)) static int dispatch(int op, int x)
{
    switch (op) {
    case 0: return x + 1;
    case 1: return x * 3;
    case 2: return x - 7;
    case 3: return x ^ 0x55;
    case 4: return x << 2;
    case 5: return x >> 1;
    case 6: return x | 9;
    case 7: return x & 0x3f;
    case 8: return x * x;
    case 9: return x + op;
    default: return 0;
    }
}

struct sink {
    char buf[96];
    int used;
};

__attribute__((noinline)) static void put(struct sink *to, const char *from, int n)
{
    while (n > 0) {
        int room = (int)sizeof to->buf - to->used;
        int part = n < room ? n : room;
        memcpy(to->buf + to->used, from, (size_t)part);
        to->used += part;
        from += part;
        n -= part;
        if (to->used == (int)sizeof to->buf)
            to->used = 0;
    }
}

__attribute__((noinline)) static long locked(const char *text, int n)
{
    long got = (long)strlen(text + (n & 3));
    if (n & 1)
        got += leaf(n);
    return got;
}

__attribute__((noinline)) static long lookup(const char *text, int i)
{
    return locked(text, 1) + locked(text, 2) + locked(text, i & 3) + locked(text, 5);
}

__attribute__((noinline)) static long many(long a, long b, long c, long d, long e, long f,
                                           long g, long h)
{
    return a + b * c - d + (e ^ f) + g * h;
}

__attribute__((noinline)) static long stacked(int i)
{
    long got = many(i, 1, 2, 3, 4, 5, i & 7, 9);
    if (i & 1)
        got += leaf(i);
    got += many(got, i, 3, 4, 5, 6, 7, i);
    return got + branchy(i);
}

char *(*volatile duplicate)(const char *, size_t);

__attribute__((noinline)) static long copied(const char *text, int i)
{
    char *copy = strndup(text + (i & 3), 5);
    long got = copy ? copy[0] + (long)strlen(copy) : 0;
    free(copy);
    return got;
}

int main(int argc, char **argv)
{
    (void)argv;
    step_fn table[2] = {leaf, branchy};
    char text[16] = "abcdefghijk";
    static const char record[] = "a record of forty bytes, copied whole..";
    struct sink sink = {.used = 0};
    long sum = 0;
    duplicate = strndup;
    for (int i = 0; i < 200 + argc; i++) {
        put(&sink, text, 2 + (i & 1));
        put(&sink, record, (int)sizeof record - 1);
        sum += sink.used;
        sum += leaf(i);
        sum += branchy(i);
        sum += table[(i >> 3) & 1](i);
        sum += twice(table[i & 1], i);
        sum += (long)strlen(text + (i & 3));
        sum += measure(text + (i & 1));
        sum += wrapper(i);
        sum += call_then_jump(i);
        sum += check_call_then_jump(i);
        sum += strcoll(text + (i & 1), text);
        sum += lookup(text, i);
        sum += stacked(i);
        sum += copied(text, i);
        for (int op = 0; op <= i / 20 && op < 10; op++) {
            sum += dispatch(op, i);
            sum += via(table[op & 1], i);
        }
    }
    printf("%ld\n", sum);
    return 0;
}
