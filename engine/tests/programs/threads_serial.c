/* Three threads without libc, one after the other: the main thread starts
 * a thread with clone(2), waits for its exit (one futex wait, woken by
 * CLONE_CHILD_CLEARTID or returning at once), sleeps 20 ms, and starts the next. */
#include "sys.h"

#include "../../../tests/programs/run/spawn.h"

static void thread_main(void) { work(200); }

void _start(void) {
    for (int i = 0; i < 3; i++) {
        child_tid = 1;
        if (spawn_thread(CLONE_FLAGS, thread_stack + sizeof thread_stack, &child_tid, thread_main) < 0)
            sys_exit_group(1);
        /* One FUTEX_WAIT whatever the timing (it returns at once if the
         * thread is gone already), so the instruction count is fixed. */
        sys4(202 /* futex */, &child_tid, 0 /* FUTEX_WAIT */, 1, 0);
        while (child_tid != 0)
            sys4(202 /* futex */, &child_tid, 0 /* FUTEX_WAIT */, 1, 0);
        long pause[2] = {0, 20000000};
        sys2(35 /* nanosleep */, pause, 0);
    }
    sys_exit_group(0);
}
