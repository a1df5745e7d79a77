#!/usr/bin/env bash
# The overhead of exact inclusive cache use: records the events of one
# run of a program with the step backend, then replays them into the collector
# with --cacheuse=yes with and without the back-dating tree, and prints the
# collector's times (medians), their ratio and the tree's sizes.
#
#     bench/cacheuse.sh [PROGRAM ARGS...]      (default: ls /usr/lib)
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet -p cgx-callstack --example cacheuse_overhead
if [ $# -eq 0 ]; then set -- ls /usr/lib; fi
target/release/examples/cacheuse_overhead "$@" > /dev/null 2> /dev/null || true
target/release/examples/cacheuse_overhead "$@" | grep -E '^(recorded|collector|back-dating)'
