/* Two threads without libc, for --separate-threads=yes: the main thread starts
   a thread with clone(2), both do some work (different amounts), and the main
   thread waits for the other's exit with a futex wait (woken by
   CLONE_CHILD_CLEARTID), then exits the group. As engine/tests/programs/threads.c,
   but spawn_thread is typed as a function (`.type @function`): Valgrind reads no
   untyped symbols. */
#include "nolibc.h"
#include "spawn.h"

/* One sink per thread: the threads may run at the same time. */
static volatile u64 main_sink, thread_sink;

__attribute__((noipa)) static void work(volatile u64 *sink, u64 n)
{
    for (u64 i = 0; i < n; i++)
        *sink += i;
}

__attribute__((noipa)) static void thread_main(void) { work(&thread_sink, 300); }

__attribute__((noreturn)) void start(long *stack)
{
    (void)stack;
    long tid = spawn_thread(CLONE_FLAGS, thread_stack + sizeof thread_stack, &child_tid,
                            thread_main);
    if (tid < 0)
        sys_exit(1);
    work(&main_sink, 100);
    wait_thread();
    put_u64(main_sink + thread_sink);
    sys_exit(0);
}
