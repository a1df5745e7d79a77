/* Checks what a `syscall` (getpid) leaves in the registers: rax the result,
   rcx the address after the instruction, r11 the flags before it, every other
   register and the flags as they were, and the red zone below the stack
   pointer untouched. Exits 0 when all hold, else the number of the first
   check that failed. */
#include "nolibc.h"

/* Fills the registers with known values (the flags with CF and ZF set),
   makes the call and stores what it finds in out[0..17]: rbx, rdx, rsi,
   rdi, rbp, r8, r9, r10, r12, r13, r14, r15, rcx, the address after the
   syscall, r11, the flags before, the flags after, the red-zone word. */
void probe(u64 *out);
__asm__(".text\n"
        ".globl probe\n"
        ".type probe,@function\n"
        "probe:\n"
        "  push %rbx\n push %rbp\n push %r12\n push %r13\n push %r14\n push %r15\n"
        "  push %rdi\n"
        "  movq $0x1111, -64(%rsp)\n"
        "  mov $0x2222, %ebx\n mov $0x3333, %edx\n mov $0x4444, %esi\n"
        "  mov $0x5555, %edi\n mov $0x6666, %ebp\n mov $0x7777, %r8d\n"
        "  mov $0x8888, %r9d\n mov $0x9999, %r10d\n mov $0xaaaa, %r12d\n"
        "  mov $0xbbbb, %r13d\n mov $0xcccc, %r14d\n mov $0xdddd, %r15d\n"
        "  mov $39, %eax\n"
        "  stc\n"
        "  cmp %eax, %eax\n" /* ZF=1, CF=0 */
        "  stc\n"            /* CF=1 */
        "  pushf\n pop %rax\n mov %rax, -72(%rsp)\n" /* the flags before (below the red-zone word) */
        "  mov $39, %eax\n"
        "  syscall\n"
        "1:\n"
        "  pushf\n pop %rax\n mov %rax, -80(%rsp)\n"
        "  mov (%rsp), %rax\n" /* out */
        "  mov %rbx, 0(%rax)\n mov %rdx, 8(%rax)\n mov %rsi, 16(%rax)\n"
        "  mov %rdi, 24(%rax)\n mov %rbp, 32(%rax)\n mov %r8, 40(%rax)\n"
        "  mov %r9, 48(%rax)\n mov %r10, 56(%rax)\n mov %r12, 64(%rax)\n"
        "  mov %r13, 72(%rax)\n mov %r14, 80(%rax)\n mov %r15, 88(%rax)\n"
        "  mov %rcx, 96(%rax)\n lea 1b(%rip), %rcx\n mov %rcx, 104(%rax)\n"
        "  mov %r11, 112(%rax)\n mov -72(%rsp), %rcx\n mov %rcx, 120(%rax)\n"
        "  mov -80(%rsp), %rcx\n mov %rcx, 128(%rax)\n"
        "  mov -64(%rsp), %rcx\n mov %rcx, 136(%rax)\n"
        "  pop %rdi\n pop %r15\n pop %r14\n pop %r13\n pop %r12\n pop %rbp\n pop %rbx\n"
        "  ret\n"
        ".size probe, .-probe\n");

__attribute__((noreturn)) void start(long *stack)
{
    (void)stack;
    u64 out[18];
    for (int round = 0; round < 3; round++) {
        probe(out);
        const u64 expected[12] = {0x2222, 0x3333, 0x4444, 0x5555, 0x6666, 0x7777,
                                  0x8888, 0x9999, 0xaaaa, 0xbbbb, 0xcccc, 0xdddd};
        for (int i = 0; i < 12; i++)
            if (out[i] != expected[i])
                sys_exit(1 + i);
        if (out[12] != out[13])
            sys_exit(20); /* rcx: the address after the syscall */
        if ((out[14] & 0xcd5) != (out[15] & 0xcd5))
            sys_exit(21); /* r11: the flags before it */
        if (out[16] != out[15])
            sys_exit(22); /* the flags kept */
        if (out[17] != 0x1111)
            sys_exit(23); /* the red zone */
    }
    put_str("registers kept\n");
    sys_exit(0);
}
