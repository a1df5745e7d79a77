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
# Readers of the stack formats `cgx convert` writes (tests/tests/pictures.rs): go
# tool pprof (Debian's golang-go) and Python's jsonschema; npm (on every machine of
# this project) fetches speedscope's file-format schema when the tests first need it.
if ! command -v go >/dev/null 2>&1; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq golang-go >/dev/null
fi
if ! python3 -c 'import jsonschema' >/dev/null 2>&1; then
    pip install --quiet jsonschema
fi
for tool in valgrind gcc callgrind_annotate cg_annotate gprof2dot kcachegrind dbus-run-session; do
    command -v "$tool" >/dev/null 2>&1 || { echo "tests/setup.sh: $tool is missing" >&2; exit 1; }
done
for tool in go npm; do
    command -v "$tool" >/dev/null 2>&1 || { echo "tests/setup.sh: $tool is missing" >&2; exit 1; }
done
python3 -c 'import jsonschema' 2>/dev/null || { echo "tests/setup.sh: python3's jsonschema is missing" >&2; exit 1; }
