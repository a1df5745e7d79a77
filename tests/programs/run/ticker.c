/* Prints "tick N" ten times a second for a minute at most, then exits 0. */
#include <stdio.h>
#include <unistd.h>

int main(void) {
    for (int tick = 0; tick < 600; tick++) {
        printf("tick %d\n", tick);
        fflush(stdout);
        usleep(100000);
    }
    return 0;
}
