/* Two threads without libc, for --separate-threads=yes: the main thread starts
   a thread with clone(2), both do some work (different amounts), and the main
   thread waits for the other's exit with a futex wait (woken by
   CLONE_CHILD_CLEARTID), then exits the group. As engine/tests/programs/threads.c,
   but spawn_thread is typed as a function (`.type @function`): Valgrind reads no
   untyped symbols. */
#include "nolibc.h"

#define CLONE_FLAGS                                                              \
    (0x100 /* VM */ | 0x200 /* FS */ | 0x400 /* FILES */ | 0x800 /* SIGHAND */ \
     | 0x10000 /* THREAD */ | 0x40000 /* SYSVSEM */ | 0x200000 /* CHILD_CLEARTID */)

static char thread_stack[16384] __attribute__((aligned(16)));
static volatile int child_tid = 1;

/* clone(flags, stack_top, 0, ctid, 0); the new thread calls fn, then exit(0). */
long spawn_thread(long flags, void *stack_top, volatile int *ctid, void (*fn)(void));
__asm__(".text\n"
        ".globl spawn_thread\n"
        ".type spawn_thread,@function\n"
        "spawn_thread:\n"
        "  mov %rcx, %r9\n"
        "  mov %rdx, %r10\n"
        "  xor %edx, %edx\n"
        "  xor %r8d, %r8d\n"
        "  mov $56, %eax\n"
        "  syscall\n"
        "  test %rax, %rax\n"
        "  jnz 1f\n"
        "  call *%r9\n"
        "  mov $60, %eax\n"
        "  xor %edi, %edi\n"
        "  syscall\n"
        "1: ret\n"
        ".size spawn_thread, .-spawn_thread\n");

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
