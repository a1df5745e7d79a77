/* A tiny program without libc for the step backend: loops, calls, REP string
 * instructions (including rcx = 0), a system call, then cgx_exit(EXIT_CODE). */

#ifndef EXIT_CODE
#define EXIT_CODE 0
#endif

static char source[256];
static volatile long loop_count = 100;
static volatile long result;
static char target[256];

__attribute__((noinline)) static long square(long x) { return x * x; }

__attribute__((noinline)) static long sum_squares(long n) {
    long total = 0;
    for (long i = 0; i < n; i++)
        total += square(i);
    return total;
}

__attribute__((noinline)) static void copy(char *to, const char *from, unsigned long n) {
    __asm__ volatile("rep movsb" : "+D"(to), "+S"(from), "+c"(n) : : "memory");
}

__attribute__((noinline)) static void fill(char *to, int byte, unsigned long n) {
    __asm__ volatile("rep stosb" : "+D"(to), "+c"(n) : "a"(byte) : "memory");
}

__attribute__((noinline)) static unsigned long find(const char *in, int byte, unsigned long n) {
    __asm__ volatile("repne scasb" : "+D"(in), "+c"(n) : "a"(byte) : "memory", "cc");
    return n;
}

/* Exits with the status in edi: a basic block of exactly two instructions that
 * the program enters with a call, so the test knows the size of the last block. */
__attribute__((noreturn)) void cgx_exit(long status);
__asm__(".globl cgx_exit\n"
        "cgx_exit:\n"
        "    mov $60, %eax\n"
        "    syscall\n");

static long raw_syscall1(long number, long arg) {
    long result;
    __asm__ volatile("syscall" : "=a"(result) : "a"(number), "D"(arg) : "rcx", "r11", "memory");
    return result;
}

void _start(void) {
    long checksum = sum_squares(loop_count);
    fill(source, 'x', 200);
    fill(source, 'y', 0);
    copy(target, source, 150);
    copy(target, source, 0);
    copy(target, source, 1);
    source[40] = 'z';
    checksum += (long)find(source, 'z', 100);
    checksum += raw_syscall1(39 /* getpid */, 0) > 0;
    result = checksum;
    cgx_exit(EXIT_CODE);
}
