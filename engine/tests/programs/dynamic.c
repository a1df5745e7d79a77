/* A dynamically linked program with a signal handler (entered from the
   kernel: an escape to original code) and callbacks through function
   pointers (qsort's comparison, a pointer computed at run time). */
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

static volatile int handled;

static void handler(int signal) { handled += signal; }

static int compare(const void *a, const void *b) {
    return *(const int *)a - *(const int *)b;
}

static int twice(int x) { return 2 * x; }
static int thrice(int x) { return 3 * x; }

int main(int argc, char **argv) {
    (void)argv;
    int values[16];
    for (int i = 0; i < 16; i++) values[i] = (i * 7919) % 31;
    qsort(values, 16, sizeof values[0], compare);
    int (*volatile pick)(int) = argc > 5 ? thrice : twice;
    int sum = pick(values[3]);
    signal(SIGUSR1, handler);
    raise(SIGUSR1);
    return handled == SIGUSR1 && sum >= 0 ? 0 : 1;
}
