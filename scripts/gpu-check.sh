#!/bin/sh
# Verifies the CUDA platform on a machine with an NVIDIA GPU and its driver
# (docs/cuda.md, "Verifying on a GPU"), on the machine as it comes, in at
# most 10 minutes, every step bounded by `timeout`:
#   build        make _all with what the machine has (scripts/deps.sh, which
#                installs Debian packages, is not run), or, with --prebuilt,
#                the build in BUILD taken as it was made elsewhere
#   conformance  the C conformance suite's cuda cases on the real driver (on
#                one GPU: every case, the parts that need two devices skipped;
#                on two: those parts listed as run)
#   bandwidth    bench/gpu_bandwidth.c: dlrun's copies and fills against the
#                driver's own cuMemcpy* / cuMemset* of the same bytes (peer
#                copies between devices 0 and 1 on two GPUs)
#   dlpack       scripts/gpu-dlpack-check.py: kDLCUDA capsules, dlrun <->
#                dlrun and dlrun <-> each CUDA consumer present (PyTorch,
#                CuPy, JAX), both ways, on the consumer's stream
#   memcheck     the conformance suite, the bandwidth program and the round
#                trip again under compute-sanitizer's memcheck, when it is here
#   lua          the busted suite on cuda:N (N = the GPU count, at most 8),
#                one spec file at a time, with what time is left; with fewer
#                than 8 GPUs the files written for 8 devices ("devices: 8" in
#                their declarations, spec/README.md) are skipped, and so is a
#                file whose needs are not met here ("needs:", judged by
#                scripts/spec-needs.sh), with why; any other file that fails
#                is a failure
# Each phase prints a header and PASS, FAIL or SKIP with the reason; the last
# line is "gpu-check: N passed, N failed, N skipped in S s". Exit status 1
# when a phase failed, 2 when the CUDA platform is not available, else 0.
#
#   scripts/gpu-check.sh [--double] [--prebuilt]
#
# --prebuilt takes the build in BUILD as it is (made elsewhere, or before):
# nothing is built, and the files the check runs must be there.
# --double runs it on the driver double of the tests instead of a GPU (2
# devices unless CUDA_DOUBLE_DEVICES says: CUDA_DOUBLE_DEVICES=1 plays a
# machine with one GPU; 1 MiB bandwidth cases, two spec files unless
# GPU_CHECK_SPECS says, the build taken as made, compute-sanitizer only when
# COMPUTE_SANITIZER names one): the smoke check `make test` runs; its figures
# mean nothing.
# Environment: BUILD (default build), PYTHON (interpreters to try for the
# round trip, the first with NumPy taken; default python3, then
# /usr/bin/python3), DLRUN_PYTHON (the specs' Python, default
# /usr/bin/python3: spec/python_side.lua), COMPUTE_SANITIZER (its path; off:
# not run; default compute-sanitizer on PATH, else in CUDA_HOME/bin),
# DLRUN_CUDA_LIBRARY (default libcuda.so.1), GPU_CHECK_BYTES (the sizes of
# the bandwidth cases, default 16MiB,256MiB,1GiB), GPU_CHECK_SPECS (spec
# files, default all).
set -u
cd "$(dirname "$0")/.." || exit 1
START=$(date +%s)
LIMIT=600
BUILD=${BUILD:-build}
USAGE="usage: scripts/gpu-check.sh [--double] [--prebuilt]"
double=""
prebuilt=""
for a in "$@"; do
  case "$a" in
    --double) double=1 ;;
    --prebuilt) prebuilt=1 ;;
    *) echo "$USAGE" >&2; exit 2 ;;
  esac
done
log=$(mktemp)
trap 'rm -f "$log"' EXIT
passed=0
failed=0
skipped=0

