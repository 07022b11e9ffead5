#!/bin/sh
# Finds circles among the C files of src/ (docs/architecture.md, "No
# circles"). C file A depends on C file B (A != B) when A names a function
# that B defines with external linkage and that a header A includes, directly
# or through other project headers (src/ and include/dlrun/), declares: A
# includes a header B implements, for a function A uses. A circle is a set of
# two or more C files each of which depends on each other one through a path
# of such dependencies (a strongly connected component of the graph).
# Prints each circle, sorted, with the dependencies inside it and the
# functions behind each; then "cycles: N files, N dependencies, N circles";
# exits 1 when a circle is not one of those accepted below.
# Usage: scripts/check-cycles.sh [SRC_DIR [PUBLIC_INCLUDE_DIR]]
set -u
src=${1:-src}
pub=${2:-include/dlrun}

# Circles that stay, one a line (the files, sorted, space-separated), each
# explained in docs/architecture.md ("No circles").
accepted=''

files=$(find "$src" "$pub" -type f \( -name '*.c' -o -name '*.h' \) | LC_ALL=C sort)
# shellcheck disable=SC2086 # file names hold no blanks
LC_ALL=C awk -v src="$src" -v pub="$pub" -v accepted="$accepted" '
function ident_start(c) { return c ~ /[A-Za-z_]/ }
# The line without comments, strings and character constants.
function strip(line,   out, i, c, n) {
  out = ""
  n = length(line)
  for (i = 1; i <= n; i++) {
    c = substr(line, i, 1)
    if (incomment) {
      if (c == "*" && substr(line, i + 1, 1) == "/") { incomment = 0; i++ }
      continue
    }
    if (c == "/" && substr(line, i + 1, 1) == "*") { incomment = 1; i++; out = out " "; continue }
    if (c == "/" && substr(line, i + 1, 1) == "/") break
    if (c == "\"" || c == "\047") {
      for (i++; i <= n && substr(line, i, 1) != c; i++)
        if (substr(line, i, 1) == "\\") i++
      out = out " 0 "
      continue
    }
    out = out c
  }
  return out
}
function resolve(name, from,   d) {
  d = from
  sub(/\/[^\/]*$/, "", d)
  if ((d "/" name) in known) return d "/" name
  if ((src "/" name) in known) return src "/" name
  if (name ~ /^dlrun\// && (pub "/" substr(name, 7)) in known) return pub "/" substr(name, 7)
  return ""
}
BEGIN {
  for (i = 1; i < ARGC; i++) known[ARGV[i]] = 1
  n = split(accepted, lines, "\n")
  for (i = 1; i <= n; i++) if (lines[i] != "") ok[lines[i]] = 1
}
FNR == 1 {
  incomment = 0
  pending = ""
  if (FILENAME ~ /\.c$/) { cfile[++ncfiles] = FILENAME }
}
{
  raw = $0
  if (!incomment && raw ~ /^[ \t]*#[ \t]*include/) {
    name = raw
    if (sub(/^[ \t]*#[ \t]*include[ \t]*["<]/, "", name)) {
      sub(/[">].*$/, "", name)
      h = resolve(name, FILENAME)
      if (h != "") incs[FILENAME] = incs[FILENAME] " " h
    }
    next
  }
  line = strip(raw)
  if (line ~ /^[ \t]*#/) next
  # Every identifier the file names; in headers, those declared as called.
  rest = line
  while (match(rest, /[A-Za-z_][A-Za-z0-9_]*/)) {
    id = substr(rest, RSTART, RLENGTH)
    rest = substr(rest, RSTART + RLENGTH)
    used[FILENAME, id] = 1
    if (FILENAME ~ /\.h$/ && rest ~ /^[ \t]*\(/ && !((FILENAME, id) in declared)) {
      declared[FILENAME, id] = 1
      decls[FILENAME] = decls[FILENAME] " " id
    }
  }
  if (FILENAME !~ /\.c$/) next
  # A definition with external linkage starts at column 0, outside static.
  if (pending == "" && line ~ /^[A-Za-z_]/ && line !~ /^(static|typedef|extern|struct|enum|union)[^A-Za-z0-9_]/ &&
      match(line, /[A-Za-z_][A-Za-z0-9_]*[ \t]*\(/)) {
    pending = substr(line, RSTART, RLENGTH)
    sub(/[ \t]*\($/, "", pending)
    line = substr(line, RSTART + RLENGTH)
  }
  if (pending != "") {
    b = index(line, "{")
    s = index(line, ";")
    if (b && (!s || b < s)) { definer[pending] = FILENAME; pending = "" }
    else if (s) pending = ""
  }
}
END {
  ndeps = 0
  for (i = 1; i <= ncfiles; i++) {
    a = cfile[i]
    # The headers a reaches through includes.
    delete seen
    queue = incs[a]
    while (queue != "") {
      sub(/^ +/, "", queue)
      h = queue
      sub(/ .*$/, "", h)
      queue = substr(queue, length(h) + 1)
      if (h == "" || h in seen) continue
      seen[h] = 1
      queue = queue " " incs[h]
    }
    for (h in seen) {
      m = split(decls[h], names, " ")
      for (k = 1; k <= m; k++) {
        fn = names[k]
        if (!((a, fn) in used) || !(fn in definer) || definer[fn] == a) continue
        b = definer[fn]
        if (!((a, b) in dep)) { dep[a, b] = 1; ndeps++; why[a, b] = fn }
        else if (index(" " why[a, b] " ", " " fn " ") == 0) why[a, b] = why[a, b] " " fn
      }
    }
  }
  # Who reaches whom (the closure, over the files with dependencies).
  nn = 0
  for (i = 1; i <= ncfiles; i++) node[++nn] = cfile[i]
  for (i = 1; i <= nn; i++)
    for (j = 1; j <= nn; j++)
      if ((node[i], node[j]) in dep) reach[i, j] = 1
  for (k = 1; k <= nn; k++)
    for (i = 1; i <= nn; i++) {
      if (!((i, k) in reach)) continue
      for (j = 1; j <= nn; j++)
        if ((k, j) in reach) reach[i, j] = 1
    }
  circles = 0
  bad = 0
  for (i = 1; i <= nn; i++) {
    if (i in placed) continue
    members = node[i]
    count = 1
    for (j = i + 1; j <= nn; j++)
      if ((i, j) in reach && (j, i) in reach) { members = members " " node[j]; placed[j] = 1; count++ }
    if (count < 2) continue
    circles++
    if (members in ok) { print "circle (accepted): " members; accepted_seen[members] = 1 }
    else { print "circle: " members; bad++ }
    m = split(members, in_circle, " ")
    for (x = 1; x <= m; x++)
      for (y = 1; y <= m; y++)
        if ((in_circle[x], in_circle[y]) in dep)
          print "  " in_circle[x] " -> " in_circle[y] ":" why[in_circle[x], in_circle[y]]
  }
  for (c in ok)
    if (!(c in accepted_seen)) print "accepted circle no longer found (drop it from the list): " c
  printf "cycles: %d files, %d dependencies, %d circles (%d accepted)\n", ncfiles, ndeps, circles, circles - bad
  exit bad > 0
}
' $files
