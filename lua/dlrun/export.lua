-- Export strategies: the ways out of DLPack's one-device limit (issue 5).
--
--   require("dlrun.export")(dl) adds to the dl table:
--     dl.ensure_single_device(x [, device])
--     dl.is_dlpack_exportable(x)
--     dl.export(x [, opts])      opts: strategy, device, max_version, dl_device, copy, stream,
--                                legacy_sharing, legacy_knows_1_1
--     dl.try_export(x [, opts])  plain __dlpack__ first, dl.export on BufferError only
--
-- Arrays that span processes (not fully addressable) take the strategies of
-- dlrun.export_global, which says how each works there; on one process "allgather" is a
-- "gather".
--
-- Results. Single-tensor strategies ("gather", "allgather", "replica", "host", and "direct"
-- from try_export):
--   {strategy =, bytes_moved =, capsule =, device = <the Device whose data was exported>}
-- "shards": {strategy = "shards", bytes_moved =, shards = {{capsule=, index=, device=,
--   replica_id=}, ...}}: every distinct block once (replica_id 0), in assignment order.
-- "auto" adds `reason`, in plain words; try_export's fallback adds `buffer_error`, the
-- BufferError that __dlpack__ raised. bytes_moved is every byte this call copied
-- (bytes_moved + local_bytes of its own transfers and exports, counted from their plans):
-- other threads and Lua states sharing the runtime, and dl.reset_transfer_stats, do not
-- change it.
--
-- opts.device: where "gather" gathers, which replica "replica" exports (a ValueError when
-- none lives there), and the target of "auto"; "host" and "shards" do not use it.
-- "auto": a one-device array (on opts.device, if given) exports as it is (strategy
-- "gather"); a fully replicated one exports a replica ("replica"; when opts.device is
-- given, only if a replica lives there); otherwise it is gathered onto the target
-- device (opts.device or the first device of the sharding) when that device's largest
-- free block holds the array rounded up to 256 bytes, else into host memory ("host").
-- A gather keeps the array's memory kind.
-- Legacy tensors (no max_version) are copies unless legacy_sharing = "share" (see
-- docs/dlpack.md): except the array a strategy has just copied into (a gather that moved
-- bytes, "host"), which nothing else can see and is exported as it is.
--
-- Errors (dlrun error values; {...} is filled in):
--   TypeError  "{fn}: argument 1 (x) must be an Array, got {type}"
--              ({fn} is export, try_export or ensure_single_device)
--   TypeError  "ensure_single_device: argument 2 (device) must be a Device, got {type}"
--   TypeError  "{fn}: argument 2 (opts) must be a table {strategy=, device=, max_version=,
--               dl_device=, copy=, stream=, legacy_sharing=, legacy_knows_1_1=}, got {type}"
--   TypeError  "{fn}: unexpected option '{key}' (expected strategy, device, max_version,
--               dl_device, copy, stream, legacy_sharing, legacy_knows_1_1)"
--   TypeError  "{fn}: option device must be a Device, got {type}"
--   TypeError  "{fn}: option strategy must be a string, got {type}"
--   ValueError "{fn}: unknown strategy \"{s}\" (expected \"auto\", \"gather\",
--               \"allgather\", \"replica\", \"host\" or \"shards\")"
--   ValueError "export: strategy \"replica\" needs a fully replicated array, but the array
--               is sharded as {tostring(sharding)}"
--   ValueError "export: strategy \"replica\" found no replica on {device}; the array's
--               replicas are on [{device}, ...]; pass one of those as device, or use
--               strategy \"gather\""
--   ValueError "export: copy=false forbids copies, but strategy \"{s}\" had to copy {size}
--               to put the array on {device}; pass copy=nil, or use strategy \"replica\"
--               or \"shards\""
-- Errors of the core (a deleted array's RuntimeError, out of memory, __dlpack__'s own
-- BufferError and ValueError for bad DLPack options) pass through unchanged. A collective
-- export of an array spanning processes raises any of these on every process: its own on
-- the failing one, RuntimeError "export failed on process N: ..." elsewhere.
local errors = require "dlrun.errors"

local STRATEGIES = {auto = true, gather = true, replica = true, host = true, shards = true,
                    allgather = true}
local OPTION_KEYS = {strategy = true, device = true, max_version = true, dl_device = true,
                     copy = true, stream = true, legacy_sharing = true, legacy_knows_1_1 = true}
local DLPACK_KEYS = {"max_version", "dl_device", "copy", "stream", "legacy_sharing",
                     "legacy_knows_1_1"}

local function fail(class, fmt, ...)
  error(errors.new(class, select("#", ...) > 0 and fmt:format(...) or fmt), 0)
end

-- The name of a userdata's dlrun class ("Array", "Device", ...), or nil.
local function class_of(v)
  if type(v) ~= "userdata" then return nil end
  local mt = getmetatable(v)
  return type(mt) == "table" and mt.__name or nil
end

local typename = errors.typename

