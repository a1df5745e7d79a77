/* A signal handler without libc: SIGUSR1 is sent to the program twice; the
 * handler counts; it returns through its own restorer (rt_sigreturn). Exits
 * with the count. */
#include "sys.h"

static volatile long handled;

static void handler(int signal) {
    (void)signal;
    work(10);
    handled++;
}

void _start(void) {
    catch_signal(10 /* SIGUSR1 */, handler);
    long pid = sys0(39 /* getpid */);
    sys2(62 /* kill */, pid, 10);
    work(5);
    sys2(62 /* kill */, pid, 10);
    sys_exit_group(handled);
}