header() { echo; echo "== $1 =="; }
H_CTS="C conformance suite on cuda"
H_BW="bandwidth (dlrun / driver, best of runs)"
H_DLPACK="DLPack round trip (kDLCUDA)"
H_MEMCHECK="memory errors (compute-sanitizer memcheck)"
verdict() { # PASS|FAIL|SKIP, reason
  echo "$1: $2"
  case "$1" in
    PASS) passed=$((passed + 1)) ;;
    FAIL) failed=$((failed + 1)) ;;
    *) skipped=$((skipped + 1)) ;;
  esac
}
left() { echo $((LIMIT - ($(date +%s) - START))); }
# The seconds a step may take: at most $1, and $2 fewer than what is left.
allow() {
  t=$(($(left) - $2))
  [ "$t" -gt "$1" ] && t=$1
  [ "$t" -lt 1 ] && t=1 # (timeout 0 would mean no limit)
  echo "$t"
}
bounded() { # seconds, command...: the command under timeout, its output in $log
  t=$1
  shift
  timeout -k 5 "$t" "$@" >"$log" 2>&1
}

if [ -n "$double" ]; then
  DLRUN_CUDA_LIBRARY=$(cd "$BUILD/tests/cuda-double" 2>/dev/null && pwd)/libcuda.so.1
  CUDA_DOUBLE_DEVICES=${CUDA_DOUBLE_DEVICES:-2}
  GPU_CHECK_BYTES=${GPU_CHECK_BYTES:-1MiB}
  GPU_CHECK_SPECS=${GPU_CHECK_SPECS:-spec/devices/cuda_spec.lua spec/dlpack/stream_protocol_spec.lua}
  export CUDA_DOUBLE_DEVICES
fi
DLRUN_CUDA_LIBRARY=${DLRUN_CUDA_LIBRARY:-libcuda.so.1}
# Tells scripts/gpu-dlpack-check.py that no consumer can read this "GPU".
GPU_DLPACK_DOUBLE=$double
export GPU_DLPACK_DOUBLE
DLRUN_CUDA_MODULE=${DLRUN_CUDA_MODULE:-$(cd "$BUILD" 2>/dev/null && pwd)/libdlrun_cuda.so}
export DLRUN_CUDA_LIBRARY DLRUN_CUDA_MODULE

echo "gpu-check: $(date -u '+%Y-%m-%d %H:%M UTC'), commit $(git rev-parse --short HEAD 2>/dev/null ||
  echo unknown), driver library $DLRUN_CUDA_LIBRARY"
if [ -n "$double" ]; then
  echo "gpu-check: on the driver double of the tests (devices: $CUDA_DOUBLE_DEVICES): a smoke check of this script;" \
    "nothing here was measured on a GPU"
elif command -v nvidia-smi >/dev/null 2>&1; then
  timeout 20 nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv,noheader |
    sed 's/^/gpu-check: GPU /'
fi

# ---- build: with what the machine has, or taken as made (--prebuilt, --double)
header "build"
if [ -n "$double" ] || [ -n "$prebuilt" ]; then
  how="--prebuilt"
  [ -n "$double" ] && how="--double"
  echo "gpu-check: build: taken as made in $BUILD ($how): nothing built here"
  missing=""
  for f in dlrun libdlrun.so libdlrun_cuda.so lua/dlrun/core.so tests/test_conformance bench/gpu_bandwidth; do
    [ -f "$BUILD/$f" ] || missing="$missing $BUILD/$f"
  done
  [ -n "$double" ] && [ ! -f "$BUILD/tests/cuda-double/libcuda.so.1" ] &&
    missing="$missing $BUILD/tests/cuda-double/libcuda.so.1"
  if [ -n "$missing" ]; then
    verdict FAIL "$how: the build lacks$missing (make _all makes them)"
  else
    verdict SKIP "$how: the build in $BUILD, as it was made"
  fi
else
  # Headers a carry tool may put beside the tree (.gpu/include) where the
  # machine has no Debian -dev packages.
  lua_inc=""
  dlpack_inc=""
  [ -f .gpu/include/lua5.4/lua.h ] && lua_inc=$PWD/.gpu/include/lua5.4
  [ -f .gpu/include/dlpack/dlpack.h ] && dlpack_inc=-I$PWD/.gpu/include
  extra="${lua_inc:+, LUA_INC=$lua_inc}${dlpack_inc:+, DLPACK_CFLAGS=$dlpack_inc}"
  echo "gpu-check: build: make _all in $BUILD with what this machine has (scripts/deps.sh not run)$extra"
  bounded "$(allow 240 300)" make -j"$(nproc)" BUILD="$BUILD" ${lua_inc:+"LUA_INC=$lua_inc"} \
    ${dlpack_inc:+"DLPACK_CFLAGS=$dlpack_inc"} _all
  rc=$?
  if [ "$rc" -eq 0 ]; then
    verdict PASS "built in $BUILD (make _all)"
  else
    tail -n 30 "$log"
    timeout 20 scripts/deps.sh --check --demo 2>&1 | tail -n 2
    verdict FAIL "make _all failed (exit $rc; 124: timed out)"
  fi
