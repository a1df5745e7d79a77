/* Waits for signals: prints "ready" once its handler is in place, then
   sleeps. SIGUSR1 is handled (prints "got SIGUSR1" and exits 0); every
   other signal has its default action (SIGTERM, SIGHUP, SIGINT end it). */
#include <signal.h>
#include <stdio.h>
#include <unistd.h>

static volatile sig_atomic_t got;

static void on_usr1(int signal) { got = signal; }

int main(void) {
    signal(SIGUSR1, on_usr1);
    puts("ready");
    fflush(stdout);
    for (int second = 0; second < 60 && !got; second++) sleep(1);
    if (!got) return 1;
    puts("got SIGUSR1");
    return 0;
}
