-- Export strategies: the ways out of DLPack's one-device limit (issue 5).
--
--   require("dlrun.export")(dl) adds to the dl table:
--     dl.ensure_single_device(x [, device])
--     dl.is_dlpack_exportable(x)
--     dl.export(x [, opts])      opts: strategy, device, max_version, dl_device, copy, stream
--     dl.try_export(x [, opts])  plain __dlpack__ first, dl.export on BufferError only
--
-- Results. Single-tensor strategies ("gather", "replica", "host", and "direct"
-- from try_export):
--   {strategy =, bytes_moved =, capsule =, device = <the Device whose data was exported>}
-- "shards": {strategy = "shards", bytes_moved =, shards = {{capsule=, index=, device=,
--   replica_id=}, ...}}: every distinct block once (replica_id 0), in assignment order.
-- "auto" adds `reason`, in plain words; try_export's fallback adds `buffer_error`, the
-- BufferError that __dlpack__ raised. bytes_moved is the growth of dl.transfer_stats()
-- bytes_moved + local_bytes over the call (every byte the export copied).
--
-- "auto": a one-device array (on opts.device, if given) exports as it is (strategy
-- "gather"); a fully replicated one exports a replica ("replica"; when opts.device is
-- given, only if a replica lives there); otherwise it is gathered onto the target
-- device (opts.device or the first device of the sharding) when that device's largest
-- free block holds the array rounded up to 256 bytes, else into host memory ("host").
-- A gather keeps the array's memory kind.
--
-- Errors (dlrun error values; {...} is filled in):
--   TypeError  "{fn}: argument 1 (x) must be an Array, got {type}"
--              ({fn} is export, try_export or ensure_single_device)
--   TypeError  "ensure_single_device: argument 2 (device) must be a Device, got {type}"
--   TypeError  "{fn}: argument 2 (opts) must be a table {strategy=, device=, max_version=,
--               dl_device=, copy=, stream=}, got {type}"
--   TypeError  "{fn}: unexpected option '{key}' (expected strategy, device, max_version,
--               dl_device, copy, stream)"
--   TypeError  "{fn}: option device must be a Device, got {type}"
--   TypeError  "{fn}: option strategy must be a string, got {type}"
--   ValueError "{fn}: unknown strategy \"{s}\" (expected \"auto\", \"gather\",
--               \"replica\", \"host\" or \"shards\")"
--   ValueError "export: strategy \"replica\" needs a fully replicated array, but the array
--               is sharded as {tostring(sharding)}"
--   ValueError "export: copy=false forbids copies, but strategy \"{s}\" had to copy {size}
--               to put the array on {device}; pass copy=nil, or use strategy \"replica\"
--               or \"shards\""
-- Errors of the core (a deleted array's RuntimeError, out of memory, __dlpack__'s own
-- BufferError and ValueError for bad DLPack options) pass through unchanged.
local errors = require "dlrun.errors"

local STRATEGIES = {auto = true, gather = true, replica = true, host = true, shards = true}
local OPTION_KEYS = {strategy = true, device = true, max_version = true, dl_device = true,
                     copy = true, stream = true}
local DLPACK_KEYS = {"max_version", "dl_device", "copy", "stream"}

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
         .. "dl_device=, copy=, stream=}, got %s", fn, typename(opts))
  end
  for k in pairs(opts) do
    if not OPTION_KEYS[k] then
      fail("TypeError", "%s: unexpected option '%s' (expected strategy, device, max_version, "
           .. "dl_device, copy, stream)", fn, tostring(k))
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
      fail("ValueError", '%s: unknown strategy "%s" (expected "auto", "gather", "replica", '
           .. '"host" or "shards")', fn, s)
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

