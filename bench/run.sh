#!/bin/sh
# Runs the dlrun benchmarks and prints one line per benchmark; writes
# bench/results.json. Builds nothing: `make bench` / `make bench-quick`
# (bench/bench.mk) build first.
#
#   bench/run.sh [--quick]
#
# Environment: BUILD (the optimised build tree, default build-bench),
# PYTHON (a python3 with Debian's NumPy, default /usr/bin/python3 when it
# exists, else python3), RESULTS (output file, default bench/results.json).
# Exit status: 0 when every correctness check passed (a missed speed target
# is reported as MISSED, not an error), 1 otherwise.
set -u
cd "$(dirname "$0")/.." || exit 1

QUICK=""
for a in "$@"; do
  case "$a" in
    --quick) QUICK="--quick" ;;
    *) echo "usage: bench/run.sh [--quick]" >&2; exit 2 ;;
  esac
done

BUILD="${BUILD:-build-bench}"
if [ -z "${PYTHON:-}" ]; then
  if [ -x /usr/bin/python3 ]; then PYTHON=/usr/bin/python3; else PYTHON=python3; fi
fi
RESULTS="${RESULTS:-bench/results.json}"

for f in "$BUILD/bench/bench" "$BUILD/dlrun" "$BUILD/libdlrun.so"; do
  if [ ! -e "$f" ]; then
    echo "bench/run.sh: $f is missing: run \`make bench\` (or bench-quick) to build it" >&2
    exit 1
  fi
done

TMP="$(mktemp -d "${TMPDIR:-/tmp}/dlrun-bench.XXXXXX")" || exit 1
trap 'rm -rf "$TMP"' EXIT INT TERM

echo "dlrun benchmarks${QUICK:+ (quick)}: C (bench.c), Lua (export_overhead.lua), NumPy (numpy_ref.py)" >&2

cat /proc/loadavg >"$TMP/load.start" 2>/dev/null
"$BUILD/bench/bench" $QUICK >"$TMP/c.json"
echo $? >"$TMP/c.rc"
"$BUILD/dlrun" bench/export_overhead.lua $QUICK >"$TMP/lua.json"
echo $? >"$TMP/lua.rc"
"$PYTHON" bench/numpy_ref.py $QUICK --lib "$BUILD/libdlrun.so" >"$TMP/numpy.json"
echo $? >"$TMP/numpy.rc"

"$PYTHON" bench/report.py "$TMP" "$RESULTS" $QUICK