fi

# ---- is CUDA here, with how many devices
listed=$(timeout 60 "$BUILD/dlrun" --list-devices 2>&1 | grep -E '^cuda ')
n=$(echo "$listed" | sed -nE 's/^cuda +available: ([0-9]+) devices?$/\1/p')
if [ -z "$n" ]; then
  why=$(echo "${listed:-cuda  not listed by $BUILD/dlrun --list-devices}" |
    sed -E 's/^cuda +(not available: )?//')
  echo "gpu-check: CUDA not available: $why"
  for p in "$H_CTS" "$H_BW" "$H_DLPACK" "$H_MEMCHECK" "Lua suite on cuda"; do
    header "$p"
    verdict SKIP "CUDA not available: $why"
  done
  echo "gpu-check: $passed passed, $failed failed, $skipped skipped in $(($(date +%s) - START)) s"
  exit 2
fi
[ "$n" -gt 8 ] && n=8
echo "gpu-check: CUDA available, $n device(s) used"

# ---- the C conformance suite: cuda on DLRUN_CUDA_LIBRARY (the parts of its
# cases that need two devices: named as skipped on one, as run on two)
header "$H_CTS"
bounded "$(allow 90 150)" "$BUILD/tests/test_conformance"
rc=$?
cuda_lines=$(grep -v '# SKIP' "$log" | grep -c '^ok .*\[cuda')
cuda_skips=$(grep '^ok .*\[cuda.*# SKIP' "$log" | sort -u | wc -l)
cuda_two=$(grep '^# ran on 2 devices: .*\[cuda\]' "$log" | sort -u | wc -l)
grep '^ok .*\[cuda.*# SKIP' "$log" | sort -u
grep '^# ran on 2 devices: .*\[cuda\]' "$log" | sort -u
grep -E '^not ok|^  ' "$log" | head -n 40
skip=$(sed -nE 's/^ok - cuda # SKIP (.*)/\1/p' "$log")
summary=$(grep -E '^C conformance: ' "$log" | tail -n 1)
if [ -n "$skip" ]; then
  verdict SKIP "the suite skipped cuda: $skip"
elif [ "$rc" -eq 0 ] && [ -n "$summary" ]; then
  parts=""
  [ "$cuda_skips" -gt 0 ] && parts=", $cuda_skips parts that need 2 devices skipped (listed above)"
  [ "$cuda_two" -gt 0 ] && parts=", $cuda_two parts on 2 devices run (listed above)"
  verdict PASS "$cuda_lines cuda cases$parts ($summary)"
else
  tail -n 5 "$log"
  verdict FAIL "exit $rc${summary:+, $summary}"
fi

# ---- bandwidth: dlrun against the driver on the same bytes
header "$H_BW"
bytes=${GPU_CHECK_BYTES:-16MiB,256MiB,1GiB}
runs=5
lat_runs=2000
[ -n "$double" ] && runs=2 && lat_runs=200
bounded "$(allow 150 120)" "$BUILD/bench/gpu_bandwidth" --bytes "$bytes" --runs "$runs" \
  --latency-runs "$lat_runs"
rc=$?
cat "$log"
peer=$(sed -nE 's/^peer \(device 0 to 1\), [^:]*: (skipped: .*)/peer copies \1/p' "$log" | head -n 1)
grep -q '^peer (device 0 to 1), [^:]*: dlrun ' "$log" && peer="peer copies from device 0 to 1 measured"
case "$rc" in
  0) verdict PASS "every case's values read back right${peer:+; $peer}${double:+ (ratios on the double mean nothing)}" ;;
  2) verdict SKIP "$(tail -n 1 "$log")" ;;
  *) verdict FAIL "gpu_bandwidth exit $rc" ;;
esac

# ---- DLPack round trips on kDLCUDA, with the first interpreter that has NumPy
header "$H_DLPACK"
py=""
tried=""
for p in ${PYTHON:-python3 /usr/bin/python3}; do
  if timeout 60 "$p" -c 'import numpy' >/dev/null 2>&1; then py=$p; break; fi
  tried="$tried; $p: no NumPy"
