# Rewrites the man page template's OPTIONS and ENVIRONMENT lists from
# `dlrun --help` (make sync-help runs it; spec/docs/help_spec.lua fails when they
# differ):
#   awk -f scripts/man-from-help.awk HELP_FILE docs/dlrun.1.in >NEW
# The lines between a template's `.\" BEGIN OPTIONS` and `.\" END OPTIONS`
# (ENVIRONMENT likewise) become one .TP entry per entry of the help's
# "Options:" ("Environment:") list, in the same words; names are bold, their
# all-capital arguments (STAT, SIZE) italic. Every other line is kept.

function roff(s) {
  gsub(/\\/, "\\e", s)
  gsub(/-/, "\\-", s)
  return s
}

function tag(name,    n, parts, i, word, comma, out) {
  n = split(name, parts, " ")
  out = ""
  for (i = 1; i <= n; i++) {
    word = parts[i]
    comma = ""
    if (word ~ /,$/) { comma = ","; word = substr(word, 1, length(word) - 1) }
    out = out (i > 1 ? " " : "") (word ~ /^[A-Z]+$/ ? "\\fI" : "\\fB") roff(word) "\\fR" comma
  }
  return out
}

# The help, first: its entries per list.
FILENAME == ARGV[1] {
  if ($0 == "Options:") { list = "OPTIONS"; next }
  if ($0 == "Environment:") { list = "ENVIRONMENT"; next }
  if (list == "" || $0 == "") next
  if ($0 ~ /^  [^ ]/) {
    line = substr($0, 3)
    cut = index(line, "  ")
    count[list]++
    names[list, count[list]] = cut ? substr(line, 1, cut - 1) : line
    text = cut ? substr(line, cut) : ""
    sub(/^ +/, "", text)
    texts[list, count[list]] = text
  } else if ($0 ~ /^   /) {
    text = $0
    sub(/^ +/, "", text)
    k = count[list]
    texts[list, k] = texts[list, k] (texts[list, k] == "" ? "" : " ") text
  } else {
    list = ""
  }
  next
}

# Then the template.
skipping { if ($0 ~ /^\.\\" END /) { skipping = 0; print } ; next }
/^\.\\" BEGIN (OPTIONS|ENVIRONMENT)/ {
  print
  list = $3
  sub(/:$/, "", list)
  if (!count[list]) { print "man-from-help.awk: no " list " in the help" > "/dev/stderr"; exit 1 }
  for (k = 1; k <= count[list]; k++) {
    print ".TP"
    print tag(names[list, k])
    print "\\&" roff(texts[list, k])
  }
  skipping = 1
  next
}

{ print }
