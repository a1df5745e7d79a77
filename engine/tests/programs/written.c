/* A JIT's loop: the code of `loop` (a loop of four blocks) copied into a
 * writable and executable page at WRITTEN, called ROUNDS times for
 * ITERATIONS iterations each, its immediate (the `add` at the loop's
 * start) rewritten in place before each call, with no system call in
 * between. Exits 0 when the calls returned what the rewritten code
 * computes, else 1. */
#include "sys.h"

#define WRITTEN 0x10000000L
#define ROUNDS 50
#define ITERATIONS 20000

typedef long (*loop_fn)(long);

/* rax = sum over n iterations of (immediate + 3 on odd n). */
void loop(void);
void loop_immediate(void);
void loop_end(void);
__asm__(".globl loop, loop_immediate, loop_end\n"
        "loop:\n"
        "    xor %eax, %eax\n"
        "1:  .byte 0x48, 0x05\n" /* add $imm32, %rax */
        "loop_immediate:\n"
        "    .long 0\n"
        "    test $1, %dil\n"
        "    jz 2f\n"
        "    add $3, %rax\n"
        "2:  dec %rdi\n"
        "    jnz 1b\n"
        "    ret\n"
        "loop_end:\n");

void _start(void) {
    unsigned char *page = (unsigned char *)sys6(9, WRITTEN, 4096, 7 /* RWX */,
                                                0x32 /* PRIVATE|ANONYMOUS|FIXED */, -1, 0);
    const unsigned char *from = (const unsigned char *)loop;
    long len = (const unsigned char *)loop_end - from;
    for (long i = 0; i < len; i++)
        ((volatile unsigned char *)page)[i] = from[i];
    volatile int *immediate =
        (volatile int *)(page + ((const unsigned char *)loop_immediate - from));
    long ok = 1;
    for (int round = 0; round < ROUNDS; round++) {
        *immediate = round;
        long got = ((loop_fn)(void *)page)(ITERATIONS);
        ok &= got == (long)round * ITERATIONS + 3L * (ITERATIONS / 2);
    }
    sys_exit_group(ok ? 0 : 1);
}
