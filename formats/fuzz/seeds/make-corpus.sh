#!/bin/sh
# Builds the seed corpus of the fuzz targets from real Valgrind output: compiles a
# tiny C program, profiles it with Callgrind (several option sets) and Cachegrind,
# cuts each profile into small valid pieces (a few KB: whole header, whole function
# blocks; Cachegrind pieces get a recomputed summary:), and puts them with the
# hand-written seeds of this folder into corpus/<target>/ for every target.
#
# Usage (from formats/fuzz):  sh seeds/make-corpus.sh
# Needs gcc, valgrind and python3. corpus/ is git-ignored.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
fuzz=$(dirname "$here")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"

cat > t.c <<'EOF'
#include <stdio.h>
static inline int sq(int x) { return x * x; }
__attribute__((noinline)) int leaf(int n) {
    int s = 0;
    for (int i = 0; i < n; i++) s += sq(i) % 7 ? i : -i;
    return s;
}
__attribute__((noinline)) int mid(int n) { return n > 0 ? leaf(n) + mid(n - 1) : 0; }
int main(void) {
    int t = 0;
    for (int i = 0; i < 20; i++) t += mid(i);
    printf("%d\n", t);
    return 0;
}
EOF
gcc -g -O1 -o t t.c

cg() { name=$1; shift; valgrind --tool=callgrind --callgrind-out-file="raw.callgrind.$name" "$@" ./t >/dev/null 2>&1; }
cg default
cg instr --dump-instr=yes --collect-jumps=yes
cg nocompress --compress-strings=no --compress-pos=no --dump-instr=yes --collect-jumps=yes
cg combined --combine-dumps=yes --dump-before=mid
cg cache --cache-sim=yes --branch-sim=yes --dump-instr=yes
cg main --toggle-collect=main --dump-instr=yes --collect-jumps=yes --collect-systime=nsec
cg threads --separate-threads=yes --combine-dumps=yes --dump-line=no --dump-instr=yes
valgrind --tool=cachegrind --cachegrind-out-file=raw.cachegrind.default ./t >/dev/null 2>&1
valgrind --tool=cachegrind --cache-sim=no --branch-sim=yes \
    --cachegrind-out-file=raw.cachegrind.branch ./t >/dev/null 2>&1 || true

mkdir pieces
python3 - <<'EOF'
import glob, os, re

BUDGET = 3000

def callgrind_pieces(name, text):
    # Paragraphs separated by blank lines; a paragraph with events:/part:/pid: or
    # desc: belongs to a part header, the others are function blocks.
    paragraphs = [p for p in text.split("\n\n") if p.strip()]
    header_keys = ("events:", "part:", "pid:", "desc:", "positions:", "version:", "thread:")
    parts = []  # [header paragraphs, body paragraphs]
    for p in paragraphs:
        first = p.lstrip("\n").split("\n", 1)[0]
        is_header = any(line.startswith(header_keys) for line in p.split("\n")) \
            and not first.startswith(("ob=", "fl=", "fn="))
        if is_header:
            if parts and parts[-1][1]:
                parts.append([[p], []])
            elif parts:
                parts[-1][0].append(p)
            else:
                parts.append([[p], []])
        elif parts:
            parts[-1][1].append(p)
    # Compressed names: a slice that starts past a name's definition "(N) name"
    # gets the definition at its first use, so that it stays valid.
    space_of = {"ob": 0, "cob": 0, "fl": 1, "fi": 1, "fe": 1, "cfi": 1, "cfl": 1,
                "jfi": 1, "fn": 2, "cfn": 2, "jfn": 2}
    definitions = {}
    name_line = re.compile(r"^([a-z]+)=\((\d+)\)(?: (.*))?$")
    for line in text.split("\n"):
        m = name_line.match(line)
        if m and m.group(1) in space_of and m.group(3):
            definitions.setdefault((space_of[m.group(1)], m.group(2)), m.group(3))

    def expand(paragraph, defined):
        out = []
        for line in paragraph.split("\n"):
            m = name_line.match(line)
            if m and m.group(1) in space_of:
                key = (space_of[m.group(1)], m.group(2))
                if m.group(3):
                    defined.add(key)
                elif key not in defined and key in definitions:
                    line = f"{m.group(1)}=({m.group(2)}) {definitions[key]}"
                    defined.add(key)
            out.append(line)
        return "\n".join(out)

    pieces = []
    # The first bodies of each part (up to the budget), and slices of the first part.
    for start in (0, 3, 10, 30):
        out, size = [], 0
        for headers, bodies in parts:
            out.extend(headers)
            size += sum(len(h) for h in headers)
            defined = set()
            for body in bodies[start:]:
                body = expand(body, defined)
                if size + len(body) > BUDGET:
                    break
                out.append(body)
                size += len(body)
            if size > BUDGET:
                break
        piece = "\n\n".join(out) + "\n"
        if piece not in pieces:
            pieces.append(piece)
    return pieces

def cachegrind_pieces(name, text):
    lines = text.rstrip("\n").split("\n")
    header = [l for l in lines if l.startswith(("desc:", "cmd:", "events:"))]
    events = next(l for l in header if l.startswith("events:")).split()[1:]
    body = [l for l in lines if not l.startswith(("desc:", "cmd:", "events:", "summary:"))]
    pieces = []
    for start in (0, 40, 200):
        # Start at an fl= line so that every cost line has its fl=/fn=.
        while start < len(body) and not body[start].startswith("fl="):
            start += 1
        out, size, totals = [], sum(map(len, header)), [0] * len(events)
        for line in body[start:]:
            if size + len(line) > BUDGET:
                break
            out.append(line)
            size += len(line) + 1
            if line[:1].isdigit():
                for i, c in enumerate(line.split()[1:]):
                    totals[i] += 0 if c == "." else int(c)
        while out and not out[-1][:1].isdigit():
            out.pop()
        summary = "summary: " + " ".join(map(str, totals))
        pieces.append("\n".join(header + out + [summary]) + "\n")
    return pieces

for path in sorted(glob.glob("raw.*")):
    text = open(path, encoding="latin-1").read()
    name = path[4:]
    make = callgrind_pieces if name.startswith("callgrind") else cachegrind_pieces
    for i, piece in enumerate(make(name, text)):
        with open(f"pieces/{name}.{i}", "w", encoding="latin-1") as f:
            f.write(piece)
EOF
gzip -9 -c pieces/cachegrind.default.0 > pieces/cachegrind.default.0.gz
gzip -9 -c pieces/callgrind.default.0 > pieces/callgrind.default.0.gz

for target in read_callgrind read_cachegrind roundtrip; do
    mkdir -p "$fuzz/corpus/$target"
    cp pieces/* "$fuzz/corpus/$target/"
    cp "$here"/*.out "$fuzz/corpus/$target/"
    # The examples of the format specification, where the workspace has them.
    for fixture in "$fuzz"/../../tests/fixtures/*.out; do
        [ -f "$fixture" ] && cp "$fixture" "$fuzz/corpus/$target/"
    done
done
echo "seeds: $(ls pieces | wc -l) from Valgrind, $(ls "$here"/*.out | wc -l) hand-written, in $fuzz/corpus/"