local function is_array(v) return class_of(v) == "Array" end
local function is_device(v) return class_of(v) == "Device" end

local function check_array(x, fn)
  if not is_array(x) then
    fail("TypeError", "%s: argument 1 (x) must be an Array, got %s", fn, typename(x))
  end
end

-- Human sizes as dlrun prints them: 512B, 1.00KiB, 1.50GiB.
local function format_bytes(n)
  if n < 1024 then return ("%dB"):format(n) end
  local units = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}
  local v, u = n + 0.0, 0
  while v >= 1024 and u < #units do
    v = v / 1024
    u = u + 1
  end
  return ("%.2f%s"):format(v, units[u])
end

local function check_options(opts, fn)
  if opts == nil then return {} end
  if type(opts) ~= "table" or getmetatable(opts) ~= nil then
    fail("TypeError", "%s: argument 2 (opts) must be a table {strategy=, device=, max_version=, "
         .. "dl_device=, copy=, stream=, legacy_sharing=, legacy_knows_1_1=}, got %s", fn,
         typename(opts))
  end
  for k in pairs(opts) do
    if not OPTION_KEYS[k] then
      fail("TypeError", "%s: unexpected option '%s' (expected strategy, device, max_version, "
           .. "dl_device, copy, stream, legacy_sharing, legacy_knows_1_1)", fn, tostring(k))
    end
  end
  if opts.device ~= nil and not is_device(opts.device) then
    fail("TypeError", "%s: option device must be a Device, got %s", fn, typename(opts.device))
  end
  local s = opts.strategy
  if s ~= nil then
    if type(s) ~= "string" then
      fail("TypeError", "%s: option strategy must be a string, got %s", fn, typename(s))
    end
    if not STRATEGIES[s] then
      fail("ValueError", '%s: unknown strategy "%s" (expected "auto", "gather", "allgather", '
           .. '"replica", "host" or "shards")', fn, s)
    end
  end
  return opts
end

-- The options __dlpack__ understands, and only those.
local function dlpack_options(opts)
  local o = {}
  for _, k in ipairs(DLPACK_KEYS) do o[k] = opts[k] end
  return o
end

