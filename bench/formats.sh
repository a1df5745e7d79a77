#!/usr/bin/env bash
# Benchmark of cgx-formats on a big Callgrind profile: read and write throughput and
# peak memory of cgx, against the time callgrind_annotate takes on the same file.
#
#   bench/formats.sh                    # full: a ~250 MB profile (generated once, ~2 min)
#   BENCH_SIZE=small bench/formats.sh   # quick check on a few-MB profile
#
# The profile is bench/work/big.callgrind (small.callgrind): Callgrind's own output for
# python3 running bench/workload.py, with --dump-instr=yes --collect-jumps=yes, cache
# and branch simulation and --separate-callers (which multiplies the contexts).
# Delete it to generate it again. Needs valgrind, callgrind_annotate, python3 and
# /usr/bin/time.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

for tool in valgrind callgrind_annotate /usr/bin/time; do
    command -v "$tool" >/dev/null || {
        echo "formats.sh: $tool is needed" >&2
        exit 2
    }
done

echo "== building (release)" >&2
cargo build --release --quiet -p cgx --bin cgx
cargo build --release --quiet -p cgx-formats --example profile_io
target=${CARGO_TARGET_DIR:-$root/target}/release
cgx=$target/cgx
profile_io=$target/examples/profile_io

script=formats.sh
# shellcheck source=bench/profile.sh
source bench/profile.sh
# Both tools read the file from the page cache.
cat "$profile" >/dev/null

# Three runs of the example; the one with the median read time counts (the machine
# may be shared, so single runs are noisy).
echo "== cgx-formats read and write (formats/examples/profile_io.rs), 3 runs" >&2
runs=()
for _ in 1 2 3; do
    runs+=("$("$profile_io" "$profile")")
    echo "   ${runs[-1]}" >&2
done
io_line=$(printf '%s\n' "${runs[@]}" | sed 's/.*\bread_s=\([^ ]*\).*/\1 &/' | sort -n | sed -n '2s/^[^ ]* //p')
field() { sed -n "s/.*\\b$1=\\([^ ]*\\).*/\\1/p" <<<"$io_line"; }

echo "== cgx convert" >&2
out=$work/converted.callgrind
/usr/bin/time -f '%e %M %U %S' -o "$work/cgx.time" "$cgx" convert "$profile" -o "$out" --to callgrind
read -r cgx_s cgx_kb cgx_user cgx_sys <"$work/cgx.time"
rm -f "$out"

echo "== callgrind_annotate" >&2
/usr/bin/time -f '%e %M %U %S' -o "$work/annotate.time" \
    callgrind_annotate "$profile" >/dev/null 2>"$work/annotate.log"
read -r annotate_s annotate_kb annotate_user annotate_sys <"$work/annotate.time"
if [[ -s $work/annotate.log ]]; then
    echo "formats.sh: warning: callgrind_annotate complained:" >&2
    head -n 5 "$work/annotate.log" >&2
fi

read_s=$(field read_s)
peak_kb=$(field peak_rss_read_kb)
awk -v bytes="$bytes" -v read_s="$read_s" -v read_mb_s="$(field read_mb_s)" \
    -v write_mb_s="$(field write_mb_s)" -v peak_kb="$peak_kb" \
    -v cgx_s="$cgx_s" -v cgx_kb="$cgx_kb" -v cgx_cpu="$cgx_user $cgx_sys" \
    -v annotate_s="$annotate_s" -v annotate_cpu="$annotate_user $annotate_sys" \
    -v annotate_kb="$annotate_kb" -v records="$(field records)" \
    -v functions="$(field functions)" -v date="$(date -u +%Y-%m-%d)" \
    -v cpus="$(nproc)" -v size="$size" 'BEGIN {
    mb = bytes / 1e6
    ratio = annotate_s / read_s
    mem = peak_kb * 1024 / bytes
    convert_mem = cgx_kb * 1024 / bytes
    printf "\n%s, %d vCPUs, %s profile: %d functions, %d records\n\n", date, cpus, \
        size, functions, records
    print "| measure | value |"
    print "|---|---|"
    printf "| file size | %.1f MB |\n", mb
    printf "| cgx read (read_path, median of 3) | %.2f s, %.1f MB/s |\n", read_s, read_mb_s
    printf "| cgx write (Callgrind, to a sink) | %.1f MB/s |\n", write_mb_s
    printf "| cgx peak RSS after reading | %.1f MB = %.3f x file size |\n", peak_kb * 1024 / 1e6, mem
    split(cgx_cpu, c)
    split(annotate_cpu, a)
    printf "| cgx convert --to callgrind | %.2f s (CPU %.2f s), peak RSS %.1f MB = %.3f x file size |\n", \
        cgx_s, c[1] + c[2], cgx_kb * 1024 / 1e6, convert_mem
    printf "| callgrind_annotate | %.2f s (CPU %.2f s), peak RSS %.1f MB |\n", annotate_s, \
        a[1] + a[2], annotate_kb * 1024 / 1e6
    printf "| callgrind_annotate time / cgx read time | %.1f x |\n", ratio
    printf "\nTarget read >= 10x faster than callgrind_annotate: %s\n", (ratio >= 10 ? "met" : "NOT met")
    printf "Target peak memory below the file size: %s\n", \
        (mem < 1 && convert_mem < 1) ? "met" : "NOT met"
}'
