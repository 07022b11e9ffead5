-- The Python side of the specs that hand arrays to NumPy and PyTorch: which
-- interpreter, which libdlrun.so, and whether a module is there.
--
-- The library: DLRUN_LIB, else libdlrun.so next to DLRUN_EXE (<build>/dlrun),
-- else build/libdlrun.so. The interpreter: /usr/bin/python3 (the python3
-- first on PATH may lack numpy); DLRUN_PYTHON overrides it.
local helpers = require "helpers"

local M = {}

M.PYTHON = os.getenv("DLRUN_PYTHON") or "/usr/bin/python3"

function M.library()
  local lib = os.getenv("DLRUN_LIB")
  if lib and lib ~= "" then return lib end
  local exe = os.getenv("DLRUN_EXE")
  if exe and exe ~= "" then
    local dir = exe:match("^(.*)/[^/]*$") or "."
    return dir .. "/libdlrun.so"
  end
  return "build/libdlrun.so"
end

local function exists(path)
  local f = io.open(path, "rb")
  if f then f:close() end
  return f ~= nil
end
M.exists = exists

-- Why `module` cannot be imported by the interpreter (naming the Debian
-- package that has it), or nil when it can.
function M.missing(module, package)
  if not exists(M.PYTHON) then
    return M.PYTHON .. " is missing (scripts/deps.sh installs " .. package .. ")"
  end
  local ok = os.execute(helpers.shell_quote(M.PYTHON) .. " -c " ..
                        helpers.shell_quote("import " .. module) .. " >/dev/null 2>&1")
  if not ok then
    return module .. " is missing for " .. M.PYTHON .. " (scripts/deps.sh installs " .. package .. ")"
  end
  return nil
end

-- The shell line that runs the interpreter on the library's side: its
-- sanitizer runtimes preloaded when it was built with them.
function M.command()
  return helpers.sanitizer_prefix(M.library()) .. helpers.shell_quote(M.PYTHON)
end

return M
