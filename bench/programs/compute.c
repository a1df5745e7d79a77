/* A compute-bound benchmark for bench/compare.sh: an N x N matrix multiply
 * (doubles, naive i-k-j loops) and a qsort of N*N pseudo-random integers,
 * then a checksum so the compiler keeps the work.
 *
 *     compute [N]      (default 400: about 400M instructions)
 *
 * The instruction count grows as N^3 (the multiply) plus N^2 log N (qsort);
 * N = 20 gives a few hundred thousand, small enough for the step backend.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static uint32_t rng_state = 12345;

static uint32_t next_random(void) {
    /* xorshift32: deterministic, so every run does the same work. */
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 17;
    rng_state ^= rng_state << 5;
    return rng_state;
}

static void matmul(size_t n, const double *a, const double *b, double *c) {
    for (size_t i = 0; i < n; i++) {
        for (size_t j = 0; j < n; j++) c[i * n + j] = 0.0;
        for (size_t k = 0; k < n; k++) {
            double aik = a[i * n + k];
            for (size_t j = 0; j < n; j++) c[i * n + j] += aik * b[k * n + j];
        }
    }
}

static int compare_ints(const void *x, const void *y) {
    int a = *(const int *)x, b = *(const int *)y;
    return (a > b) - (a < b);
}

int main(int argc, char **argv) {
    size_t n = argc > 1 ? strtoul(argv[1], NULL, 10) : 400;
    if (n == 0) {
        fprintf(stderr, "usage: %s [N > 0]\n", argv[0]);
        return 2;
    }
    double *a = malloc(n * n * sizeof *a), *b = malloc(n * n * sizeof *b),
           *c = malloc(n * n * sizeof *c);
    int *v = malloc(n * n * sizeof *v);
    if (!a || !b || !c || !v) {
        perror("malloc");
        return 1;
    }
    for (size_t i = 0; i < n * n; i++) {
        a[i] = (double)(next_random() % 1000) / 100.0;
        b[i] = (double)(next_random() % 1000) / 100.0;
        v[i] = (int)(next_random() % 1000000);
    }
    matmul(n, a, b, c);
    qsort(v, n * n, sizeof *v, compare_ints);

    double sum = 0.0;
    for (size_t i = 0; i < n * n; i++) sum += c[i] + v[i];
    printf("n=%zu checksum=%.6e median=%d\n", n, sum, v[n * n / 2]);
    free(a), free(b), free(c), free(v);
    return 0;
}