-- Bytes are counted per call from each transfer's own plan (dl._put_counted,
-- dl._dlpack_counted), never from dl.transfer_stats(): those totals are shared by every
-- state and thread of the runtime.
return function(dl)
  -- The device of a one-device array (raises the core's RuntimeError when deleted).
  local function first_device(x) return x.addressable_shards[1].device end

  -- x on `device` (keeping its memory kind), and the bytes that copied.
  local function gather(x, device)
    local target = dl.SingleDeviceSharding(device, x.sharding.memory_kind)
    return dl._put_counted(x, target)
  end

  -- ensure_single_device, and the bytes it copied.
  local function single_device(x, device)
    local here = first_device(x)
    if x.sharding.num_devices == 1 and (device == nil or device == here) then return x, 0 end
    return gather(x, device or here)
  end

  function dl.ensure_single_device(...)
    errors.check_nargs("ensure_single_device", 2, ...)
    local x, device = ...
    check_array(x, "ensure_single_device")
    if device ~= nil and not is_device(device) then
      fail("TypeError", "ensure_single_device: argument 2 (device) must be a Device, got %s",
           typename(device))
    end
    return (single_device(x, device))
  end

  -- Never raises: anything but one Array that __dlpack__ takes as it is, extra
  -- arguments included, is false.
  function dl.is_dlpack_exportable(...)
    if select("#", ...) > 1 then return false end
    local x = ...
    if not is_array(x) then return false end
    local ok, result = pcall(function()
      return not x:is_deleted() and x.sharding.num_devices == 1 and x.is_fully_addressable
    end)
    return ok and result == true
  end

  -- Export the one-device array y; `before` is what the strategy copied to make y (then
  -- y is the strategy's own fresh copy: a legacy export need not copy it again).
  local function single(strategy, y, opts, before, reason)
    local device = first_device(y)
    local o = dlpack_options(opts)
    if before > 0 and o.legacy_sharing == nil then o.legacy_sharing = "share" end
    local capsule, n = dl._dlpack_counted(y, o)
    return {strategy = strategy, bytes_moved = before + n, capsule = capsule,
            device = device, reason = reason}
  end

  -- A strategy's own copy (n bytes, before __dlpack__) under copy=false is an error.
  local function refuse_copy(strategy, opts, n, device)
    if opts.copy == false and n > 0 then
      fail("ValueError", 'export: copy=false forbids copies, but strategy "%s" had to copy %s '
           .. 'to put the array on %s; pass copy=nil, or use strategy "replica" or "shards"',
           strategy, format_bytes(n), tostring(device))
    end
  end

  local run = {}

  function run.gather(x, opts, reason, strategy)
    strategy = strategy or "gather"
    local device = opts.device or first_device(x)
    local y, n = single_device(x, device)
    refuse_copy(strategy, opts, n, device)
    return single(strategy, y, opts, n, reason)
  end

  -- On one process, every process is this one: a gather.
  function run.allgather(x, opts) return run.gather(x, opts, nil, "allgather") end

  function run.host(x, opts, reason)
    local host = dl.host_device()
    local y, n = dl._put_counted(x, host)
    refuse_copy("host", opts, n, host)
    return single("host", y, opts, n, reason)
  end

  function run.replica(x, opts, reason)
    if not x.is_fully_replicated then
      fail("ValueError", 'export: strategy "replica" needs a fully replicated array, but the '
           .. "array is sharded as %s", tostring(x.sharding))
    end
    local shards = x.addressable_shards
    local pick = opts.device == nil and shards[1] or nil
    for _, shard in ipairs(shards) do
      if shard.device == opts.device then
        pick = shard
        break
      end
    end
    if pick == nil then
      local held = {}
      for i, shard in ipairs(shards) do held[i] = tostring(shard.device) end
      fail("ValueError", 'export: strategy "replica" found no replica on %s; the array\'s '
           .. 'replicas are on [%s]; pass one of those as device, or use strategy "gather"',
           tostring(opts.device), table.concat(held, ", "))
    end
    return single("replica", pick.data, opts, 0, reason)
  end

  function run.shards(x, opts)
    local list, total = {}, 0
    local o = dlpack_options(opts)
    for _, shard in ipairs(x.addressable_shards) do
      if shard.replica_id == 0 then
        local capsule, n = dl._dlpack_counted(shard.data, o)
        total = total + n
        list[#list + 1] = {capsule = capsule, index = shard.index,
                           device = shard.device, replica_id = shard.replica_id}
      end
    end
    return {strategy = "shards", bytes_moved = total, shards = list}
  end

  function run.auto(x, opts)
    local shards = x.addressable_shards -- the deleted-array error, first
    local here = shards[1].device
    local target = opts.device or here
    if #shards == 1 and target == here then
      return run.gather(x, opts,
                        ("already on one device (%s): exported as it is, gathering nothing"):format(tostring(here)))
    end
    if x.is_fully_replicated then
      local on_target = opts.device == nil
      for _, shard in ipairs(shards) do on_target = on_target or shard.device == target end
      if on_target then
        return run.replica(x, opts, "fully replicated: exported one replica, gathering nothing")
      end
    end
    local need = (x.nbytes + 255) // 256 * 256
    local ok, stats = pcall(target.memory_stats, target, x.sharding.memory_kind)
    local free = ok and stats.largest_free_block_bytes or math.maxinteger
    if free >= need then
      return run.gather(x, opts, ("gathered onto %s, which has room"):format(tostring(target)))
    end
    return run.host(x, opts,
                    ("%s cannot hold %s (largest free block %s): gathered into host memory")
                    :format(tostring(target), format_bytes(x.nbytes), format_bytes(free)))
  end

  -- Arrays spanning processes take the strategies of dlrun.export_global.
  local global = require("dlrun.export_global")(dl, {
    fail = fail, single = single, refuse_copy = refuse_copy, format_bytes = format_bytes,
    dlpack_options = dlpack_options,
  })

  -- This process's checks of an export: the options, a live array (a deleted array raises
  -- the core's own RuntimeError, whatever the strategy). Returns opts and the strategy.
  local function prepare(x, opts, fn)
    opts = check_options(opts, fn)
    if x:is_deleted() then first_device(x) end
    return opts, opts.strategy or "auto"
  end

  local function export(x, opts, fn)
    check_array(x, fn)
    if global.collective(x, opts) then
      return global.export(x, function() return prepare(x, opts, fn) end)
    end
    local strategy
    opts, strategy = prepare(x, opts, fn)
    if not x.is_fully_addressable then return global.run(strategy, x, opts) end
    return run[strategy](x, opts)
  end

  function dl.export(...)
    errors.check_nargs("export", 2, ...)
    local x, opts = ...
    return export(x, opts, "export")
  end

  function dl.try_export(...)
    errors.check_nargs("try_export", 2, ...)
    local x, opts = ...
    check_array(x, "try_export")
    if global.collective(x, opts) then
      -- __dlpack__ refuses an array of several processes (a BufferError, found here
      -- before the agreement): the export is collective from the start.
      local buffer_error
      local result = global.export(x, function()
        local o, strategy = prepare(x, opts, "try_export")
        local ok, e = pcall(dl._dlpack_counted, x, dlpack_options(o))
        if not ok and not errors.BufferError:is_instance(e) then error(e, 0) end
        buffer_error = not ok and e or nil
        return o, strategy
      end)
      result.buffer_error = buffer_error
      return result
    end
    opts = check_options(opts, "try_export")
    local ok, capsule, n = pcall(dl._dlpack_counted, x, dlpack_options(opts))
    if ok then
      return {strategy = "direct", bytes_moved = n, capsule = capsule, device = first_device(x)}
    end
    if not errors.BufferError:is_instance(capsule) then error(capsule, 0) end
    local result = export(x, opts, "try_export")
    result.buffer_error = capsule
    return result
  end
end
