/* The little a -static -nostdlib test program needs instead of libc: an entry
   point that passes the initial stack to start(), system calls, and output.
   Every program including this must define
       __attribute__((noreturn)) void start(long *stack);
   where stack[0] is argc and stack + 1 is argv. The writable `nolibc_data`
   gives the executable a read-write segment: without one Valgrind 3.19 reads
   no symbols and names functions by address. _start moves to a stack of its
   own in .bss: the initial stack is elsewhere under Valgrind (and the
   kernel's moves), and a simulated cache must see the same addresses. */
#ifndef NOLIBC_H
#define NOLIBC_H

typedef unsigned long u64;

volatile u64 nolibc_data = 1;

__attribute__((noreturn)) void start(long *stack);

__asm__(".bss\n"
        ".balign 4096\n"
        "nolibc_stack:\n"
        "  .skip 65536\n"
        "nolibc_stack_top:\n"
        ".text\n"
        ".globl _start\n"
        ".type _start,@function\n"
        "_start:\n"
        "  xor %ebp, %ebp\n"
        "  mov %rsp, %rdi\n"
        "  lea nolibc_stack_top(%rip), %rsp\n"
        "  call start\n"
        "  hlt\n"
        ".size _start, .-_start\n");

static inline long sys3(long number, long a, long b, long c)
{
    long result;
    __asm__ volatile("syscall"
                     : "=a"(result)
                     : "a"(number), "D"(a), "S"(b), "d"(c)
                     : "rcx", "r11", "memory");
    return result;
}

static inline long sys4(long number, long a, long b, long c, long d)
{
    long result;
    register long r10 __asm__("r10") = d;
    __asm__ volatile("syscall"
                     : "=a"(result)
                     : "a"(number), "D"(a), "S"(b), "d"(c), "r"(r10)
                     : "rcx", "r11", "memory");
    return result;
}

__attribute__((noreturn)) static inline void sys_exit(long code)
{
    sys3(231 /* exit_group */, code, 0, 0);
    __builtin_unreachable();
}

static inline long str_len(const char *s)
{
    long n = 0;
    while (s[n])
        n++;
    return n;
}

static inline void put_str(const char *s)
{
    sys3(1 /* write */, 1, (long)s, str_len(s));
}

/* Writes `value` in decimal and a newline. */
static inline void put_u64(u64 value)
{
    char text[24];
    int at = 23;
    text[at] = '\n';
    do {
        text[--at] = (char)('0' + value % 10);
        value /= 10;
    } while (value);
    sys3(1, 1, (long)(text + at), 24 - at);
}

#endif
