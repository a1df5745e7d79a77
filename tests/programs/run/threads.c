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
    /* FUTEX_WAIT while child_tid == 1: returns at once if it is 0 already. */
    register long timeout __asm__("r10") = 0;
    long result;
    __asm__ volatile("syscall"
                     : "=a"(result)
                     : "a"(202L), "D"(&child_tid), "S"(0L), "d"(1L), "r"(timeout)
                     : "rcx", "r11", "memory");
    (void)result;
    while (child_tid != 0) {
    }
    put_u64(main_sink + thread_sink);
    sys_exit(0);
}
