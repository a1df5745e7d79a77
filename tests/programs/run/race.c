/* Many threads reach the same new code at once: a barrier releases them
 * into a chain of functions none has run yet, each with branches whose
 * exits get linked while the other threads run through them. Prints the
 * sum of their results. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#define THREADS 16

static pthread_barrier_t start;

#define F(n, next) \
    __attribute__((noinline)) static long f##n(long x) { \
        long s = x; \
        for (int i = 0; i < 3; i++) { if ((x + i) & 1) s += n * i; else s ^= n + i; } \
        return next(s) + 1; \
    }
__attribute__((noinline)) static long f_end(long x) { return x & 0xffff; }
#define F10(p, next) F(p##9, next) F(p##8, f##p##9) F(p##7, f##p##8) F(p##6, f##p##7) F(p##5, f##p##6) \
    F(p##4, f##p##5) F(p##3, f##p##4) F(p##2, f##p##3) F(p##1, f##p##2) F(p##0, f##p##1)
F10(4, f_end)
F10(3, f40)
F10(2, f30)
F10(1, f20)

static void *worker(void *arg) {
    long id = (long)arg;
    pthread_barrier_wait(&start);
    long sum = 0;
    for (int r = 0; r < 50; r++) sum += f10(id * 1000 + r);
    return (void *)sum;
}

int main(void) {
    pthread_t ids[THREADS];
    pthread_barrier_init(&start, NULL, THREADS);
    for (long t = 0; t < THREADS; t++) pthread_create(&ids[t], NULL, worker, (void *)t);
    long total = 0;
    for (int t = 0; t < THREADS; t++) { void *r; pthread_join(ids[t], &r); total += (long)r; }
    printf("%ld\n", total);
    return 0;
}
