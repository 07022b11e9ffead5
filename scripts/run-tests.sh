#!/bin/sh
# Runs the whole test suite: the C tests, then the busted specs (under the
# system lua5.4, loading the freshly built module). Ends with one line
# "N passed, N failed" counting every C test and every busted test.
# Usage: scripts/run-tests.sh BUILD_DIR [--c-only]
# BUSTED_RUNNER, when set, runs busted through that program (e.g. an
# instrumented dlrun: "build-asan/dlrun"). ABI_CHECK=off skips the ABI check,
# for builds that are not the one shipped (check-asan's: clang, instrumented).
# The busted suite runs on the default devices (then the spec files that
# declare "ipc-off: yes" again with DLRUN_DISTRIBUTED_IPC=off), then on
# opencl:8 when the OpenCL platform is here (OPENCL_SUITE, below) and on
# cuda:8 over the driver double of the tests (CUDA_SUITE, below), those two
# with the spec files that declare "runs: every-platform". Each spec file
# declares where it runs in its first lines (spec/README.md, "Declaring a
# spec"; scripts/spec-list.sh reads them); one with no declaration, or a wrong
# one, is a failure.
set -u
build=${1:-build}
passed=0
failed=0
log=$(mktemp)
trap 'rm -f "$log"' EXIT

add_counts() { # $1 passed, $2 failed
  passed=$((passed + $1))
  failed=$((failed + $2))
}

for t in "$build"/tests/test_*; do
  [ -x "$t" ] || continue
  "$t" >"$log" 2>&1
  rc=$?
  grep -E '^(not ok|  )' "$log"
  line=$(grep -E '^C [a-z_]+: [0-9]+ passed, [0-9]+ failed$' "$log" | tail -n 1)
  if [ -z "$line" ]; then
    echo "$t: crashed or printed no summary (exit $rc)"; tail -n 20 "$log"
    add_counts 0 1
    continue
  fi
  echo "$line"
  p=$(echo "$line" | sed -E 's/.*: ([0-9]+) passed, ([0-9]+) failed/\1/')
  f=$(echo "$line" | sed -E 's/.*: ([0-9]+) passed, ([0-9]+) failed/\2/')
  [ "$rc" -ne 0 ] && [ "$f" -eq 0 ] && f=1
  add_counts "$p" "$f"
done

# A script that is one check: its last line when it passes, all it said when not.
one_check() { # $1 name, then the command
  name=$1
  shift
  if "$@" >"$log" 2>&1; then
    tail -n 1 "$log"
    add_counts 1 0
  else
    cat "$log"
    echo "$name: failed"
    add_counts 0 1
  fi
}

# The layers of src/ (scripts/check-layers.sh).
one_check check-layers scripts/check-layers.sh
# No circles among the C files of src/ (scripts/check-cycles.sh).
one_check check-cycles scripts/check-cycles.sh
# The public ABI against abi/libdlrun.abi (scripts/check-abi.sh).
[ "${ABI_CHECK:-on}" = off ] || one_check check-abi scripts/check-abi.sh "$build"

# scripts/gpu-check.sh on the driver double: a smoke check that the GPU
# script and bench/gpu_bandwidth.c work (a few seconds). Not under an
# instrumented runner: its Python step loads libdlrun.so into python3.
[ -n "${BUSTED_RUNNER:-}" ] || one_check gpu-check env BUILD="$build" scripts/gpu-check.sh --double

# The stress programs, briefly (make check-tsan runs them long, under TSan).
for t in "$build"/stress/*; do
  [ -x "$t" ] || continue
  "$t" "${STRESS_ITERS:-2000}" >"$log" 2>&1
  rc=$?
  line=$(grep -E '^[a-z_]+: [0-9]+ passed, [0-9]+ failed$' "$log" | tail -n 1)
  if [ "$rc" -ne 0 ] || [ -z "$line" ]; then
    tail -n 20 "$log"
    echo "$t: failed (exit $rc)"
    add_counts 0 1
  else
    echo "$line"
    add_counts 1 0
  fi
done

# The busted suite in this process's environment; $1 names the run in the
# line that says it printed no summary; the spec files to run follow (none:
# a failure, as scripts/spec-list.sh listed none).
run_busted() {
  name=$1
  shift
  if [ $# -eq 0 ]; then
    echo "$name: no spec files to run (scripts/spec-list.sh)"
    add_counts 0 1
    return
  fi
  if [ -n "${BUSTED_RUNNER:-}" ]; then
    DLRUN_EXE="$build/dlrun" "$BUSTED_RUNNER" "$(command -v busted)" --cpath="$build/lua/?.so" \
      -o utfTerminal "$@" >"$log" 2>&1
  else
    DLRUN_EXE="$build/dlrun" busted --cpath="$build/lua/?.so" -o utfTerminal "$@" >"$log" 2>&1
  fi
  rc=$?
  cat "$log"
  line=$(grep -E '[0-9]+ successes? / [0-9]+ failures? / [0-9]+ errors? / [0-9]+ pending' "$log" | tail -n 1)
  if [ -z "$line" ]; then
    echo "$name: printed no summary (exit $rc)"
    add_counts 0 1
  else
    s=$(echo "$line" | sed -E 's/^[^0-9]*([0-9]+) success.*/\1/')
    fl=$(echo "$line" | sed -E 's/.* ([0-9]+) failures? .*/\1/')
    er=$(echo "$line" | sed -E 's/.* ([0-9]+) errors? .*/\1/')
    add_counts "$s" $((fl + er))
    [ "$rc" -ne 0 ] && [ $((fl + er)) -eq 0 ] && add_counts 0 1
  fi
}

