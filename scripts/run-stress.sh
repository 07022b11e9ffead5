#!/bin/sh
# Runs the C tests and the stress programs of a build (made by make
# check-tsan); ends with one line "N passed, N failed".
set -u
build=${1:-build-tsan}
passed=0
failed=0
for t in "$build"/tests/test_* "$build"/stress/*; do
  [ -x "$t" ] || continue
  out=$("$t" 2>&1)
  rc=$?
  line=$(printf '%s\n' "$out" | grep -E '^[A-Za-z_ ]+: [0-9]+ passed, [0-9]+ failed$' | tail -n 1)
  if [ $rc -ne 0 ] || [ -z "$line" ]; then
    printf '%s\n' "$out" | tail -n 40
    echo "$t: FAILED (exit $rc)"
    failed=$((failed + 1))
  else
    echo "$line"
    passed=$((passed + 1))
  fi
done
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
