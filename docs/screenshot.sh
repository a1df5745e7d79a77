#!/bin/sh
# Takes docs/kcachegrind.png: KCachegrind on a cgx profile of
# bench/programs/compute.c, in a virtual X screen, with no window manager.
# Needs Debian's kcachegrind, xvfb, x11-apps (xwd) and netpbm, and cgx on PATH.
#
#     docs/screenshot.sh [OUT.png]
set -eu
out="$(realpath -m "${1:-docs/kcachegrind.png}")"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
gcc -O2 -g bench/programs/compute.c -o "$work/compute"
cd "$work"
cgx run -q --callgrind-out-file=callgrind.out.tour ./compute 40 > /dev/null
# No tip of the day over the window.
mkdir -p config
printf '[TipOfDay]\nRunOnStart=false\n' > config/kcachegrindrc
cat > shot.sh <<'INNER'
#!/bin/sh
kcachegrind -geometry 1280x800+0+0 callgrind.out.tour > /dev/null 2>&1 &
sleep 15
xwd -root -silent | xwdtopnm 2>/dev/null | pnmtopng > "$1"
kill $! 2>/dev/null || true
INNER
chmod +x shot.sh
XDG_CONFIG_HOME="$work/config" xvfb-run -a -s "-screen 0 1280x800x24" \
    dbus-run-session -- ./shot.sh "$out" 2>/dev/null
echo "$out"
