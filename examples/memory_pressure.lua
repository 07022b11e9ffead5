-- Memory pressure: an array too large for any single device, exported anyway.
--
-- The devices here have 1 MiB of memory each, and the array is 2 MiB: it
-- fits only when spread over the devices. Gathering it onto one
-- device runs out of memory, so dl.export's "auto" strategy gathers it into
-- host memory instead, and says so.
--
--   build/dlrun examples/memory_pressure.lua
local dl = require "dlrun"

-- Small devices. This must come before anything else touches dlrun: the
-- configuration is fixed when the runtime starts.
dl.configure{device_memory = "1MiB"}

local function say(fmt, ...) io.write(fmt:format(...), "\n") end

-- The first 8 devices of the default backend, whose memory dl.configure
-- sets (sim and opencl devices; cpu devices use the host's). Otherwise the
-- example says why on one line and stops with status 1.
local N_DEVICES = 8
local MiB = 1024 * 1024
local function refuse(found)
  io.stderr:write(("memory_pressure.lua: this example needs %d devices whose memory it can "
                   .. "set, but found %s (devices %s); run it with --devices sim:%d\n")
                  :format(N_DEVICES, found, dl.device_spec(), N_DEVICES))
  os.exit(1, true)
end
if dl.devices()[1]:memory_stats().bytes_limit ~= MiB then
  refuse(("%s devices, which use the host's memory"):format(dl.default_backend()))
end
if dl.device_count() < N_DEVICES then refuse(("%d"):format(dl.device_count())) end
local devices = {}
for i = 1, N_DEVICES do devices[i] = dl.devices()[i] end
local limit = devices[1]:memory_stats().bytes_limit

-- 1. A 2 MiB array: 524288 float32 values 0, 1, 2, ... (all exact in float32).
-- With a sharding, arange fills each shard on its own device: the whole
-- array is never in one place.
local COUNT = 2 * MiB // 4
local mesh = dl.make_mesh({N_DEVICES}, {"x"}, devices)
local x = dl.arange(0, COUNT, 1, "float32", dl.NamedSharding(mesh, dl.P("x")))
x:block_until_ready()
say("Each device has %d bytes (1 MiB) of memory. The array: %d float32 values,", limit, COUNT)
say("%d bytes (2 MiB), split over %d devices:", x.nbytes, N_DEVICES)
dl.visualize_sharding(x)
for i, d in ipairs(devices) do
  local s = d:memory_stats()
  if i == 1 or i == N_DEVICES then
    say("  %s: %d of %d bytes in use", tostring(d), s.bytes_in_use, s.bytes_limit)
  elseif i == 2 then
    say("  ...")
  end
end

-- 2. A gather onto one device cannot work: the whole array does not fit.
say("\nGathering it onto %s fails, and changes nothing:", tostring(devices[1]))
-- A versioned tensor is READ_ONLY when shared; a legacy one would be a copy.
local ok, err = pcall(dl.export, x, {max_version = {1, 0}, strategy = "gather"})
assert(not ok and dl.ResourceExhaustedError:is_instance(err),
       "expected the gather to run out of memory, got " .. tostring(err))
say("  %s", tostring(err))
assert(devices[1]:memory_stats().bytes_in_use == x.nbytes // N_DEVICES,
       "the failed gather left memory allocated")

-- 3. "auto" sees that no device has room and falls back to the host.
say("\nExporting with strategy \"auto\":")
dl.reset_transfer_stats()
local result = dl.export(x, {max_version = {1, 0}, strategy = "auto"})
local stats = dl.transfer_stats()
assert(result.strategy == "host", "expected auto to fall back to the host, got " .. result.strategy)
assert(result.device == dl.host_device(), "the export is not on the host")
assert(result.bytes_moved == x.nbytes and stats.bytes_moved == x.nbytes,
       ("expected %d bytes moved, got %d"):format(x.nbytes, result.bytes_moved))
say("  strategy: %s", result.strategy)
say("  reason: %s", result.reason)
say("  auto fell back to the host: %d bytes moved from the %d devices into host memory,",
    result.bytes_moved, N_DEVICES)
say("  and the tensor lives on %s (DLPack device kDLCPU, %d).", tostring(result.device),
    result.capsule.device[2])

-- 4. The consumer imports it (host memory, no copy) and checks every value.
say("\nThe consumer imports it from host memory (no copy):")
local y = dl.from_dlpack(result.capsule)
dl.visualize_sharding(y)
local got = y:tolist()
assert(#got == COUNT, ("the consumer got %d values, expected %d"):format(#got, COUNT))
for i = 1, COUNT do
  if got[i] ~= i - 1 then
    error(("value %d is %s, expected %d"):format(i - 1, tostring(got[i]), i - 1), 0)
  end
end
say("The consumer checked all %d values: correct.", COUNT)

y, result, got = nil, nil, nil
collectgarbage()
collectgarbage()
local alive = dl.live_exports()
assert(alive == 0, ("%d exports are still alive"):format(alive))
say("Exports alive after the consumer let go: %d.", alive)
