/* A timer signal every millisecond while the program sweeps an array in
 * long straight-line blocks: the signals interrupt blocks in their middle.
 * Prints a checksum of the sweep and whether a signal came; `sweep`'s own
 * costs do not depend on where the signals land. */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>

static volatile long ticks;
static double a[4096];

static void on_alarm(int signal) {
    (void)signal;
    ticks++;
}

#define STEP(k) s += a[(i + k * 67) & 4095] * 1.5 - a[(i * 13 + k) & 4095] * 0.5;

__attribute__((noinline)) static double sweep(int n) {
    double s = 0;
    for (int i = 0; i < n; i++) {
        STEP(0) STEP(1) STEP(2) STEP(3) STEP(4) STEP(5) STEP(6) STEP(7)
        a[(i * 3) & 4095] = s * 1e-9;
    }
    return s;
}

int main(void) {
    for (int i = 0; i < 4096; i++)
        a[i] = (i % 17) * 0.25;
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_handler = on_alarm;
    sigaction(SIGALRM, &action, NULL);
    struct itimerval every = {{0, 1000}, {0, 1000}};
    setitimer(ITIMER_REAL, &every, NULL);
    double total = 0;
    for (int round = 0; round < 1500; round++)
        total += sweep(4096);
    struct itimerval stop = {{0, 0}, {0, 0}};
    setitimer(ITIMER_REAL, &stop, NULL);
    printf("%.6e %d\n", total, ticks > 0);
    return 0;
}
