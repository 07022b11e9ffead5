-- runs: once
-- ipc-off: no
-- devices: any
-- needs: mpi, python3-numpy

-- Every error message the docs quote is one dlrun raises. A quote is an
-- inline code span of README.md or docs/*.md naming an error class
-- (`ValueError: ...`, `RuntimeError: export failed on process 1: TypeError: ...`);
-- the man page quotes class names only, and a quote there fails until this
-- spec reads troff. Each quote must match, whole, a message that one of the
-- cases below makes dlrun raise: `...` and placeholders such as <message>
-- stand for any text, and nothing else may be left out, so a quote cannot
-- stop early unless it says so. A message that changes fails here until the
-- docs follow; a new quote needs a case (and a case that no quote matches
-- any more is reported, so the table stays the docs' own).
--
-- The cases run in groups, each in a fresh process on the devices it names
-- (not the suite's), so the spec runs once, in the default pass: dlrun on
-- one process, a job of 4 processes under mpirun, a job with a late
-- process, OpenCL (pending where it is not here), NumPy and dlrun's C API
-- through ctypes (pending without python3-numpy) and the dlrun command
-- itself. About 3 seconds in all.
local helpers = require "helpers"
local markdown = require "markdown"
local python = require "python_side"

-- ---- the quotes ----

local DOCS = {"README.md"}
for path in io.popen("ls docs/*.md"):lines() do DOCS[#DOCS + 1] = path end
local MAN = "docs/dlrun.1.in"

-- A quoted message: a code span naming an error class followed by ": ".
local function is_message(text) return text:find("%u%a*Error: ") ~= nil end

local function quotes()
  local list = {}
  for _, path in ipairs(DOCS) do
    for _, span in ipairs(markdown.code_spans(path)) do
      if is_message(span.text) then
        list[#list + 1] = {text = span.text, where = path .. ":" .. span.line}
      end
    end
  end
  return list
end

-- The quote as a Lua pattern over the whole message: "..." and <placeholder>
-- match any text, everything else itself.
local function quote_pattern(text)
  local parts, at = {}, 1
  while true do
    local s, e = text:find("%.%.%.", at)
    local ps, pe = text:find("<%a[%w_]*>", at)
    if ps and (not s or ps < s) then s, e = ps, pe end
    if not s then break end
    parts[#parts + 1] = text:sub(at, s - 1):gsub("[%^%$%(%)%%%.%[%]%*%+%-%?]", "%%%0")
    parts[#parts + 1] = ".-"
    at = e + 1
  end
  parts[#parts + 1] = text:sub(at):gsub("[%^%$%(%)%%%.%[%]%*%+%-%?]", "%%%0")
  return "^" .. table.concat(parts) .. "$"
end

-- ---- the cases ----

-- Each case's code runs in a dlrun process of its group with `dl` loaded and
-- two helpers: raised(f, ...) calls f and gives the error it raised (a
-- string saying so when it raised none); quote(e) records the messages
-- that quotes may match: an error value's tostring and its message alone,
-- or a string. Cases name what the docs describe; their order is the group's.
local ONE = {
  {"an absent platform", [[quote(raised(dl.devices, "gpu"))]]},
  {"a multi-device array's __dlpack__", [[
local x = dl.zeros({16}, "float32", dl.NamedSharding(dl.make_mesh({8}, {"x"}), dl.P("x")))
quote(raised(x.__dlpack__, x))
quote(raised(x.__dlpack_device__, x))]]},
  {"a max_version below (0, 5)", [[
local x = dl.zeros({4}, "float32")
quote(raised(x.__dlpack__, x, {max_version = {0, 4}}))]]},
  {"a float8 export to a consumer that cannot know its code", [[
local x = dl.zeros({4}, "float8_e4m3fn")
quote(raised(x.__dlpack__, x))
quote(raised(x.__dlpack__, x, {max_version = {1, 0}}))]]},
  {"dl_device on the host with copy = false", [[
local x = dl.zeros({4}, "float32")
quote(raised(x.__dlpack__, x, {dl_device = {1, 0}, copy = false}))]]},
  {"dl_device of a type dlrun has no device for", [[
local x = dl.zeros({4}, "float32")
quote(raised(x.__dlpack__, x, {dl_device = {2, 0}}))]]},
  {"dl_device with an id dlrun has not", [[
local x = dl.zeros({4}, "float32")
quote(raised(x.__dlpack__, x, {dl_device = {12, 99}}))]]},
  {"from_dlpack of what has no __dlpack__", [[quote(raised(dl.from_dlpack, 42))]]},
  {"from_dlpack into another device with copy = false", [[
local x = dl.zeros({4}, "float32", dl.devices()[2])
quote(raised(dl.from_dlpack, x, {device = dl.devices()[1], copy = false}))]]},
  {"from_dlpack onto a multi-device sharding", [[
local x = dl.zeros({16}, "float32")
quote(raised(dl.from_dlpack, x, {device = dl.NamedSharding(dl.make_mesh({8}, {"x"}), dl.P("x"))}))]]},
  {"replica not on opts.device", [[
local d = dl.devices()
local x = dl.zeros({8}, "float32", dl.NamedSharding(dl.Mesh({d[5], d[6], d[7], d[8]}, "x"), dl.P()))
quote(raised(dl.export, x, {strategy = "replica", device = dl.devices()[1]}))]]},
  {"item of a size-6 array", [[quote(raised(function() return dl.zeros({6}):item() end))]]},
  {"a deleted array", [[
local x = dl.zeros({3}, "float32")
x:delete()
quote(raised(x.tolist, x))]]},
  {"a misspelt field of an Array", [[
local x = dl.zeros({3}, "float32")
quote(raised(function() return x.shpae end))]]},
  {"an unknown field of an Array", [[
local x = dl.zeros({3}, "float32")
quote(raised(function() return x.foo end))]]},
  {"trace_stop with no trace on", [[quote(raised(dl.trace_stop))]]},
  {"trace_start into a missing folder", [[quote(raised(dl.trace_start, "/nonexistent-dir/t.json"))]]},
  {"trace_start with a number", [[quote(raised(dl.trace_start, 1))]]},
  {"trace_start with a NUL in the path", [[quote(raised(dl.trace_start, "a\0b.json"))]]},
  {"data with a key other than 1..n", [[quote(raised(dl.array, {a = 1}))]]},
  {"a complex element with another key", [[quote(raised(dl.array, {{re = 1, im = 2, x = 3}}))]]},
  {"a mesh of the wrong depth", [[quote(raised(dl.Mesh, dl.devices(), {"x", "y"}))]]},
  {"a mesh with a device twice", [[
local d = dl.devices()
quote(raised(dl.Mesh, {d[1], d[1]}, {"x"}))]]},
  {"make_mesh over too few devices", [[quote(raised(dl.make_mesh, {16}, {"x"}))]]},
  {"make_mesh with a size below 1", [[quote(raised(dl.make_mesh, {2, 0}, {"x", "y"}))]]},
  {"a list inside a list in P", [[quote(raised(dl.P, {{"x"}}))]]},
  {"a spec longer than the rank", [[
local s = dl.NamedSharding(dl.make_mesh({2, 4}, {"x", "y"}), dl.P("x", "y"))
quote(raised(dl.zeros, {8}, "float32", s))]]},
  {"a dimension the partitioning does not divide", [[
local s = dl.NamedSharding(dl.make_mesh({8}, {"x"}), dl.P("x"))
quote(raised(dl.zeros, {10}, "float32", s))]]},
  {"make_array_from_callback with different dtypes", [[
local s = dl.NamedSharding(dl.make_mesh({2}, {"x"}, {dl.devices()[1], dl.devices()[2]}), dl.P("x"))
quote(raised(dl.make_array_from_callback, {2}, s, function(index)
  return index[1][1] == 1 and dl.array({1}, "int32") or dl.array({1}, "float32")
end))]]},
  {"targets that are not a tree prefix", [[
quote(raised(dl.device_put, {w = 1, opt = 2}, {w = dl.devices()[1]}))]]},
  {"may_alias and donate both true", [[
local x = dl.zeros({4})
quote(raised(dl.device_put, x, dl.devices()[2], {may_alias = true, donate = true}))]]},
  {"a tree with a function key", [[quote(raised(dl.device_put, {[print] = 1}))]]},
  {"assert_equal of a NaN, alone", [[quote(raised(dl.assert_equal, dl.array({0, 0 / 0})))]]},
}

-- A job of 4 processes of 2 sim devices each: process p holds devices 2p
-- and 2p + 1. Every process runs every case, in order, as a job must.
local JOB = [[
local p = dl.process_index()
local d = dl.devices()
local rows = dl.NamedSharding(dl.make_mesh({8}, {"x"}), dl.P("x"))
local x = dl.arange(0, 8, 1, "float32", rows)          -- 1 value on each device, all processes'
]]
local FOUR = {
  {"another process's device memory", [[
if p == 0 then quote(raised(d[3].memory_stats, d[3])) end]]},
  {"each process puts onto a device of its own", [[
quote(raised(dl.device_put, x, dl.local_devices()[1]))]]},
  {"a host allocation failing on process 1 inside process_allgather", [[
local v = dl.array({p, 10}, "float32")
if p == 1 then dl._debug.fail_alloc("host", 1) end
local e = raised(dl.process_allgather, v)
if p == 1 then dl._debug.fail_alloc("host", 0) end
quote(e)]]},
  {"sync_global_devices with different names", [[
quote(raised(dl.sync_global_devices, p == 0 and "a" or "b"))]]},
  {"process_allgather of a global array, not tiled", [[
quote(raised(dl.process_allgather, x))]]},
  {"broadcast_one_to_all with two sources", [[
quote(raised(dl.broadcast_one_to_all, dl.array({p}), p == 0 or p == 2))]]},
  {"assert_equal with processes 1 and 3 differing", [[
quote(raised(dl.assert_equal, dl.array({0, (p == 1 or p == 3) and 5 or 1}), "weights drifted."))]]},
  {"a bad argument of process_allgather on process 1", [[
quote(raised(dl.process_allgather, dl.array({p}), p == 1 and "yes" or true))]]},
  {"reading an array that spans processes", [[
quote(raised(x.tolist, x))]]},
  {"make_array_from_single_device_arrays with another process's array", [[
local mine = {}
for i, dev in ipairs(dl.local_devices()) do mine[i] = dl.zeros({1}, "float32", dev) end
if p == 0 then mine[1] = dl.zeros({1}, "float32", d[3]) end
quote(raised(dl.make_array_from_single_device_arrays, {8}, rows, mine))]]},
  {"allgather onto another process's device", [[
quote(raised(dl.export, x, {strategy = "allgather", device = p == 0 and d[3] or dl.local_devices()[1]}))]]},
  {"exporting an array wholly on process 1's devices", [[
local y = dl.zeros({2}, "float32", dl.NamedSharding(dl.Mesh({d[3], d[4]}, "x"), dl.P("x")))
if p == 0 then quote(raised(dl.export, y)) end
if p == 1 then dl.export(y) end]]},
  {"an unknown export option on process 1", [[
quote(raised(dl.export, x, p == 1 and {strategy = "gather", bogus = 1} or {strategy = "gather"}))]]},
  {"different export strategies", [[
quote(raised(dl.export, x, {strategy = p == 1 and "allgather" or "gather"}))]]},
  {"a gather onto process 1's device with copy = false", [[
quote(raised(dl.export, x, {strategy = "gather", device = d[3], copy = false}))]]},
  {"from_partitioned with no partition and no data here", [[
local y = dl.arange(0, 4, 1, "float32", dl.NamedSharding(dl.Mesh({d[1], d[2]}, "x"), dl.P("x")))
quote(raised(dl.from_partitioned, y:__partitioned__()))]]},
  {"from_partitioned with a sharding, refused on process 1", [[
local desc = x:__partitioned__()
if p == 1 then
  desc.shape = {5}
  desc.partition_tiling = {2}
  desc.partitions = {{position = {0}, start = {0}, shape = {2}}, {position = {1}, start = {2}, shape = {3}}}
end
quote(raised(dl.from_partitioned, desc, rows))]]},
  -- last: process 1 ends its script while the others are in a collective
  {"the end of the script on process 1 while the others put", [[
if p ~= 1 then quote(raised(dl.device_put, x, dl.NamedSharding(rows.mesh, dl.P()))) end]]},
}

-- Python through ctypes (spec/interop/dlrun_ctypes.py, its declarations):
-- what NumPy says of a dlrun export, and C imports Lua cannot make. Each
-- case is the body of a function given quote(text); `rt` is a runtime of
-- sim:1 and `host` a sharding on its host device.
local PY_PRELUDE = [[
import sys
sys.path.insert(0, "spec/interop")
from dlrun_ctypes import *  # the library: argv[1]
import numpy as np


def say(i, text):
    sys.stdout.write("\x1e%d\t%s\n" % (i, str(text).replace("\\", "\\\\").replace("\n", "\\n")))


def run_case(i, fn):
    try:
        fn(lambda text: say(i, text))
    except Exception as e:  # noqa: BLE001 - reported as the case's text
        say(i, "(the case failed: %s: %s)" % (type(e).__name__, e))
    sys.stdout.flush()


rt = P()
check(dlrun_runtime_create(C.byref(dlrun_config(devices=b"sim:1")), C.byref(rt)), "runtime")
host = P()
check(dlrun_single_device_sharding_create(dlrun_host_device(rt), DLRUN_MEM_DEVICE, C.byref(host)),
      "sharding")
]]
local PYTHON_CASES = {
  {"NumPy reading a bool export", [[
arr = from_host(host, "bool", np.array([True, False]))
try:
    np.from_dlpack(Producer(export_legacy(arr)))
except RuntimeError as e:
    quote("RuntimeError: %s" % e)]]},
  {"host memory labelled as a sim device's (kDLExtDev, 0)", [[
buf = np.zeros(6, dtype=np.float32)
m = DLManagedTensor()
m.dl_tensor = DLTensor(data=buf.ctypes.data, device=DLDevice(12, 0), ndim=1,
                       dtype=DLDataType(2, 32, 1), shape=(C.c_int64 * 1)(6))
st = dlrun_import(rt, C.byref(m), None, None, C.byref(P()), None)
quote("%s: %s" % (dlrun_status_name(st).decode(), dlrun_last_error().decode()))]]},
}

-- Why opencl:1 is not here (no module, no driver), from --list-devices; nil when it is.
local function opencl_missing()
  local out = helpers.run({"--list-devices"}, nil, {POCL_DEVICES = "pthread"})
  local line = ("\n" .. out):match("\nopencl +([^\n]*)") or "not listed"
  if line:match("^available: %d+ devices?$") then return nil end
  return "needs an OpenCL device: opencl " .. line
end

-- The driver double of the tests, for the CUDA group; why it cannot run.
local CUDA_DOUBLE = (helpers.exe:match("^(.*)/[^/]*$") or "build") .. "/tests/cuda-double/libcuda.so.1"
local function cuda_missing()
  local f = io.open(CUDA_DOUBLE)
  if f then f:close() return nil end
  return "needs the CUDA driver double (" .. CUDA_DOUBLE .. ")"
end

local GROUPS = {
  {name = "one process on sim:8", args = {"--devices", "sim:8"}, cases = ONE},
  {name = "one process on sim:1 of 1MiB", args = {"--devices", "sim:1", "--device-memory", "1MiB"},
   cases = {
     {"out of memory", [[quote(raised(dl.zeros, {1048576}, "float32"))]]},
   }},
  {name = "one process on opencl:1", args = {"--devices", "opencl:1"},
   env = {POCL_DEVICES = "pthread"}, missing = opencl_missing, covers = "RuntimeError: OpenclDevice",
   cases = {
     {"a copy failing on the device", [[
local d = dl.devices()[1]
dl._debug.inject_failure(d, "copy", 1)
quote(raised(function() return dl.device_put(dl.array({1, 2}, "float32"), d):block_until_ready() end))]]},
   }},
  {name = "one process on cuda:2,sim:1 (the driver double)", args = {"--devices", "cuda:2,sim:1"},
   env = {DLRUN_CUDA_LIBRARY = CUDA_DOUBLE}, missing = cuda_missing,
   covers = "ValueError: __cuda_array_interface__", cases = {
     {"stream=0 on a CUDA array", [[
local a = dl.arange(3, "float32", dl.devices("cuda")[1])
quote(raised(a.__dlpack__, a, {stream = 0}))]]},
     {"__cuda_array_interface__ of a sharded array", [[
local m = dl.make_mesh({2}, {"x"}, dl.devices("cuda"))
local a = dl.device_put(dl.arange(4, "float32"), dl.NamedSharding(m, dl.P("x")))
quote(raised(a.__cuda_array_interface__, a))]]},
     {"__cuda_array_interface__ of a sim array", [[
local a = dl.arange(3, "float32", dl.devices("sim")[1])
quote(raised(a.__cuda_array_interface__, a))]]},
     {"__cuda_array_interface__ of a pinned_host array", [[
local a = dl.zeros({2}, "float32", dl.SingleDeviceSharding(dl.devices("cuda")[2], "pinned_host"))
quote(raised(a.__cuda_array_interface__, a))]]},
     {"stream=7 on a CUDA array", [[
local a = dl.arange(3, "float32", dl.devices("cuda")[1])
quote(raised(a.__dlpack__, a, {stream = 7}))]]},
     {"a stream the driver does not know", [[
local a = dl.arange(3, "float32", dl.devices("cuda")[1])
quote(raised(a.__dlpack__, a, {stream = 4096}))]]},
   }},
  {name = "one process on cuda:1, a sticky error (the driver double)", args = {"--devices", "cuda:1"},
   env = {DLRUN_CUDA_LIBRARY = CUDA_DOUBLE, CUDA_DOUBLE_FAIL = "cuLaunchKernel:1:700:sticky"},
   missing = cuda_missing, covers = "RuntimeError: CudaDevice(id=0) is unusable", cases = {
     {"a fill after a sticky error", [[
local d = dl.devices("cuda")[1]
pcall(function() dl.full({2}, 1.5, "float64", d):block_until_ready() end)
quote(raised(dl.zeros, {2}, "float32", d))]]},
   }},
  {name = "one process on cuda:2 without VMM, cuMemAlloc failing (the driver double)",
   args = {"--devices", "cuda:2"},
   env = {DLRUN_CUDA_LIBRARY = CUDA_DOUBLE, CUDA_DOUBLE_NO_VMM = "1",
          CUDA_DOUBLE_FAIL = "cuMemAlloc:1:2"},
   missing = cuda_missing, covers = "ResourceExhaustedError: CudaDevice(id=0): cuMemAlloc", cases = {
     {"a segment the driver cannot allocate", [[
quote(raised(dl.zeros, {4}, "float32", dl.devices("cuda")[1]))]]},
   }},
  {name = "4 processes of sim:2", procs = 4, args = "--devices sim:2", prelude = JOB, cases = FOUR},
  {name = "2 processes, process 1 late", procs = 2, env = {DLRUN_DISTRIBUTED_TIMEOUT = "0.5"},
   cases = {
     {"a barrier that process 1 reaches late", [[
if dl.process_index() == 1 then os.execute("sleep 2") return end
quote(raised(dl.sync_global_devices, "a"))]]},
   }},
  {name = "Python with NumPy", python = "numpy", package = "python3-numpy",
   covers = "RuntimeError: Unsupported dtype in DLTensor", cases = PYTHON_CASES},
  -- cases run here: a function returning the texts
  {name = "the dlrun command", here = true, cases = {
    {"a bad DLRUN_DEVICES", function()
      local _, err = helpers.run({"-e", ""}, nil, {DLRUN_DEVICES = "bogus"})
      return {err:match("^[^\n]*")}
    end},
    {"a DLRUN_TRACE file that cannot be written", function()
      local _, err = helpers.run({"-e", ""}, nil, {DLRUN_TRACE = "/nonexistent-dir/t.json"})
      local line = err:match("^[^\n]*")
      return {line, (line:gsub("^dlrun: ", ""))}
    end},
    {"a second trace_start, in a folder of its own", function()
      local dir = helpers.capture("mktemp -d"):gsub("\n$", "")
      local exe = helpers.exe:sub(1, 1) == "/" and helpers.exe
                  or helpers.capture("pwd"):gsub("\n$", "") .. "/" .. helpers.exe
      local out = helpers.capture(("cd %s && %s -e %s 2>&1"):format(helpers.shell_quote(dir),
        helpers.shell_quote(exe), helpers.shell_quote([[
local dl = require "dlrun"
dl.trace_start("t.json")
print(select(2, pcall(dl.trace_start, "t.json")))
dl.trace_stop()]])))
      os.execute("rm -rf " .. helpers.shell_quote(dir))
      return {out:match("^[^\n]*")}
    end},
    {"the running script as the trace file (trace_start, then DLRUN_TRACE under lua5.4)",
     function()
      local dir = helpers.capture("mktemp -d"):gsub("\n$", "")
      local exe = helpers.exe:sub(1, 1) == "/" and helpers.exe
                  or helpers.capture("pwd"):gsub("\n$", "") .. "/" .. helpers.exe
      local root = helpers.capture("pwd"):gsub("\n$", "")
      local san = "" -- an instrumented module loads into lua5.4 with its runtime
      for k, v in pairs(helpers.sanitizer_env(exe:match("^(.*)/") .. "/lua/dlrun/core.so")) do
        san = san .. k .. "=" .. helpers.shell_quote(v) .. " "
      end
      local f = assert(io.open(dir .. "/job.lua", "w"))
      f:write([[
local ok, e = pcall(require, "dlrun")
if ok then e = select(2, pcall(e.trace_start, arg[0])) end
print(e.name .. ": " .. e.message)]])
      f:close()
      local function run(cmd)
        return helpers.capture(("cd %s && %s 2>&1"):format(helpers.shell_quote(dir), cmd))
                      :match("^[^\n]*")
      end
      local texts = {run(helpers.shell_quote(exe) .. " job.lua"),
                     run((san .. "LUA_PATH=%s LUA_CPATH=%s DLRUN_TRACE=job.lua lua5.4 job.lua")
                         :format(helpers.shell_quote(root .. "/lua/?.lua;" .. root
                                                     .. "/lua/?/init.lua;;"),
                                 helpers.shell_quote(exe:match("^(.*)/") .. "/lua/?.so;;")))}
      os.execute("rm -rf " .. helpers.shell_quote(dir))
      return texts
    end},
  }},
}

-- ---- running them ----

local PRELUDE = [[
local dl = require "dlrun"
local function quote_line(case, text)
  io.write("\30", case, "\t", (tostring(text):gsub("\\", "\\\\"):gsub("\n", "\\n")), "\n")
end
local case_now
function quote(e)
  if type(e) == "table" and e.message then quote_line(case_now, e.message) end
  quote_line(case_now, tostring(e))
end
function raised(f, ...)
  local ok, e = pcall(f, ...)
  if ok then return "(no error raised)" end
  return e
end
function run_case(i, fn)
  case_now = i
  local ok, e = pcall(fn)
  if not ok then quote_line(i, "(the case failed: " .. tostring(e) .. ")") end
  io.stdout:flush()
end
]]

local function lua_script(group)
  local parts = {PRELUDE, "do\n", group.prelude or "", "\n"}
  for i, case in ipairs(group.cases) do
    parts[#parts + 1] = ("run_case(%d, function()\n%s\nend)\n"):format(i, case[2])
  end
  parts[#parts + 1] = "end\n"
  return table.concat(parts)
end

local function python_script(group)
  local parts = {PY_PRELUDE}
  for i, case in ipairs(group.cases) do
    parts[#parts + 1] = ("\n\ndef case_%d(quote):\n    %s\n\n\nrun_case(%d, case_%d)\n")
                        :format(i, case[2]:gsub("\n", "\n    "), i, i)
  end
  return table.concat(parts)
end

-- Runs a group's cases: the output ("\30<case>\t<text>" lines), its
-- stderr and exit status.
local function run_group(group)
  if group.procs then
    return helpers.mpirun(group.procs, lua_script(group),
                          {args = group.args, env = group.env, limit = 60})
  elseif group.python then
    local script = os.tmpname()
    helpers.write_file(script, python_script(group))
    local out, err = os.tmpname(), os.tmpname()
    local _, _, status = os.execute(python.command() .. " " .. script .. " "
                                    .. helpers.shell_quote(python.library()) .. " >" .. out
                                    .. " 2>" .. err)
    os.remove(script)
    local o, e = helpers.read_all(out), helpers.read_all(err)
    os.remove(out)
    os.remove(err)
    return o, e, status
  end
  local args = {}
  for _, a in ipairs(group.args) do args[#args + 1] = a end
  args[#args + 1] = "-"
  local env = {DLRUN_DEVICES = "", DLRUN_DEVICE_MEMORY = ""}
  for k, v in pairs(group.env or {}) do env[k] = v end
  return helpers.run(args, lua_script(group), env)
end

-- Runs every group: a list of {case =, group =, texts = {...}, trouble =},
-- and the groups that cannot run here ({covers =, why =}).
local function run_all()
  local results, absent = {}, {}
  for _, group in ipairs(GROUPS) do
    local why = group.missing and group.missing()
                or group.python and python.missing(group.python, group.package)
    if why then
      absent[#absent + 1] = {covers = group.covers, why = group.name .. ": " .. why}
    elseif group.here then
      for _, case in ipairs(group.cases) do
        results[#results + 1] = {case = case[1], group = group.name, texts = case[2]()}
      end
    else
      local out, err, status = run_group(group)
      local texts = {}
      for i, line in ("\n" .. out):gmatch("\n\30(%d+)\t([^\n]*)") do
        local t = texts[tonumber(i)] or {}
        texts[tonumber(i)] = t
        t[#t + 1] = line:gsub("\\(.)", {n = "\n", ["\\"] = "\\"})
      end
      local trouble = (status ~= 0 or err ~= "")
                      and ("(the group exited %s: %s)"):format(tostring(status), err) or nil
      for i, case in ipairs(group.cases) do
        results[#results + 1] = {case = case[1], group = group.name, texts = texts[i] or {},
                                 trouble = trouble}
      end
    end
  end
  return results, absent
end

-- The message closest to a quote (the longest common start), for a failure.
local function closest(text, results)
  local best, best_n, best_case = nil, -1, nil
  for _, r in ipairs(results) do
    for _, t in ipairs(r.texts) do
      local n = 0
      while n < #t and n < #text and t:byte(n + 1) == text:byte(n + 1) do n = n + 1 end
      if n > best_n then best, best_n, best_case = t, n, r.case end
    end
  end
  return best, best_n, best_case
end

helpers.describe_on("sim", "its cases choose their own devices; checked once, in the default pass",
                    "messages the docs quote", function()
  local results, absent
  local function all()
    if not results then results, absent = run_all() end
    return results
  end

  it("the man page quotes no message (only class names)", function()
    for n, line in ipairs(markdown.lines(MAN)) do
      assert(not is_message((line:gsub("\\%-", "-"))),
             ("%s:%d quotes a message: teach spec/docs/doc_messages_spec.lua to read troff")
               :format(MAN, n))
    end
  end)

  for _, q in ipairs(quotes()) do
    it(q.where .. ": `" .. q.text .. "`", function()
      local pattern = quote_pattern(q.text)
      for _, r in ipairs(all()) do
        for _, t in ipairs(r.texts) do
          if t:match(pattern) then return end
        end
      end
      for _, a in ipairs(absent) do
        if q.text:sub(1, #a.covers) == a.covers then return pending(a.why) end
      end
      local best, n, case = closest(q.text, all())
      assert(false, ("%s quotes a message that no case raises:\n  `%s`\n%s"):format(q.where, q.text,
             best and ("the closest, from the case %q, differs from character %d on:\n  `%s`")
                        :format(case, n + 1, best)
               or "no case raised anything"))
    end)
  end

  it("every case raises what some quote quotes", function()
    local patterns = {}
    for _, q in ipairs(quotes()) do patterns[#patterns + 1] = quote_pattern(q.text) end
    local stale = {}
    for _, r in ipairs(all()) do
      local used = false
      for _, t in ipairs(r.texts) do
        for _, p in ipairs(patterns) do used = used or t:match(p) ~= nil end
      end
      if not used then
        stale[#stale + 1] = ("case %q (%s) raised %s%s"):format(r.case, r.group,
          #r.texts > 0 and "`" .. table.concat(r.texts, "` and `") .. "`" or "nothing",
          r.trouble and " " .. r.trouble or "")
      end
    end
    assert(#stale == 0, "no doc quotes these (a message that changed, or a stale case):\n"
                        .. table.concat(stale, "\n"))
  end)
end)
