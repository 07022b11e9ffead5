#!/bin/sh
# Copies `dlrun --help`, the one list of the command's options and
# environment variables, into the README's usage block (under "## The dlrun
# command") and the man page template's OPTIONS and ENVIRONMENT lists.
# Usage: scripts/sync-help.sh path/to/dlrun   (make sync-help)
set -eu
exe=$1
help=$(mktemp)
trap 'rm -f "$help" README.md.tmp docs/dlrun.1.in.tmp' EXIT
"$exe" --help >"$help"
awk -v help="$help" '
  state == 0 && $0 == "## The dlrun command" { state = 1 }
  state == 1 && $0 == "```" { print; while ((getline line < help) > 0) print line; state = 2; next }
  state == 2 { if ($0 == "```") { print; state = 3 }; next }
  { print }
  END { if (state != 3) { print "sync-help: no usage block in README.md" > "/dev/stderr"; exit 1 } }
' README.md >README.md.tmp
awk -f scripts/man-from-help.awk "$help" docs/dlrun.1.in >docs/dlrun.1.in.tmp
mv README.md.tmp README.md
mv docs/dlrun.1.in.tmp docs/dlrun.1.in
echo "sync-help: README.md and docs/dlrun.1.in list what dlrun --help lists"
