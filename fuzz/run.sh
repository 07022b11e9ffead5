#!/bin/sh
# Replays and runs the libFuzzer targets built by fuzz/fuzz.mk.
#
#   fuzz/run.sh replay BIN_DIR TARGET...           each saved input once
#   fuzz/run.sh fuzz BIN_DIR SECONDS TARGET...     replay, then fuzz each target
#
# BIN_DIR holds fuzz_<target>. Saved inputs are fuzz/regressions/<target>/
# and fuzz/corpus/<target>/. Fuzzing uses the scratch corpus
# $FUZZ_WORK/run/<target> (seeded from fuzz/corpus/<target>, kept between
# runs) and saves what it finds in $FUZZ_WORK/artifacts/<target>/. Extra
# libFuzzer flags come from FUZZ_FLAGS. Every target is run even when an
# earlier one fails; the last line is "N passed, N failed" (inputs replayed
# plus targets fuzzed), and the exit status is 1 when anything failed.
set -u
mode=${1:?usage: fuzz/run.sh replay|fuzz BIN_DIR [SECONDS] TARGET...}
bin=${2:?BIN_DIR missing}
shift 2
seconds=0
if [ "$mode" = fuzz ]; then
  seconds=${1:?SECONDS missing}
  shift
fi
work=${FUZZ_WORK:-build-fuzz}
flags="-timeout=10 -rss_limit_mb=2048 -max_len=4096"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:allocator_may_return_null=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
passed=0
failed=0

# First line worth showing of a failure log.
reason() {
  grep -m1 -E '^=== dlrun|ERROR: |runtime error|SUMMARY: ' "$1" | cut -c1-160
}

replay() { # target
  t=$1
  dirs="fuzz/corpus/$t"
  dirs="fuzz/regressions/$t $dirs"
  files=$(find $dirs -type f 2>/dev/null | sort)
  [ -n "$files" ] || return 0
  log=$bin/replay-$t.log
  : >"$log"
  n=0
  bad=0
  for f in $files; do
    n=$((n + 1))
    if "$bin/fuzz_$t" $flags "$f" >"$log.one" 2>&1; then
      passed=$((passed + 1))
    else
      failed=$((failed + 1))
      bad=$((bad + 1))
      echo "  FAIL    $f: $(reason "$log.one")"
    fi
    cat "$log.one" >>"$log"
  done
  rm -f "$log.one"
  echo "  REPLAY  $t: $n inputs, $bad failing (log: $log)"
}

fuzz() { # target
  t=$1
  run=$work/run/$t
  art=$work/artifacts/$t
  log=$bin/run-$t.log
  mkdir -p "$run" "$art"
  [ -d "fuzz/corpus/$t" ] && cp fuzz/corpus/"$t"/* "$run"/ 2>/dev/null
  echo "  FUZZ    $t for ${seconds}s"
  # shellcheck disable=SC2086
  if "$bin/fuzz_$t" $flags -print_final_stats=1 -max_total_time="$seconds" \
      -artifact_prefix="$art/" ${FUZZ_FLAGS:-} "$run" >"$log" 2>&1; then
    passed=$((passed + 1))
    grep -E '^stat::(number_of_executed_units|average_exec_per_sec|new_units_added)' "$log" |
      sed 's/^/          /'
    grep -E '^#[0-9]+[[:space:]]+DONE' "$log" | sed 's/^/          /'
  else
    failed=$((failed + 1))
    # The report, from its first line, without libFuzzer's own frames.
    awk '/^=== dlrun|ERROR: |runtime error/ { on = 1 } on && !/fuzzer::|libc_start|_start / { print; if (++n == 40) exit }' "$log"
    echo "  FAIL    $t: $(reason "$log")"
    echo "          input saved under $art/ (log: $log); see fuzz/README.md"
  fi
}

for t in "$@"; do replay "$t"; done
if [ "$mode" = fuzz ]; then
  for t in "$@"; do fuzz "$t"; done
fi
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
