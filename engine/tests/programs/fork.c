/* fork(2) without libc: the child works and exits 7, the parent waits for it
 * and exits with 0 if the child's status was 7. */
#include "sys.h"

void _start(void) {
    work(50);
    long pid = sys0(57 /* fork */);
    if (pid == 0) {
        work(200);
        sys_exit_group(7);
    }
    int status = 0;
    sys4(61 /* wait4 */, pid, &status, 0, 0);
    work(20);
    sys_exit_group(((status >> 8) & 0xff) == 7 ? 0 : 1);
}
