/* A loop calling a function that calls another, then one that calls
 * it and jumps into it (a tail call): the calls nested two deep, the
 * inner calls' returns going on to a block that returns and to one that
 * jumps into another function. Between nested and nested_end, the
 * blocks run ITERATIONS times each, inner's three times as often. */
#include "sys.h"

#define ITERATIONS 1000000

void nested(long n);
__asm__(".globl nested, middle, tailing, inner, nested_end\n"
        "nested:\n"
        "    push %rbx\n"
        "    mov %rdi, %rbx\n"
        "1:  call middle\n"
        "    call tailing\n"
        "    dec %rbx\n"
        "    jnz 1b\n"
        "    pop %rbx\n"
        "    ret\n"
        "middle:\n"
        "    call inner\n"
        "    add $1, %rax\n"
        "    ret\n"
        "tailing:\n"
        "    call inner\n"
        "    jmp inner\n"
        "inner:\n"
        "    lea 1(%rax,%rax,2), %rax\n"
        "    ret\n"
        "nested_end:\n");

void _start(void) {
    nested(ITERATIONS);
    sys_exit_group(0);
}
