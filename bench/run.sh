#!/bin/sh
# Runs the dlrun benchmarks and prints one line per benchmark; writes
# bench/results.json. Builds nothing: `make bench` / `make bench-quick`
# (bench/bench.mk) build first.
#
#   bench/run.sh [--quick]
#
# Environment: BUILD (the optimised build tree, default build-bench),
# PYTHON (a python3 with Debian's NumPy, default /usr/bin/python3 when it
# exists, else python3), RESULTS (output file, default bench/results.json),
# MPIRUN (default mpirun: benchmark 8 runs under it on 2 and 4 processes;
# without it, or without bench_mpi, its lines are reported as skipped),
# DLRUN_OPENCL_MODULE (default $BUILD/libdlrun_opencl.so: benchmark 9 runs on
# opencl:4; without the module or an OpenCL device its lines are skipped).
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

echo "dlrun benchmarks${QUICK:+ (quick)}: C (bench.c, OpenCL in its own run), Lua (export_overhead.lua), NumPy (numpy_ref.py), MPI (bench_mpi.c)" >&2

cat /proc/loadavg >"$TMP/load.start" 2>/dev/null
"$BUILD/bench/bench" $QUICK --only gather,column_gather,reshard,pool,scale >"$TMP/c.json"
echo $? >"$TMP/c.rc"
# 9 in a process of its own (a failure there leaves the other parts' lines
# standing), with the OpenCL module of this build (bench links libdlrun.a
# statically, so the module is not beside it); bench sets POCL_DEVICES.
env DLRUN_OPENCL_MODULE="${DLRUN_OPENCL_MODULE:-$BUILD/libdlrun_opencl.so}" \
  timeout -k 10 300 "$BUILD/bench/bench" $QUICK --only opencl >"$TMP/opencl.json"
echo $? >"$TMP/opencl.rc"
"$BUILD/dlrun" bench/export_overhead.lua $QUICK >"$TMP/lua.json"
echo $? >"$TMP/lua.rc"
"$PYTHON" bench/numpy_ref.py $QUICK --lib "$BUILD/libdlrun.so" >"$TMP/numpy.json"
echo $? >"$TMP/numpy.rc"

# 8: one job of N processes each; the MPI transport module from this build.
MPIRUN="${MPIRUN:-mpirun}"
for n in 2 4; do
  if [ ! -x "$BUILD/bench/bench_mpi" ]; then
    echo "bench_mpi not built (no MPI development files: pkg-config ompi-c or mpich)" >"$TMP/mpi$n.skip"
  elif ! command -v "$MPIRUN" >/dev/null 2>&1; then
    echo "$MPIRUN not found (install openmpi-bin)" >"$TMP/mpi$n.skip"
  elif [ ! -e "$BUILD/libdlrun_mpi.so" ]; then
    echo "$BUILD/libdlrun_mpi.so (the MPI transport module) not built" >"$TMP/mpi$n.skip"
  else
    env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
      DLRUN_MPI_MODULE="$BUILD/libdlrun_mpi.so" \
      timeout -k 10 300 "$MPIRUN" -n "$n" --oversubscribe --mca mpi_yield_when_idle 1 \
      --mca btl self,vader "$BUILD/bench/bench_mpi" $QUICK >"$TMP/mpi$n.json"
    echo $? >"$TMP/mpi$n.rc"
  fi
done

"$PYTHON" bench/report.py "$TMP" "$RESULTS" $QUICK
