/* A loop calling a function that calls another in a loop of its own,
 * CALLS times a turn: while the outer call is pending, its callee
 * finishes more inner calls than the chain of pending runs holds. The
 * callee's first block ends in one of the inner calls. Between finished
 * and finished_end, the loop's blocks run ITERATIONS times each, the
 * inner loop's and leaf's about CALLS times as often. */
#include "sys.h"

#define ITERATIONS 20000

void finished(long n);
__asm__(".globl finished, many, leaf, finished_end\n"
        "finished:\n"
        "    push %rbx\n"
        "    mov %rdi, %rbx\n"
        "1:  call many\n"
        "    dec %rbx\n"
        "    jnz 1b\n"
        "    pop %rbx\n"
        "    ret\n"
        "many:\n"
        "    push %rbx\n"
        "    mov $100, %ebx\n"
        "    call leaf\n"
        "2:  dec %ebx\n"
        "    jz 3f\n"
        "    call leaf\n"
        "    jmp 2b\n"
        "3:  pop %rbx\n"
        "    ret\n"
        "leaf:\n"
        "    lea 1(%rax,%rax,2), %rax\n"
        "    ret\n"
        "finished_end:\n");

void _start(void) {
    finished(ITERATIONS);
    sys_exit_group(0);
}
