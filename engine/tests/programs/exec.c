/* execve(2) without libc: runs argv[1] with argv[1..] and the environment. */
#include "sys.h"

__asm__(".globl _start\n"
        "_start:\n"
        "    mov %rsp, %rdi\n"
        "    and $-16, %rsp\n"
        "    call start_c\n");

void start_c(long *sp) {
    long argc = sp[0];
    char **argv = (char **)(sp + 1);
    char **envp = argv + argc + 1;
    work(30);
    if (argc < 2)
        sys_exit_group(2);
    sys3(59 /* execve */, argv[1], argv + 1, envp);
    sys_exit_group(127);
}
