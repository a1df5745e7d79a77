/* A small dynamically linked program for run_backends.rs: ld.so, libc's
   start-up and exit, printf, and a loop over an array (data accesses,
   conditional branches) in the program's own code. */
#include <stdio.h>

static int values[256];

int main(void)
{
    long sum = 0;
    for (int i = 0; i < 256; i++)
        values[i] = i * 3;
    for (int i = 0; i < 256; i++)
        if (values[i] & 1)
            sum += values[i];
    printf("%ld\n", sum);
    return 0;
}
