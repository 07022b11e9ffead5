-- Shared helpers for the busted specs.
local assert = require "luassert"
local M = {}

M.exe = os.getenv("DLRUN_EXE") or "build/dlrun"

-- Call fn(...) and check it raises a dlrun error of class `name` whose message
-- equals `message` exactly (a string) or matches `{pattern = "..."}` or
-- contains `{contains = "..."}`. Returns the error value.
function M.expect_error(name, message, fn, ...)
  local ok, err = pcall(fn, ...)
  assert(not ok, "expected " .. name .. " but the call succeeded")
  assert(type(err) == "table" and err.name,
         "expected a dlrun error value, got " .. tostring(err))
  assert.are.equal(name, err.name)
  if type(message) == "string" then
    assert.are.equal(message, err.message)
  elseif type(message) == "table" and message.pattern then
    assert(err.message:match(message.pattern),
           ("message %q does not match %q"):format(err.message, message.pattern))
  elseif type(message) == "table" and message.contains then
    assert(err.message:find(message.contains, 1, true),
           ("message %q does not contain %q"):format(err.message, message.contains))
  end
  return err
end

local function shell_quote(s)
  return "'" .. tostring(s):gsub("'", "'\\''") .. "'"
end
M.shell_quote = shell_quote

-- Run the dlrun command with a list of arguments (and optional stdin text and
-- environment assignments such as {DLRUN_DEVICES = "sim:2"}). Returns
-- stdout, stderr, exit status.
function M.run(args, stdin, env)
  local out, err = os.tmpname(), os.tmpname()
  local cmd = {}
  for k, v in pairs(env or {}) do cmd[#cmd + 1] = k .. "=" .. shell_quote(v) end
  cmd[#cmd + 1] = shell_quote(M.exe)
  for _, a in ipairs(args) do cmd[#cmd + 1] = shell_quote(a) end
  local line = table.concat(cmd, " ") .. " >" .. out .. " 2>" .. err
  if stdin then
    local inp = os.tmpname()
    local f = assert(io.open(inp, "w")); f:write(stdin); f:close()
    line = line .. " <" .. inp
  end
  local _, _, status = os.execute(line)
  local function slurp(p)
    local f = assert(io.open(p)); local s = f:read("a"); f:close(); os.remove(p); return s
  end
  return slurp(out), slurp(err), status
end

-- Run a Lua chunk in a fresh dlrun process (its own runtime, so configure and
-- device options can differ from the suite's). Returns stdout, stderr, status.
function M.run_code(code, options, env)
  local args = {}
  for _, o in ipairs(options or {}) do args[#args + 1] = o end
  args[#args + 1] = "-e"
  args[#args + 1] = code
  return M.run(args, nil, env)
end

return M
