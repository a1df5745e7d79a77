#!/usr/bin/env bash
# Installs what the test suite needs beyond Rust, valgrind, gcc, Python and npm
# (which every machine of this project has): the other readers of the files cgx
# writes, which the tests check its output against — gprof2dot, KCachegrind (run
# headless in a D-Bus session), go tool pprof (Debian's golang-go) and Python's
# jsonschema; tmux (a real terminal for the job-control test); Debian's gzip,
# python3, sort and sqlite3; and programs that compile code as they run (LuaJIT,
# node, grep with PCRE2's JIT); the runners of iai-callgrind and gungraun; and
# the other writers of callgrind files whose files cgx reads (PHP with Xdebug,
# pyprof2calltree; go tool pprof above). npm fetches speedscope's file-format
# schema when the tests first need it.
set -euo pipefail

packages=()
command -v kcachegrind >/dev/null 2>&1 || packages+=(kcachegrind)
command -v dbus-run-session >/dev/null 2>&1 || packages+=(dbus)
command -v go >/dev/null 2>&1 || packages+=(golang-go)
command -v tmux >/dev/null 2>&1 || packages+=(tmux)
# The programs nobody here wrote that run_real_programs profiles.
[ -x /usr/bin/gzip ] || packages+=(gzip)
[ -x /usr/bin/sort ] || packages+=(coreutils)
[ -x /usr/bin/python3 ] || packages+=(python3)
[ -x /usr/bin/sqlite3 ] || packages+=(sqlite3)
# The JITs run_jit runs.
[ -x /usr/bin/luajit ] || packages+=(luajit)
[ -x /usr/bin/node ] || packages+=(nodejs)
[ -x /usr/bin/grep ] || packages+=(grep)
# The other writers of callgrind files (other_writers).
command -v php >/dev/null 2>&1 || packages+=(php-cli)
php -m 2>/dev/null | grep -i '^xdebug$' >/dev/null || packages+=(php-xdebug)
if ((${#packages[@]})); then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq "${packages[@]}" >/dev/null
fi
command -v gprof2dot >/dev/null 2>&1 || pip install --quiet gprof2dot
command -v pyprof2calltree >/dev/null 2>&1 || pip install --quiet pyprof2calltree
# The runners of the benchmark harnesses that tool_drivers runs through cgx's shims.
command -v iai-callgrind-runner >/dev/null 2>&1 ||
    cargo install --quiet iai-callgrind-runner --version 0.16.1
command -v gungraun-runner >/dev/null 2>&1 ||
    cargo install --quiet gungraun-runner --version 0.20.0
python3 -c 'import jsonschema' >/dev/null 2>&1 || pip install --quiet jsonschema

for tool in valgrind gcc callgrind_annotate cg_annotate cg_merge cg_diff gprof2dot \
    kcachegrind dbus-run-session go tmux npm /usr/bin/gzip /usr/bin/sort /usr/bin/python3 /usr/bin/sqlite3 \
    /usr/bin/luajit /usr/bin/node /usr/bin/grep iai-callgrind-runner gungraun-runner \
    php pyprof2calltree; do
    command -v "$tool" >/dev/null 2>&1 || { echo "tests/setup.sh: $tool is missing" >&2; exit 1; }
done
python3 -c 'import jsonschema' 2>/dev/null || { echo "tests/setup.sh: python3's jsonschema is missing" >&2; exit 1; }
# grep reads all of php's output: grep -q may stop first and fail php (SIGPIPE) under pipefail.
php -m | grep -i '^xdebug$' >/dev/null || { echo "tests/setup.sh: PHP's Xdebug is missing" >&2; exit 1; }
