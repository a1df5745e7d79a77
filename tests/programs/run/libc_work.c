/* A single-threaded, dynamically linked program for the simulation tests:
 * libc's allocator, qsort with a callback, string functions and memcpy,
 * recursion, data-dependent branches and strided accesses that miss. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int compare(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

static int fib(int n)
{
    return n < 2 ? n : fib(n - 1) + fib(n - 2);
}

static long stride(const int *values, int count, int step)
{
    long sum = 0;
    for (int round = 0; round < step; round++)
        for (int i = round; i < count; i += step)
            sum += values[i] & 1 ? values[i] : -values[i];
    return sum;
}

static size_t words(char *text)
{
    size_t count = 0;
    for (char *word = strtok(text, " "); word; word = strtok(NULL, " "))
        count += strlen(word) > 3;
    return count;
}

int main(void)
{
    enum { COUNT = 6000 };
    int *values = malloc(COUNT * sizeof *values);
    int *copy = malloc(COUNT * sizeof *copy);
    if (!values || !copy)
        return 1;
    unsigned state = 12345;
    for (int i = 0; i < COUNT; i++) {
        state = state * 1103515245u + 12345u;
        values[i] = (int)(state >> 8) % 10000;
    }
    memcpy(copy, values, COUNT * sizeof *values);
    qsort(copy, COUNT, sizeof *copy, compare);
    char text[] = "the quick brown fox jumps over the lazy dog again and again";
    printf("%d %ld %d %zu\n", fib(18), stride(values, COUNT, 16), copy[COUNT / 2],
           words(text));
    free(copy);
    free(values);
    return 0;
}
