/* Two threads without libc: the main thread starts a thread with clone(2), both
 * do some work, the main thread waits for the other's exit with one futex
 * wait (woken by CLONE_CHILD_CLEARTID), then exits the group. */
#include "sys.h"

#define CLONE_VM 0x100
#define CLONE_FS 0x200
#define CLONE_FILES 0x400
#define CLONE_SIGHAND 0x800
#define CLONE_THREAD 0x10000
#define CLONE_SYSVSEM 0x40000
#define CLONE_CHILD_CLEARTID 0x200000

static char stack[16384] __attribute__((aligned(16)));
static volatile int child_tid = 1;

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

static void thread_main(void) { work(300); }

void _start(void) {
    long flags = CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_SIGHAND | CLONE_THREAD |
                 CLONE_SYSVSEM | CLONE_CHILD_CLEARTID;
    long tid = spawn_thread(flags, stack + sizeof stack, &child_tid, thread_main);
    if (tid < 0)
        sys_exit_group(1);
    work(100);
    /* FUTEX_WAIT while child_tid == 1: returns at once if it is 0 already. */
    sys4(202, &child_tid, 0, 1, 0);
    while (child_tid != 0) {
    }
    sys_exit_group(0);
}
