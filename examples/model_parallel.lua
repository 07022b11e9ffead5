-- Model parallel on a 2-D mesh: a matrix split by rows over a `data` x `model`
-- mesh, resharded to columns, then gathered onto one device.
--
-- Each step is one dl.device_put, copied device to device. The pictures show
-- the layout before and after, and dl.transfer_stats() counts the bytes each
-- step moved between devices and copied within a device.
--
--   build/dlrun examples/model_parallel.lua
local dl = require "dlrun"

local function say(fmt, ...) io.write(fmt:format(...), "\n") end

-- The first 8 devices of the default backend (any platform: sim, cpu, opencl);
-- with fewer, the example says so on one line and stops with status 1.
local N_DEVICES = 8
if dl.device_count() < N_DEVICES then
  io.stderr:write(("model_parallel.lua: this example needs %d devices, found %d (devices %s); "
                   .. "run it with --devices sim:%d\n")
                  :format(N_DEVICES, dl.device_count(), dl.device_spec(), N_DEVICES))
  os.exit(1, true)
end
local devices = {}
for i = 1, N_DEVICES do devices[i] = dl.devices()[i] end

-- A 16x16 float32 matrix (1024 bytes); element (r, c), 0-based, is 16r + c.
local N = 16
local values = {}
for r = 0, N - 1 do
  values[r + 1] = {}
  for c = 0, N - 1 do values[r + 1][c + 1] = N * r + c end
end

-- Check that `x` holds the matrix, and that each device holds the block its
-- sharding says (read through the shards themselves).
local function check(x, what)
  local got = x:tolist()
  for r = 1, N do
    for c = 1, N do
      if got[r][c] ~= values[r][c] then
        error(("%s: element (%d, %d) is %s, expected %s")
              :format(what, r - 1, c - 1, tostring(got[r][c]), tostring(values[r][c])), 0)
      end
    end
  end
  for _, shard in ipairs(x.addressable_shards) do
    local block = shard.data:tolist()
    local rows, cols = shard.index[1], shard.index[2]
    for r = rows[1], rows[2] do
      for c = cols[1], cols[2] do
        if block[r - rows[1] + 1][c - cols[1] + 1] ~= values[r][c] then
          error(("%s: the shard on %s is wrong at (%d, %d)")
                :format(what, tostring(shard.device), r - 1, c - 1), 0)
        end
      end
    end
  end
  return N * N
end

-- Run one step, then report the bytes it moved.
local total_moved, total_local = 0, 0
local function step(fn)
  dl.reset_transfer_stats()
  local y = fn():block_until_ready()
  local s = dl.transfer_stats()
  total_moved, total_local = total_moved + s.bytes_moved, total_local + s.local_bytes
  return y, s
end

-- 1. The mesh: 2 rows of devices along `data`, 4 columns along `model`.
local mesh = dl.make_mesh({2, 4}, {"data", "model"}, devices)
say("The mesh %s:", tostring(mesh))
for i, row in ipairs(mesh.devices) do
  local names = {}
  for j, d in ipairs(row) do names[j] = tostring(d) end
  say("  data=%d: %s", i - 1, table.concat(names, "  "))
end

-- 2. The matrix split by rows over both axes: 8 row blocks, one per device.
local by_rows = dl.NamedSharding(mesh, dl.P({"data", "model"}))
local x = dl.array(values, "float32", by_rows)
say("\nA %dx%d float32 matrix (%d bytes), split by rows over both axes,", N, N, x.nbytes)
say("%s:", tostring(x.sharding.spec))
dl.visualize_sharding(x)
say("checked %d values: correct", check(x, "rows"))

-- 3. Reshard to columns: each device keeps the piece of its new column block
-- that it already held and receives the rest from the 7 others.
local by_cols = dl.NamedSharding(mesh, dl.P(nil, {"data", "model"}))
say("\nResharding to columns, %s (device_put to the new sharding):",
    tostring(by_cols.spec))
local cols, s1 = step(function() return dl.device_put(x, by_cols) end)
dl.visualize_sharding(cols)
assert(s1.bytes_moved == x.nbytes * 7 // 8 and s1.local_bytes == x.nbytes // 8,
       ("the reshard moved %d bytes and copied %d locally"):format(s1.bytes_moved, s1.local_bytes))
say("moved %d bytes between devices (7/8 of the matrix) and copied %d within devices.",
    s1.bytes_moved, s1.local_bytes)
say("checked %d values: correct", check(cols, "columns"))

-- 4. Gather the columns onto the first device of the mesh.
local target = devices[1]
say("\nGathering onto %s (device_put to the device):", tostring(target))
local one, s2 = step(function() return dl.device_put(cols, target) end)
dl.visualize_sharding(one)
assert(s2.bytes_moved == x.nbytes * 7 // 8 and s2.local_bytes == x.nbytes // 8,
       ("the gather moved %d bytes and copied %d locally"):format(s2.bytes_moved, s2.local_bytes))
assert(#one:devices() == 1 and one:devices()[1] == target, "the gather did not land on one device")
say("moved %d bytes between devices and copied %d within %s.", s2.bytes_moved, s2.local_bytes,
    tostring(target))
say("checked %d values: correct", check(one, "gathered"))

-- 5. The gathered matrix lives on one device, so DLPack takes it as it is.
local capsule = one:__dlpack__()
local imported = dl.from_dlpack(capsule)
say("\nIt now exports through DLPack without a copy: checked %d values on the consumer side.",
    check(imported, "imported"))

say("\nIn all: %d bytes moved between devices, %d copied within devices, in 2 steps.",
    total_moved, total_local)
