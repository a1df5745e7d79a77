/* A second thread for the test programs without libc (these and the
   engine's): clone(2) with the flags of a pthread (CLONE_CHILD_CLEARTID
   clears child_tid when it ends), on a static stack. spawn_thread is typed
   as a function (`.type @function`): Valgrind reads no untyped symbols. */
#ifndef SPAWN_H
#define SPAWN_H

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

/* Waits for the thread spawn_thread started to end: FUTEX_WAIT while
   child_tid == 1 (it returns at once if it is 0 already), then until the
   kernel has cleared it. */
static inline void wait_thread(void)
{
    register long timeout __asm__("r10") = 0;
    long result;
    __asm__ volatile("syscall"
                     : "=a"(result)
                     : "a"(202L), "D"(&child_tid), "S"(0L), "d"(1L), "r"(timeout)
                     : "rcx", "r11", "memory");
    (void)result;
    while (child_tid != 0) {
    }
}

#endif