return function(dl)
  local function moved()
    local s = dl.transfer_stats()
    return s.bytes_moved + s.local_bytes
  end

  -- The device of a one-device array (raises the core's RuntimeError when deleted).
  local function first_device(x) return x.addressable_shards[1].device end

  local function gather(x, device)
    local target = dl.SingleDeviceSharding(device, x.sharding.memory_kind)
    return dl.device_put(x, target)
  end

  function dl.ensure_single_device(...)
    errors.check_nargs("ensure_single_device", 2, ...)
    local x, device = ...
    check_array(x, "ensure_single_device")
    if device ~= nil and not is_device(device) then
      fail("TypeError", "ensure_single_device: argument 2 (device) must be a Device, got %s",
           typename(device))
    end
    local here = first_device(x)
    if x.sharding.num_devices == 1 and (device == nil or device == here) then return x end
    return gather(x, device or here)
  end

  function dl.is_dlpack_exportable(...)
    errors.check_nargs("is_dlpack_exportable", 1, ...)
    local x = ...
    if not is_array(x) then return false end
    local ok, result = pcall(function()
      return not x:is_deleted() and x.sharding.num_devices == 1
    end)
    return ok and result == true
  end

  -- Export the one-device array y; `start` is the stats reading at the call's start.
  local function single(strategy, y, opts, start, reason)
    local device = first_device(y)
    local capsule = y:__dlpack__(dlpack_options(opts))
    return {strategy = strategy, bytes_moved = moved() - start, capsule = capsule,
            device = device, reason = reason}
  end

  -- A strategy's own copy (before __dlpack__) under copy=false is an error.
  local function refuse_copy(strategy, opts, start, device)
    local n = moved() - start
    if opts.copy == false and n > 0 then
      fail("ValueError", 'export: copy=false forbids copies, but strategy "%s" had to copy %s '
           .. 'to put the array on %s; pass copy=nil, or use strategy "replica" or "shards"',
           strategy, format_bytes(n), tostring(device))
    end
  end

  local run = {}

  function run.gather(x, opts, start, reason)
    local device = opts.device or first_device(x)
    local y = dl.ensure_single_device(x, device)
    refuse_copy("gather", opts, start, device)
    return single("gather", y, opts, start, reason)
  end

  function run.host(x, opts, start, reason)
    local host = dl.host_device()
    local y = dl.device_put(x, host)
    refuse_copy("host", opts, start, host)
    return single("host", y, opts, start, reason)
  end

  function run.replica(x, opts, start, reason)
    if not x.is_fully_replicated then
      fail("ValueError", 'export: strategy "replica" needs a fully replicated array, but the '
           .. "array is sharded as %s", tostring(x.sharding))
    end
    local shards = x.addressable_shards
    local pick = shards[1]
    for _, shard in ipairs(shards) do
      if shard.device == opts.device then
        pick = shard
        break
      end
    end
    return single("replica", pick.data, opts, start, reason)
  end

  function run.shards(x, opts, start)
    local list = {}
    local o = dlpack_options(opts)
    for _, shard in ipairs(x.addressable_shards) do
      if shard.replica_id == 0 then
        list[#list + 1] = {capsule = shard.data:__dlpack__(o), index = shard.index,
                           device = shard.device, replica_id = shard.replica_id}
      end
    end
    return {strategy = "shards", bytes_moved = moved() - start, shards = list}
  end

  function run.auto(x, opts, start)
    local shards = x.addressable_shards -- the deleted-array error, first
    local here = shards[1].device
    local target = opts.device or here
    if #shards == 1 and target == here then
      return run.gather(x, opts, start,
                        ("already on one device (%s): exported without a copy"):format(tostring(here)))
    end
    if x.is_fully_replicated then
      local on_target = opts.device == nil
      for _, shard in ipairs(shards) do on_target = on_target or shard.device == target end
      if on_target then
        return run.replica(x, opts, start, "fully replicated: exported one replica without a copy")
      end
    end
    local need = (x.nbytes + 255) // 256 * 256
    local ok, stats = pcall(target.memory_stats, target, x.sharding.memory_kind)
    local free = ok and stats.largest_free_block_bytes or math.maxinteger
    if free >= need then
      return run.gather(x, opts, start,
                        ("gathered onto %s, which has room"):format(tostring(target)))
    end
    return run.host(x, opts, start,
                    ("%s cannot hold %s (largest free block %s): gathered into host memory")
                    :format(tostring(target), format_bytes(x.nbytes), format_bytes(free)))
  end

  local function export(x, opts, fn)
    check_array(x, fn)
    opts = check_options(opts, fn)
    -- A deleted array raises the core's own RuntimeError, whatever the strategy.
    if x:is_deleted() then first_device(x) end
    local start = moved()
    return run[opts.strategy or "auto"](x, opts, start)
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
    opts = check_options(opts, "try_export")
    local start = moved()
    local ok, capsule = pcall(x.__dlpack__, x, dlpack_options(opts))
    if ok then
      return {strategy = "direct", bytes_moved = moved() - start, capsule = capsule,
              device = first_device(x)}
    end
    if not errors.BufferError:is_instance(capsule) then error(capsule, 0) end
    local result = export(x, opts, "try_export")
    result.buffer_error = capsule
    return result
  end
end
