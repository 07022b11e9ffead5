#!/bin/sh
# The README's two commands on a fresh machine, as a newcomer runs them: a
# minimal Debian 12 root (debootstrap --variant=minbase with only gcc, make,
# git, clang-14 and python3), a clone of the committed HEAD in it, then, as
# root inside it, `make demo` and `make test`. Each must pass the first time.
# Ends with its own "N passed, N failed" line (one check).
# Usage: scripts/check-fresh.sh [BUILD_DIR]
#        scripts/check-fresh.sh --sources   print the root's apt sources, run nothing
#
# Needs root and the network. The mirror is the Debian one this machine's apt
# sources name. The pristine root is kept in BUILD_DIR/fresh/base and copied
# for each run (FRESH_REBUILD=1 makes it again); the run's root, logs and
# timings are in BUILD_DIR/fresh.
# FRESH_DEMO_TIMEOUT and FRESH_TEST_TIMEOUT (seconds) bound each command;
# FRESH_APT_DIR (/etc/apt) is where the machine's sources are read.
set -u
apt_dir=${FRESH_APT_DIR:-/etc/apt}
SUITE=bookworm
INCLUDE=gcc,make,git,clang-14,python3
build=${1:-build}
src=$(pwd)
work=$src/$build/fresh
base=$work/base
root=$work/root

fail() {
  echo "check-fresh: $*" >&2
  echo "0 passed, 1 failed"
  exit 1
}
now() { date +%s; }

# Mount points under folder $1, deepest first.
mounts_under() {
  awk -v r="$1/" 'index($2, r) == 1 { print $2 }' /proc/self/mounts | sort -r
}

# Ends what still runs inside the root (MPI daemons after a timeout), then
# unmounts everything under it; a busy mount is detached (umount -l), so
# that nothing of the machine stays reachable through the root.
release_root() {
  [ -d "$root" ] || return 0
  real=$(readlink -f "$root")
  for p in /proc/[0-9]*; do
    [ "$(readlink "$p/root" 2>/dev/null)" = "$real" ] && kill -9 "${p#/proc/}" 2>/dev/null
  done
  for m in $(mounts_under "$real"); do
    umount "$m" 2>/dev/null || umount -l "$m"
  done
}

# Removes folder $1, never through a mount.
remove_tree() {
  [ -e "$1" ] || return 0
  [ -z "$(mounts_under "$(readlink -f "$1")")" ] || fail "mounts are left under $1; not removing it"
  rm -rf --one-file-system "$1"
}

