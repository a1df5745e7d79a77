/* Loops of several blocks, two of them calling a function at each
 * iteration, long enough for a timer signal every millisecond to
 * interrupt them many times. The handler counts; the program exits with
 * the count (at most 255). */
#include "sys.h"

/* Iterations of each loop (the test knows it too). */
#define ITERATIONS 3000000

/* branches(n): a loop of three blocks, one run at odd counts only:
 * 4n + (n + 1) / 2 + 3 instructions between branches and branches_end. */
void branches(long n);
/* calls(n): a loop calling `leaf` each time, then two blocks, one run at
 * odd counts only: 6n + (n + 1) / 2 + 4 instructions between calls and
 * calls_end, the two blocks between tail and tail_end. */
void calls(long n);
/* dispatch(n): a loop whose turns end in an indirect jump back to it:
 * 3n + 2 instructions between dispatch and dispatch_end, the loop's
 * first block at dispatch_loop. */
void dispatch(long n);
__asm__(".globl dispatch, dispatch_loop, dispatch_end\n"
        "dispatch:\n"
        "    mov %rdi, %rcx\n"
        "    lea dispatch_loop(%rip), %rdx\n"
        "dispatch_loop:\n"
        "    dec %rcx\n"
        "    jz 2f\n"
        "    jmp *%rdx\n"
        "2:  ret\n"
        "dispatch_end:\n");
__asm__(".globl branches, branches_end, calls, tail, tail_end, leaf, calls_end\n"
        "branches:\n"
        "    mov %rdi, %rcx\n"
        "    xor %eax, %eax\n"
        "1:  test $1, %cl\n"
        "    jz 2f\n"
        "    add %rcx, %rax\n"
        "2:  dec %rcx\n"
        "    jnz 1b\n"
        "    ret\n"
        "branches_end:\n"
        "calls:\n"
        "    push %rbx\n"
        "    mov %rdi, %rbx\n"
        "1:  call leaf\n"
        "    test $1, %bl\n"
        "    jz 2f\n"
        "tail:\n"
        "    add %rbx, %rax\n"
        "2:  dec %rbx\n"
        "    jnz 1b\n"
        "tail_end:\n"
        "    pop %rbx\n"
        "    ret\n"
        "leaf:\n"
        "    ret\n"
        "calls_end:\n");

/* repeat(n): a loop calling `callee` twice each time, from two calls,
 * whose body of two blocks (between callee_inner and callee_inner_end,
 * one run at odd counts only, below the stack pointer the call left: the
 * callee saves a register first) runs in the segment of its first call
 * from each: 18n + 4 ((n + 1) / 2) + 4 instructions between repeat and
 * repeat_end. */
void repeat(long n);
__asm__(".globl repeat, callee, callee_inner, callee_inner_end, repeat_end\n"
        "repeat:\n"
        "    push %rbx\n"
        "    mov %rdi, %rbx\n"
        "1:  call callee\n"
        "    call callee\n"
        "    dec %rbx\n"
        "    jnz 1b\n"
        "    pop %rbx\n"
        "    ret\n"
        "callee:\n"
        "    push %r12\n"
        "    mov %rbx, %rdx\n"
        "    jmp callee_inner\n"
        "callee_inner:\n"
        "    and $1, %edx\n"
        "    jz callee_inner_end\n"
        "    add %rdx, %rax\n"
        "    jmp callee_inner_end\n"
        "callee_inner_end:\n"
        "    pop %r12\n"
        "    ret\n"
        "repeat_end:\n");

void _start(void) {
    catch_signal(SIGALRM, count_signal);
    alarm_every(1000);
    branches(ITERATIONS);
    calls(ITERATIONS);
    dispatch(ITERATIONS);
    repeat(ITERATIONS);
    alarm_every(0);
    sys_exit_group(counted_signals > 255 ? 255 : counted_signals);
}
