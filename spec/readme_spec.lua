-- The README's Lua tour runs and prints what its comments say.
local helpers = require "helpers"

local function readme_blocks()
  local f = assert(io.open("README.md"))
  local text = f:read("a")
  f:close()
  local blocks = {}
  for code in text:gmatch("```lua\n(.-)```") do blocks[#blocks + 1] = code end
  assert(#blocks > 0, "no Lua block in README.md")
  return blocks
end

-- Run a block and check every "--> shown" comment appears, in order, in its output.
local function check_block(code)
  local expected = {}
  for line in code:gmatch("[^\n]+") do
    local shown = line:match("%-%->%s(.*)$")
    if shown then expected[#expected + 1] = shown end
  end
  local out, err, status = helpers.run({"-"}, code, {DLRUN_DEVICES = ""})
  assert.are.equal("", err)
  assert.are.equal(0, status)
  local lines = {}
  for line in out:gmatch("[^\n]+") do lines[#lines + 1] = (line:gsub("\t", "  ")) end
  local at = 1
  for _, want in ipairs(expected) do
    while at <= #lines and lines[at] ~= want do at = at + 1 end
    assert(at <= #lines, ("README says %q but the output was:\n%s"):format(want, out))
    at = at + 1
  end
  return #expected
end

describe("README", function()
  it("every Lua block runs and prints what its --> comments say", function()
    local shown = 0
    for _, code in ipairs(readme_blocks()) do shown = shown + check_block(code) end
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
