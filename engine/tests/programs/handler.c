/* A signal handler without libc: SIGUSR1 is sent to the program twice; the
 * handler counts; it returns through its own restorer (rt_sigreturn). Exits
 * with the count. */
#include "sys.h"

#define SA_RESTORER 0x04000000

struct kernel_sigaction {
    void (*handler)(int);
    unsigned long flags;
    void (*restorer)(void);
    unsigned long mask;
};

static volatile long handled;

static void handler(int signal) {
    (void)signal;
    work(10);
    handled++;
}

void restorer(void);
__asm__(".globl restorer\n"
        "restorer:\n"
        "    mov $15, %eax\n"
        "    syscall\n");

void _start(void) {
    struct kernel_sigaction action = {handler, SA_RESTORER, restorer, 0};
    sys4(13 /* rt_sigaction */, 10 /* SIGUSR1 */, &action, 0, 8);
    long pid = sys0(39 /* getpid */);
    sys2(62 /* kill */, pid, 10);
    work(5);
    sys2(62 /* kill */, pid, 10);
    sys_exit_group(handled);
}
