#!/usr/bin/env bash
# Benchmark of `cgx annotate` against Valgrind's callgrind_annotate and cg_annotate
# on the big Callgrind profile of bench/formats.sh, all in one run.
#
#   bench/annotate.sh                    # full: the ~250 MB profile
#   BENCH_SIZE=small bench/annotate.sh   # quick check on the ~25 MB profile
#   CGX=path/to/cgx bench/annotate.sh    # that binary instead of a release build
#
# The profile is bench/work/big.callgrind (small.callgrind), the one
# bench/formats.sh uses; if it is missing it is generated the same way (about 2.5
# minutes). cg_annotate reads only the Cachegrind format, so for it the profile is
# converted once with `cgx convert --to cachegrind` (not timed). Needs valgrind,
# callgrind_annotate, cg_annotate, python3 and /usr/bin/time.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

for tool in valgrind callgrind_annotate cg_annotate /usr/bin/time; do
    command -v "$tool" >/dev/null || {
        echo "annotate.sh: $tool is needed" >&2
        exit 2
    }
done

if [[ -n ${CGX:-} ]]; then
    cgx=$CGX # a cgx binary built beforehand
else
    echo "== building (release)" >&2
    cargo build --release --quiet -p cgx --bin cgx
    cgx=${CARGO_TARGET_DIR:-$root/target}/release/cgx
fi

script=annotate.sh
# shellcheck source=bench/profile.sh
source bench/profile.sh

cachegrind=$work/${size}.cachegrind
if [[ ! -s $cachegrind || $cachegrind -ot $profile ]]; then
    echo "== converting to $cachegrind for cg_annotate" >&2
    "$cgx" convert "$profile" -o "$cachegrind" --to cachegrind
fi
cachegrind_bytes=$(stat -c %s "$cachegrind")
# Every tool reads its file from the page cache.
cat "$profile" "$cachegrind" >/dev/null

# time_run NAME COMMAND...: runs COMMAND with stdout to $work/NAME.out, and sets
# seconds / kilobytes of the run.
time_run() {
    local name=$1
    shift
    /usr/bin/time -f '%e %M' -o "$work/$name.time" "$@" >"$work/$name.out" 2>"$work/$name.err" || {
        echo "annotate.sh: $* failed:" >&2
        tail -n 5 "$work/$name.err" >&2
        exit 1
    }
    read -r seconds kilobytes <"$work/$name.time"
}

# cgx runs three times; the median counts (the machine may be shared).
time_cgx() {
    local name=$1
    shift
    local runs=()
    for run in 1 2 3; do
        time_run "$name" "$cgx" annotate "$@"
        runs+=("$seconds $kilobytes")
        echo "   cgx annotate $*: $seconds s, $kilobytes KB" >&2
    done
    read -r seconds kilobytes < <(printf '%s\n' "${runs[@]}" | sort -n | sed -n 2p)
}

rows=()
# compare NAME LABEL FILE TOOL OPTIONS...: cgx annotate and TOOL with the same
# options on FILE.
compare() {
    local name=$1 label=$2 file=$3 tool=$4
    shift 4
    echo "== $label" >&2
    time_cgx "cgx-$name" "$@" "$file"
    local cgx_s=$seconds cgx_kb=$kilobytes
    echo "   $tool $* (one run)" >&2
    time_run "$tool-$name" "$tool" "$@" "$file"
    echo "   $tool: $seconds s, $kilobytes KB" >&2
    rows+=("$label|$cgx_s|$cgx_kb|$seconds|$kilobytes")
}

compare default "callgrind_annotate, default options" "$profile" callgrind_annotate
compare tree "callgrind_annotate --inclusive=yes --tree=both" "$profile" callgrind_annotate \
    --inclusive=yes --tree=both
compare cachegrind "cg_annotate (Cachegrind file), default options" "$cachegrind" cg_annotate

printf '\n%s, %d vCPUs, %s profile: %.1f MB Callgrind, %.1f MB Cachegrind\n\n' \
    "$(date -u +%Y-%m-%d)" "$(nproc)" "$size" "$(echo "$bytes / 1000000" | bc -l)" \
    "$(echo "$cachegrind_bytes / 1000000" | bc -l)"
echo "| compared with | cgx annotate (median of 3) | cgx peak RSS | Valgrind's tool | its peak RSS | ratio |"
echo "|---|---|---|---|---|---|"
met=yes
for row in "${rows[@]}"; do
    IFS='|' read -r label cgx_s cgx_kb tool_s tool_kb <<<"$row"
    ratio=$(echo "$tool_s / $cgx_s" | bc -l)
    printf '| %s | %.2f s | %.0f MB | %.2f s | %.0f MB | %.1f x |\n' "$label" "$cgx_s" \
        "$(echo "$cgx_kb / 1000" | bc -l)" "$tool_s" "$(echo "$tool_kb / 1000" | bc -l)" "$ratio"
    if (($(echo "$ratio < 10" | bc -l))); then
        met=no
    fi
done
echo
if [[ $met == yes ]]; then
    echo "Target cgx annotate >= 10x faster than Valgrind's annotate tools: met"
else
    echo "Target cgx annotate >= 10x faster than Valgrind's annotate tools: NOT met"
fi
