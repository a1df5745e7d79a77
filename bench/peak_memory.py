#!/usr/bin/env python3
"""Peak memory of a command and every process it starts.

    bench/peak_memory.py COMMAND [ARGS...]

Runs COMMAND (its output discarded) and prints one line: the sum over the
processes of its tree of each one's peak resident set (`VmHWM`), in
kilobytes. The tree is read from /proc every few milliseconds; a process
is counted with the highest peak seen before it ended, so growth in its
last milliseconds is missed. Pages that two processes both map (a shared
library's) count once in each, so the sum is an upper bound of what they
held together at any moment. A child that still runs COMMAND's own program (a
fork before its exec) is not counted: its pages are COMMAND's. Exits with
COMMAND's exit status.
"""

import os
import shutil
import subprocess
import sys
import time


def children(pid):
    """The child processes of every thread of `pid`."""
    found = []
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as f:
                found.extend(int(child) for child in f.read().split())
    except OSError:
        pass
    return found


def executable(pid):
    """The program `pid` runs (its /proc/PID/exe), or None once it is gone."""
    try:
        return os.readlink(f"/proc/{pid}/exe")
    except OSError:
        return None


def peak_kb(pid):
    """The VmHWM of `pid` in kilobytes, or None once it is gone."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def main():
    if len(sys.argv) < 2:
        sys.exit("usage: peak_memory.py COMMAND [ARGS...]")
    process = subprocess.Popen(
        sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    peaks = {}
    tool = os.path.realpath(shutil.which(sys.argv[1]) or sys.argv[1])
    while process.poll() is None:
        todo = [process.pid]
        while todo:
            pid = todo.pop()
            # A child still running the tool's own program is a fork that
            # has not called exec yet: its pages are the tool's, shared.
            forked = pid != process.pid and executable(pid) == tool
            kb = None if forked else peak_kb(pid)
            if kb is not None:
                peaks[pid] = max(peaks.get(pid, 0), kb)
            todo.extend(children(pid))
        time.sleep(0.002)
    print(sum(peaks.values()))
    sys.exit(process.returncode)


if __name__ == "__main__":
    main()
