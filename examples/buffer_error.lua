-- The BufferError, and every way out of it.
--
-- DLPack hands over one tensor in one memory, so an array sharded over several
-- devices cannot be exported as it is: JAX raises a BufferError, and so does
-- dlrun, with the same words. This example shows the error, then each way out
-- that dl.export offers, with what it costs (bytes copied) and where the
-- consumer finds the tensor; a consumer (dl.from_dlpack) checks every value.
--
--   build/dlrun examples/buffer_error.lua
local dl = require "dlrun"

local function say(fmt, ...) io.write(fmt:format(...), "\n") end

-- The first 8 devices of the default backend (any platform: sim, cpu, opencl);
-- with fewer, the example says so on one line and stops with status 1.
local N_DEVICES = 8
if dl.device_count() < N_DEVICES then
  io.stderr:write(("buffer_error.lua: this example needs %d devices, found %d (devices %s); "
                   .. "run it with --devices sim:%d\n")
                  :format(N_DEVICES, dl.device_count(), dl.device_spec(), N_DEVICES))
  os.exit(1, true)
end
local devices = {}
for i = 1, N_DEVICES do devices[i] = dl.devices()[i] end

-- A 16x4 float32 array (256 bytes) whose element (r, c) is 4r + c, 0-based.
local ROWS, COLS = 16, 4
local values = {}
for r = 0, ROWS - 1 do
  values[r + 1] = {}
  for c = 0, COLS - 1 do values[r + 1][c + 1] = r * COLS + c end
end

-- Bytes copied since `start` (a dl.transfer_stats() reading): between devices
-- or memories, and within one device memory.
local function copied_since(start)
  local now = dl.transfer_stats()
  return now.bytes_moved - start.bytes_moved, now.local_bytes - start.local_bytes
end

local DLPACK_DEVICE = {[1] = "kDLCPU", [4] = "kDLOpenCL", [12] = "kDLExtDev"}
local function where(result)
  local d = result.capsule.device
  return ("%s (DLPack device %s, %d)"):format(tostring(result.device),
                                             DLPACK_DEVICE[d[1]] or tostring(d[1]), d[2])
end

