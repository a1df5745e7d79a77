/* Self-modifying and remapped code for the step backend's tests: seven
 * versions of a function, each returning its number, written over one another
 * at the same address (the sum of the results is 28). */
#ifndef CGX_SMC_H
#define CGX_SMC_H

#include "sys.h"

#define CODE_SIZE 64
#define VERSIONS 7
#define PAGE_SIZE 4096

/* Each version, called as version(0, 0, 0, 7): rcx = 7 on entry. */
typedef long (*version_fn)(long, long, long, long);

/* The client-request marker (rol $3/$13/$61/$51, %rdi; xchg %rbx,%rbx): a
 * no-op natively, one 19-byte instruction for Valgrind and cgx. */
#define MARKER 0x48, 0xc1, 0xc7, 0x03, 0x48, 0xc1, 0xc7, 0x0d, 0x48, 0xc1, 0xc7, 0x3d, \
               0x48, 0xc1, 0xc7, 0x33, 0x48, 0x87, 0xdb

/* The versions; each is chosen so that a stale decoding of the previous one
 * shows: 2 would return 40 (the marker of 1 emulated), 4 would count
 * 7 iterations of the rep stosb of 3. */
static const unsigned char versions[VERSIONS][CODE_SIZE] = {
    /* 1: a client request (RUNNING_ON_VALGRIND, its arguments on the stack)
     * at 18; mov $1,%eax; ret */
    {0x6a, 0, 0x6a, 0, 0x6a, 0, 0x6a, 0, 0x6a, 0, /* push $0 x5 */
     0x68, 0x01, 0x10, 0, 0,                      /* push $0x1001 */
     0x48, 0x89, 0xe0,                            /* mov %rsp,%rax */
     MARKER,                                      /* 18 */
     0x48, 0x83, 0xc4, 0x30,                      /* 37: add $48,%rsp */
     0xb8, 1, 0, 0, 0,                            /* 41: mov $1,%eax */
     0xc3},                                       /* 46: ret */
    /* 2: jmp 18; 18: mov $2,%eax; ret; 37: mov $40,%eax; ret (where a stale
     * marker at 18 would go on) */
    {0xeb, 0x10, [18] = 0xb8, 2, 0, 0, 0, 0xc3, [37] = 0xb8, 40, 0, 0, 0, 0xc3},
    /* 3: jmp 48; 48: xor %ecx,%ecx; rep stosb (no iteration); mov $3,%eax; ret */
    {0xeb, 0x2e, [48] = 0x31, 0xc9, 0xf3, 0xaa, 0xb8, 3, 0, 0, 0, 0xc3},
    /* 4: jmp 48; 48: nop; nop; xor %ecx,%ecx (where 3 has its rep stosb);
     * mov $4,%eax; ret */
    {0xeb, 0x2e, [48] = 0x90, 0x90, 0x31, 0xc9, 0xb8, 4, 0, 0, 0, 0xc3},
    /* 5: mov $5,%eax; ret */
    {0xb8, 5, 0, 0, 0, 0xc3},
    /* 6: mov $6,%eax; ret (the same lengths, other bytes) */
    {0xb8, 6, 0, 0, 0, 0xc3},
    /* 7: xor %eax,%eax; add $7,%al; ret (other lengths: new instructions
     * start inside the old mov) */
    {0x31, 0xc0, 0x04, 0x07, 0xc3},
};

/* Calls the code at `code`. */
static long call_code(const void *code) { return ((version_fn)code)(0, 0, 0, 7); }

#endif
