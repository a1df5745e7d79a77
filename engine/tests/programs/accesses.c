/* A tiny program without libc for the data-access and branch events of the
 * step backend: push/pop/call/ret/leave, REP string instructions (including
 * rcx = 0), read-modify-write instructions (plain and lock-prefixed), SSE and
 * AVX loads and stores, FS-relative loads, an indirect call, a jump table,
 * loop/jrcxz and conditional branches, then cgx_exit(EXIT_CODE). */

#ifndef EXIT_CODE
#define EXIT_CODE 0
#endif

static char source[256] __attribute__((aligned(64)));
static char target[256] __attribute__((aligned(64)));
static volatile long counter;
static long words[8] __attribute__((aligned(64)));
static unsigned char fxarea[512 + 64] __attribute__((aligned(64)));
static volatile long result;
static long tls_block[4] = {0x1234};

__attribute__((noreturn)) void cgx_exit(long status);
__asm__(".globl cgx_exit\n"
        "cgx_exit:\n"
        "    mov $60, %eax\n"
        "    syscall\n");

/* A function with a frame pointer, so it ends with `leave`. */
__attribute__((noinline, optimize("no-omit-frame-pointer"))) static long framed(long x) {
    volatile long local[4];
    local[0] = x;
    local[3] = x + 1;
    __asm__ volatile("" ::: "memory");
    return local[0] + local[3];
}

/* `enter`-less frame by hand, left with `leave`. */
__attribute__((noinline)) static long with_leave(long x) {
    long r;
    __asm__ volatile("push %%rbp; mov %%rsp, %%rbp; sub $32, %%rsp; mov %1, -8(%%rbp);"
                     "mov -8(%%rbp), %0; leave"
                     : "=&a"(r) : "D"(x) : "memory");
    return r;
}

__attribute__((noinline)) static long twice(long x) { return 2 * x; }
__attribute__((noinline)) static long thrice(long x) { return 3 * x; }
static long (*volatile operation)(long) = twice;

__attribute__((noinline)) static long jump_table(long selector) {
    switch (selector) {
    case 0: return counter + 11;
    case 1: return counter * 7;
    case 2: return counter - 5;
    case 3: return counter ^ 0x55;
    case 4: return counter << 2;
    default: return 0;
    }
}

static void strings(void) {
    char *to = target;
    const char *from = source;
    unsigned long n = 100;
    __asm__ volatile("rep stosb" : "+D"(to), "+c"(n) : "a"('x') : "memory");
    to = source; n = 8;
    __asm__ volatile("rep stosq" : "+D"(to), "+c"(n) : "a"(0x4141414141414141L) : "memory");
    to = target; from = source; n = 20;
    __asm__ volatile("rep movsb" : "+D"(to), "+S"(from), "+c"(n) : : "memory");
    to = target; from = source; n = 0;
    __asm__ volatile("rep movsb" : "+D"(to), "+S"(from), "+c"(n) : : "memory");
    to = target; from = source; n = 4;
    __asm__ volatile("rep movsq" : "+D"(to), "+S"(from), "+c"(n) : : "memory");
    target[10] = 'q';
    to = target; from = source; n = 30;
    __asm__ volatile("repe cmpsb" : "+D"(to), "+S"(from), "+c"(n) : : "memory", "cc");
    to = target; from = target; n = 5;
    __asm__ volatile("repe cmpsb" : "+D"(to), "+S"(from), "+c"(n) : : "memory", "cc");
    to = target; n = 50;
    __asm__ volatile("repne scasb" : "+D"(to), "+c"(n) : "a"('q') : "memory", "cc");
    to = target; n = 3;
    __asm__ volatile("repne scasb" : "+D"(to), "+c"(n) : "a"('#') : "memory", "cc");
    to = target; n = 0;
    __asm__ volatile("repne scasb" : "+D"(to), "+c"(n) : "a"('#') : "memory", "cc");
    from = source;
    long loaded;
    __asm__ volatile("lodsq" : "=a"(loaded), "+S"(from) : : "memory");
    to = target;
    __asm__ volatile("movsw" : "+D"(to), "+S"(from) : : "memory");
    n = 4;
    __asm__ volatile("std; lea 7(%1), %1; lea 7(%2), %2; rep movsb; cld"
                     : "+c"(n), "+D"(to), "+S"(from) : : "memory");
    result += loaded;
}

