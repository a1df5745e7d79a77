/* Three threads without libc, one after the other: the main thread starts
 * a thread with clone(2), waits for its exit (one futex wait, woken by
 * CLONE_CHILD_CLEARTID or returning at once), sleeps 20 ms, and starts the next. */
#include "sys.h"

#define CLONE_FLAGS                                                            \
    (0x100 /* VM */ | 0x200 /* FS */ | 0x400 /* FILES */ | 0x800 /* SIGHAND */ \
     | 0x10000 /* THREAD */ | 0x40000 /* SYSVSEM */ | 0x200000 /* CHILD_CLEARTID */)

static char stack[16384] __attribute__((aligned(16)));
static volatile int child_tid;

/* clone(flags, stack, 0, ctid, 0); the new thread calls fn, then exit(0). */
long spawn_thread(long flags, void *stack_top, volatile int *ctid, void (*fn)(void));
__asm__(".globl spawn_thread\n"
        "spawn_thread:\n"
        "    mov %rcx, %r9\n"
        "    mov %rdx, %r10\n"
        "    xor %edx, %edx\n"
        "    xor %r8d, %r8d\n"
        "    mov $56, %eax\n"
        "    syscall\n"
        "    test %rax, %rax\n"
        "    jnz 1f\n"
        "    call *%r9\n"
        "    mov $60, %eax\n"
        "    xor %edi, %edi\n"
        "    syscall\n"
        "1:  ret\n");

static void thread_main(void) { work(200); }

void _start(void) {
    for (int i = 0; i < 3; i++) {
        child_tid = 1;
        if (spawn_thread(CLONE_FLAGS, stack + sizeof stack, &child_tid, thread_main) < 0)
            sys_exit_group(1);
        /* One FUTEX_WAIT whatever the timing (it returns at once if the
         * thread is gone already), so the instruction count is fixed. */
        sys4(202 /* futex */, &child_tid, 0 /* FUTEX_WAIT */, 1, 0);
        while (child_tid != 0)
            sys4(202 /* futex */, &child_tid, 0 /* FUTEX_WAIT */, 1, 0);
        long pause[2] = {0, 20000000};
        sys2(35 /* nanosleep */, pause, 0);
    }
    sys_exit_group(0);
}
