/* `--collect-bus=yes`: a -static -nostdlib program whose atomic
   read-modify-writes (Callgrind's global bus events, `Ge`) are known. Each
   lock-prefixed instruction and `xchg` with memory is one event; `cmpxchg`
   without the prefix and `xchg` of two registers are none. The atomics sit
   in functions called from others, so the call arcs' inclusive `Ge` count
   too. noipa keeps gcc from inlining or cloning the calls. */
#include "nolibc.h"

static u64 words[8];

__attribute__((noipa)) static void add_locked(u64 n)
{
    __asm__ volatile("lock addq %1, %0" : "+m"(words[0]) : "r"(n));
    __asm__ volatile("lock incl %0" : "+m"(words[1]));
}

__attribute__((noipa)) static u64 exchange(u64 n)
{
    u64 other = n;
    __asm__ volatile("xchgq %1, %0" : "+m"(words[2]), "+r"(n));
    /* Two registers: no bus event. */
    __asm__ volatile("xchgq %1, %0" : "+r"(other), "+r"(n));
    return n + other;
}

__attribute__((noipa)) static u64 compare_and_swap(u64 n)
{
    u64 old = words[3];
    __asm__ volatile("lock cmpxchgq %2, %0" : "+m"(words[3]), "+a"(old) : "r"(n) : "cc");
    /* Without the prefix: not atomic, no bus event. */
    __asm__ volatile("cmpxchgq %2, %0" : "+m"(words[4]), "+a"(old) : "r"(n) : "cc");
    __asm__ volatile("lock xaddq %1, %0" : "+m"(words[5]), "+r"(n));
    return n + old;
}

__attribute__((noipa)) static u64 work(u64 i)
{
    add_locked(i);
    u64 total = exchange(i);
    if (i % 3 == 0)
        total += compare_and_swap(i);
    return total;
}

__attribute__((noreturn)) void start(long *stack)
{
    u64 total = 0;
    for (u64 i = 0; i < 50; i++)
        total += work(i);
    nolibc_data = total + words[0] + words[5];
    put_u64(nolibc_data);
    (void)stack;
    sys_exit(0);
}
