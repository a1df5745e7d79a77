/* Stops itself: with an argument N, first starts N threads that compute
   (for a few seconds at most); prints "stopping PID", raises SIGSTOP, and
   once continued prints "continued", joins the threads and exits 0. */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static volatile int done;

static void *compute(void *unused) {
    volatile long sum = 0;
    for (long i = 0; i < 200000000 && !done; i++) sum += i;
    return unused;
}

int main(int argc, char **argv) {
    int threads = argc > 1 ? atoi(argv[1]) : 0;
    pthread_t ids[8];
    if (threads > 8) threads = 8;
    for (int i = 0; i < threads; i++) pthread_create(&ids[i], 0, compute, 0);
    printf("stopping %d\n", (int)getpid());
    fflush(stdout);
    raise(SIGSTOP);
    puts("continued");
    done = 1;
    for (int i = 0; i < threads; i++) pthread_join(ids[i], 0);
    return 0;
}
