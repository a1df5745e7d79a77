/* A loop calling a function that calls another: its blocks (between
 * nested and nested_end) run ITERATIONS times each, the calls nested two
 * deep, the inner call's return going on to a block that returns. */
#include "sys.h"

#define ITERATIONS 1000000

void nested(long n);
__asm__(".globl nested, middle, inner, nested_end\n"
        "nested:\n"
        "    push %rbx\n"
        "    mov %rdi, %rbx\n"
        "1:  call middle\n"
        "    dec %rbx\n"
        "    jnz 1b\n"
        "    pop %rbx\n"
        "    ret\n"
        "middle:\n"
        "    call inner\n"
        "    add $1, %rax\n"
        "    ret\n"
        "inner:\n"
        "    lea 1(%rax,%rax,2), %rax\n"
        "    ret\n"
        "nested_end:\n");

void _start(void) {
    nested(ITERATIONS);
    sys_exit_group(0);
}
