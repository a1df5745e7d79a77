#!/usr/bin/env bash
# cgx against Valgrind, side by side: runs the same
# programs under `valgrind` and under `cgx run` in four modes and prints a
# Markdown table of median wall times and the ratio cgx/valgrind.
#
#     bench/compare.sh                       # translate backend, full sizes
#     BACKEND=step bench/compare.sh          # step backend: small sizes only
#     RUNS=5 SIZE=small bench/compare.sh
#
# Environment:
#   BACKEND   cgx's --backend (default translate; if cgx rejects it, the script
#             says so and uses step)
#   RUNS      timed runs per tool, workload and mode (default 3; medians count)
#   SIZE      small | full (default: full, or small with the step backend)
#   MAX_STEP_INSTRUCTIONS
#             with the step backend, workloads above this many instructions are
#             skipped (default 2000000; the step backend runs ~50k instr/s)
#   WORKLOADS space-separated subset of: true ls compute gzip python3 sort sqlite3
#             node (V8 compiles the loop as it runs: a JIT), dispatch (a bytecode
#             interpreter in C: handlers called through a table) and perl (a hash
#             built and summed)
#   MODES     space-separated subset of: cachegrind callgrind callgrind-cache
#             callgrind-cacheuse (default: these four, the issue's), and
#             cachegrind-cache (Cachegrind with its cache simulation, the
#             default of valgrind 3.19)
#   CGX       a cgx binary to use instead of building target/release/cgx
#   MEMORY    yes (default): one more run of each tool per workload and mode
#             measures its peak memory (bench/peak_memory.py: the sum of the
#             peak resident sets of the tool's processes and the program's);
#             no: times only
#
# Needs valgrind, gcc, gzip, sort, python3 (/usr/bin/python3), sqlite3, node and
# perl (Debian packages valgrind gcc gzip coreutils python3 sqlite3 nodejs
# perl). A workload whose program is missing is skipped with a note.
set -euo pipefail
cd "$(dirname "$0")/.."
export LC_ALL="${LC_ALL:-C.UTF-8}"   # same locale for every run of sort

RUNS="${RUNS:-3}"
BACKEND="${BACKEND:-translate}"
MAX_STEP_INSTRUCTIONS="${MAX_STEP_INSTRUCTIONS:-2000000}"
WORKLOADS="${WORKLOADS:-true ls compute gzip python3 sort sqlite3 node dispatch perl}"
MODES="${MODES:-cachegrind callgrind callgrind-cache callgrind-cacheuse}"
MEMORY="${MEMORY:-yes}"

WORK="$(mktemp -d "${TMPDIR:-/tmp}/cgx-compare.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT

# --- setup -----------------------------------------------------------------

# Builds cgx (release) unless CGX names a binary; sets CGX.
build_cgx() {
    if [ -z "${CGX:-}" ]; then
        cargo build --release --quiet -p cgx
        CGX="$PWD/target/release/cgx"
    fi
}

# Uses BACKEND if cgx accepts it, otherwise falls back to step with a note.
check_backend() {
    if ! "$CGX" run -q --backend="$BACKEND" --tool=cachegrind --cache-sim=no \
            --cachegrind-out-file="$WORK/probe.out" /bin/true \
            > /dev/null 2> "$WORK/probe.err"; then
        echo "note: cgx rejects --backend=$BACKEND ($(head -1 "$WORK/probe.err")); using --backend=step" >&2
        BACKEND=step
    fi
    SIZE="${SIZE:-$([ "$BACKEND" = step ] && echo small || echo full)}"
}

# Compiles the C benchmarks.
build_programs() {
    gcc -O2 -g -o "$WORK/compute" bench/programs/compute.c
    gcc -O2 -g -o "$WORK/dispatch" bench/programs/dispatch.c
}

# Writes NUM_LINES deterministic lines of pseudo-random words to FILE.
generate_text() {
    local file="$1" num_lines="$2"
    awk -v n="$num_lines" 'BEGIN {
        srand(42)
        for (i = 0; i < n; i++) {
            line = ""
            words = 3 + int(rand() * 8)
            for (w = 0; w < words; w++) {
                len = 2 + int(rand() * 7); word = ""
                for (c = 0; c < len; c++) word = word sprintf("%c", 97 + int(rand() * 26))
                line = line (w ? " " : "") word
            }
            print line, int(rand() * 1000000)
        }
    }' > "$file"
}

# Sets the workload sizes for SIZE and generates the input files.
prepare_inputs() {
    case "$SIZE" in
        small) COMPUTE_N=20;  GZIP_LINES=40;    SORT_LINES=100;     PY_LOOP=1000;    SQL_ROWS=1000;   JS_LOOP=1000;    DISPATCH_ROUNDS=20;    PERL_LOOP=200 ;;
        full)  COMPUTE_N=400; GZIP_LINES=80000; SORT_LINES=300000;  PY_LOOP=3000000; SQL_ROWS=200000; JS_LOOP=3000000; DISPATCH_ROUNDS=20000; PERL_LOOP=200000 ;;
        *) echo "SIZE must be small or full, not '$SIZE'" >&2; exit 2 ;;
    esac
    generate_text "$WORK/gzip-input.txt" "$GZIP_LINES"
    generate_text "$WORK/sort-input.txt" "$SORT_LINES"
    if command -v sqlite3 > /dev/null; then
        sqlite3 "$WORK/bench.db" "CREATE TABLE t(id INTEGER PRIMARY KEY, k INTEGER, v TEXT);
            WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < $SQL_ROWS)
            INSERT INTO t SELECT x, (x * 7919) % 1000, hex(x * 2654435761) FROM c;"
    fi
}

