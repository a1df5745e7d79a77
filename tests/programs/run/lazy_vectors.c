/* Calls functions of a shared library (lazy_vectors_lib.c) and of libm that
   are bound lazily (linked with -z lazy), passing floating-point and vector
   arguments, and prints the results exactly (%a). The first call of each
   function runs glibc's lazy-binding trampoline, which saves the vector
   registers in a frame sized by cpuid leaf 0xd: if cpuid and the processor
   disagree on that size, the stack is corrupted or the arguments arrive
   changed. The output does not depend on the processor (the AVX call has a
   scalar twin). With an argument N, N more rounds add to the sum alone. */
#include <immintrin.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

double weigh8(double, double, double, double, double, double, double, double);
float weighf(float, float, float, float);
__m128d mix2(__m128d, __m128d, __m128d);
__attribute__((target("avx"))) __m256d mix4(__m256d, __m256d);

__attribute__((target("avx"), noinline)) static void mix4_into(double out[4], double x) {
    __m256d a = _mm256_set_pd(x, x + 1, x + 2, x + 3);
    __m256d b = _mm256_set_pd(0.5, 0.25, -2, 3);
    _mm256_storeu_pd(out, mix4(a, b));
}

static void mix4_scalar(double out[4], double x) {
    const double a[4] = {x + 3, x + 2, x + 1, x};
    const double b[4] = {3, -2, 0.25, 0.5};
    for (int i = 0; i < 4; i++) out[i] = a[i] * b[i] + a[i];
}

int main(int argc, char **argv) {
    int avx = __builtin_cpu_supports("avx");
    int rounds = 3 + (argc > 1 ? atoi(argv[1]) : 0);
    double sum = 0;
    for (int round = 0; round < rounds; round++) {
        double x = 1.0 / (round + 3);
        double w = weigh8(x, x * 2, x * 3, x * 4, x * 5, x * 6, x * 7, x * 8);
        float f = weighf((float)x, 3.5f, (float)w, 1.25f);
        double h = hypot(w, x) + fma(x, w, (double)f);
        double pair[2];
        _mm_storeu_pd(pair, mix2(_mm_set_pd(x, w), _mm_set_pd(2, 3), _mm_set1_pd(h)));
        double four[4];
        if (avx) {
            mix4_into(four, x);
        } else {
            mix4_scalar(four, x);
        }
        if (round < 3)
            printf("%d: %a %a %a %a %a %a %a %a %a\n", round, w, (double)f, h, pair[0], pair[1],
               four[0], four[1], four[2], four[3]);
        sum += w + f + h + pair[0] + pair[1] + four[0] + four[1] + four[2] + four[3];
    }
    printf("sum %a\n", sum);
    return 0;
}
