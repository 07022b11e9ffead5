#!/bin/sh
# Installs the Debian packages dlrun needs, only those missing.
# Usage: scripts/deps.sh [--demo | --hardening] [--check | --list]
#   --demo       only what `make demo` needs: a compiler, Lua 5.4, DLPack's header
#   --hardening  also what the sanitizer, fuzzing and valgrind targets need
#   --check      report what is missing, install nothing
#   --list       print the package set, one line, and install nothing
set -u
DEMO_PKGS="gcc make libc6-dev liblua5.4-dev libdlpack-dev"
PKGS="$DEMO_PKGS lua5.4 lua-busted python3-numpy python3-torch bsdutils
      binutils pkg-config man-db luarocks openmpi-bin libopenmpi-dev abigail-tools
      opencl-headers ocl-icd-opencl-dev pocl-opencl-icd clinfo"
check_only=""
list_only=""
for a in "$@"; do
  case "$a" in
    --demo) PKGS="$DEMO_PKGS" ;;
    --hardening) PKGS="$PKGS clang-14 libclang-rt-14-dev valgrind" ;;
    --check) check_only=1 ;;
    --list) list_only=1 ;;
    *) echo "dlrun: scripts/deps.sh: unknown option $a" >&2; exit 2 ;;
  esac
done
if [ -n "$list_only" ]; then
  echo $PKGS
  exit 0
fi

missing=""
for p in $PKGS; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
    missing="$missing $p"
done
[ -z "$missing" ] && exit 0

if [ -n "$check_only" ]; then
  echo "dlrun: missing packages:$missing" >&2
  exit 1
fi

echo "dlrun: installing missing packages:$missing" >&2
SUDO=""
if [ "$(id -u)" != 0 ]; then
  if command -v sudo >/dev/null 2>&1; then SUDO="sudo"; else
    echo "dlrun: need root (or sudo) to run: apt-get install$missing" >&2
    exit 1
  fi
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "dlrun: apt-get not found; install these packages by hand:$missing" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
lua_before=$(readlink -e /usr/bin/lua 2>/dev/null)
if ! { $SUDO apt-get update -qq && $SUDO apt-get install -y -qq --no-install-recommends $missing; } >&2; then
  echo "dlrun: apt-get failed; these packages are needed:$missing" >&2
  exit 1
fi
# luarocks brings lua5.1, whose alternative outranks lua5.4's: keep `lua`
# (busted's interpreter) as it was, lua5.4 when there was none (and nothing
# to keep when lua5.4 is not there either, as after --demo).
lua_keep=${lua_before:-/usr/bin/lua5.4}
if [ -e "$lua_keep" ] && [ "$(readlink -e /usr/bin/lua 2>/dev/null)" != "$lua_keep" ]; then
  $SUDO update-alternatives --set lua-interpreter "$lua_keep" >&2 ||
    echo "dlrun: warning: \`lua\` is not $lua_keep; run busted with lua5.4" >&2
fi
