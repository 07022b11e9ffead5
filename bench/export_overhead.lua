-- Benchmark 4: the cost of a DLPack export from Lua.
--
--   dlrun bench/export_overhead.lua [--quick]
--
-- Per call: `dl.to_dlpack(x, SHARE)` (a legacy export of the array's own
-- memory: without legacy_sharing = "share" a legacy export is a copy) of a
-- single-device array plus the collection
-- of the Capsule it returns (whose __gc runs the export's deleter), against
-- creating and collecting an empty object with a finalizer from Lua.
--
-- The reference: `setmetatable({}, {__gc = rawlen})`, an empty table whose
-- finalizer is a C function that does nothing useful. Lua 5.4 has no
-- `newproxy`, and pure Lua cannot make a userdata except through io (file
-- handles: a system call each, which would flatter dlrun), so an empty table
-- with a C finalizer is the honest stand-in: like the Capsule it is one GC
-- object made by one C call, marked for finalization by its metatable, and
-- finalized by a C function. A second reference with a Lua function as the
-- finalizer is reported for information.
--
-- Each loop makes N objects and then runs a full collection, so every object
-- made was also finalized; the time is divided by N. Loops of the two kinds
-- alternate, after one warm-up each; the figure is the median. Time is
-- os.clock() (process CPU time, microsecond resolution: dlrun's worker
-- threads are idle here, so it is the calling thread's time).
--
-- Also checked: the exports copy nothing (dl.transfer_stats bytes_moved and
-- local_bytes unchanged over all loops) and every deleter ran
-- (dl.live_exports back to where it was).
--
-- Prints one JSON object on stdout; exits 1 when a check fails.

local dl = require "dlrun"

local quick = false
for _, a in ipairs(arg or {}) do
  if a == "--quick" then quick = true
  else
    io.stderr:write("usage: dlrun bench/export_overhead.lua [--quick]\n")
    os.exit(2)
  end
end

local N = quick and 20000 or 200000
local RUNS = quick and 5 or 9
local clock = os.clock

local x = dl.full({256, 256}, 1.5, "float32", dl.devices()[1])
x:block_until_ready()

local SHARE = {legacy_sharing = "share"}
local function export_loop(n)
  local to_dlpack = dl.to_dlpack
  for _ = 1, n do
    local c = to_dlpack(x, SHARE)
  end
end

local c_gc = {__gc = rawlen}
local function ref_loop(n)
  local smt = setmetatable
  for _ = 1, n do
    local o = smt({}, c_gc)
  end
end

local lua_gc = {__gc = function() end}
local function ref_lua_loop(n)
  local smt = setmetatable
  for _ = 1, n do
    local o = smt({}, lua_gc)
  end
end

local function timed(loop, n)
  collectgarbage("collect")
  local t0 = clock()
  loop(n)
  collectgarbage("collect") -- the last objects made are collected too
  return clock() - t0
end

local function median(v)
  local s = {}
  for i, t in ipairs(v) do s[i] = t end
  table.sort(s)
  local n = #s
  if n % 2 == 1 then return s[(n + 1) // 2] end
  return (s[n // 2] + s[n // 2 + 1]) / 2
end

local before = dl.transfer_stats()
local live_before = dl.live_exports()

timed(export_loop, N // 10) -- warm-up
timed(ref_loop, N // 10)
timed(ref_lua_loop, N // 10)
local dl_t, ref_t, ref_lua_t = {}, {}, {}
for r = 1, RUNS do
  dl_t[r] = timed(export_loop, N) / N
  ref_t[r] = timed(ref_loop, N) / N
  ref_lua_t[r] = timed(ref_lua_loop, N) / N
end

local after = dl.transfer_stats()
local live_after = dl.live_exports()
local copied = (after.bytes_moved - before.bytes_moved) + (after.local_bytes - before.local_bytes)

-- One export outside the loops: the capsule describes x, zero-copy.
local cap = dl.to_dlpack(x, SHARE)
local shape_ok = cap.name == "dltensor" and cap.shape[1] == 256 and cap.shape[2] == 256
cap = nil
collectgarbage("collect")

local ok = copied == 0 and live_after == live_before and shape_ok
if copied ~= 0 then io.stderr:write("export_overhead: exports copied ", copied, " bytes\n") end
if live_after ~= live_before then
  io.stderr:write("export_overhead: live exports ", live_before, " before, ", live_after, " after\n")
end
if not shape_ok then io.stderr:write("export_overhead: the capsule does not describe x\n") end

local function list(v)
  local t = {}
  for i, s in ipairs(v) do t[i] = string.format("%.6g", s) end
  return "[" .. table.concat(t, ",") .. "]"
end

local dl_med, ref_med = median(dl_t), median(ref_t)
print(string.format(
  '{"export_overhead":{"calls_per_run":%d,"runs":%d,"array":"float32[256,256] on SimDevice(id=0)",' ..
  '"reference":"setmetatable({}, {__gc = rawlen})","clock":"os.clock",' ..
  '"dlrun_s":%.6g,"dlrun_s_samples":%s,"ref_s":%.6g,"ref_s_samples":%s,' ..
  '"ref_lua_gc_s":%.6g,"ref_lua_gc_s_samples":%s,"cost_ratio":%.6g,' ..
  '"bytes_copied":%d,"live_exports_before":%d,"live_exports_after":%d,"checks_ok":%s}}',
  N, RUNS, dl_med, list(dl_t), ref_med, list(ref_t), median(ref_lua_t), list(ref_lua_t),
  dl_med / ref_med, copied, live_before, live_after, tostring(ok)))
os.exit(ok and 0 or 1)
