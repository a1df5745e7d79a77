/* Inclusive cache use, by hand: `stream` reads one byte of each of the 128
   lines of a 64-byte-aligned array. It is called twice: from `near` (start ->
   near -> stream) and from `far` (start -> far -> middle -> stream). With
   D1 = 1024 B, 2-way, 64 B lines (16 lines) every line is evicted, once per
   pass, having been used once (AcCost1 1000, and 1 of its 32 usage bits set:
   SpLoss1 (31 * 64) >> 5 = 62). With a large I1 and LL, stream's code stays in
   I1 from the first call on, and each array line stays in LL from the first
   pass: LL lines belong to the instruction of the first pass and collect both
   passes' L1 usage (count 2: AcCost2 500; SpLoss2 62), charged at the end.
   One more line: the array pushes the line of stream's return address out
   of D1, so stream's `ret` loads it again (8 bytes used). In far's call it
   is used once more before it goes (AcCost1 1000, SpLoss1 (28 * 64) >> 5 =
   56); in near's it is used again by the callers. So, exactly:
     middle -> stream: AcCost1 129,000, SpLoss1 7,992, AcCost2 0, SpLoss2 0
     near -> stream: AcCost2 64,000, SpLoss2 7,936, and AcCost1 at least 128,000
   and back-dating moves these to the arcs of the calls that loaded the lines,
   although they are only known when the lines leave the cache, long after
   stream returned. */
#include "nolibc.h"

#define LINES 128

static volatile unsigned char array[LINES * 64] __attribute__((aligned(64)));

__attribute__((noinline)) static u64 stream(void)
{
    u64 sum = 0;
    for (u64 i = 0; i < LINES * 64; i += 64)
        sum += array[i];
    return sum;
}

__attribute__((noinline)) static u64 near(void)
{
    return stream() + 1;
}

__attribute__((noinline)) static u64 middle(void)
{
    return stream() + 2;
}

__attribute__((noinline)) static u64 far(void)
{
    return middle() + 3;
}

__attribute__((noreturn)) void start(long *stack)
{
    (void)stack;
    u64 total = near() + far();
    put_u64(total);
    sys_exit(0);
}
