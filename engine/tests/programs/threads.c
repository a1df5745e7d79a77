/* Two threads without libc: the main thread starts a thread with clone(2), both
 * do some work, the main thread waits for the other's exit with one futex
 * wait (woken by CLONE_CHILD_CLEARTID), then exits the group. */
#include "sys.h"

#include "../../../tests/programs/run/spawn.h"

static void thread_main(void) { work(300); }

void _start(void) {
    long tid = spawn_thread(CLONE_FLAGS, thread_stack + sizeof thread_stack, &child_tid,
                            thread_main);
    if (tid < 0)
        sys_exit_group(1);
    work(100);
    /* FUTEX_WAIT while child_tid == 1: returns at once if it is 0 already. */
    sys4(202, &child_tid, 0, 1, 0);
    while (child_tid != 0) {
    }
    sys_exit_group(0);
}
