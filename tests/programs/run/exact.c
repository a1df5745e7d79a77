/* Acceptance 1 of `cgx run`: a -static -nostdlib program on which every figure
   of cgx's profile must equal Valgrind's. It has recursion (fib), mutual
   recursion (is_even/is_odd, which gcc -O2 turns into jumps between the two
   functions: Callgrind's jump-is-a-call rule), calls through function pointers,
   a switch compiled to a jump table (apply), and REP string instructions
   (rep movsb, rep stosb, repne scasb, repe cmpsb, rep stosq), including REP
   with rcx = 0. noipa keeps gcc from inlining, cloning or unrolling the calls. */
#include "nolibc.h"

static unsigned char buffer_a[300], buffer_b[300];

__attribute__((noipa)) static u64 fib(u64 n)
{
    return n < 2 ? n : fib(n - 1) + fib(n - 2);
}

__attribute__((noipa)) static int is_odd(u64 n);

__attribute__((noipa)) static int is_even(u64 n)
{
    return n == 0 ? 1 : is_odd(n - 1);
}

__attribute__((noipa)) static int is_odd(u64 n)
{
    return n == 0 ? 0 : is_even(n - 1);
}

/* Eight dense cases: a jump table (`jmp *TABLE(,%rax,8)`). */
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

__attribute__((noipa)) static u64 square(u64 x) { return x * x; }
__attribute__((noipa)) static u64 twice(u64 x) { return x + x; }
__attribute__((noipa)) static u64 step(u64 x) { return apply((unsigned)(x % 9), x); }

__attribute__((noipa)) static void copy(void *to, const void *from, u64 n)
{
    __asm__ volatile("rep movsb" : "+D"(to), "+S"(from), "+c"(n) : : "memory");
}

__attribute__((noipa)) static void fill(void *to, int byte, u64 n)
{
    __asm__ volatile("rep stosb" : "+D"(to), "+c"(n) : "a"(byte) : "memory");
}

__attribute__((noipa)) static void fill_words(void *to, u64 word, u64 n)
{
    __asm__ volatile("rep stosq" : "+D"(to), "+c"(n) : "a"(word) : "memory");
}

/* How many bytes repne scasb leaves unscanned when it finds `byte`. */
__attribute__((noipa)) static u64 find(const void *in, int byte, u64 n)
{
    __asm__ volatile("repne scasb" : "+D"(in), "+c"(n) : "a"(byte) : "memory", "cc");
    return n;
}

/* How many bytes repe cmpsb leaves uncompared at the first difference. */
__attribute__((noipa)) static u64 compare(const void *a, const void *b, u64 n)
{
    __asm__ volatile("repe cmpsb" : "+D"(a), "+S"(b), "+c"(n) : : "memory", "cc");
    return n;
}

__attribute__((noipa)) static u64 strings(void)
{
    u64 result = 0;
    fill(buffer_a, 'x', sizeof buffer_a);
    fill(buffer_a, 'y', 0);
    buffer_a[200] = 'z';
    copy(buffer_b, buffer_a, 250);
    copy(buffer_b, buffer_a, 0);
    result += find(buffer_b, 'z', sizeof buffer_b);
    result += find(buffer_b, 'q', 0);
    result += compare(buffer_a, buffer_b, 260);
    fill_words(buffer_b, 0x0101010101010101ul, 20);
    result += compare(buffer_a, buffer_b, 100);
    return result;
}

__attribute__((noreturn)) void start(long *stack)
{
    u64 (*ops[])(u64) = {square, twice, step};
    u64 total = fib(15);
    for (u64 i = 0; i < 60; i++)
        total += ops[i % 3](i) + (u64)is_even(i);
    for (unsigned op = 0; op < 9; op++)
        total += apply(op, total);
    total += strings();
    nolibc_data = total;
    put_u64(total);
    /* Not argc + 2: the initial stack (argc) sits elsewhere under Valgrind,
       and with small simulated caches that one access evicts other lines. */
    (void)stack;
    sys_exit(3);
}