# The spec files of each pass, from their declarations (scripts/spec-list.sh):
# every one for the first pass; those declaring "runs: every-platform" for the
# OpenCL and CUDA passes (the others name their own devices, inject host
# allocation failures, or check the sources, the docs, the ABI or the
# install); those declaring "ipc-off: yes" for the pass with
# DLRUN_DISTRIBUTED_IPC=off. A spec file without a right declaration still
# runs in the first pass, and counts as one failure here.
all_specs=$(scripts/spec-list.sh all 2>/dev/null)
platform_specs=$(scripts/spec-list.sh every-platform 2>/dev/null)
ipc_off_specs=$(scripts/spec-list.sh ipc-off 2>/dev/null)
if [ "${2:-}" != "--c-only" ] && ! scripts/spec-list.sh check >"$log" 2>&1; then
  cat "$log"
  echo "spec declarations: failed (spec/README.md, \"Declaring a spec\")"
  add_counts 0 1
fi

# The cross-process specs once more with DLRUN_DISTRIBUTED_IPC=off, so that
# every job also runs with each piece between processes an MPI message
# (distributed_ipc_spec and distributed_counts_spec run both ways themselves).
ipc_off_pass() {
  echo "busted (cross-process specs) with DLRUN_DISTRIBUTED_IPC=off"
  # shellcheck disable=SC2086 # one path a word
  DLRUN_DISTRIBUTED_IPC=off run_busted "busted with DLRUN_DISTRIBUTED_IPC=off" $ipc_off_specs
}

# Whether a platform's pass runs ($1 its name, $2 its variable, $3 the
# variable's value): not when it is off, nor under an instrumented runner
# (BUSTED_RUNNER) unless it is on; says why not.
suite_wanted() {
  if [ "$3" = off ]; then
    echo "$1 suite: not run ($2=off)"
    return 1
  fi
  if [ -n "${BUSTED_RUNNER:-}" ] && [ "$3" != on ]; then
    echo "$1 suite: not run under BUSTED_RUNNER ($2=on runs it)"
    return 1
  fi
}

# The suite a second time on OpenCL (docs/opencl.md), when the platform is
# here: pocl's CPU devices in CI ("pthread" driver, never "basic", which
# deadlocks), a GPU's elsewhere. On opencl:8, not opencl:4: the specs are
# written for 8 default devices (meshes of 8, device ids up to 7), as on
# sim:8. The spec files declaring "runs: every-platform" run; cases about one platform
# are pending there with their reason (helpers.it_on / describe_on). Children inherit DLRUN_DEVICES
# unless a spec sets their devices itself. Not under an instrumented runner
# (BUSTED_RUNNER) unless OPENCL_SUITE=on; OPENCL_SUITE=off skips it anywhere.
opencl_suite() {
  suite_wanted OpenCL OPENCL_SUITE "${OPENCL_SUITE:-}" || return
  POCL_DEVICES=${POCL_DEVICES:-"pthread pthread pthread pthread pthread pthread pthread pthread"}
  export POCL_DEVICES
  listed=$("$build/dlrun" --list-devices 2>&1 | grep -E '^opencl ')
  n=$(echo "$listed" | sed -nE 's/^opencl +available: ([0-9]+) devices?$/\1/p')
  if [ -z "$n" ]; then
    echo "OpenCL not available: $(echo "${listed:-opencl  not listed by dlrun --list-devices}" |
      sed -E 's/^opencl +(not available: )?//')"
    return
  fi
  if [ "$n" -lt 8 ]; then
    echo "OpenCL not available: the suite needs 8 devices, the platform has $n"
    return
  fi
  echo "busted on opencl:8"
  DLRUN_DEVICES=opencl:8
  export DLRUN_DEVICES
  # shellcheck disable=SC2086 # one path a word
  run_busted "busted on opencl:8" $platform_specs
}

# The suite on CUDA (docs/cuda.md): cuda:8 on the driver double of the
# tests (tests/cuda-double/libcuda.so.1, CUDA_DOUBLE_DEVICES=8), or on a real
# driver when DLRUN_CUDA_LIBRARY names one; children inherit both, so "auto"
# is cuda:8 there (spec/helpers.lua, helpers.auto). About 2.5 minutes on 2
# cores. Not under an instrumented runner (BUSTED_RUNNER) unless
# CUDA_SUITE=on; CUDA_SUITE=off skips it anywhere.
cuda_suite() {
  suite_wanted CUDA CUDA_SUITE "${CUDA_SUITE:-}" || return
  if [ -z "${DLRUN_CUDA_LIBRARY:-}" ] && [ -f "$build/tests/cuda-double/libcuda.so.1" ]; then
    DLRUN_CUDA_LIBRARY=$(cd "$build/tests/cuda-double" && pwd)/libcuda.so.1
    CUDA_DOUBLE_DEVICES=${CUDA_DOUBLE_DEVICES:-8}
    export DLRUN_CUDA_LIBRARY CUDA_DOUBLE_DEVICES
  fi
  listed=$("$build/dlrun" --list-devices 2>&1 | grep -E '^cuda ')
  n=$(echo "$listed" | sed -nE 's/^cuda +available: ([0-9]+) devices?$/\1/p')
  if [ -z "$n" ] || [ "$n" -lt 8 ]; then
    echo "CUDA not available for the suite: $(echo "${listed:-cuda  not listed}" |
      sed -E 's/^cuda +(not available: )?//')"
    return
  fi
  echo "busted on cuda:8"
  DLRUN_DEVICES=cuda:8
  export DLRUN_DEVICES
  # shellcheck disable=SC2086 # one path a word
  run_busted "busted on cuda:8" $platform_specs
}

if [ "${2:-}" != "--c-only" ]; then
  # shellcheck disable=SC2086 # one path a word
  run_busted busted $all_specs
  ipc_off_pass
  opencl_suite
  cuda_suite
fi

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
