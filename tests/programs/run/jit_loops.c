/* Code written into a writable and executable mapping, as a JIT writes it,
 * whose loop runs many blocks with no symbol: a direct jump, a fall-through,
 * an indirect jump through a table (as an interpreter dispatches), a call of
 * a C function and the loop's own conditional jump back. Between calls two
 * instructions of the loop are rewritten in place (their immediates), with
 * no system call in between. Prints the sum of what the calls returned.
 * Arguments: rounds (default 300) and iterations per call (default 40). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

typedef int (*loop_fn)(int);

static int calls_made;

/* Called from the written code. */
__attribute__((noinline)) static int helper(void) { return ++calls_made % 5; }

static unsigned char *at;

static void put(const void *bytes, size_t len) {
    memcpy(at, bytes, len);
    at += len;
}

#define PUT(...)                                                                \
    do {                                                                        \
        const unsigned char bytes_[] = {__VA_ARGS__};                           \
        put(bytes_, sizeof bytes_);                                             \
    } while (0)

static void put_u32(uint32_t value) { put(&value, 4); }
static void put_u64(uint64_t value) { put(&value, 8); }

/* Where the written function's two rewritten immediates are. */
struct immediates {
    unsigned char *odd;   /* in the block an indirect jump leads to */
    unsigned char *after; /* in the block the helper returns to */
};

/* Writes the function at `code`, its jump table at `table`. Neither
 * rewritten immediate is in a block a call enters, so only a check of the
 * blocks' code where jumps and returns enter them sees it rewritten. */
static struct immediates write_function(unsigned char *code, uint64_t *table) {
    struct immediates immediates;
    at = code;
    PUT(0x53);                   /* push rbx */
    PUT(0x41, 0x54);             /* push r12 */
    PUT(0x48, 0x83, 0xec, 0x08); /* sub rsp, 8 */
    PUT(0x89, 0xfb);             /* mov ebx, edi */
    PUT(0x45, 0x31, 0xe4);       /* xor r12d, r12d */
    unsigned char *loop = at;
    PUT(0x41, 0x83, 0xc4, 0x01); /* add r12d, 1 */
    PUT(0x89, 0xd9);             /* mov ecx, ebx */
    PUT(0x83, 0xe1, 0x01);       /* and ecx, 1 */
    PUT(0x48, 0xba);             /* mov rdx, imm64 (the table) */
    put_u64((uint64_t)(uintptr_t)table);
    PUT(0xff, 0x24, 0xca);       /* jmp [rdx + rcx*8] */
    unsigned char *even = at;
    PUT(0x41, 0x83, 0xc4, 0x03); /* add r12d, 3 */
    PUT(0xe9);                   /* jmp rel32 (to `call`, patched below) */
    unsigned char *to_call = at;
    put_u32(0);
    unsigned char *odd = at;
    PUT(0x41, 0x81, 0xc4);       /* add r12d, imm32, falling through */
    immediates.odd = at;
    put_u32(0);
    unsigned char *call = at;
    PUT(0x48, 0xb8);             /* mov rax, imm64 (the helper) */
    put_u64((uint64_t)(uintptr_t)helper);
    PUT(0xff, 0xd0);             /* call rax */
    PUT(0x41, 0x01, 0xc4);       /* add r12d, eax */
    PUT(0x41, 0x81, 0xc4);       /* add r12d, imm32 */
    immediates.after = at;
    put_u32(0);
    PUT(0xff, 0xcb);             /* dec ebx */
    PUT(0x0f, 0x85);             /* jnz rel32 (to the loop) */
    put_u32((uint32_t)(loop - (at + 4)));
    PUT(0x44, 0x89, 0xe0);       /* mov eax, r12d */
    PUT(0x48, 0x83, 0xc4, 0x08); /* add rsp, 8 */
    PUT(0x41, 0x5c);             /* pop r12 */
    PUT(0x5b);                   /* pop rbx */
    PUT(0xc3);                   /* ret */
    int32_t jump = (int32_t)(call - (to_call + 4));
    memcpy(to_call, &jump, 4);
    table[0] = (uint64_t)(uintptr_t)even;
    table[1] = (uint64_t)(uintptr_t)odd;
    return immediates;
}

int main(int argc, char **argv) {
    long rounds = argc > 1 ? atol(argv[1]) : 300;
    int iterations = argc > 2 ? atoi(argv[2]) : 40;
    unsigned char *code = mmap(NULL, 4096, PROT_READ | PROT_WRITE | PROT_EXEC,
                               MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (code == MAP_FAILED) {
        perror("mmap");
        return 1;
    }
    struct immediates immediates = write_function(code, (uint64_t *)(code + 2048));
    loop_fn run = (loop_fn)(void *)code;
    long total = 0;
    for (long r = 0; r < rounds; r++) {
        int32_t odd = (int32_t)(r * 7 % 1000), after = (int32_t)(r * 13 % 997);
        memcpy(immediates.odd, &odd, 4);
        memcpy(immediates.after, &after, 4);
        total += run(iterations);
    }
    printf("%ld %d\n", total, calls_made);
    return 0;
}
