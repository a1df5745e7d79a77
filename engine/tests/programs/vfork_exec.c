/* vfork(2) and execve(2) without libc: the child runs argv[1] with
 * argv[1..] and the environment, the parent (suspended until the child's
 * execve) waits for it and exits with its status. */
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
    long pid = sys0(58 /* vfork */);
    if (pid == 0) {
        sys3(59 /* execve */, argv[1], argv + 1, envp);
        sys1(60 /* exit */, 127);
    }
    int status = 0;
    sys4(61 /* wait4 */, pid, &status, 0, 0);
    work(10);
    sys_exit_group((status >> 8) & 0xff);
}