-- The consumer: imports a capsule and checks the values against the original
-- rows first..last (1-based, all columns). Returns the number of values checked.
local function consume(capsule, first, last)
  local got = dl.from_dlpack(capsule):tolist()
  assert(#got == last - first + 1,
         ("the consumer got %d rows, expected %d"):format(#got, last - first + 1))
  local n = 0
  for r = first, last do
    for c = 1, COLS do
      local v, want = got[r - first + 1][c], values[r][c]
      if v ~= want then
        error(("the consumer read %s at row %d, column %d where %s was expected")
              :format(tostring(v), r, c, tostring(want)), 0)
      end
      n = n + 1
    end
  end
  return n
end

-- What each way out cost, for the summary at the end.
local costs = {}

-- Report one single-tensor export and check it.
local function report(label, result, start, want_strategy)
  assert(result.strategy == want_strategy,
         ("%s: strategy %s, expected %s"):format(label, result.strategy, want_strategy))
  local moved, localb = copied_since(start)
  assert(result.bytes_moved == moved + localb, label .. ": bytes_moved disagrees with transfer_stats")
  say("  strategy %q: %d bytes copied (%d between devices, %d within one device)",
      result.strategy, result.bytes_moved, moved, localb)
  say("  the tensor lives on %s", where(result))
  costs[#costs + 1] = {label, result.strategy, result.bytes_moved, tostring(result.device)}
  local n = consume(result.capsule, 1, ROWS)
  say("  the consumer checked all %d values: correct", n)
end

-- 1. Shard the array by rows over 8 devices.
local mesh = dl.make_mesh({N_DEVICES}, {"x"}, devices)
local x = dl.array(values, "float32", dl.NamedSharding(mesh, dl.P("x")))
say("A %dx%d float32 array (%d bytes), sharded by rows over %d devices (%d bytes each):",
    ROWS, COLS, x.nbytes, N_DEVICES, x.nbytes // N_DEVICES)
dl.visualize_sharding(x)

-- 2. The error, exactly as JAX prints it.
say("\nExporting it with __dlpack__ fails, as in JAX:")
local ok, err = pcall(x.__dlpack__, x)
assert(not ok and dl.BufferError:is_instance(err), "expected a BufferError from __dlpack__")
say("  %s", tostring(err))
assert(not dl.is_dlpack_exportable(x), "is_dlpack_exportable should say false")
say("  (dl.is_dlpack_exportable(x) says false, so a script can ask before trying)")

-- 3. The ways out, one by one.
local start
-- max_version = {1, 0}: versioned tensors, READ_ONLY where they share dlrun's memory
-- (a legacy tensor cannot say so, and is a copy unless legacy_sharing = "share").

say("\nWay out 1, gather: copy the array onto one device, then export it.")
start = dl.transfer_stats()
report("gather", dl.export(x, {max_version = {1, 0}, strategy = "gather"}), start, "gather")

say("\nWay out 2, replica: a fully replicated array already has a whole copy on")
say("every device; export one of them without copying.")
start = dl.transfer_stats()
local replicated = dl.device_put(x, dl.NamedSharding(mesh, dl.P()))
replicated:block_until_ready()
local replicate_cost, localb = copied_since(start)
say("  making the replicated copy first cost %d bytes between devices (each device", replicate_cost)
say("  received the %d bytes it lacked) and %d within devices:", x.nbytes - x.nbytes // N_DEVICES,
    localb)
dl.visualize_sharding(replicated)
start = dl.transfer_stats()
report("replica", dl.export(replicated, {max_version = {1, 0}, strategy = "replica"}), start,
       "replica")
local ok_r, err_r = pcall(dl.export, x, {max_version = {1, 0}, strategy = "replica"})
assert(not ok_r and dl.ValueError:is_instance(err_r), "replica should refuse a sharded array")
say("  on the sharded array itself, replica refuses:")
say("  %s", tostring(err_r))

say("\nWay out 3, host: gather straight into host memory, for host libraries.")
start = dl.transfer_stats()
report("host", dl.export(x, {max_version = {1, 0}, strategy = "host"}), start, "host")

say("\nWay out 4, shards: hand over every shard as its own tensor, with its index;")
say("nothing is gathered.")
start = dl.transfer_stats()
local s = dl.export(x, {max_version = {1, 0}, strategy = "shards"})
assert(s.strategy == "shards" and #s.shards == N_DEVICES, "expected one capsule per shard")
local moved_s, local_s = copied_since(start)
assert(s.bytes_moved == 0 and moved_s == 0 and local_s == 0, "shards should copy nothing")
local checked = 0
for _, shard in ipairs(s.shards) do
  local rows = shard.index[1]
  checked = checked + consume(shard.capsule, rows[1], rows[2])
end
say("  strategy %q: %d tensors, %d bytes copied", s.strategy, #s.shards, s.bytes_moved)
say("  shard 1 holds rows %d-%d on %s, ..., shard %d holds rows %d-%d on %s",
    s.shards[1].index[1][1], s.shards[1].index[1][2], tostring(s.shards[1].device), #s.shards,
    s.shards[#s.shards].index[1][1], s.shards[#s.shards].index[1][2],
    tostring(s.shards[#s.shards].device))
say("  the consumer checked all %d values, shard by shard: correct", checked)
costs[#costs + 1] = {"shards", s.strategy, s.bytes_moved,
                     ("%d devices, one shard each"):format(#s.shards)}

say("\nWay out 5, auto (the default): replica when fully replicated, else gather")
say("when the device has room, else host.")
start = dl.transfer_stats()
local a = dl.export(x, {max_version = {1, 0}})
say("  auto chose: %s", a.reason)
report("auto", a, start, "gather")
start = dl.transfer_stats()
local ar = dl.export(replicated, {max_version = {1, 0}})
say("  on the replicated copy, auto chose: %s", ar.reason)
report("auto (replicated)", ar, start, "replica")

say("\nWay out 6, try_export: the usual try-then-fall-back in one call; it tries")
say("__dlpack__ first and falls back to dl.export on a BufferError only.")
start = dl.transfer_stats()
local t = dl.try_export(x, {max_version = {1, 0}})
assert(dl.BufferError:is_instance(t.buffer_error), "try_export should keep the BufferError")
say("  __dlpack__ raised %s, so it fell back", t.buffer_error.name)
report("try_export", t, start, "gather")
local single = dl.device_put(x, devices[1])
start = dl.transfer_stats()
local direct = dl.try_export(single, {max_version = {1, 0}})
say("  on a one-device array it exports directly:")
report("try_export (one device)", direct, start, "direct")

-- 4. The bill.
say("\nWhat each way out cost:")
say("  %-24s %-9s %12s  %s", "way out", "strategy", "bytes copied", "the tensor lives on")
for _, row in ipairs(costs) do say("  %-24s %-9s %12d  %s", row[1], row[2], row[3], row[4]) end
say("  (the replicated copy they export cost %d bytes to make, once)", replicate_cost)

-- 5. Every capsule was consumed; the imports are released with the garbage.
x, replicated, single = nil, nil, nil
collectgarbage()
collectgarbage()
local alive = dl.live_exports()
assert(alive == 0, ("%d exports are still alive"):format(alive))
say("\nAll ways out checked; %d exports alive.", alive)
