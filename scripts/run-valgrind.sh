#!/bin/sh
# The C tests, the stress programs (when built) and the demo pipeline (also on
# opencl:2 and cuda:2 where those are here) under
# valgrind memcheck: no errors, no leaks. Ends with "N passed, N failed".
set -u
build=${1:-build}
passed=0
failed=0
vg="valgrind --quiet --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite,indirect
    --suppressions=$(dirname "$0")/valgrind.supp"
# What a failure shows: valgrind's error blocks (leaks of the kinds that
# count as errors included, "possibly lost" and "still reachable" left out:
# they never fail a run) and the program's own failure lines, then the exit
# status, which says which of the two failed.
failure_lines() {
  awk '/^==[0-9]+== [^ ]/ { keep = $0 !~ /possibly lost|still reachable/ }
       /^==[0-9]+==/ { if (keep) print; next }
       /^not ok|CHECK\(|did not end|Assertion|Segmentation|Aborted/ { print }' | head -n 200
}
check() { # name, command...
  name=$1
  shift
  out=$($vg "$@" 2>&1)
  rc=$?
  if [ "$rc" -eq 0 ]; then
    echo "ok - valgrind $name"
    passed=$((passed + 1))
  else
    printf '%s\n' "$out" | failure_lines
    echo "  exit $rc ($( [ "$rc" -eq 99 ] && echo "valgrind found errors" ||
      echo "the program failed; valgrind found no error"))"
    echo "not ok - valgrind $name"
    failed=$((failed + 1))
  fi
}
command -v valgrind >/dev/null 2>&1 || { echo "valgrind is not installed"; exit 1; }
# test_dtype is left out: valgrind's int64 -> float32 conversion rounds twice
# (through double), so its exact-rounding checks cannot pass under it; it has
# no memory management worth checking either.
for t in "$build"/tests/test_*; do
  case "$t" in */test_dtype) continue ;; esac
  [ -x "$t" ] && DLRUN_POOL_TRACE_OPS=20000 check "$(basename "$t")" "$t"
done
for t in "$build"/stress/*; do
  [ -x "$t" ] && check "$(basename "$t")" "$t" 20
done
check "examples/pipeline.lua" "$build/dlrun" examples/pipeline.lua
check "examples/host/minimal" "$build/examples/minimal"
check "examples/host/exchange" "$build/examples/exchange"
# The OpenCL platform on pocl, when the module and a driver are here.
if [ -x "$build/examples/opencl_interop" ] &&
   POCL_DEVICES="pthread pthread" "$build/dlrun" --list-devices | grep -q '^opencl  available'; then
  POCL_DEVICES="pthread pthread" check "examples/pipeline.lua on opencl:2" \
    "$build/dlrun" --devices opencl:2 examples/pipeline.lua
  check "examples/host/opencl_interop" "$build/examples/opencl_interop"
fi
# The CUDA platform on the driver double of the tests (docs/cuda.md); the
# C tests above include its conformance cases and test_cuda_import.
if [ -f "$build/tests/cuda-double/libcuda.so.1" ]; then
  DLRUN_CUDA_LIBRARY=$(cd "$build/tests/cuda-double" && pwd)/libcuda.so.1 CUDA_DOUBLE_DEVICES=2 \
    check "examples/pipeline.lua on cuda:2" "$build/dlrun" --devices cuda:2 examples/pipeline.lua
fi
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
