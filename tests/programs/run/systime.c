/* System calls in known functions, for --collect-systime: `quick` makes
   getpid 5 times and write once, `sleepy` one nanosleep of 20 ms and getpid
   twice, `no_program` two execve of a program that does not exist (they
   fail), `start` calls each once and a thread (clone) makes getpid 3 times
   in `in_thread`; every call completes (exit_group, the thread's exit and
   the wait on it excepted). */
#include "nolibc.h"
#include "spawn.h"

__attribute__((noipa)) static void quick(void)
{
    for (int i = 0; i < 5; i++)
        sys3(39 /* getpid */, 0, 0, 0);
    put_str("quick\n");
}

__attribute__((noipa)) static void sleepy(void)
{
    long duration[2] = {0, 20 * 1000 * 1000};
    sys3(35 /* nanosleep */, (long)duration, 0, 0);
    sys3(39, 0, 0, 0);
    sys3(39, 0, 0, 0);
}

__attribute__((noipa)) static void no_program(void)
{
    static char path[] = "/nonexistent/program";
    char *argv[] = {path, 0};
    for (int i = 0; i < 2; i++)
        sys3(59 /* execve */, (long)path, (long)argv, 0);
}

__attribute__((noipa)) static void in_thread(void)
{
    for (int i = 0; i < 3; i++)
        sys3(39, 0, 0, 0);
}

__attribute__((noreturn)) void start(long *stack)
{
    (void)stack;
    quick();
    sleepy();
    no_program();
    long tid = spawn_thread(CLONE_FLAGS, thread_stack + sizeof thread_stack, &child_tid,
                            in_thread);
    if (tid < 0)
        sys_exit(1);
    /* One FUTEX_WAIT whatever the timing (it returns at once if the thread
       is gone already), so the number of calls is fixed; then a spin until
       the kernel has cleared child_tid. */
    register long timeout __asm__("r10") = 0;
    long result;
    __asm__ volatile("syscall"
                     : "=a"(result)
                     : "a"(202), "D"(&child_tid), "S"(0), "d"(1), "r"(timeout)
                     : "rcx", "r11", "memory");
    while (child_tid) {
    }
    sys_exit(0);
}
