/* Two threads without libc that each cycle through as many lines of one D1
   set as the set has ways (with --D1=32768,8,64: 8 lines 4 KiB apart), both
   at once. Alone, a thread's lines stay resident; Valgrind runs one thread at
   a time, so each thread misses only after the other ran. Caches changed by
   both threads at the same instant would miss at nearly every access. */
#include "nolibc.h"
#include "spawn.h"

/* Each thread's 8 lines, 4 KiB apart: all in set 0 of a 64-set D1. */
static volatile u64 lines[2][8][512] __attribute__((aligned(4096)));
/* Set by the second thread when it starts: the first waits for it. */
static volatile u64 started;

__attribute__((noipa)) static void cycle(volatile u64 (*own)[512])
{
    for (u64 round = 0; round < 1000000; round++)
        for (u64 line = 0; line < 8; line++)
            own[line][0] += round;
}

__attribute__((noipa)) static void thread_main(void)
{
    started = 1;
    cycle(lines[1]);
}

__attribute__((noreturn)) void start(long *stack)
{
    (void)stack;
    long tid = spawn_thread(CLONE_FLAGS, thread_stack + sizeof thread_stack, &child_tid,
                            thread_main);
    if (tid < 0)
        sys_exit(1);
    while (!started) {
    }
    cycle(lines[0]);
    wait_thread();
    put_u64(lines[0][7][0] + lines[1][7][0]);
    sys_exit(0);
}