static void modify(void) {
    long one = 1, old = 5;
    __asm__ volatile("incq %0" : "+m"(words[0]));
    __asm__ volatile("addq %1, %0" : "+m"(words[1]) : "r"(one));
    __asm__ volatile("xchgq %1, %0" : "+m"(words[2]), "+r"(one));
    __asm__ volatile("lock addq %1, %0" : "+m"(words[3]) : "r"(one));
    __asm__ volatile("lock incl %0" : "+m"(words[3]));
    __asm__ volatile("lock cmpxchgq %2, %0" : "+m"(words[4]), "+a"(old) : "r"(one) : "cc");
    __asm__ volatile("cmpxchgq %2, %0" : "+m"(words[4]), "+a"(old) : "r"(one) : "cc");
    __asm__ volatile("lock xaddq %1, %0" : "+m"(words[5]), "+r"(one));
    __asm__ volatile("xaddq %1, %0" : "+m"(words[5]), "+r"(one));
    __asm__ volatile("notq %0; negq %0; shlq $3, %0; sarq %0" : "+m"(words[6]));
    __asm__ volatile("btsq $3, %0; btrq $1, %0" : "+m"(words[7]) : : "cc");
    char flag_a, flag_b;
    __asm__ volatile("cmpq $1, %2; sete %0; testq %3, %2; setne %1"
                     : "=r"(flag_a), "=r"(flag_b) : "m"(words[6]), "r"(one) : "cc");
    result += flag_a + flag_b;
    __asm__ volatile("sete %0" : "=m"(fxarea[0]) : : "cc");
    __asm__ volatile("pushq %0; popq %0" : "+m"(words[2]));
    long zero_extended, sign_extended, moved = 3, address;
    __asm__ volatile("movzbl %1, %k0" : "=r"(zero_extended) : "m"(fxarea[1]));
    __asm__ volatile("movsbq %1, %0" : "=r"(sign_extended) : "m"(fxarea[1]));
    __asm__ volatile("cmpq $0, %1; cmovneq %1, %0" : "+r"(moved) : "m"(words[1]) : "cc");
    __asm__ volatile("leaq %1, %0; nopl %1" : "=r"(address) : "m"(words[1]));
    result += zero_extended + sign_extended + moved + address;
    __asm__ volatile("prefetcht0 %0; prefetchnta %0" : : "m"(words[1]));
    __asm__ volatile("pushfq; popfq" ::: "memory");
    result += old + one;
}

static void vectors(void) {
    __asm__ volatile("movdqa %0, %%xmm0; movdqu %%xmm0, %1; movups %1, %%xmm1; movaps %%xmm1, %0"
                     : "+m"(*(char (*)[16])source), "+m"(*(char (*)[16])(target + 1))
                     :
                     : "xmm0", "xmm1");
    __asm__ volatile("paddd %0, %%xmm0; movq %%xmm0, %1; movd %%xmm0, %2; movss %2, %%xmm1"
                     : "+m"(*(char (*)[16])source), "=m"(words[0]), "=m"(words[1])
                     :
                     : "xmm0", "xmm1");
    __asm__ volatile("movhps %0, %%xmm0; movlps %%xmm0, %0" : "+m"(words[2]) : : "xmm0");
    __asm__ volatile("vmovdqu %0, %%ymm0; vmovdqu %%ymm0, %1; vzeroupper"
                     : "+m"(*(char (*)[32])source), "=m"(*(char (*)[32])(target + 3))
                     :
                     : "xmm0");
    __asm__ volatile("fxsave %0" : "=m"(*(char (*)[512])fxarea));
    __asm__ volatile("fxrstor %0" : : "m"(*(char (*)[512])fxarea));
}

static void branches(void) {
    long n = 5;
    __asm__ volatile("1: loop 1b" : "+c"(n));
    n = 0;
    __asm__ volatile("jrcxz 1f; nop; 1: nop" : : "c"(n));
    n = 3;
    __asm__ volatile("jrcxz 1f; nop; 1: nop" : : "c"(n));
    long fs_word;
    __asm__ volatile("mov %%fs:0, %0" : "=r"(fs_word));
    result += fs_word;
    __asm__ volatile("test %0, %0; jz 1f; nop; 1: nop; cmp $2, %0; jne 2f; nop; 2:" : : "r"(n) : "cc");
}

void _start(void) {
    long total = 0;
    /* arch_prctl(ARCH_SET_FS, tls_block): FS-relative loads read tls_block. */
    long error;
    __asm__ volatile("syscall" : "=a"(error) : "a"(158L), "D"(0x1002L), "S"(tls_block)
                     : "rcx", "r11", "memory");
    total += error;
    for (long i = 0; i < 12; i++) {
        total += jump_table(i % 6);
        total += operation(i);
        if (i == 5)
            operation = thrice;
    }
    total += framed(total);
    total += with_leave(total);
    strings();
    modify();
    vectors();
    branches();
    result = total;
    cgx_exit(EXIT_CODE);
}
