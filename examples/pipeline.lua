-- The dlrun demo (`make demo`): a short pipeline on the default simulated
-- devices. It creates arrays on several devices, checks their contents,
-- watches each device's memory pool, and cleans up.
local dl = require "dlrun"

local function say(fmt, ...) io.write(fmt:format(...), "\n") end

say("dlrun %s on %s: %d %s devices, host %s", dl.__version__, dl.device_spec(),
    dl.device_count(), dl.default_backend(), tostring(dl.host_device()))

-- 1. Put a batch on each device: rows i*4 .. i*4+3 of a 4x3 block per device.
local devices = dl.devices()
local batches = {}
for i, dev in ipairs(devices) do
  local start = (i - 1) * 12
  local flat = dl.arange(start, start + 12, 1, "float32", dev)
  batches[i] = flat
  local stats = dev:memory_stats()
  say("%-16s holds %d %s values  (%d bytes in use of a %d byte pool)", tostring(dev),
      flat.size, flat.dtype, stats.bytes_in_use, stats.bytes_limit)
end

-- 2. Gather to the host by hand (sharded gathers come with NamedSharding).
local host = dl.host_device()
local rows = {}
for i, b in ipairs(batches) do
  local values = b:tolist()
  for r = 0, 3 do
    rows[#rows + 1] = {values[r * 3 + 1], values[r * 3 + 2], values[r * 3 + 3]}
  end
end
local gathered = dl.array(rows, "float32", host)
say("\ngathered on %s: shape {%d, %d}, %d bytes", tostring(gathered:devices()[1]),
    gathered.shape[1], gathered.shape[2], gathered.nbytes)
print(gathered)

-- 3. Check the result the way a consumer would: every value in order.
local flat = gathered:tolist()
local expected = 0
for _, row in ipairs(flat) do
  for _, v in ipairs(row) do
    assert(v == expected, ("value %s where %s was expected"):format(v, expected))
    expected = expected + 1
  end
end
say("checked %d values: all correct", expected)

-- 4. Clean up: deleting returns device memory at once.
for _, b in ipairs(batches) do b:delete() end
collectgarbage()
local in_use = 0
for _, dev in ipairs(devices) do in_use = in_use + dev:memory_stats().bytes_in_use end
say("after delete: %d bytes in use on the sim devices", in_use)

-- 5. Errors are values with JAX's names and messages.
local ok, err = pcall(function() return batches[1]:tolist() end)
say("using a deleted array: %s", tostring(err))
assert(not ok and dl.RuntimeError:is_instance(err))
