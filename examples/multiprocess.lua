-- Many processes: a batch built from each process's own rows, resharded across processes,
-- and every way out of "Fetching value ... spans non-addressable devices".
--
-- The same script runs alone or in a job of many processes (each with its own devices):
--
--   build/dlrun examples/multiprocess.lua
--   mpirun -n 2 build/dlrun --devices sim:2 examples/multiprocess.lua
--
-- (As root, Open MPI also needs OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;
-- on a machine with fewer cores than processes, add --oversubscribe.) Every process
-- checks what it gets and stops with an error when a check fails, which ends the job.
local dl = require "dlrun"

local p, n = dl.process_index(), dl.process_count()
local function say(fmt, ...) io.write(("[%d] " .. fmt):format(p, ...), "\n") end
local function check(ok, what) if not ok then error(dl.RuntimeError("check failed: " .. what)) end end

-- Sample r (0-based) has features 100r + 0 .. 100r + F - 1: any value tells where it is.
local devices = dl.devices()
local D = #devices
local ROWS_PER_DEVICE, F = 2, 2 * D
local mesh = dl.make_mesh({D}, {"batch"})
local by_rows = dl.NamedSharding(mesh, dl.P("batch"))
local by_features = dl.NamedSharding(mesh, dl.P(nil, "batch"))

-- 1. A data-parallel batch: each process loads only its own rows (its slab), as a data
--    loader would, and make_array_from_process_local_data makes them one global array.
local local_rows = ROWS_PER_DEVICE * dl.local_device_count()
local first = p * local_rows
local mine = {}
for r = 1, local_rows do
  local row = {}
  for f = 1, F do row[f] = (first + r - 1) * 100 + f - 1 end
  mine[r] = row
end
local batch = dl.make_array_from_process_local_data(by_rows, dl.array(mine, "float32"))
check(batch.shape[1] == ROWS_PER_DEVICE * D and batch.shape[2] == F, "the global shape")
say("batch %dx%d over %d devices of %d process(es); this process holds rows %d..%d on %d "
    .. "device(s)", batch.shape[1], batch.shape[2], D, n, first, first + local_rows - 1,
    #batch.addressable_shards)

-- 2. A reshard across processes: split the features instead of the rows. Each byte whose
--    owner changes goes once, straight from the process holding it to the one needing it.
dl.reset_transfer_stats()
local resharded = dl.device_put(batch, by_features)
local stats = dl.transfer_stats()
local keep = 1 / n -- the share of this process's rows whose new owner is itself
local expect = math.floor(batch.nbytes / n * (1 - keep) + 0.5)
check(stats.bytes_sent == expect and stats.bytes_received == expect, "bytes sent and received")
say("reshard rows -> features: sent %d bytes, received %d bytes", stats.bytes_sent,
    stats.bytes_received)
for _, shard in ipairs(resharded.addressable_shards) do
  local col = shard.index[2][1] - 1 -- its first feature, 0-based
  check(shard.data:tolist()[ROWS_PER_DEVICE * D][1] == (ROWS_PER_DEVICE * D - 1) * 100 + col,
        "a resharded value")
end

-- 3. Reading a global array's value fails on every process, as in JAX...
if n > 1 then
  local ok, e = pcall(batch.tolist, batch)
  check(not ok and e.name == "RuntimeError", "the fetch error")
  say("batch:tolist(): %s: %s", e.name, e.message:sub(1, 72) .. "...")
end

-- ...and these are the ways out. process_allgather: the whole value on every host.
local whole = dl.process_allgather(batch, true):tolist()
check(whole[#whole][F] == (#whole - 1) * 100 + F - 1, "process_allgather")
say("process_allgather: %d rows on this host", #whole)

-- dl.export's strategies: "gather" hands one DLPack tensor to process 0 alone; "allgather"
-- one to every process, on a device of its own; "host" one in every host's memory;
-- "shards" this process's blocks in place, each with its global index; "auto" chooses.
local function consume(capsule)
  local got = dl.from_dlpack(capsule):tolist()
  check(#got == #whole and got[#got][F] == whole[#whole][F], "an exported tensor")
end
for _, strategy in ipairs {"gather", "allgather", "host", "shards", "auto"} do
  local r = dl.export(batch, {strategy = strategy, max_version = {1, 0}}) -- versioned: read-only, shared
  if r.shards then
    for _, s in ipairs(r.shards) do
      local rows = dl.from_dlpack(s.capsule):tolist()
      check(rows[1][1] == (s.index[1][1] - 1) * 100, "an exported shard")
    end
    say('export "%s": %d tensors in place, %d bytes copied', strategy, #r.shards, r.bytes_moved)
  elseif r.capsule then
    consume(r.capsule)
    say('export "%s" -> "%s": a tensor on %s, %d bytes copied here', strategy, r.strategy,
        tostring(r.device), r.bytes_moved)
  else
    say('export "%s": no tensor here; process %d holds it on %s', strategy, r.process_index,
        tostring(r.device))
  end
end
dl.sync_global_devices("done")
say("all checks passed")
