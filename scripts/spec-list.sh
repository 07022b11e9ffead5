#!/bin/sh
# The busted spec files, and which of them each pass of scripts/run-tests.sh
# (and scripts/gpu-check.sh) runs, read from the declaration that opens each
# spec file (spec/README.md, "Declaring a spec"): a block of lines
#   -- runs: once | every-platform
#   -- ipc-off: yes | no
#   -- devices: 8 | any
#   -- needs: none | WORD[, WORD...]   (the words: NEEDS below)
# each key exactly once, before any other line of the file.
# Usage: scripts/spec-list.sh LIST, from anywhere; LIST is one of
#   check           nothing on stdout: only whether every declaration is right
#   all             every spec file (the first pass, on the default devices)
#   every-platform  "runs: every-platform" (the OpenCL and CUDA passes)
#   ipc-off         "ipc-off: yes" (the pass with DLRUN_DISTRIBUTED_IPC=off)
#   devices-8       "devices: 8" (gpu-check.sh skips them on fewer devices)
# Prints paths from the repository root (spec/<folder>/<name>_spec.lua), one
# a line, in busted's order. A spec file with no declaration, or an unknown,
# missing, repeated or wrongly valued key, is named on stderr (FILE:LINE:
# what is wrong) and the exit status is 1; `all` still lists it (it runs in
# the first pass), the other lists leave it out.
set -eu
cd "$(dirname "$0")/.."
NEEDS="mpi python3 python3-numpy python3-torch opencl pocl ocl-icd abigail-tools luarocks pkg-config man-db build-deps uts-namespace"
case "${1:-}" in
  check | all | every-platform | ipc-off | devices-8) ;;
  *)
    echo "usage: scripts/spec-list.sh check|all|every-platform|ipc-off|devices-8" >&2
    exit 2
    ;;
esac
files=$(find spec -type f -name '*_spec.lua' | LC_ALL=C sort)
if [ -z "$files" ]; then
  echo "scripts/spec-list.sh: no spec file under spec/" >&2
  exit 1
fi
# shellcheck disable=SC2086 # the paths have no blanks (spec/README.md)
awk -v list="$1" -v needs_words="$NEEDS" '
function fail(f, line, what) {
  printf "%s:%d: %s (spec/README.md, \"Declaring a spec\")\n", f, line, what > "/dev/stderr"
  bad = 1
  status = 1
}
function check_needs(f, v, line,   n, i, w) {
  if (v == "none") return
  if (v == "") { fail(f, line, "needs is empty (none, when it needs nothing more)"); return }
  n = split(v, w, /, */)
  for (i = 1; i <= n; i++)
    if (!(w[i] in needs)) fail(f, line, "unknown word \"" w[i] "\" in needs (known: none " needs_words ")")
}
# One file: its declaration (the lines "-- key: value" that open it), then
# whether it is in the list asked for.
function read_spec(f,   n, line, key, v, nkeys, k) {
  bad = 0
  nkeys = 0
  split("", value)
  n = 0
  while ((getline line < f) > 0) {
    n++
    if (line !~ /^-- [a-z0-9-]+:/) break
    key = substr(line, 4, index(line, ":") - 4)
    v = substr(line, index(line, ":") + 1)
    sub(/^ +/, "", v)
    sub(/ +$/, "", v)
    nkeys++
    if (!(key in allowed)) { fail(f, n, "unknown key \"" key "\" (known: runs ipc-off devices needs)"); continue }
    if (key in value) { fail(f, n, "\"" key "\" declared twice"); continue }
    value[key] = v
    if (key == "needs") check_needs(f, v, n)
    else if (v == "" || index(allowed[key], " " v " ") == 0)
      fail(f, n, "unknown value \"" v "\" for " key " (known:" substr(allowed[key], 1, length(allowed[key]) - 1) ")")
  }
  close(f)
  if (nkeys == 0)
    fail(f, 1, "no declaration: the file must open with the lines \"-- runs: ...\", \"-- ipc-off: ...\", \"-- devices: ...\" and \"-- needs: ...\"")
  else
    for (k in allowed) if (!(k in value)) fail(f, 1, "the declaration lacks \"-- " k ": ...\"")
  if (list == "all" ||
      !bad && (list == "every-platform" && value["runs"] == "every-platform" ||
               list == "ipc-off" && value["ipc-off"] == "yes" ||
               list == "devices-8" && value["devices"] == "8"))
    print f
}
BEGIN {
  allowed["runs"] = " once every-platform "
  allowed["ipc-off"] = " yes no "
  allowed["devices"] = " 8 any "
  allowed["needs"] = ""
  n = split(needs_words, ws, " ")
  for (i = 1; i <= n; i++) needs[ws[i]] = 1
  status = 0
  for (i = 1; i < ARGC; i++) read_spec(ARGV[i])
  exit status
}
' $files
