-- runs: once
-- ipc-off: no
-- devices: any
-- needs: python3-numpy, python3-torch

-- docs/dlpack.md's recipe for NumPy and PyTorch works as written: its Python
-- blocks run as they are (a block whose paragraph says "Save this as
-- `NAME.py`" is that module, beside the others) under the interpreter and
-- library of spec/python_side.lua, and print what their "# -->" comments say.
local helpers = require "helpers"
local markdown = require "markdown"
local python = require "python_side"

local DOC = "docs/dlpack.md"

describe(DOC .. "'s recipe for NumPy and PyTorch", function()
  it("every Python block runs and prints what its # --> comments say", function()
    local why = python.missing("numpy", "python3-numpy") or python.missing("torch", "python3-torch")
    if why then return pending(why .. ": the recipe cannot run") end
    local dir = os.tmpname()
    os.remove(dir)
    assert(os.execute("mkdir " .. helpers.shell_quote(dir)))
    finally(function() os.execute("rm -rf " .. helpers.shell_quote(dir)) end)
    local modules, examples = 0, {}
    for _, block in ipairs(markdown.blocks(DOC, "python")) do
      local name = block.prose_before:match("[Ss]ave this as `([%w_]+%.py)`")
      if name then
        helpers.write_file(dir .. "/" .. name, block.code)
        modules = modules + 1
      else
        examples[#examples + 1] = block
      end
    end
    assert.are.equal(1, modules)
    assert.are.equal(2, #examples)
    local shown = 0
    for i, block in ipairs(examples) do
      local script = ("%s/example%d.py"):format(dir, i)
      helpers.write_file(script, block.code)
      local out, err = script .. ".out", script .. ".err"
      local _, _, status = os.execute("DLRUN_LIB=" .. helpers.shell_quote(python.library()) .. " "
                                      .. python.command() .. " " .. helpers.shell_quote(script)
                                      .. " >" .. out .. " 2>" .. err)
      local where = DOC .. ":" .. block.line
      local output = helpers.read_all(out)
      assert.are.equal("", helpers.read_all(err), where .. " wrote to stderr")
      assert.are.equal(0, status, where .. " failed:\n" .. output)
      local expected = markdown.shown(block.code, "#%s*%-%->%s")
      local missing = markdown.missing_shown(expected, output, where)
      assert(not missing, missing)
      shown = shown + #expected
    end
    assert.are.equal(8, shown)
  end)
end)
