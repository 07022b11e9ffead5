-- runs: once
-- ipc-off: no
-- devices: any
-- needs: none

-- One list of the dlrun command's options and environment variables: the
-- README's usage block is `dlrun --help` itself, the man page's OPTIONS and
-- ENVIRONMENT say the same in the same words, and every variable the code
-- reads is in it. `make sync-help` copies the help into the README and the
-- man page's template when it changes.
local helpers = require "helpers"

local EXE = helpers.exe
local MAN = EXE:gsub("[^/]*$", "") .. "dlrun.1" -- built beside the executable

local function help()
  local out, err, code = helpers.run({"--help"})
  assert.are.equal(0, code)
  assert.are.equal("", err)
  return out
end

-- The entries of --help's "Options:" and "Environment:" lists, in order:
-- {list = "OPTIONS", name = "-e STAT", text = "execute ... script)"}; a
-- description's lines are joined by one space.
local function help_entries(text)
  local entries, list = {}, nil
  for line in text:gmatch("([^\n]*)\n") do
    if line == "Options:" then list = "OPTIONS"
    elseif line == "Environment:" then list = "ENVIRONMENT"
    elseif list and line:match("^  %S") then
      local name, rest = line:match("^  (.-)  +(.*)$")
      entries[#entries + 1] = {list = list, name = name or line:sub(3), text = rest or ""}
    elseif list and line:match("^   ") then
      local e = entries[#entries]
      e.text = (e.text == "" and "" or e.text .. " ") .. line:match("^%s*(.-)$")
    elseif line ~= "" then
      list = nil
    end
  end
  return entries
end

-- roff text as it reads: escapes and font changes undone.
local function plain(s)
  return (s:gsub("\\f[BIRP]", ""):gsub("\\&", ""):gsub("\\%-", "-"):gsub("\\e", "\\"))
end

-- The man page's .TP entries under OPTIONS and ENVIRONMENT, as help_entries.
local function man_entries(text)
  local entries, list = {}, nil
  local lines = {}
  for line in text:gmatch("([^\n]*)\n") do lines[#lines + 1] = line end
  local i = 1
  while i <= #lines do
    local line = lines[i]
    if line:match("^%.SH ") then
      list = line:match("^%.SH (%u+)$")
      if list ~= "OPTIONS" and list ~= "ENVIRONMENT" then list = nil end
    elseif list and line == ".TP" then
      local name = plain(lines[i + 1])
      local body = {}
      i = i + 2
      while i <= #lines and not lines[i]:match("^%.") do
        body[#body + 1] = plain(lines[i])
        i = i + 1
      end
      entries[#entries + 1] = {list = list, name = name, text = table.concat(body, " ")}
      i = i - 1
    end
    i = i + 1
  end
  return entries
end

-- The names an entry lists: "-h, --help" -> {"-h", "--help"}; arguments
-- ("STAT") left out.
local function names_of(entries, list)
  local names = {}
  for _, e in ipairs(entries) do
    if e.list == list then
      for word in e.name:gmatch("[^%s,]+") do
        if not word:match("^%u+$") then names[#names + 1] = word end
      end
    end
  end
  table.sort(names)
  return names
end

describe("dlrun --help", function()
  it("is the README's usage block, word for word", function()
    local readme = helpers.read_file("README.md")
    local block = readme:match("\n## The dlrun command\n\n```\n(.-)```\n")
    assert.truthy(block, "no usage block under \"## The dlrun command\"")
    assert.are.equal(help(), block, "README.md's usage block differs from dlrun --help: run make sync-help")
  end)

  it("is the man page's OPTIONS and ENVIRONMENT, entry by entry, in the same words", function()
    local page = helpers.read_file(MAN)
    assert.truthy(page, MAN)
    local want, got = help_entries(help()), man_entries(page)
    assert.are.same(names_of(want, "OPTIONS"), names_of(got, "OPTIONS"))
    assert.are.same(names_of(want, "ENVIRONMENT"), names_of(got, "ENVIRONMENT"))
    assert.are.same(want, got, "the man page's lists differ from dlrun --help: run make sync-help")
  end)

  it("lists -i and every option, and no option twice", function()
    local names = names_of(help_entries(help()), "OPTIONS")
    assert.are.same({"-", "--", "--allow-binary-chunks", "--device-memory", "--device-preallocate", "--devices",
                     "--distributed", "--help", "--host-memory", "--list-devices", "--pinned-host-memory",
                     "--pinned-host-preallocate", "--stats", "--trace", "--version", "-E", "-W",
                     "-e", "-h", "-i", "-l", "-v"}, names)
  end)

  it("lists every DLRUN_ variable the code reads, and DLRUN_TRACE", function()
    -- Every quoted DLRUN_ name in the sources is a variable read: by getenv,
    -- or kept in a table and read through it.
    local read = {DLRUN_TRACE = true}
    local grep = helpers.capture("grep -rhoE --exclude=help.c '\"DLRUN_[A-Z0-9_]+\"' src lua")
    for name in grep:gmatch('"(DLRUN_[%u%d_]+)"') do read[name] = true end
    local want = {}
    for name in pairs(read) do want[#want + 1] = name end
    table.sort(want)
    local listed = {}
    for _, name in ipairs(names_of(help_entries(help()), "ENVIRONMENT")) do
      if name:match("^DLRUN_") then listed[#listed + 1] = name end
    end
    assert.truthy(#want >= 17, table.concat(want, " "))
    assert.are.same(want, listed)
  end)
end)
