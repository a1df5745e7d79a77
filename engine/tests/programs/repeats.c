/* Loops of one block (`dec; jnz` and `rep stosb`), long enough for a timer
 * signal every millisecond to interrupt them many times. The handler
 * counts; the program exits with the count (at most 255). */
#include "sys.h"

/* Iterations of each loop (the test knows it too). */
#define ITERATIONS 30000000

#define SIGALRM 14
#define ITIMER_REAL 0

static volatile long handled;

static void handler(int signal) {
    (void)signal;
    work(3);
    handled++;
}

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
    catch_signal(SIGALRM, handler);
    long timer[4] = {0, 1000, 0, 1000}; /* every millisecond */
    sys3(38 /* setitimer */, ITIMER_REAL, timer, 0);
    spin(ITERATIONS);
    fill(buffer, ITERATIONS);
    long off[4] = {0, 0, 0, 0};
    sys3(38 /* setitimer */, ITIMER_REAL, off, 0);
    sys_exit_group(handled > 255 ? 255 : handled);
}
