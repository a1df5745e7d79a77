/* Sends SIGINT and SIGQUIT to its parent (the tracer, which must ignore them),
 * then SIGINT to itself (which must kill it: the tracer restored the default
 * disposition in the child). Exits 0 only if it survives. */
#include "sys.h"

void _start(void) {
    long parent = sys0(110 /* getppid */);
    sys2(62 /* kill */, parent, 2 /* SIGINT */);
    sys2(62 /* kill */, parent, 3 /* SIGQUIT */);
    sys2(62 /* kill */, sys0(39 /* getpid */), 2);
    sys_exit_group(0);
}
