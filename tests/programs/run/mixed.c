/* Acceptance 2 of `cgx run`: a small dynamically linked C program with the
   shapes of control flow a tracer must follow. Recursion (fib), mutual
   recursion (is_even/is_odd), calls through function pointers (ops),
   setjmp/longjmp out of a recursion (dive), a signal handler (raise(SIGUSR1)),
   two threads (pthread_create/join) and fork (the child and the parent each
   write a profile). It prints the same lines and exits with 3 under any
   profiler: the child prints before the parent, which waits for it. noipa keeps
   gcc from inlining, cloning or unrolling the calls. */
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static volatile unsigned long sink;
static jmp_buf escape;
static volatile sig_atomic_t signals;

__attribute__((noipa)) static unsigned long fib(unsigned long n)
{
    return n < 2 ? n : fib(n - 1) + fib(n - 2);
}

__attribute__((noipa)) static int is_odd(unsigned long n);

__attribute__((noipa)) static int is_even(unsigned long n)
{
    return n == 0 ? 1 : is_odd(n - 1);
}

__attribute__((noipa)) static int is_odd(unsigned long n)
{
    return n == 0 ? 0 : is_even(n - 1);
}

__attribute__((noipa)) static unsigned long square(unsigned long x) { return x * x; }
__attribute__((noipa)) static unsigned long twice(unsigned long x) { return x + x; }

/* Recurses `depth` levels, then jumps back to setjmp's caller. */
__attribute__((noipa)) static void dive(int depth)
{
    sink += (unsigned long)depth;
    if (depth == 0)
        longjmp(escape, 42);
    dive(depth - 1);
    sink++; /* never reached: not a tail call */
}

__attribute__((noipa)) static void on_signal(int number)
{
    signals += number;
    sink += fib(5);
}

__attribute__((noipa)) static void *worker(void *argument)
{
    unsigned long n = (unsigned long)argument;
    return (void *)fib(n);
}

__attribute__((noipa)) static unsigned long child_work(void)
{
    return fib(9) + (unsigned long)is_even(21);
}

__attribute__((noipa)) static unsigned long parent_work(void)
{
    return fib(8) + (unsigned long)is_odd(13);
}

int main(void)
{
    unsigned long (*ops[])(unsigned long) = {square, twice};
    // Enough own work that start-up, which differs under Valgrind, is
    // under 2% of the total.
    unsigned long total = fib(24);
    for (unsigned long i = 0; i < 20; i++)
        total += ops[i % 2](i) + (unsigned long)is_even(i);
    printf("calls: %lu\n", total);

    int jumped = setjmp(escape);
    if (jumped == 0)
        dive(6);
    printf("longjmp: %d\n", jumped);

    signal(SIGUSR1, on_signal);
    raise(SIGUSR1);
    printf("signals: %d\n", (int)signals);

    pthread_t threads[2];
    void *results[2];
    for (unsigned long i = 0; i < 2; i++)
        pthread_create(&threads[i], NULL, worker, (void *)(10 + i));
    for (int i = 0; i < 2; i++)
        pthread_join(threads[i], &results[i]);
    printf("threads: %lu %lu\n", (unsigned long)results[0], (unsigned long)results[1]);

    fflush(stdout);
    pid_t child = fork();
    if (child == 0) {
        printf("child: %lu\n", child_work());
        exit(0);
    }
    int status = 0;
    waitpid(child, &status, 0);
    printf("parent: %lu, child exit %d\n", parent_work(), WEXITSTATUS(status));
    return 3;
}
