/* Constant REP counts that reach the instruction across a chased transfer
   (Cachegrind's VEX chases one direct jmp or call per superblock, within
   its 60-instruction budget; Callgrind's does not chase): see
   tests/superblocks.rs. */
        .text
        .globl _start
_start:
        /* Through a call: folded for Cachegrind. */
        mov $16, %ecx
        call fill
        /* Through a jmp: folded. */
        mov $8, %ecx
        jmp 1f
1:      lea buffer(%rip), %rdi
        rep stosb
        /* Two jmps: only the first is chased, so counted. */
        mov $4, %ecx
        jmp 2f
2:      jmp 3f
3:      lea buffer(%rip), %rdi
        rep stosb
        /* A jmp after 58 instructions: fewer than 3 left, not chased. */
        mov $5, %ecx
        .rept 56
        nop
        .endr
        jmp 4f
4:      lea buffer(%rip), %rdi
        rep stosb
        /* After 57: chased, the extension's limit is 3 instructions. */
        mov $6, %ecx
        .rept 55
        nop
        .endr
        jmp 5f
5:      lea buffer(%rip), %rdi
        nop
        rep stosb
        /* Same, but the limit cuts the extension before the rep. */
        mov $7, %ecx
        .rept 55
        nop
        .endr
        jmp 6f
6:      lea buffer(%rip), %rdi
        nop
        nop
        rep stosb
        /* REPNE/REPE with counts not constant: Cachegrind's inversion. */
        mov count(%rip), %rcx
        lea buffer(%rip), %rdi
        mov $1, %eax
        repne scasb
        mov count(%rip), %rcx
        lea buffer(%rip), %rdi
        lea buffer(%rip), %rsi
        repe cmpsb
        mov $3, %ecx
        call find
        /* loop and jrcxz to the next instruction. */
        mov count(%rip), %rcx
7:      loop 8f
8:      jrcxz 9f
9:      test %rcx, %rcx
        jnz 7b
        mov $60, %eax
        xor %edi, %edi
        syscall
fill:
        lea buffer(%rip), %rdi
        rep stosb
        ret
find:
        lea buffer(%rip), %rdi
        mov $1, %eax
        repne scasb
        ret
        .data
count:  .quad 12
        .bss
buffer: .zero 64
