-- Export strategies for a global array: one not fully addressable, whose shards lie on
-- several processes of a job. Loaded by dlrun.export, which sends such arrays here. Every
-- strategy but "shards" and "replica" is collective: every process calls dl.export with
-- the same strategy (and, for "gather", the same device), in the same order, as for any
-- collective. Each process's checks of the call join one agreement ("export") before
-- anything moves, and the local end of the strategy (the copy=false check, the export)
-- another after: a failure on one process is its own error there and "export failed on
-- process N: ..." on the others; a mismatch is the agreement's RuntimeError everywhere.
--
--   "gather"    onto one device of one process (opts.device, default the first device of
--               process 0 on the array's platform). On that process the result is as on one
--               process; on the others capsule is nil, device is the target and
--               process_index its process.
--   "allgather" the whole array on a device of every process (opts.device, which must be
--               this process's, default this process's first device on the array's
--               platform; processes may pick different local devices): each process exports
--               its own replica.
--   "host"      the whole array into every process's host memory (process_allgather).
--   "shards"    this process's shards, each distinct block once (its first local replica),
--               with its global index and replica_id; no communication.
--   "replica"   a fully replicated array's replica on this process (on opts.device when
--               given); no communication.
--   "auto"      "replica" when every process holds a replica (on opts.device when given),
--               else "allgather" when every process's target device has room, else "host";
--               the processes agree on the choice in one small collective first.
--
-- Results carry process_index (this process's, or the owner's for "gather") besides the
-- fields of dlrun.export. bytes_moved counts the bytes written on this process (received
-- or copied), as dlrun.export counts them.
return function(dl, h)
  local run, checks = {}, {}

  -- The local end of a collective strategy (its copy check and export) with its failure
  -- shared: every process raises, the failing one its own error.
  local function finish(fn, ...)
    local ok, result = pcall(fn, ...)
    dl._agree("export", not ok and result or nil)
    return result
  end

  local function platform_of(x) return x.sharding.device_set[1].platform end

  local function local_target(x, opts, strategy)
    local device = opts.device
    if device == nil then return dl.local_devices(platform_of(x))[1] end
    if device.process_index ~= dl.process_index() then
      h.fail("ValueError", 'export: strategy "%s" needs a device of this process (process %d), '
             .. "but %s is process %d's", strategy, dl.process_index(), tostring(device),
             device.process_index)
    end
    return device
  end

  -- Each collective strategy's checks on this process: its target device, and what every
  -- process must pass alike.
  function checks.gather(x, opts)
    local device = opts.device or dl.devices(platform_of(x))[1]
    return device, "gather onto " .. tostring(device)
  end
  function checks.allgather(x, opts) return local_target(x, opts, "allgather"), "allgather" end
  function checks.host() return nil, "host" end
  function checks.auto(x, opts) return local_target(x, opts, "auto"), "auto" end

  function run.gather(x, opts, device, reason)
    local y, n = dl._put_counted(x, dl.SingleDeviceSharding(device, x.sharding.memory_kind))
    return finish(function()
      h.refuse_copy("gather", opts, n, device)
      if device.process_index == dl.process_index() then
        local result = h.single("gather", y, opts, n, reason)
        result.process_index = device.process_index
        return result
      end
      return {strategy = "gather", bytes_moved = n, capsule = nil, device = device,
              process_index = device.process_index, reason = reason}
    end)
  end

  -- The devices each process chose, in process order: one small collective.
  local function chosen_devices(platform, device)
    local ids = dl.process_allgather(dl.array({device.id}, "int64"), true):tolist()
    local by_id, list = {}, {}
    for _, d in ipairs(dl.devices(platform)) do by_id[d.id] = d end
    for p, id in ipairs(ids) do list[p] = by_id[id] end
    return list
  end

  -- Stamp a single-tensor result with this process's index.
  local function here(result)
    result.process_index = dl.process_index()
    return result
  end

  function run.allgather(x, opts, device, reason)
    local mesh = dl.Mesh(chosen_devices(platform_of(x), device), {"process"})
    local y, n = dl._put_counted(x, dl.NamedSharding(mesh, dl.P(), x.sharding.memory_kind))
    return finish(function()
      h.refuse_copy("allgather", opts, n, device)
      return here(h.single("allgather", y.addressable_shards[1].data, opts, n, reason))
    end)
  end

  function run.host(x, opts, _, reason)
    local y = dl.process_allgather(x, true)
    return finish(function()
      h.refuse_copy("host", opts, x.nbytes, dl.host_device())
      return here(h.single("host", y, opts, x.nbytes, reason))
    end)
  end

  -- Each distinct index once, from its first replica on this process.
  function run.shards(x, opts)
    local list, total, seen = {}, 0, {}
    local o = h.dlpack_options(opts)
    for _, shard in ipairs(x.addressable_shards) do
      local key = {}
      for d, pair in ipairs(shard.index) do key[d] = pair[1] .. ":" .. pair[2] end
      key = table.concat(key, ",")
      if not seen[key] then
        seen[key] = true
        local capsule, n = dl._dlpack_counted(shard.data, o)
        total = total + n
        list[#list + 1] = {capsule = capsule, index = shard.index, device = shard.device,
                           replica_id = shard.replica_id}
      end
    end
    return {strategy = "shards", bytes_moved = total, shards = list,
            process_index = dl.process_index()}
  end

  -- This process's replica (on opts.device when given), or nil.
  local function local_replica(x, opts)
    if not x.is_fully_replicated then return nil end
    for _, shard in ipairs(x.addressable_shards) do
      if opts.device == nil or shard.device == opts.device then return shard end
    end
    return nil
  end

  function run.replica(x, opts, reason)
    if not x.is_fully_replicated then
      h.fail("ValueError", 'export: strategy "replica" needs a fully replicated array, but the '
             .. "array is sharded as %s", tostring(x.sharding))
    end
    local shard = local_replica(x, opts)
    if shard == nil then
      local held = {}
      for i, s in ipairs(x.addressable_shards) do held[i] = tostring(s.device) end
      h.fail("ValueError", 'export: strategy "replica" found no replica on %s on process %d; '
             .. "this process's replicas are on [%s]; pass one of those as device, or use "
             .. 'strategy "allgather"', tostring(opts.device or "this process"),
             dl.process_index(), table.concat(held, ", "))
    end
    return here(h.single("replica", shard.data, opts, 0, reason))
  end

  -- Every process states whether it can export a replica and whether its target has room;
  -- all then take the same way.
  function run.auto(x, opts, device)
    local can_replica = local_replica(x, opts) ~= nil
    local need = (x.nbytes + 255) // 256 * 256
    local ok, stats = pcall(device.memory_stats, device, x.sharding.memory_kind)
    local has_room = not ok or stats.largest_free_block_bytes >= need
    local flags = dl.process_allgather(dl.array({can_replica and 1 or 0, has_room and 1 or 0},
                                                "int32"))
    local all_replica, short = true, nil
    for p, row in ipairs(flags:tolist()) do
      all_replica = all_replica and row[1] == 1
      if row[2] ~= 1 then short = short or p - 1 end
    end
    if all_replica then
      return finish(run.replica, x, opts, "fully replicated, with a replica on every process: "
                    .. "exported this process's replica, gathering nothing")
    end
    if short == nil then
      return run.allgather(x, opts, device, "spans processes: gathered whole onto a device of "
                           .. "every process, each of which has room")
    end
    return run.host(x, opts, nil, ("spans processes, and process %d's device cannot hold %s: "
                                   .. "gathered into every process's host memory")
                                  :format(short, h.format_bytes(x.nbytes)))
  end

  local M = {}

  -- Whether x spans the devices of several processes.
  local function spans(x)
    local owner
    for _, d in ipairs(x.sharding.device_set) do
      if owner ~= nil and d.process_index ~= owner then return true end
      owner = d.process_index
    end
    return false
  end

  -- Whether dl.export(x, opts) is collective: x spans processes and the strategy (read
  -- before any check, as every process reads it) is not "shards" or "replica".
  function M.collective(x, opts)
    local s = type(opts) == "table" and rawget(opts, "strategy") or nil
    return s ~= "shards" and s ~= "replica" and spans(x)
  end

  -- A collective export: prepare() makes this process's checks of the call (options, a
  -- live array) and returns the checked opts and the strategy; with the strategy's own,
  -- they join the agreement, so that a failed check is an error on every process.
  function M.export(x, prepare)
    local ok, opts, strategy, device, agreed = pcall(function()
      local o, s = prepare()
      return o, s, checks[s](x, o)
    end)
    dl._agree("export", not ok and opts or nil, "the strategy", agreed)
    return run[strategy](x, opts, device)
  end

  -- An export without communication ("shards", "replica"), or of an array wholly on one
  -- other process's devices (which only that process can export).
  function M.run(strategy, x, opts)
    if not spans(x) then
      local owner = x.sharding.device_set[1].process_index
      h.fail("ValueError", "export: the array lies wholly on process %d's devices, so only "
             .. "process %d can export it (this is process %d)", owner, owner, dl.process_index())
    end
    return run[strategy](x, opts)
  end

  return M
end
