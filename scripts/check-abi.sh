#!/bin/sh
# The ABI check (README, "ABI"): the public ABI of libdlrun.so as installed
# (the library and its headers, staged under BUILD_DIR/abi), compared by
# libabigail's abidiff with the committed baseline abi/libdlrun.abi.
# Passes when nothing changed or when functions were only added; fails when
# the ABI breaks while the soname stays, and when the soname changed but the
# baseline was not recorded again for it.
#
# Usage: scripts/check-abi.sh BUILD_DIR             check BUILD_DIR's library
#        scripts/check-abi.sh --update BUILD_DIR    record it as the baseline
#                                                   (make abi-baseline)
#        scripts/check-abi.sh [--update] --lib FILE --headers DIR --baseline FILE --out FILE
#            the same on any library, its public headers' folder, a baseline
#            and where to write the current ABI (spec/project/abi_spec.lua uses it)
# --update refuses a break under the baseline's soname, unless ABI_UNRELEASED=1:
# that soname was never released, so the break joins the bump that made it.
set -u
me="check-abi"
update=""
build=""
lib=""
headers=""
baseline=""
out=""
while [ $# -gt 0 ]; do
  case "$1" in
    --update) update=1 ;;
    --lib) lib=$2; shift ;;
    --headers) headers=$2; shift ;;
    --baseline) baseline=$2; shift ;;
    --out) out=$2; shift ;;
    -*) build="" lib="" && break ;;
    *) build=$1 ;;
  esac
  shift
done

fail() {
  echo "$me: $*" >&2
  exit 1
}

for tool in abidw abidiff abilint; do
  command -v "$tool" >/dev/null 2>&1 ||
    fail "$tool not found: install abigail-tools (scripts/deps.sh does)"
done

if [ -n "$build" ]; then
  # Install as a packager would, into a staging root under the build folder.
  stage="$build/abi/stage"
  rm -rf "$stage"
  make --no-print-directory BUILD="$build" DESTDIR="$stage" PREFIX=/usr install >/dev/null ||
    fail "make install into $stage failed"
  lib="$stage/usr/lib/$(readlink "$stage/usr/lib/libdlrun.so")"
  headers="$stage/usr/include/dlrun"
  baseline="abi/libdlrun.abi"
  out="$build/abi/libdlrun.abi"
fi
[ -f "$lib" ] && [ -d "$headers" ] && [ -n "$baseline" ] && [ -n "$out" ] ||
  fail "usage: scripts/check-abi.sh [--update] BUILD_DIR"

# The types come from the DWARF: without it only symbol names would be compared.
readelf -S --wide "$lib" | grep -q '\.debug_info' ||
  fail "$lib has no debug information: build it with -g (OPT=\"-O2 -g\")"

# The ABI of the public headers only, with nothing of this machine or of the
# build's path in it: the same text from any checkout of the same tree.
abidw --headers-dir "$headers" --drop-private-types --no-corpus-path --no-comp-dir-path \
  --no-show-locs --no-architecture --no-elf-needed --type-id-style hash \
  --out-file "$out" "$lib" || fail "abidw failed on $lib"

soname_of() {
  sed -n "s/^<abi-corpus .*soname='\([^']*\)'.*/\1/p" "$1" | head -n 1
}
now=$(soname_of "$out")
record="record it with \`make abi-baseline\` and commit $baseline with the change"

if [ ! -f "$baseline" ]; then
  [ -n "$update" ] || fail "no baseline $baseline for $now: $record"
  cp "$out" "$baseline" || fail "cannot write $baseline"
  echo "$me: recorded the ABI of $now in $baseline"
  exit
fi
# abidiff reads a broken abixml (a cut file, a merge's conflict markers) as
# an empty ABI and reports no change: abilint reads it strictly first.
lint=$(abilint --noout "$baseline" 2>&1) ||
  fail "$baseline cannot be read: $(echo "$lint" | head -n 1); $record"
was=$(soname_of "$baseline")

# abidiff's exit status is a bit set: 1 error, 2 usage error, 4 the ABI
# changed, 8 the change is incompatible (a removed function, a new soname).
# A changed struct layout or function type is only 4: a second run that hides
# added functions tells such a change from mere additions.
report=$(abidiff --no-architecture "$baseline" "$out" 2>&1)
rc=$?
if [ $((rc & 3)) -ne 0 ]; then
  echo "$report" >&2
  fail "abidiff failed (exit $rc) comparing $baseline with $lib"
fi
breaks=$((rc & 8))
if [ $((rc & 4)) -ne 0 ] && [ "$breaks" -eq 0 ]; then
  abidiff --no-architecture --no-added-syms "$baseline" "$out" >/dev/null 2>&1
  breaks=$(($? & 12))
fi

if [ "$now" != "$was" ] && [ -z "$update" ]; then
  [ "$rc" -ne 0 ] && echo "$report"
  fail "the soname is now $now but $baseline records the ABI of $was; $record"
fi

folded=""
[ "$now" = "$was" ] && [ "$breaks" -ne 0 ] && [ -n "$update" ] && [ "${ABI_UNRELEASED:-}" = 1 ] &&
  folded=", a break joining the bump to $now (not released)"
if [ "$now" = "$was" ] && [ "$breaks" -ne 0 ] && [ -z "$folded" ]; then
  echo "$report"
  echo "$me: the ABI of $now changed incompatibly (above, against $baseline): a binary" \
       "built against the previous headers would misread dlrun's structs or calls." >&2
  [ -n "$update" ] && echo "$me: not recorded: the soname must change first (unless $now was" \
    "never released: then make abi-baseline ABI_UNRELEASED=1)" >&2
  fail "keep the old declarations as they were (new functions are compatible), or, when" \
       "the break is deliberate, raise DLRUN_ABI_VERSION in include/dlrun/dlrun.h (and the" \
       "release, DLRUN_VERSION_STRING), rebuild, then $record"
fi

[ "$rc" -ne 0 ] && echo "$report"
if [ -n "$update" ]; then
  cp "$out" "$baseline" || fail "cannot write $baseline"
  if [ "$now" != "$was" ]; then
    echo "$me: recorded the ABI of $now in $baseline (was $was)"
  else
    echo "$me: recorded the ABI of $now in $baseline$folded"
  fi
elif [ "$rc" -ne 0 ]; then
  echo "$me: $now gained functions, a compatible change (above); $record"
else
  echo "$me: $now matches $baseline"
fi
