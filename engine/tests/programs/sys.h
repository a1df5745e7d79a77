/* Raw Linux x86-64 system calls for the -nostdlib test programs. */
#ifndef CGX_SYS_H
#define CGX_SYS_H

static inline long sys6(long n, long a, long b, long c, long d, long e, long f) {
    long r;
    register long r10 __asm__("r10") = d;
    register long r8 __asm__("r8") = e;
    register long r9 __asm__("r9") = f;
    __asm__ volatile("syscall"
                     : "=a"(r)
                     : "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9)
                     : "rcx", "r11", "memory");
    return r;
}
#define sys0(n) sys6((n), 0, 0, 0, 0, 0, 0)
#define sys1(n, a) sys6((n), (long)(a), 0, 0, 0, 0, 0)
#define sys2(n, a, b) sys6((n), (long)(a), (long)(b), 0, 0, 0, 0)
#define sys3(n, a, b, c) sys6((n), (long)(a), (long)(b), (long)(c), 0, 0, 0)
#define sys4(n, a, b, c, d) sys6((n), (long)(a), (long)(b), (long)(c), (long)(d), 0, 0)

__attribute__((noreturn)) static inline void sys_exit_group(long status) {
    sys1(231, status);
    __builtin_unreachable();
}

/* A signal handler without libc: rt_sigaction(2)'s structure, and a
 * restorer that returns through rt_sigreturn. */
#define SA_RESTORER 0x04000000

struct kernel_sigaction {
    void (*handler)(int);
    unsigned long flags;
    void (*restorer)(void);
    unsigned long mask;
};

void restorer(void);
__asm__(".globl restorer\n"
        "restorer:\n"
        "    mov $15, %eax\n"
        "    syscall\n");

/* Installs `handler` for `signal`. */
static inline void catch_signal(int signal, void (*handler)(int)) {
    struct kernel_sigaction action = {handler, SA_RESTORER, restorer, 0};
    sys4(13 /* rt_sigaction */, signal, &action, 0, 8);
}

#define SIGALRM 14
#define ITIMER_REAL 0

/* Sends SIGALRM every `microseconds` (0: no more). */
static inline void alarm_every(long microseconds) {
    long timer[4] = {0, microseconds, 0, microseconds};
    sys3(38 /* setitimer */, ITIMER_REAL, timer, 0);
}

/* Some work the compiler cannot fold: n iterations of a small loop. */
static volatile long sink_value;
__attribute__((noinline)) static void work(long n) {
    for (long i = 0; i < n; i++)
        sink_value += i;
}

/* Signals handled by `count_signal`. */
static volatile long counted_signals;

/* A handler that does some work and counts. */
static void count_signal(int signal) {
    (void)signal;
    work(3);
    counted_signals++;
}

#endif
