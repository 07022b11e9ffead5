-- Data parallel: a batch split by rows over 8 devices, handed to a consumer
-- shard by shard, without gathering it anywhere.
--
-- Each device holds its own rows of the batch. dl.export with strategy
-- "shards" exports every shard in place (one DLPack tensor per device, with its
-- index in the whole batch), and the consumer imports each one where it lives.
-- Not one byte moves.
--
--   build/dlrun examples/data_parallel.lua
local dl = require "dlrun"

local function say(fmt, ...) io.write(fmt:format(...), "\n") end

-- The first 8 devices of the default backend (any platform: sim, cpu, opencl);
-- with fewer, the example says so on one line and stops with status 1.
local N_DEVICES = 8
if dl.device_count() < N_DEVICES then
  io.stderr:write(("data_parallel.lua: this example needs %d devices, found %d (devices %s); "
                   .. "run it with --devices sim:%d\n")
                  :format(N_DEVICES, dl.device_count(), dl.device_spec(), N_DEVICES))
  os.exit(1, true)
end
local devices = {}
for i = 1, N_DEVICES do devices[i] = dl.devices()[i] end

-- The batch: 64 samples of 16 features, float32. Sample r (0-based) has
-- features 100r + 0 .. 100r + 15, so any row tells where it came from.
local BATCH, FEATURES = 64, 16
local function sample(r)
  local row = {}
  for c = 0, FEATURES - 1 do row[c + 1] = 100 * r + c end
  return row
end

-- 1. Lay the batch out along a `data` axis. Each device's rows are made on that
-- device by a loader callback (here it computes them; a real one would read
-- them from disk), so the whole batch never exists in one place.
local mesh = dl.make_mesh({N_DEVICES}, {"data"}, devices)
local by_rows = dl.NamedSharding(mesh, dl.P("data"))
dl.reset_transfer_stats()
local batch = dl.make_array_from_callback({BATCH, FEATURES}, by_rows, function(index)
  local rows = {}
  for r = index[1][1], index[1][2] do rows[#rows + 1] = sample(r - 1) end
  return rows
end, "float32")
local per_device = BATCH // N_DEVICES
say("A batch of %d samples x %d features (float32, %d bytes), split along the",
    BATCH, FEATURES, batch.nbytes)
say("`data` axis: each of the %d devices holds %d samples (%d bytes).",
    N_DEVICES, per_device, batch.nbytes // N_DEVICES)
dl.visualize_sharding(batch)

-- 2. The consumer: a training step that takes one shard at a time. It imports
-- the tensor (dl.from_dlpack) onto the shard's device and checks every row
-- against the original. It names the device because DLPack cannot: every cpu
-- device's memory is (kDLCPU, 0). copy = false makes the import fail rather
-- than copy.
local steps, checked_rows = 0, 0
local function train_step(capsule, index, device)
  local x = dl.from_dlpack(capsule, {device = device, copy = false})
  assert(x:devices()[1] == device,
         ("the shard was imported on %s, not on %s"):format(tostring(x:devices()[1]), tostring(device)))
  local first, last = index[1][1], index[1][2]
  local got = x:tolist()
  assert(#got == last - first + 1, "the shard has the wrong number of rows")
  for i, row in ipairs(got) do
    local want = sample(first + i - 2)
    for c = 1, FEATURES do
      if row[c] ~= want[c] then
        error(("sample %d, feature %d: the consumer read %s, expected %s")
              :format(first + i - 2, c - 1, tostring(row[c]), tostring(want[c])), 0)
      end
    end
  end
  steps = steps + 1
  checked_rows = checked_rows + #got
  return #got
end

-- 3. Hand the batch over shard by shard.
say("\nHanding the batch over shard by shard (dl.export, strategy \"shards\"):")
dl.reset_transfer_stats()
-- A versioned tensor is READ_ONLY when shared; a legacy one would be a copy.
local result = dl.export(batch, {max_version = {1, 0}, strategy = "shards"})
assert(result.strategy == "shards", "expected strategy shards, got " .. tostring(result.strategy))
assert(#result.shards == N_DEVICES, ("expected %d shards, got %d"):format(N_DEVICES, #result.shards))
for i, shard in ipairs(result.shards) do
  local rows = train_step(shard.capsule, shard.index, shard.device)
  say("  shard %d: samples %2d-%2d on %s, imported there, %d rows checked",
      i, shard.index[1][1] - 1, shard.index[1][2] - 1, tostring(shard.device), rows)
end
local stats = dl.transfer_stats()
assert(checked_rows == BATCH, ("the consumer saw %d samples, not %d"):format(checked_rows, BATCH))
assert(result.bytes_moved == 0 and stats.bytes_moved == 0 and stats.local_bytes == 0,
       ("the hand-over copied bytes: %d between devices, %d locally")
       :format(stats.bytes_moved, stats.local_bytes))
say("\nThe consumer ran %d steps and checked all %d samples: correct.", steps, checked_rows)
say("Bytes moved: %d (strategy %q exports each shard where it is; nothing was gathered).",
    stats.bytes_moved, result.strategy)

-- For comparison, what the usual way (gather, then export) costs: measured.
dl.reset_transfer_stats()
local gathered = dl.ensure_single_device(batch):block_until_ready()
local gather_cost = dl.transfer_stats().bytes_moved
assert(gather_cost == batch.nbytes - batch.nbytes // N_DEVICES, "unexpected cost of a gather")
say("For comparison, gathering it onto %s first moves %d bytes.",
    tostring(gathered:devices()[1]), gather_cost)
gathered:delete()

-- 4. The imports are released with the garbage; then no export is left alive.
result = nil
collectgarbage()
collectgarbage()
local alive = dl.live_exports()
assert(alive == 0, ("%d exports are still alive"):format(alive))
say("Exports alive after the consumer let go: %d.", alive)
