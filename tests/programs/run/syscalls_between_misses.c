/* System calls between data-cache misses, a -static -nostdlib program: each
   turn of the loop misses D1 0 to 3 times (a stride of 65 lines through an
   array larger than D1), then calls getpid and checks its result. Under
   Cachegrind's cache simulation cgx writes a record for each miss and one
   for each block ending in `syscall`, just before the call; with the
   number of misses changing from turn to turn, some of the record buffer's
   halves fill up at the record right before the call, and the call must
   still be getpid. Prints how many calls returned another number (0) and
   exits with 0 when none did. */
#include "nolibc.h"

static volatile unsigned char lines[1 << 20];

__attribute__((noreturn)) void start(long *stack)
{
    (void)stack;
    long pid = sys3(39, 0, 0, 0);
    u64 wrong = 0, at = 0;
    for (u64 turn = 0; turn < 2000000; turn++) {
        for (u64 miss = 0; miss < turn % 4; miss++) {
            lines[at]++;
            at = (at + 65 * 64) % sizeof lines;
        }
        if (sys3(39, 0, 0, 0) != pid)
            wrong++;
    }
    put_u64(wrong);
    put_str(" wrong\n");
    sys_exit(wrong != 0);
}
