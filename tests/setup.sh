#!/usr/bin/env bash
# Installs what the test suite needs beyond Rust, valgrind and gcc (which every
# machine of this project has): gprof2dot and KCachegrind, readers of Callgrind
# files that the tests check cgx's output against.
set -euo pipefail

if ! command -v gprof2dot >/dev/null 2>&1; then
    pip install --quiet gprof2dot
fi
if ! command -v kcachegrind >/dev/null 2>&1 || ! command -v dbus-run-session >/dev/null 2>&1; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq kcachegrind dbus >/dev/null
fi
for tool in valgrind gcc callgrind_annotate cg_annotate gprof2dot kcachegrind dbus-run-session; do
    command -v "$tool" >/dev/null 2>&1 || { echo "tests/setup.sh: $tool is missing" >&2; exit 1; }
done
