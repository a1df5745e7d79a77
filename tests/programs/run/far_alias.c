/* Reads one line in every 64 bytes of 1 MiB mapped at 0x30000000, then of
   1 MiB mapped 4 GiB higher: the write-back LL of Callgrind keeps no tag
   bits above bit 31, so the second pass hits the first pass's lines. */
#include <sys/mman.h>

__attribute__((noinline)) long touch(volatile char *p, long n)
{
    long s = 0;
    for (long i = 0; i < n; i += 64)
        s += p[i];
    return s;
}

int main(void)
{
    int flags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE;
    char *low = mmap((void *)0x30000000, 1 << 20, PROT_READ | PROT_WRITE, flags, -1, 0);
    char *high = mmap((void *)0x130000000, 1 << 20, PROT_READ | PROT_WRITE, flags, -1, 0);
    if (low == MAP_FAILED || high == MAP_FAILED)
        return 2;
    return (int)(touch(low, 1 << 20) + touch(high, 1 << 20));
}
