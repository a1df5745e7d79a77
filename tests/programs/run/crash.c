/* Bad input for `cgx run`, a -static -nostdlib program: with the argument
   `segv` it writes to address 0 (killed by SIGSEGV, exit status 139), with
   `sigint` it sends itself SIGINT (exit status 130, wherever it is
   started), with `marker PATH` it
   creates the file PATH (so a test can tell whether it ran) and exits with 0. */
#include "nolibc.h"

__attribute__((noipa)) static u64 count(u64 n)
{
    u64 sum = 0;
    for (u64 i = 0; i < n; i++)
        sum += i;
    return sum;
}

__attribute__((noipa)) static void crash(void)
{
    *(volatile u64 *)0 = count(10);
}

__attribute__((noipa)) static void interrupt(void)
{
    /* SIGINT's default action first: a process started in the background
       by a shell without job control inherits SIGINT ignored. */
    u64 action[4] = {0 /* SIG_DFL */, 0, 0, 0};
    sys4(13 /* rt_sigaction */, 2 /* SIGINT */, (long)action, 0, 8);
    long pid = sys3(39 /* getpid */, 0, 0, 0);
    sys3(62 /* kill */, pid, 2 /* SIGINT */, 0);
}

__attribute__((noipa)) static void mark(const char *path)
{
    long fd = sys3(2 /* open */, (long)path, 0101 /* O_WRONLY | O_CREAT */, 0644);
    sys3(3 /* close */, fd, 0, 0);
}

static int same(const char *a, const char *b)
{
    while (*a && *a == *b)
        a++, b++;
    return *a == *b;
}

__attribute__((noreturn)) void start(long *stack)
{
    long argc = stack[0];
    char **argv = (char **)(stack + 1);
    nolibc_data = count(20);
    if (argc >= 2 && same(argv[1], "segv"))
        crash();
    if (argc >= 2 && same(argv[1], "sigint"))
        interrupt();
    if (argc >= 3 && same(argv[1], "marker"))
        mark(argv[2]);
    put_str("done\n");
    sys_exit(0);
}
