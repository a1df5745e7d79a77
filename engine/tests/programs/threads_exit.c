/* Two threads without libc: the main thread starts a thread that calls
 * work(1) forever, counting the calls; once it has counted 2000 the main
 * thread exits the group while the other thread still runs. */
#include "sys.h"

#define CLONE_VM 0x100
#define CLONE_FS 0x200
#define CLONE_FILES 0x400
#define CLONE_SIGHAND 0x800
#define CLONE_THREAD 0x10000
#define CLONE_SYSVSEM 0x40000

static char stack[16384] __attribute__((aligned(16)));
static volatile long calls;

/* clone(flags, stack, 0, 0, 0); the new thread calls fn (never returns). */
long spawn_thread(long flags, void *stack_top, void (*fn)(void));
__asm__(".globl spawn_thread\n"
        "spawn_thread:\n"
        "    mov %rdx, %r9\n"
        "    xor %edx, %edx\n"
        "    xor %r10d, %r10d\n"
        "    xor %r8d, %r8d\n"
        "    mov $56, %eax\n"
        "    syscall\n"
        "    test %rax, %rax\n"
        "    jnz 1f\n"
        "    call *%r9\n"
        "1:  ret\n");

static void thread_main(void) {
    for (;;) {
        work(1);
        calls++;
    }
}

void _start(void) {
    long flags = CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_SIGHAND | CLONE_THREAD | CLONE_SYSVSEM;
    if (spawn_thread(flags, stack + sizeof stack, thread_main) < 0)
        sys_exit_group(1);
    while (calls < 2000) {
    }
    sys_exit_group(0);
}
