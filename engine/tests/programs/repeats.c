/* Loops of one block (`dec; jnz` and `rep stosb`), long enough for a timer
 * signal every millisecond to interrupt them many times. The handler
 * counts; the program exits with the count (at most 255). */
#include "sys.h"

/* Iterations of each loop (the test knows it too). */
#define ITERATIONS 30000000

/* spin(n): 2n + 2 instructions between spin and spin_end. */
void spin(long n);
/* fill(buffer, n): n + 4 instructions between fill and fill_end (the REP
 * instruction counts n + 1). */
void fill(char *buffer, long n);
__asm__(".globl spin, spin_end, fill, fill_end\n"
        "spin:\n"
        "    mov %rdi, %rcx\n"
        "1:  dec %rcx\n"
        "    jnz 1b\n"
        "    ret\n"
        "spin_end:\n"
        "fill:\n"
        "    mov %rsi, %rcx\n"
        "    xor %eax, %eax\n"
        "    rep stosb\n"
        "    ret\n"
        "fill_end:\n");

static char buffer[ITERATIONS];

void _start(void) {
    catch_signal(SIGALRM, count_signal);
    alarm_every(1000);
    spin(ITERATIONS);
    fill(buffer, ITERATIONS);
    alarm_every(0);
    sys_exit_group(counted_signals > 255 ? 255 : counted_signals);
}
