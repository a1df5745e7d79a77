/* Two threads that are alive at the same time (the barrier makes sure), so
   that --separate-threads=yes writes one file per thread: main and two
   workers. */
#include <pthread.h>
#include <stdio.h>

static pthread_barrier_t barrier;

__attribute__((noipa)) static unsigned long work(unsigned long n)
{
    unsigned long sum = 0;
    for (unsigned long i = 0; i < n; i++)
        sum += i * i;
    return sum;
}

static void *worker(void *arg)
{
    unsigned long *n = arg;
    pthread_barrier_wait(&barrier);
    *n = work(*n);
    return NULL;
}

int main(void)
{
    pthread_t threads[2];
    unsigned long n[2] = {1000, 3000};
    pthread_barrier_init(&barrier, NULL, 2);
    for (int i = 0; i < 2; i++)
        pthread_create(&threads[i], NULL, worker, &n[i]);
    for (int i = 0; i < 2; i++)
        pthread_join(threads[i], NULL);
    printf("%lu\n", n[0] + n[1]);
    return 0;
}
