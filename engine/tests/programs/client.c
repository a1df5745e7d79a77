/* A client request without libc: exits with RUNNING_ON_VALGRIND's answer
 * (0 natively, 1 under Valgrind). */
#include <valgrind/valgrind.h>
#include "sys.h"

void _start(void) {
    work(5);
    long running = (long)VALGRIND_DO_CLIENT_REQUEST_EXPR(0, VG_USERREQ__RUNNING_ON_VALGRIND, 0, 0, 0, 0, 0);
    sys_exit_group(running);
}
