-- The dlrun demo (`make demo`): a short pipeline from sharded data to a
-- consumer that takes it through DLPack.
--
-- It shards a matrix over all the devices, reshards it, meets DLPack's
-- one-device limit (the BufferError), gets past it twice (shard by shard, and
-- by falling back to a gather), fetches the matrix to the host, and hands
-- every tensor to a consumer that checks each value. Every step says how many
-- bytes it moved. The other examples go deeper into each step.
--
--   build/dlrun examples/pipeline.lua       (any number of devices: --devices sim:2)
local dl = require "dlrun"

local function say(fmt, ...) io.write(fmt:format(...), "\n") end

local n = dl.device_count()
say("dlrun %s on %s: %d %s %s, host %s", dl.__version__, dl.device_spec(), n,
    dl.default_backend(), n == 1 and "device" or "devices", tostring(dl.host_device()))

-- The data: a (2n)x(2n) float32 matrix whose element (r, c), 0-based, is
-- 100r + c.
local SIZE = 2 * n
local function value(r, c) return 100 * r + c end
local rows = {}
for r = 0, SIZE - 1 do
  rows[r + 1] = {}
  for c = 0, SIZE - 1 do rows[r + 1][c + 1] = value(r, c) end
end

-- The consumer: imports a capsule and checks it against the block `index`
-- ({first, last} per dimension, 1-based) of the matrix.
local handed, checked = 0, 0
local function consume(capsule, index)
  local got = dl.from_dlpack(capsule):tolist()
  local r0, c0 = index[1][1], index[2][1]
  assert(#got == index[1][2] - r0 + 1, "the consumer got the wrong number of rows")
  for i, row in ipairs(got) do
    assert(#row == index[2][2] - c0 + 1, "the consumer got the wrong number of columns")
    for j, v in ipairs(row) do
      local want = value(r0 + i - 2, c0 + j - 2)
      if v ~= want then
        error(("the consumer read %s at (%d, %d), expected %s")
              :format(tostring(v), r0 + i - 2, c0 + j - 2, tostring(want)), 0)
      end
      checked = checked + 1
    end
  end
  handed = handed + 1
end
local WHOLE = {{1, SIZE}, {1, SIZE}}

-- Bytes moved between devices, and copied within one, since the last call.
local function moved()
  local s = dl.transfer_stats({reset = true})
  return s.bytes_moved, s.local_bytes
end
local total = 0
local function report(what)
  local between, within = moved()
  total = total + between
  say("   %s: %d bytes moved between devices, %d copied within a device", what, between, within)
end

-- 1. Create: the matrix split by rows over every device.
local mesh = dl.make_mesh({n}, {"x"})
local x = dl.array(rows, "float32", dl.NamedSharding(mesh, dl.P("x")))
moved()
say("\n1. A %dx%d float32 matrix (%d bytes), split by rows over %d devices:", SIZE, SIZE,
    x.nbytes, n)
dl.visualize_sharding(x)

-- 2. Reshard: the same matrix, split by columns.
local cols = dl.device_put(x, dl.NamedSharding(mesh, dl.P(nil, "x"))):block_until_ready()
say("\n2. Resharded to columns (device_put):")
dl.visualize_sharding(cols)
report("reshard")

-- 3. Export. DLPack takes one device's memory, so a sharded array is refused...
say("\n3. Handing it over through DLPack.")
local ok, err = pcall(cols.__dlpack__, cols)
if ok then -- one device only: nothing to refuse
  say("   on one device, __dlpack__ takes it as it is")
  consume(err, WHOLE)
else
  assert(dl.BufferError:is_instance(err), "expected a BufferError, got " .. tostring(err))
  say("   __dlpack__ refuses a sharded array, as in JAX:")
  say("   %s", tostring(err))
end
-- ... shard by shard: every column block where it is, with its index.
-- A versioned tensor is READ_ONLY when shared; a legacy one would be a copy.
local by_shard = dl.export(cols, {max_version = {1, 0}, strategy = "shards"})
for _, shard in ipairs(by_shard.shards) do consume(shard.capsule, shard.index) end
say("   strategy %q: %d %s, one per device, checked by the consumer", by_shard.strategy,
    #by_shard.shards, #by_shard.shards == 1 and "tensor" or "tensors")
report("shards")
-- ... or try __dlpack__ and fall back on a BufferError (auto picks the way).
local tried = dl.try_export(cols, {max_version = {1, 0}})
consume(tried.capsule, WHOLE)
say("   try_export: strategy %q (%s), checked", tried.strategy,
    tried.reason or "one device: exported as it is")
report("try_export")

-- 4. Fetch to the host: device_get gathers into host memory, which any host
-- library can take as it is.
local host = dl.device_get(cols)
say("\n4. device_get: the whole matrix on %s, exportable: %s", tostring(host:devices()[1]),
    tostring(dl.is_dlpack_exportable(host)))
consume(host:__dlpack__{max_version = {1, 0}}, WHOLE)
report("device_get")

-- 5. Let go of everything and check that no export is left behind.
x, cols, host, by_shard, tried = nil, nil, nil, nil, nil
collectgarbage()
collectgarbage()
local alive = dl.live_exports()
assert(alive == 0, ("%d exports are still alive"):format(alive))
say("\npipeline: %d tensors handed over, all values checked, %d bytes moved, %d exports alive",
    handed, total, alive)