# --- workloads -------------------------------------------------------------

# Sets CMD (an array) to the command line of workload $1.
workload_command() {
    case "$1" in
        true)    CMD=(/bin/true) ;;
        ls)      CMD=(ls /usr/lib) ;;
        compute) CMD=("$WORK/compute" "$COMPUTE_N") ;;
        gzip)    CMD=(gzip -9 -c "$WORK/gzip-input.txt") ;;
        python3) CMD=(/usr/bin/python3 -c "n = 0
for i in range($PY_LOOP): n += i * i % 7
print(n)") ;;
        sort)    CMD=(sort --parallel=2 "$WORK/sort-input.txt") ;;
        sqlite3) CMD=(sqlite3 "$WORK/bench.db"
                      "SELECT k, count(*), sum(length(v)) FROM t GROUP BY k ORDER BY 3 DESC LIMIT 5;") ;;
        node)    CMD=(node -e "let s = 0; for (let i = 0; i < $JS_LOOP; i++) s += i * i % 7; console.log(s)") ;;
        dispatch) CMD=("$WORK/dispatch" "$DISPATCH_ROUNDS") ;;
        perl)    CMD=(perl -e "my %h; \$h{\"k\$_\"} = \$_ * 2 for 1 .. $PERL_LOOP; my \$s = 0; \$s += \$_ for values %h; print \"\$s\\n\"") ;;
        *) echo "unknown workload '$1'" >&2; exit 2 ;;
    esac
}

# Prints the table's label for workload $1.
workload_label() {
    case "$1" in
        true)    echo '`/bin/true`' ;;
        ls)      echo '`ls /usr/lib`' ;;
        compute) echo "\`compute $COMPUTE_N\` (C, -O2)" ;;
        gzip)    echo "\`gzip -9\` $(file_size "$WORK/gzip-input.txt")" ;;
        python3) echo "\`python3 -c\` loop of $PY_LOOP" ;;
        sort)    echo "\`sort --parallel=2\` $SORT_LINES lines, $(file_size "$WORK/sort-input.txt")" ;;
        sqlite3) echo "\`sqlite3\` GROUP BY on $SQL_ROWS rows" ;;
        node)    echo "\`node -e\` loop of $JS_LOOP (JIT)" ;;
        dispatch) echo "\`dispatch $DISPATCH_ROUNDS\` (C bytecode interpreter)" ;;
        perl)    echo "\`perl -e\` hash of $PERL_LOOP" ;;
    esac
}

# Prints the size of file $1 in kB or MB.
file_size() {
    stat -c %s "$1" | awk '{ if ($1 >= 1e6) printf "%.1f MB", $1 / 1e6; else printf "%.1f kB", $1 / 1e3 }'
}

# Prints the tool options of mode $1 (the output file option is added later).
mode_options() {
    case "$1" in
        cachegrind)         echo "--tool=cachegrind --cache-sim=no" ;;
        cachegrind-cache)   echo "--tool=cachegrind --cache-sim=yes" ;;
        callgrind)          echo "--tool=callgrind" ;;
        callgrind-cache)    echo "--tool=callgrind --cache-sim=yes" ;;
        callgrind-cacheuse) echo "--tool=callgrind --cacheuse=yes" ;;
    esac
}

# --- measuring -------------------------------------------------------------

# Prints the instruction count of CMD (Valgrind's `I refs`, Cachegrind without
# cache simulation: the cheapest run).
count_instructions() {
    valgrind --tool=cachegrind --cache-sim=no --cachegrind-out-file="$WORK/count.out" \
        "${CMD[@]}" 2>&1 > /dev/null | awk '/I +refs:/ { gsub(",", "", $NF); print $NF }'
    rm -f "$WORK/count.out"
}

