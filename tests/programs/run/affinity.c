/* Reads and sets the processors it may run on, as nproc and thread pools
 * do: prints how many it has (sched_getaffinity, through glibc and with
 * the raw system call), pins itself to its first one and reads that back,
 * takes its whole set back, then a thread prints its own, is pinned to the
 * first processor by the main thread (pthread_setaffinity_np) and prints
 * it again, a forked child prints its own, and the parent ends
 * (parent_end).
 * Between the steps it computes (work), for figures to compare. */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static unsigned long work(unsigned long n) {
    unsigned long s = 0;
    for (unsigned long i = 1; i <= n; i++)
        s += (i * i) % 7 + (s >> 3);
    return s;
}

static int count(void) {
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) != 0)
        return -1;
    return CPU_COUNT(&set);
}

static int first(const cpu_set_t *set) {
    for (int cpu = 0; cpu < CPU_SETSIZE; cpu++)
        if (CPU_ISSET(cpu, set))
            return cpu;
    return -1;
}

/* Run by the parent alone, after its child. */
__attribute__((noinline)) static void parent_end(int status) {
    printf("end: %d processors, child %d\n", count(), status);
}

/* The thread waits here while the main thread sets its processors. */
static pthread_barrier_t set_by_main;

static void *thread_main(void *arg) {
    (void)arg;
    printf("thread: %d processors, work %lu\n", count(), work(20000));
    pthread_barrier_wait(&set_by_main);
    pthread_barrier_wait(&set_by_main);
    printf("thread pinned by main: %d processors, work %lu\n", count(), work(20000));
    return NULL;
}

int main(void) {
    cpu_set_t own;
    CPU_ZERO(&own);
    if (sched_getaffinity(0, sizeof own, &own) != 0)
        return 1;
    printf("start: %d processors, work %lu\n", CPU_COUNT(&own), work(30000));
    cpu_set_t raw;
    CPU_ZERO(&raw);
    long bytes = syscall(SYS_sched_getaffinity, getpid(), sizeof raw, &raw);
    printf("raw: %ld bytes, %d processors, same %d\n", bytes > 0 ? 1L : bytes,
           CPU_COUNT(&raw), CPU_EQUAL(&raw, &own));
    cpu_set_t one;
    CPU_ZERO(&one);
    int cpu = first(&own);
    CPU_SET(cpu, &one);
    if (sched_setaffinity(0, sizeof one, &one) != 0)
        return 2;
    printf("pinned: %d processors, work %lu\n", count(), work(30000));
    cpu_set_t now;
    CPU_ZERO(&now);
    sched_getaffinity(0, sizeof now, &now);
    printf("pinned to its first: %d\n", CPU_ISSET(cpu, &now) && CPU_COUNT(&now) == 1);
    if (sched_setaffinity(0, sizeof own, &own) != 0)
        return 3;
    printf("back: %d processors, work %lu\n", count(), work(30000));
    fflush(stdout);
    pthread_t thread;
    pthread_barrier_init(&set_by_main, NULL, 2);
    pthread_create(&thread, NULL, thread_main, NULL);
    pthread_barrier_wait(&set_by_main);
    if (pthread_setaffinity_np(thread, sizeof one, &one) != 0)
        return 5;
    CPU_ZERO(&now);
    pthread_getaffinity_np(thread, sizeof now, &now);
    printf("main sees the thread on %d processors\n", CPU_COUNT(&now));
    pthread_barrier_wait(&set_by_main);
    pthread_join(thread, NULL);
    fflush(stdout);
    pid_t child = fork();
    if (child == 0) {
        printf("child: %d processors, work %lu\n", count(), work(20000));
        return 0;
    }
    int status;
    waitpid(child, &status, 0);
    parent_end(status);
    return status == 0 ? 0 : 4;
}
