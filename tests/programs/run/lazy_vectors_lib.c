/* The shared library of lazy_vectors.c: functions whose arguments travel in
   vector registers (xmm0-7, ymm0-1), bound lazily, so the first call of each
   goes through glibc's resolver, which saves and restores the vector state
   around the lookup. */
#include <immintrin.h>

double weigh8(double a, double b, double c, double d, double e, double f, double g,
              double h) {
    return a + 2 * b + 3 * c + 4 * d + 5 * e + 6 * f + 7 * g + 8 * h;
}

float weighf(float a, float b, float c, float d) { return a * b - c / d; }

__m128d mix2(__m128d a, __m128d b, __m128d c) { return _mm_add_pd(_mm_mul_pd(a, b), c); }

__attribute__((target("avx"))) __m256d mix4(__m256d a, __m256d b) {
    return _mm256_add_pd(_mm256_mul_pd(a, b), a);
}
