-- runs: every-platform
-- ipc-off: no
-- devices: any
-- needs: python3-numpy, python3-torch

-- DLPack interop with real consumers and producers: NumPy (Debian's
-- python3-numpy) and PyTorch (python3-torch), driven through ctypes and
-- libdlrun.so by spec/interop/numpy_interop.py and torch_interop.py (their
-- shared declarations: spec/interop/dlrun_ctypes.py). Each script prints
-- "ok - ..." / "not ok - ..." lines and "<name> interop: N passed, N failed".
-- A library that is not installed fails its spec, naming the package (make test installs it).
--
-- The interpreter and the library: spec/python_side.lua.

local helpers = require "spec.helpers"
local python = require "python_side"

local PYTHON = python.PYTHON
local library = python.library

local function quote(s)
  return "'" .. tostring(s):gsub("'", [['\'']]) .. "'"
end

local read_all = helpers.read_all

local exists = python.exists

-- Run a shell command line; returns its output (stdout and stderr) and exit
-- status (128 + n for a signal).
local function run(line)
  local out = os.tmpname()
  local ok, how, code = os.execute(line .. " >" .. out .. " 2>&1")
  local text = read_all(out)
  os.remove(out)
  if how == "signal" then code = 128 + code end
  return text, ok and 0 or code
end

-- One interop script: every check must pass, at least `least` of them. A
-- missing Python module fails, naming the package (make test installs it).
local function interop(module, package, script, summary_name, least)
  return function()
    local why = python.missing(module, package)
    assert(not why, why and why .. ": its interop checks cannot run")
    local lib = library()
    assert(exists(lib), lib .. " is missing: build it with make")

    local output, status = run(helpers.sanitizer_prefix(lib) .. quote(PYTHON) .. " " ..
                               quote(script) .. " " .. quote(lib))
    local failures = {}
    for line in output:gmatch("[^\n]+") do
      if line:match("^not ok") then failures[#failures + 1] = line end
    end
    local function tail(text)
      return #text > 1500 and ("..." .. text:sub(-1500)) or text
    end
    local summary = {}
    for p, f in output:gmatch(summary_name .. " interop: (%d+) passed, (%d+) failed") do
      summary = {passed = tonumber(p), failed = tonumber(f)}
    end
    assert(summary.passed, ("no summary line: crashed? (exit status %d)\n%s\nlast output:\n%s")
           :format(status, table.concat(failures, "\n"), tail(output)))
    assert(summary.failed == 0 and #failures == 0,
           ("%d checks failed:\n%s"):format(summary.failed, table.concat(failures, "\n")))
    assert(summary.passed >= least, ("only %d checks passed"):format(summary.passed))
    assert(status == 0, ("exit status %d; output:\n%s"):format(status, tail(output)))
  end
end

describe("DLPack interop with NumPy", function()
  it("passes every check of spec/interop/numpy_interop.py",
     interop("numpy", "python3-numpy", "spec/interop/numpy_interop.py", "python", 100))
end)

describe("DLPack interop with PyTorch", function()
  it("passes every check of spec/interop/torch_interop.py",
     interop("torch", "python3-torch", "spec/interop/torch_interop.py", "torch", 100))
end)
