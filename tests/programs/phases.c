/* Three phases separated by CALLGRIND_DUMP_STATS requests: Callgrind writes
   three dumps (three files, or three parts of one file with
   --combine-dumps=yes). */
#include <stdio.h>
#include <valgrind/callgrind.h>

__attribute__((noipa)) static unsigned long phase_one(unsigned long n)
{
    unsigned long sum = 0;
    for (unsigned long i = 0; i < n; i++)
        sum += i;
    return sum;
}

__attribute__((noipa)) static unsigned long phase_two(unsigned long n)
{
    unsigned long product = 1;
    for (unsigned long i = 1; i < n; i++)
        product = product * 3 + i;
    return product;
}

int main(void)
{
    unsigned long result = phase_one(1000);
    CALLGRIND_DUMP_STATS;
    result += phase_two(2000);
    CALLGRIND_DUMP_STATS;
    result += phase_one(500);
    printf("%lu\n", result);
    return 0;
}
