/* A server to control while it runs (callgrind_control): prints "ready",
   then serves one-byte commands on standard input: 'w' runs a round of
   work, 'q' quits, printing the sum of the rounds. It waits for them in
   epoll_wait, as servers do, or with the argument "busy" polls for them
   between rounds of other work (a program that computes while it serves,
   which Valgrind's vgdb reaches without ptrace). */
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

static unsigned long __attribute__((noinline)) work(unsigned long n) {
    unsigned long sum = 0;
    for (unsigned long i = 0; i < n; i++)
        sum += i * i % 7;
    return sum;
}

int main(int argc, char **argv) {
    int busy = argc > 1 && strcmp(argv[1], "busy") == 0;
    unsigned long sum = work(100000), spare = 0;
    printf("ready\n");
    fflush(stdout);
    int ep = epoll_create1(0);
    struct epoll_event in = {.events = EPOLLIN, .data.fd = 0};
    if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, 0, &in) != 0) {
        perror("epoll");
        return 1;
    }
    for (;;) {
        struct epoll_event got;
        int n = epoll_wait(ep, &got, 1, busy ? 0 : -1);
        if (n < 0) {
            perror("epoll_wait");
            return 1;
        }
        if (n == 0) {
            spare += work(1000);
            continue;
        }
        char c;
        if (read(0, &c, 1) <= 0 || c == 'q')
            break;
        if (c == 'w')
            sum += work(50000);
    }
    printf("sum %lu\n", sum);
    return spare == 1; /* never: keeps the spare work */
}