# Runs "$@" once, output discarded, and prints its wall time in seconds, or
# "fail" (with the end of its stderr on ours) if it exits non-zero.
time_once() {
    local start end
    start=$EPOCHREALTIME
    if "$@" > /dev/null 2> "$WORK/run.err"; then
        end=$EPOCHREALTIME
        awk -v s="$start" -v e="$end" 'BEGIN { printf "%.3f\n", e - s }'
    else
        echo "  failed: $*" >&2
        tail -3 "$WORK/run.err" | sed 's/^/    /' >&2
        echo fail
    fi
    rm -f "$WORK"/*.out.*
}

# Runs "$@" once under bench/peak_memory.py and prints the peak memory of
# its processes together in MB, or "fail".
peak_once() {
    local kb
    if kb=$(python3 bench/peak_memory.py "$@" 2> "$WORK/run.err"); then
        awk -v kb="$kb" 'BEGIN { printf "%.1f\n", kb * 1024 / 1e6 }'
    else
        echo fail
    fi
    rm -f "$WORK"/*.out.*
}

# Prints the median of its arguments, or "fail" if any is "fail".
median() {
    printf '%s\n' "$@" | sort -g | awk '
        /fail/ { failed = 1 } { v[NR] = $1 }
        END {
            if (failed) { print "fail"; exit }
            if (NR % 2) print v[(NR + 1) / 2]; else printf "%.3f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2
        }'
}

# Times CMD under valgrind and cgx in mode $1, RUNS times each (interleaved,
# so that a slow spell of a shared machine hits both), and sets VG_MEDIAN and
# CGX_MEDIAN.
time_mode() {
    local mode="$1" options out_option vg_times=() cgx_times=() run
    read -r -a options <<< "$(mode_options "$mode")"
    out_option="--${options[0]#--tool=}-out-file=$WORK"   # + /TOOL.out.%p
    for ((run = 0; run < RUNS; run++)); do
        vg_times+=("$(time_once valgrind -q "${options[@]}" "$out_option/vg.out.%p" "${CMD[@]}")")
        cgx_times+=("$(time_once "$CGX" run -q --backend="$BACKEND" "${options[@]}" \
                           "$out_option/cgx.out.%p" "${CMD[@]}")")
    done
    VG_MEDIAN=$(median "${vg_times[@]}")
    CGX_MEDIAN=$(median "${cgx_times[@]}")
    VG_MB=–
    CGX_MB=–
    if [ "$MEMORY" = yes ]; then
        VG_MB=$(peak_once valgrind -q "${options[@]}" "$out_option/vg.out.%p" "${CMD[@]}")
        CGX_MB=$(peak_once "$CGX" run -q --backend="$BACKEND" "${options[@]}" \
                     "$out_option/cgx.out.%p" "${CMD[@]}")
    fi
}

# Prints cgx/valgrind of two medians.
ratio() {
    if [ "$1" = fail ] || [ "$2" = fail ]; then echo "–"; return; fi
    awk -v v="$1" -v c="$2" 'BEGIN { printf "%.2f\n", c / v }'
}

# Prints a number with thousands separators.
thousands() {
    echo "$1" | sed -e ':a' -e 's/\([0-9]\)\([0-9]\{3\}\)\($\|,\)/\1,\2\3/' -e 'ta'
}

# --- report ----------------------------------------------------------------

print_machine() {
    echo "date: $(date -u '+%Y-%m-%d %H:%M UTC')"
    echo "machine: $(nproc) CPUs, $(awk -F': ' '/model name/ { print $2; exit }' /proc/cpuinfo), load average $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "valgrind: $(valgrind --version); cgx: $(git rev-parse --short HEAD 2>/dev/null || echo '?') (release), --backend=$BACKEND"
    echo "size: $SIZE; runs: $RUNS per tool, workload and mode (medians)"
    echo
}

# Measures workload $1 in every mode and prints its table rows, or a note on
# stderr when it is skipped.
report_workload() {
    local name="$1" label instructions mode
    workload_command "$name"
    if ! command -v "${CMD[0]}" > /dev/null; then
        echo "skipped $name: ${CMD[0]} is not installed" >&2
        return
    fi
    label=$(workload_label "$name")
    instructions=$(count_instructions)
    if [ "$BACKEND" = step ] && [ "$instructions" -gt "$MAX_STEP_INSTRUCTIONS" ]; then
        echo "skipped $name: $(thousands "$instructions") instructions > MAX_STEP_INSTRUCTIONS=$MAX_STEP_INSTRUCTIONS (the step backend would take ~$((instructions / 50000)) s a run)" >&2
        SKIPPED+=("$label: $(thousands "$instructions") instructions")
        return
    fi
    for mode in $MODES; do
        echo "measuring $name, $mode ..." >&2
        time_mode "$mode"
        echo "| $label | $(thousands "$instructions") | $mode | $VG_MEDIAN | $CGX_MEDIAN | $(ratio "$VG_MEDIAN" "$CGX_MEDIAN") | $VG_MB | $CGX_MB |"
    done
}

main() {
    build_cgx
    check_backend
    build_programs
    prepare_inputs
    print_machine
    echo "| workload | instructions | mode | valgrind s | cgx s | cgx/valgrind | valgrind MB | cgx MB |"
    echo "|---|---:|---|---:|---:|---:|---:|---:|"
    SKIPPED=()
    local name
    for name in $WORKLOADS; do
        report_workload "$name"
    done
    if [ ${#SKIPPED[@]} -gt 0 ]; then
        echo
        echo "Skipped with --backend=step (over MAX_STEP_INSTRUCTIONS=$MAX_STEP_INSTRUCTIONS):"
        printf -- '- %s\n' "${SKIPPED[@]}"
    fi
}

main