done
tried=${tried#; }
if [ -z "$py" ]; then
  verdict SKIP "no Python with NumPy ($tried); PYTHON= names one"
else
  echo "gpu-check: Python: $py${tried:+ ($tried)}"
  bounded "$(allow 60 90)" "$py" -B scripts/gpu-dlpack-check.py "$BUILD/libdlrun.so"
  rc=$?
  cat "$log"
  if [ "$rc" -ne 0 ]; then
    verdict FAIL "$py scripts/gpu-dlpack-check.py: exit $rc"
  else
    verdict PASS "$(tail -n 1 "$log")"
  fi
  sed -nE 's/^skip - (.*)/\1/p' "$log" >"$log.skips"
  while IFS= read -r why; do
    verdict SKIP "$why (PYTHON= names an interpreter with it)"
  done <"$log.skips"
  rm -f "$log.skips"
fi

# ---- memory errors: the CUDA phases again under compute-sanitizer's memcheck
# (every process: the conformance suite's children too), on fewer bytes
header "$H_MEMCHECK"
SAN_EXIT=86 # compute-sanitizer's exit status when it found an error
san=""
cs=${COMPUTE_SANITIZER:-}
cuda_bin=${CUDA_HOME:-/usr/local/cuda}/bin
if [ "$cs" = off ]; then
  verdict SKIP "COMPUTE_SANITIZER=off"
elif [ -n "$cs" ]; then
  san=$(command -v "$cs") || verdict FAIL "COMPUTE_SANITIZER=$cs: not found"
elif [ -n "$double" ]; then
  verdict SKIP "--double: compute-sanitizer cannot watch the driver double (COMPUTE_SANITIZER names one to try the wiring)"
elif command -v compute-sanitizer >/dev/null 2>&1; then
  san=$(command -v compute-sanitizer)
elif [ -x "$cuda_bin/compute-sanitizer" ]; then
  san=$cuda_bin/compute-sanitizer
else
  verdict SKIP "compute-sanitizer not found (PATH, COMPUTE_SANITIZER, $cuda_bin): device memory errors not checked"
fi
if [ -n "$san" ]; then
  echo "gpu-check: $san --tool memcheck --target-processes all --error-exitcode $SAN_EXIT"
  san_bytes=16MiB
  [ -n "$double" ] && san_bytes=$bytes
  bad=""
  memcheck() { # seconds, name, command...: one step under memcheck
    t=$1
    name=$2
    shift 2
    bounded "$t" "$san" --tool memcheck --target-processes all --error-exitcode "$SAN_EXIT" "$@"
    rc=$?
    case "$rc" in
      0) echo "memcheck $name: no errors" ;;
      "$SAN_EXIT")
        grep -E '^=+ ' "$log" | head -n 30
        echo "memcheck $name: memory errors (compute-sanitizer exit $SAN_EXIT)"
        bad="$bad, $name (memory errors)"
        ;;
      *)
        tail -n 10 "$log"
        echo "memcheck $name: failed (exit $rc; 124: timed out)"
        bad="$bad, $name (exit $rc)"
        ;;
    esac
  }
  memcheck "$(allow 240 120)" "the conformance suite" "$BUILD/tests/test_conformance"
  memcheck "$(allow 90 90)" "gpu_bandwidth" "$BUILD/bench/gpu_bandwidth" --bytes "$san_bytes" --runs 1 \
    --latency-runs 20
  steps="the conformance suite, gpu_bandwidth"
  if [ -n "$py" ]; then
    memcheck "$(allow 90 60)" "the DLPack round trip" \
      "$py" -B scripts/gpu-dlpack-check.py "$BUILD/libdlrun.so"
    steps="$steps, the DLPack round trip"
  fi
  if [ -n "$bad" ]; then
    verdict FAIL "compute-sanitizer memcheck:${bad#,}"
  else
    verdict PASS "no memory errors in $steps"
  fi
fi

