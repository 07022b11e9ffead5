-- runs: every-platform
-- ipc-off: no
-- devices: any
-- needs: none

-- The README's Lua tour runs and prints what its comments say; its C tour is
-- an excerpt of the example it names.
local helpers = require "helpers"
local markdown = require "markdown"

-- Run a block and check every "--> shown" comment appears, in order, in its output.
-- On sim:8, as the tour shows it: what auto gives on a machine without a GPU
-- (the suite's cuda pass has one, and auto would take it).
local function check_block(block)
  local expected = markdown.shown(block.code, "%-%->%s")
  local out, err, status = helpers.run({"-"}, block.code, {DLRUN_DEVICES = "sim:8"})
  assert.are.equal("", err)
  assert.are.equal(0, status)
  local why = markdown.missing_shown(expected, out, "README.md:" .. block.line)
  assert(not why, why)
  return #expected
end

-- The line of an excerpt that stands for lines it leaves out: a comment
-- opening with "...", as "/* ... release each object ... */".
local function is_elision(line) return line:match("^/%*%s*%.%.%..*%*/$") ~= nil end

-- A line as compared: runs of blanks are one space, none at either end.
local function squeeze(line) return (line:gsub("%s+", " "):gsub("^ ", ""):gsub(" $", "")) end

-- Checks that `code` is an excerpt of the file at `path`: its lines (blank
-- lines aside, blanks squeezed) are the file's, in order; runs of them
-- between elision lines are runs of the file too. Returns nil, or why not
-- (naming the README's line).
local function excerpt_mismatch(code, first_line, path)
  local file = {}
  for _, line in ipairs(markdown.lines(path)) do
    if squeeze(line) ~= "" then file[#file + 1] = squeeze(line) end
  end
  local runs, run = {}, {}
  local n = first_line - 1
  for line in (code):gmatch("([^\n]*)\n") do
    n = n + 1
    local s = squeeze(line)
    if is_elision(s) then
      if #run > 0 then runs[#runs + 1] = run end
      run = {}
    elseif s ~= "" then
      run[#run + 1] = {text = s, line = n}
    end
  end
  if #run > 0 then runs[#runs + 1] = run end
  local at = 1                                  -- the first file line still free
  for _, r in ipairs(runs) do
    local found
    for start = at, #file - #r + 1 do
      local k = 0
      while k < #r and file[start + k] == r[k + 1].text do k = k + 1 end
      if k == #r then found = start break end
    end
    if not found then
      -- name the first line of the run that is not where it should be
      local best, best_k = nil, -1
      for start = at, #file do
        local k = 0
        while k < #r and file[start + k] == r[k + 1].text do k = k + 1 end
        if k > best_k then best, best_k = start, k end
      end
      local bad = r[math.min(best_k + 1, #r)]
      return ("README.md:%d: %q is not in %s (in order, after the excerpt's lines above it; "
              .. "mark left-out lines with /* ... */)"):format(bad.line, bad.text, path)
    end
    at = found + #r
  end
  return nil
end

describe("README", function()
  it("every C block is a marked excerpt of the example it names, line by line", function()
    local blocks = markdown.blocks("README.md", "c")
    assert(#blocks > 0, "no C block in README.md")
    for _, b in ipairs(blocks) do
      local path = b.prose_before:match("[Ee]xcerpt of `([^`]+)`")
      assert(path, ("README.md:%d: a C block that does not say which file it is an excerpt of "
                    .. "(\"An excerpt of `examples/host/NAME.c`\" in the paragraph above it)")
                   :format(b.line))
      local why = excerpt_mismatch(b.code, b.line, path)
      assert(why == nil, why)
    end
  end)

  it("the excerpt check finds a changed line, a line out of order and an unmarked gap", function()
    local path = os.tmpname()
    helpers.write_file(path, "int a;\nint b;\n\nint c;\n")
    assert.is_nil(excerpt_mismatch("int  a;\nint b;\n/* ... */\n", 1, path))
    assert.is_nil(excerpt_mismatch("int a;\n/* ... the rest */\nint c;\n", 1, path))
    assert.are.equal(("README.md:11: \"int x;\" is not in %s (in order, after the excerpt's lines "
                      .. "above it; mark left-out lines with /* ... */)"):format(path),
                     excerpt_mismatch("int a;\nint x;\n", 10, path))
    assert.truthy(excerpt_mismatch("int b;\n/* ... */\nint a;\n", 1, path))
    assert.truthy(excerpt_mismatch("int a;\nint c;\n", 1, path))
    os.remove(path)
  end)

  it("every Lua block runs and prints what its --> comments say", function()
    local shown = 0
    local blocks = markdown.blocks("README.md", "lua")
    assert(#blocks > 0, "no Lua block in README.md")
    for _, block in ipairs(blocks) do shown = shown + check_block(block) end
    assert.is_true(shown >= 7)
  end)

  it("first screen shows the demo and test commands", function()
    local f = assert(io.open("README.md"))
    local first = {}
    for _ = 1, 40 do first[#first + 1] = f:read("l") or "" end
    f:close()
    local screen = table.concat(first, "\n")
    assert.truthy(screen:find("make demo", 1, true))
    assert.truthy(screen:find("make test", 1, true))
  end)
end)
