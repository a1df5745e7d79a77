/* The system calls cgx refuses as Valgrind 3.19 does (engine/src/refusals.rs):
   prints whether glibc registered its rseq area (__rseq_size, 0 when rseq
   failed), the errno of a clone3 with no arguments (EINVAL from a kernel
   that has it, ENOSYS under Valgrind), and then starts THREADS threads
   with pthread_create (clone3, or clone when clone3 fails), each of which
   asks for its processor. */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <sys/rseq.h>
#include <sys/syscall.h>
#include <unistd.h>

#define THREADS 3

static void *ask_cpu(void *arg)
{
    *(int *)arg = sched_getcpu() >= 0;
    return NULL;
}

int main(void)
{
    printf("rseq area %u bytes\n", __rseq_size);
    errno = 0;
    long clone3 = syscall(SYS_clone3, NULL, 0);
    printf("clone3: %ld, errno %d\n", clone3, errno);
    pthread_t threads[THREADS];
    int known[THREADS] = {0};
    for (int i = 0; i < THREADS; i++)
        if (pthread_create(&threads[i], NULL, ask_cpu, &known[i]) != 0)
            return 1;
    int all = 1;
    for (int i = 0; i < THREADS; i++) {
        pthread_join(threads[i], NULL);
        all &= known[i];
    }
    printf("%d threads knew their processor: %s\n", THREADS, all ? "yes" : "no");
    return 0;
}
