-- The README's Lua tour runs and prints what its comments say.
local helpers = require "helpers"

local function readme_tour()
  local f = assert(io.open("README.md"))
  local text = f:read("a")
  f:close()
  return assert(text:match("```lua\n(.-)```"), "no Lua block in README.md")
end

describe("README", function()
  it("Lua tour prints what its --> comments say", function()
    local code = readme_tour()
    local expected = {}
    for line in code:gmatch("[^\n]+") do
      local shown = line:match("%-%->%s(.*)$")
      if shown then expected[#expected + 1] = shown end
    end
    local out, err, status = helpers.run({"-"}, code)
    assert.are.equal("", err)
    assert.is_true(status == 0)
    local lines = {}
    for line in out:gmatch("[^\n]+") do lines[#lines + 1] = (line:gsub("\t", "  ")) end
    -- every commented output line appears in order in the real output
    local at = 1
    for _, want in ipairs(expected) do
      while at <= #lines and lines[at] ~= want do at = at + 1 end
      assert(at <= #lines, ("README says %q but the output was:\n%s"):format(want, out))
      at = at + 1
    end
    assert.is_true(#expected >= 6)
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