# ---- the Lua suite on cuda:N, file by file, in the time left
# The spec files written for 8 default devices (they fail on fewer: meshes
# of 8, device ids up to 7), as their declarations say ("devices: 8",
# scripts/spec-list.sh); every other file passes on cuda:1 (checked on the
# driver double with CUDA_DOUBLE_DEVICES=1) where what it needs is here.
NEEDS_8=$(scripts/spec-list.sh devices-8)
needs_8() { # spec file: true when it is written for 8 devices
  for x in $NEEDS_8; do [ "$x" = "$1" ] && return 0; done
  return 1
}
header "Lua suite on cuda:$n"
DLRUN_DEVICES=cuda:$n
export DLRUN_DEVICES
ok_files=""
bad_files=""
skip_files=""
unrun=""
totals="0 0 0 0"
CUDA_SPEC=spec/devices/cuda_spec.lua
files=${GPU_CHECK_SPECS:-$CUDA_SPEC $(scripts/spec-list.sh all | grep -vxF "$CUDA_SPEC")}
# What the files need that is not here ("FILE: WORD: why" lines).
# shellcheck disable=SC2086 # one path a word
unmet=$(BUILD=$BUILD timeout 300 scripts/spec-needs.sh $files)
unmet_files=""
for f in $files; do
  if [ "$n" -lt 8 ] && needs_8 "$f"; then skip_files="$skip_files $f"; continue; fi
  if echo "$unmet" | grep -qF "$f: "; then unmet_files="$unmet_files $f"; continue; fi
  t=$(allow 600 5)
  if [ "$t" -lt 10 ]; then unrun="$unrun $f"; continue; fi
  DLRUN_EXE="$BUILD/dlrun" bounded "$t" busted --cpath="$BUILD/lua/?.so" -o utfTerminal "$f"
  rc=$?
  line=$(grep -E '[0-9]+ success(es)? / [0-9]+ failures? / [0-9]+ errors? / [0-9]+ pending' "$log" |
    tail -n 1)
  counts=$(echo "$line" | sed -nE 's/^[^0-9]*([0-9]+) succ[^0-9]*([0-9]+) fail[^0-9]*([0-9]+) err[^0-9]*([0-9]+) pend.*/\1 \2 \3 \4/p')
  if [ -z "$counts" ]; then counts="0 0 1 0"; fi
  totals=$(echo "$totals $counts" | awk '{print $1+$5, $2+$6, $3+$7, $4+$8}')
  if [ "$rc" -eq 0 ] && [ -n "$line" ]; then
    ok_files="$ok_files $f"
  else
    case "$rc" in 124 | 137) bad_files="$bad_files $f(timed-out)" ;; *) bad_files="$bad_files $f" ;; esac
    grep -E -A3 '^(Failure|Error) ' "$log" | head -n 20
    grep -qE '^(Failure|Error) ' "$log" || tail -n 10 "$log" # a crash or a time-out
  fi
done
# shellcheck disable=SC2086 # counting words
ran=$(echo $ok_files $bad_files | wc -w)
# shellcheck disable=SC2086 # the four counts, one a word
set -- $totals
echo "Lua suite on cuda:$n: $1 successes / $2 failures / $3 errors / $4 pending in $ran files"
[ -n "$unrun" ] && echo "not run (out of time):$unrun"
if [ -n "$bad_files" ]; then
  verdict FAIL "files with failures:$bad_files"
elif [ -n "$unrun" ]; then
  verdict FAIL "out of time before$unrun"
elif [ "$ran" -gt 0 ]; then
  verdict PASS "every file run passed on cuda:$n ($ran files)"
fi
if [ -n "$skip_files" ]; then
  echo "written for 8 devices, not run on $n:$skip_files"
  # shellcheck disable=SC2086 # counting words
  verdict SKIP "$(echo $skip_files | wc -w) spec files need 8 devices, this machine has $n (listed above)"
fi
if [ -n "$unmet_files" ]; then
  echo "not run, what they need is not here (scripts/spec-needs.sh):"
  for f in $unmet_files; do echo "$unmet" | grep -F "$f: " | sed 's/^/  /'; done
  # shellcheck disable=SC2086 # counting words
  verdict SKIP "$(echo $unmet_files | wc -w) spec files need what this machine lacks (listed above)"
fi

echo
echo "gpu-check: $passed passed, $failed failed, $skipped skipped in $(($(date +%s) - START)) s"
[ "$failed" -eq 0 ]
