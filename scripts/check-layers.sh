#!/bin/sh
# Holds the layers of src/ (docs/architecture.md): every include of a project
# header in src/LAYER/**.[ch] and include/dlrun/*.h must follow an allowed
# edge (a platform, src/platforms/NAME, includes public headers, its own
# folder's and those it shares: platform_shares), and no platform name is
# spelled out above the device layer. Project headers are checked however
# they are spelled ("x.h" or <x.h>); <...> names that are neither public nor
# in src/ are system headers and not counted.
# Prints each violation, then "layers: N files, N includes, N violations";
# exits 1 on any.
# Usage: scripts/check-layers.sh [SRC_DIR [PUBLIC_INCLUDE_DIR]]
set -u
src=${1:-src}
pub=${2:-include/dlrun}

# The layers, lowest first. A layer may include the public headers of its own
# layer and of every layer below it.
order="core mem distributed device shard array dlpack lua cli mpi platforms"

# Internal headers (src/LAYER/*.h) a layer may include besides its own:
# the layers whose internals it is built on. The Lua binding and the command
# use the public API only.
internal() {
  case $1 in
  core) echo "" ;;
  mem) echo "core" ;;
  distributed) echo "core mem" ;; # mem: the memory files of processes on one host
  device) echo "core mem distributed" ;;
  shard) echo "core" ;;
  array) echo "core distributed device shard" ;;
  dlpack) echo "core device shard array" ;;
  lua) echo "" ;;
  cli) echo "" ;;
  mpi) echo "distributed" ;; # the transport module: transport.h alone
  platforms) echo "" ;; # platforms: public headers (platform.h) alone
  esac
}

# The folders of src/platforms a platform's files may include besides their
# own: common (what every platform shares) and, for the built-in platforms
# that run their work on the host's threads, host (host execution).
platform_shares() {
  case $1 in
  sim | cpu) echo "common host" ;;
  *) echo "common" ;;
  esac
}

# The layer of a public header (include/dlrun/NAME.h).
public_layer() {
  case $1 in
  status | dtype | shape | debug | trace | export) echo core ;;
  distributed) echo distributed ;;
  device | runtime | stats | platform | opencl) echo device ;;
  sharding) echo shard ;;
  multihost) echo array ;;
  array) echo array ;;
  dlpack | partitioned | exchange) echo dlpack ;;
  lua | dlrun) echo lua ;;
  *) echo unknown ;;
  esac
}

rank() { # position of a layer in $order, or 99 (run in $(...): IFS stays here)
  IFS=' '
  i=0
  for l in $order; do
    [ "$l" = "$1" ] && { echo $i; return; }
    i=$((i + 1))
  done
  echo 99
}

# The C files of a folder and its subfolders, one per line, sorted.
sources() {
  find "$1" -type f \( -name '*.c' -o -name '*.h' \) | LC_ALL=C sort
}
# File names split on newlines only.
IFS='
'

files=0
includes=0
violations=0

# check FILE LAYER [public]: one file's includes against LAYER's rules. In a
# public header, "NAME.h" is the public header NAME.
check() {
  file=$1
  layer=$2
  files=$((files + 1))
  for inc in $(sed -n -e 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' \
    -e 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*<\([^>]*\)>.*/<\1>/p' "$file"); do
    case $inc in
    "<"*)
      inc=${inc#<}
      inc=${inc%>}
      shown="<$inc>"
      case $inc in dlrun/*) ;; *) [ -f "$src/$inc" ] || continue ;; esac
      ;;
    *)
      [ "${3:-}" = public ] && case $inc in */*) ;; *) inc="dlrun/$inc" ;; esac
      shown="\"$inc\""
      ;;
    esac
    includes=$((includes + 1))
    why=""
    case $inc in
    *..*)
      why="a path through .. leaves the folder: name the header by its layer"
      ;;
    dlrun/*.h | */dlrun/*.h)
      name=$(basename "$inc" .h)
      to=$(public_layer "$name")
      if [ "$to" = unknown ]; then
        why="no layer owns public header $inc"
      elif [ "$(rank "$to")" -gt "$(rank "$layer")" ]; then
        why="$layer -> $to is not allowed: public header of a higher layer"
      fi
      ;;
    */*)
      to=${inc%%/*}
      # a subfolder of the including file's folder comes first, as in the compiler
      [ -f "$(dirname "$file")/$inc" ] && to=$layer
      if [ "$to" != "$layer" ]; then
        case " $(internal "$layer") " in
        *" $to "*) ;;
        *) why="$layer -> $to is not allowed" ;;
        esac
      elif [ "$layer" = platforms ] && [ "${inc%%/*}" = platforms ]; then
        # one platform's folder: its own headers, and those it shares
        own=${file#"$src"/platforms/}
        own=${own%%/*}
        other=${inc#platforms/}
        other=${other%%/*}
        case " $own $(platform_shares "$own") " in
        *" $other "*) ;;
        *) why="platforms/$own -> platforms/$other is not allowed" ;;
        esac
      fi
      ;;
    *)
      # a header of the same folder
      if [ -f "$(dirname "$file")/$inc" ]; then :; else
        why="\"$inc\" is not in $(dirname "$file")"
      fi
      ;;
    esac
    if [ -n "$why" ]; then
      echo "$file: includes $shown ($why)"
      violations=$((violations + 1))
    fi
  done
}

for dir in "$src"/*/; do
  layer=$(basename "$dir")
  if [ "$(rank "$layer")" = 99 ]; then
    echo "$dir: folder is not a known layer (expected one of: $order)"
    violations=$((violations + 1))
    continue
  fi
  for f in $(sources "$dir"); do
    check "$f" "$layer"
  done
done

# Public headers: each may include those of its own layer or lower ones.
for f in "$pub"/*.h; do
  [ -f "$f" ] || continue
  layer=$(public_layer "$(basename "$f" .h)")
  if [ "$layer" = unknown ]; then
    echo "$f: no layer owns this public header (add it to public_layer)"
    violations=$((violations + 1))
    continue
  fi
  check "$f" "$layer" public
done

# Platforms are chosen through the registry: no platform name is spelled out
# above the device layer (the platforms themselves, and the command's help and
# report aside).
for dir in "$src"/*/; do
  case $(basename "$dir") in device | cli | platforms) continue ;; esac
  for f in $(sources "$dir"); do
    grep -n '"sim"\|"cpu"' "$f" | while IFS= read -r hit; do
      echo "$f:${hit%%:*}: names a platform (\"sim\"/\"cpu\") above the device layer"
    done
    n=$(grep -c '"sim"\|"cpu"' "$f")
    violations=$((violations + n))
  done
done

echo "layers: $files files, $includes includes, $violations violations"
[ "$violations" -eq 0 ]
