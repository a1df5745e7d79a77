/* A loop calling a function from two call sites in turn, which calls
 * another: the inner call is made from the outer function's two
 * segments (one for each call site) in turn. Between alternating and
 * alternating_end, the blocks run ITERATIONS times each, those of
 * writer and copy twice as often. */
#include "sys.h"

#define ITERATIONS 1000000

void alternating(long n);
__asm__(".globl alternating, writer, copy, alternating_end\n"
        "alternating:\n"
        "    push %rbx\n"
        "    mov %rdi, %rbx\n"
        "1:  call writer\n"
        "    call writer\n"
        "    dec %rbx\n"
        "    jnz 1b\n"
        "    pop %rbx\n"
        "    ret\n"
        "writer:\n"
        "    call copy\n"
        "    add $1, %rax\n"
        "    ret\n"
        "copy:\n"
        "    lea 1(%rax,%rax,2), %rax\n"
        "    ret\n"
        "alternating_end:\n");

void _start(void) {
    alternating(ITERATIONS);
    sys_exit_group(0);
}
