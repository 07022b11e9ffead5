#!/bin/sh
# What the spec files need of this machine ("-- needs:" in their declarations,
# spec/README.md, "Declaring a spec"), and which of it is not here.
# Usage: scripts/spec-needs.sh [SPEC_FILE...]   (none: every spec file)
# Prints one line per unmet need of each file, "FILE: WORD: why", and nothing
# for a file whose needs are met. Exit status 0 when every need is met, 1 when
# one is not, 2 for a file that is not there or declares no needs.
# Each word is judged once, every probe under `timeout`, as the specs would
# meet it: Python is the specs' interpreter (DLRUN_PYTHON, default
# /usr/bin/python3: spec/python_side.lua), OpenCL what BUILD's dlrun lists
# (BUILD default build). scripts/gpu-check.sh skips the files named here;
# `make test` does not use it (there an unmet need is a failure).
set -u
cd "$(dirname "$0")/.." || exit 2
BUILD=${BUILD:-build}
PY=${DLRUN_PYTHON:-/usr/bin/python3}
PY_WHO="the specs' Python: DLRUN_PYTHON, default /usr/bin/python3"

has() { command -v "$1" >/dev/null 2>&1; }

# Why the specs' Python cannot import module $1 ($2, Debian package $3);
# nothing when it can.
py_module() {
  if [ ! -x "$PY" ]; then
    echo "no Python at $PY ($PY_WHO)"
  elif ! timeout 60 "$PY" -c "import $1" >/dev/null 2>&1; then
    echo "no $2 for $PY ($PY_WHO; Debian: $3)"
  fi
}

# The OpenCL ICD loader the OpenCL module is linked with.
icd_loader() {
  ldd "$BUILD/libdlrun_opencl.so" 2>/dev/null | awk '/libOpenCL/ { print $3; exit }'
}

# Why need $1 is not met here; nothing when it is.
why_unmet() {
  case "$1" in
    mpi) has mpirun || echo "mpirun not found (Open MPI: openmpi-bin)" ;;
    uts-namespace)
      # As scripts/two-hosts-agent.sh makes one: a host name of its own.
      if ! has unshare; then
        echo "unshare not found (util-linux)"
      elif ! has hostname; then
        echo "hostname not found (hostname)"
      elif ! said=$(timeout 60 unshare --uts hostname dlrun-probe 2>&1); then
        echo "unshare --uts cannot make a UTS namespace here (it needs root, CAP_SYS_ADMIN):" \
          "$(echo "$said" | head -n 1)"
      fi
      ;;
    python3)
      if [ ! -x "$PY" ]; then
        echo "no Python at $PY ($PY_WHO)"
      elif ! timeout 60 "$PY" -c 'import sys' >/dev/null 2>&1; then
        echo "$PY does not run ($PY_WHO)"
      fi
      ;;
    python3-numpy) py_module numpy NumPy python3-numpy ;;
    python3-torch) py_module torch PyTorch python3-torch ;;
    opencl)
      if [ ! -x "$BUILD/dlrun" ]; then
        echo "$BUILD/dlrun is not built: cannot ask it for the OpenCL platform"
      else
        line=$(timeout 60 "$BUILD/dlrun" --list-devices 2>&1 | sed -nE 's/^opencl +//p')
        case "$line" in
          "available: "*) ;;
          "") echo "$BUILD/dlrun --list-devices lists no opencl platform" ;;
          *) echo "the OpenCL platform is $line" ;;
        esac
      fi
      ;;
    pocl)
      vendors=${OCL_ICD_VENDORS:-/etc/OpenCL/vendors}
      if [ -d "$vendors" ]; then
        found=$(grep -l pocl "$vendors"/*.icd 2>/dev/null)
      else
        found=$(grep -l pocl "$vendors" 2>/dev/null)
      fi
      [ -n "$found" ] ||
        echo "no pocl ICD in $vendors (pocl-opencl-icd): the files assume pocl's CPU devices (POCL_DEVICES)"
      ;;
    ocl-icd)
      # As platforms_spec does: with no vendors, the loader must find no platform.
      if [ ! -f "$BUILD/libdlrun_opencl.so" ]; then
        echo "$BUILD/libdlrun_opencl.so is not built: no OpenCL ICD loader to ask"
      else
        line=$(OCL_ICD_VENDORS=/nonexistent timeout 60 "$BUILD/dlrun" --list-devices 2>&1 |
          sed -nE 's/^opencl +//p')
        case "$line" in
          "available: "*)
            loader=$(icd_loader)
            echo "the OpenCL ICD loader${loader:+ ($loader)} ignores OCL_ICD_VENDORS: with" \
              "OCL_ICD_VENDORS=/nonexistent, $BUILD/dlrun --list-devices still lists opencl" \
              "$line (ocl-icd's loader reads it: ocl-icd-libopencl1)"
            ;;
        esac
      fi
      ;;
    abigail-tools) has abidiff || echo "abidiff not found (abigail-tools)" ;;
    luarocks) has luarocks || echo "luarocks not found (luarocks)" ;;
    pkg-config) has pkg-config || echo "pkg-config not found (pkg-config)" ;;
    man-db) has man || echo "man not found (man-db)" ;;
    build-deps)
      for c in cc make lua5.4 pkg-config; do
        has "$c" || { echo "$c not found (scripts/deps.sh --demo installs the build's packages)"; return; }
      done
      flags=$(pkg-config --cflags lua5.4 2>/dev/null) || {
        echo "pkg-config knows no lua5.4 (liblua5.4-dev)"
        return
      }
      # shellcheck disable=SC2086 # the flags, one a word
      if ! printf '#include <lua.h>\n#include <dlpack/dlpack.h>\n' |
        timeout 60 cc $flags -E -x c - >/dev/null 2>&1; then
        echo "lua.h (pkg-config lua5.4) or dlpack/dlpack.h is not on the compiler's default path (liblua5.4-dev, libdlpack-dev)"
      fi
      ;;
    *) echo "unknown word (scripts/spec-list.sh, NEEDS)" ;;
  esac
}

# Sets `why` to the reason for need $1, judged once ("word<TAB>why" lines in judged).
judged=""
judge() {
  line=$(printf '%s\n' "$judged" | grep -m 1 "^$1	")
  if [ -n "$line" ]; then
    why=${line#*	}
  else
    why=$(why_unmet "$1")
    judged="$judged
$1	$why"
  fi
}
if [ $# -eq 0 ]; then
  # shellcheck disable=SC2046 # one path a word (no blanks: spec/README.md)
  set -- $(scripts/spec-list.sh all 2>/dev/null)
fi
status=0
for f in "$@"; do
  if [ ! -f "$f" ]; then
    echo "scripts/spec-needs.sh: $f: no such spec file" >&2
    status=2
    continue
  fi
  # The value of "-- needs:" in the declaration (the lines "-- key: value" that open the file).
  words=$(awk '!/^-- [a-z0-9-]+:/ { exit } sub(/^-- needs: */, "") { print; exit }' "$f")
  if [ -z "$words" ]; then
    echo "scripts/spec-needs.sh: $f: no \"-- needs:\" line in its declaration (spec/README.md)" >&2
    status=2
    continue
  fi
  [ "$words" = none ] && continue
  for w in $(echo "$words" | tr ',' ' '); do
    judge "$w"
    if [ -n "$why" ]; then
      echo "$f: $w: $why"
      [ "$status" -eq 0 ] && status=1
    fi
  done
done
exit "$status"
