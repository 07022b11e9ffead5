#!/bin/sh
# The busted specs against the build: what `luarocks test` runs (the test
# table of dlrun-scm-0.rockspec), from the repository root. Builds what is
# missing first (make all), then runs busted with the arguments given (none:
# every spec, as .busted says), on busted as the system has it: nothing is
# downloaded. BUILD names the build folder (default build).
# Usage: scripts/busted.sh [busted arguments...]
set -eu
build=${BUILD:-build}
if ! command -v busted >/dev/null 2>&1; then
  echo "dlrun: scripts/busted.sh: busted is not installed (Debian: apt-get install lua-busted)" >&2
  exit 1
fi
"${MAKE:-make}" --no-print-directory BUILD="$build" all >&2
DLRUN_EXE="$build/dlrun" exec busted --cpath="$build/lua/?.so" "$@"