# "URI SUITE" for each Debian package source of this machine: one-line
# entries (sources.list, *.list) and deb822 stanzas (*.sources).
apt_entries() {
  for f in "$apt_dir/sources.list" "$apt_dir"/sources.list.d/*.list; do
    [ -r "$f" ] || continue
    sed -n 's/^[[:space:]]*deb[[:space:]]\{1,\}\(\[[^]]*\][[:space:]]\{1,\}\)\{0,1\}\([^[:space:]]\{1,\}\)[[:space:]]\{1,\}\([^[:space:]]\{1,\}\).*/\2 \3/p' "$f"
  done
  for f in "$apt_dir"/sources.list.d/*.sources; do
    [ -r "$f" ] || continue
    awk 'function flush(  n, m, i, j, u, s) {
           if (types ~ /(^| )deb( |$)/ && enabled != "no") {
             n = split(uris, u, " "); m = split(suites, s, " ")
             for (i = 1; i <= n; i++) for (j = 1; j <= m; j++) print u[i], s[j]
           }
           types = uris = suites = enabled = ""
         }
         /^[[:space:]]*$/ { flush(); next }
         /^#/ { next }
         { key = tolower($1); $1 = "" }
         key == "types:" { types = $0 }
         key == "uris:" { uris = $0 }
         key == "suites:" { suites = $0 }
         key == "enabled:" { enabled = tolower($0); gsub(/ /, "", enabled) }
         END { flush() }' "$f"
  done
}

# One block, read whole before it runs and left only by exit: a checkout
# changed during the run (a pull, a rebase) cannot change the rest of it.
{
entries=$(apt_entries)
# The mirror serving $SUITE; else any Debian archive named by the sources.
mirror=$(echo "$entries" | awk -v s="$SUITE" '$2 == s { print $1; exit }')
[ -n "$mirror" ] || mirror=$(echo "$entries" | awk '$1 ~ /\/debian\/?$/ { print $1; exit }')
[ -n "$mirror" ] || fail "no Debian mirror in this machine's apt sources ($apt_dir/sources.list, $apt_dir/sources.list.d)"
case "$mirror" in https:*) INCLUDE="$INCLUDE,ca-certificates" ;; esac
# The root's sources: the mirror, and the machine's updates and security
# sources of $SUITE.
root_sources() {
  echo "deb $mirror $SUITE main"
  echo "$entries" | awk -v s="$SUITE" '($2 == s "-updates" || $2 == s "-security") && !seen[$0]++ {
    print "deb " $1 " " $2 " main" }'
}
if [ "$build" = --sources ]; then
  root_sources
  exit 0
fi

[ "$(id -u)" = 0 ] || fail "needs root (debootstrap, chroot and mounts)"

if ! command -v debootstrap >/dev/null 2>&1; then
  echo "check-fresh: installing debootstrap"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >&2 ||
    fail "debootstrap is missing and apt-get could not install it"
fi

# Whatever a killed run left behind.
release_root
remove_tree "$root"
mkdir -p "$work"
trap release_root EXIT
trap 'exit 1' INT TERM HUP

t0=$(now)
if [ -f "$base/.dlrun-fresh-complete" ] && [ -z "${FRESH_REBUILD:-}" ]; then
  echo "check-fresh: reusing the $SUITE root in $base (FRESH_REBUILD=1 makes it again)"
  made="reused"
else
  remove_tree "$base"
  echo "check-fresh: debootstrap --variant=minbase --include=$INCLUDE $SUITE from $mirror"
  if ! debootstrap --variant=minbase --include="$INCLUDE" "$SUITE" "$base" "$mirror" \
       >"$work/debootstrap.log" 2>&1; then
    tail -n 20 "$work/debootstrap.log"
    fail "debootstrap failed (no network, or the mirror $mirror cannot serve $SUITE); log: $work/debootstrap.log"
  fi
  touch "$base/.dlrun-fresh-complete"
  made="made in $(($(now) - t0)) s"
fi
t1=$(now)
cp -a "$base" "$root" || fail "cannot copy $base to $root"
rm -f "$root/.dlrun-fresh-complete"

# The machine's Debian sources, and its name servers.
root_sources >"$root/etc/apt/sources.list"
rm -f "$root"/etc/apt/sources.list.d/*
cp -L /etc/resolv.conf "$root/etc/resolv.conf" 2>/dev/null

# The committed HEAD, cloned as a newcomer would.
head=$(git rev-parse HEAD) || fail "not a git checkout"
[ -z "$(git status --porcelain --untracked-files=no)" ] ||
  echo "check-fresh: note: uncommitted changes are not checked (the clone is of HEAD $head)"
git clone -q --no-hardlinks "$src" "$root/root/dlrun" || fail "cannot clone $src into the root"
git -C "$root/root/dlrun" checkout -q --detach "$head" || fail "cannot check out $head in the clone"

# What a booted machine has (MPI reads the topology in /sys); /dev/shm is
# the root's own: MPI's shared memory needs one.
if ! { mount -t proc proc "$root/proc" && mount -t sysfs sysfs "$root/sys" &&
       mount --bind /dev "$root/dev" && mount --make-private "$root/dev" &&
       mount --bind /dev/pts "$root/dev/pts" &&
       mount -t tmpfs -o mode=1777 shm "$root/dev/shm"; }; then
  fail "cannot mount /proc, /sys and /dev in the root"
fi
echo "check-fresh: root ready ($made, copied in $(($(now) - t1)) s), HEAD $head"

# command, log, timeout: run as root in the root, with a newcomer's environment.
inside() {
  timeout -k 10 "$3" chroot "$root" /usr/bin/env -i HOME=/root TERM=dumb \
    PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    sh -c "cd /root/dlrun && $1" >"$2" 2>&1
}

ok=1
t2=$(now)
inside "make demo" "$work/demo.log" "${FRESH_DEMO_TIMEOUT:-900}"
demo_rc=$?
t3=$(now)
echo "check-fresh: make demo exited $demo_rc in $((t3 - t2)) s; its last lines:"
tail -n 8 "$work/demo.log" | sed 's/^/  | /'
[ "$demo_rc" -eq 0 ] || { ok=0; tail -n 40 "$work/demo.log"; }

inside "make test" "$work/test.log" "${FRESH_TEST_TIMEOUT:-2700}"
test_rc=$?
t4=$(now)
line=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$work/test.log" | tail -n 1)
echo "check-fresh: make test exited $test_rc in $((t4 - t3)) s: ${line:-no closing line}"
if [ "$test_rc" -ne 0 ] || [ -z "$line" ] || [ "${line#* passed, }" != "0 failed" ]; then
  ok=0
  echo "check-fresh: what failed in make test:"
  grep -E -A 12 '^(not ok|Failure|Error)|crashed|: failed' "$work/test.log" | head -n 80
  echo "check-fresh: the end of make test's log ($work/test.log):"
  tail -n 40 "$work/test.log"
fi
echo "check-fresh: total $((t4 - t0)) s (root $made, make demo $((t3 - t2)) s, make test $((t4 - t3)) s)"
release_root
if [ "$ok" -eq 1 ]; then
  remove_tree "$root"
  echo "1 passed, 0 failed"
  exit 0
fi
echo "check-fresh: the root is kept for a look: $root"
echo "0 passed, 1 failed"
exit 1
}
