# Sourced by the benchmarks: the big Callgrind profile they all use.
#
# Sets `profile` to bench/work/big.callgrind (BENCH_SIZE=full, the default) or
# bench/work/small.callgrind (BENCH_SIZE=small), generating it when missing:
# Callgrind's own output for python3 running bench/workload.py, with
# --dump-instr=yes --collect-jumps=yes, cache and branch simulation and
# --separate-callers (which multiplies the contexts): ~250 MB in about 2.5
# minutes, or ~25 MB. Delete the file to generate it again. `script` names the
# calling script in messages.

size=${BENCH_SIZE:-full}
work=bench/work
mkdir -p "$work"

case "$size" in
full)
    profile=$work/big.callgrind
    workload_args=()
    separate_callers=15
    ;;
small)
    profile=$work/small.callgrind
    workload_args=(small)
    separate_callers=3
    ;;
*)
    echo "$script: BENCH_SIZE must be full or small, not '$size'" >&2
    exit 2
    ;;
esac

if [[ ! -s $profile ]]; then
    # The system's python (pyenv and similar put a shell script first on PATH).
    python=${PYTHON:-/usr/bin/python3}
    [[ -x $python ]] || python=$(python3 -c 'import sys; print(sys.executable)')
    echo "== generating $profile: callgrind on $python bench/workload.py ${workload_args[*]-}" >&2
    start=$(date +%s)
    valgrind --tool=callgrind --dump-instr=yes --collect-jumps=yes \
        --cache-sim=yes --branch-sim=yes --separate-callers=$separate_callers \
        --callgrind-out-file="$profile.tmp" \
        "$python" bench/workload.py "${workload_args[@]}" >/dev/null 2>"$work/valgrind.log" || {
        tail -n 20 "$work/valgrind.log" >&2
        exit 1
    }
    mv "$profile.tmp" "$profile"
    echo "   $(stat -c %s "$profile") bytes in $(($(date +%s) - start)) s" >&2
fi

bytes=$(stat -c %s "$profile")
if [[ $size == full && $bytes -lt 200000000 ]]; then
    echo "$script: warning: $profile has only $bytes bytes (< 200 MB)" >&2
fi
