-- dl.from_partitioned(desc [, sharding]): a dlrun Array from a `__partitioned__`
-- description (x:__partitioned__() makes one; docs/partitioned.md). Loaded by
-- require "dlrun".
--
-- desc = {shape=, partition_tiling=, partitions = {{position=, start=, shape=,
-- location = {{process=, device=, replica_id=}, ...}, data=}, ...}}; positions
-- and starts are 0-based. The grid must be complete and regular (equal blocks,
-- as a NamedSharding lays out), the partitions disjoint, and the data of one
-- dtype. Each partition lives on its first location's device (or where its
-- data imports, without locations); the inferred sharding is a mesh of those
-- devices shaped as the grid, one axis per dimension ("p0", "p1", ...), so
-- replicas beyond the first are not rebuilt unless `sharding` asks for them.
-- Data import zero-copy where dlrun_import can wrap them; with `sharding` the
-- array is then put there (copying only what moves).
local errors = require "dlrun.errors"

local MAX_NDIM, MAX_PARTITIONS = 32, 65536

local function fail(class, fmt, ...)
  error(errors.new(class, "from_partitioned: " .. fmt:format(...)), 0)
end

local typename, describe = errors.typename, errors.describe

local function class_of(v)
  if type(v) ~= "userdata" then return nil end
  local mt = getmetatable(v)
  return type(mt) == "table" and rawget(mt, "__name") or nil
end

-- The product of v's entries (all >= 0), nil when it overflows int64; a zero
-- entry makes it 0 whatever the others (as dlrun_shape_size).
local function product(v)
  local p, overflow = 1, false
  for _, n in ipairs(v) do
    if n == 0 then return 0 end
    if n > math.maxinteger // p then overflow = true else p = p * n end
  end
  return not overflow and p or nil
end

-- "(4, 2)", and "(4,)" and "()" as Python prints tuples.
local function tuple(v)
  if #v == 1 then return ("(%d,)"):format(v[1]) end
  local s = {}
  for i, n in ipairs(v) do s[i] = ("%d"):format(n) end
  return "(" .. table.concat(s, ", ") .. ")"
end

-- A list (keys 1..n only, n <= limit) read without metamethods.
local function list(v, what, limit, expected)
  if type(v) ~= "table" then
    fail("TypeError", "%s must be %s, got %s", what, expected, typename(v))
  end
  local n = rawlen(v)
  if n > limit then fail("ValueError", "%s has %d entries (at most %d)", what, n, limit) end
  local keys = 0
  for _ in next, v do
    keys = keys + 1
    if keys > n then fail("TypeError", "%s must be %s (keys 1 to n only)", what, expected) end
  end
  return n
end

-- A list of integers >= min.
local function ints(v, what, min)
  local n = list(v, what, MAX_NDIM, "a list of integers")
  local out = {}
  for i = 1, n do
    local x = rawget(v, i)
    if math.type(x) == "float" and x == math.floor(x) and x >= math.mininteger and x < 2^63 then
      x = math.tointeger(x)
    end
    if math.type(x) ~= "integer" or x < min then
      fail("ValueError", "%s[%d] must be an integer >= %d, got %s", what, i, min, describe(x))
    end
    out[i] = x
  end
  return out
end

local function same_length(v, what, shape)
  if #v ~= #shape then
    fail("ValueError", "%s %s has %d entries, but shape %s has %d dimensions", what, tuple(v),
         #v, tuple(shape), #shape)
  end
end

-- Read and check one entry; ndim and tiling bound it.
local function entry(e, i, shape, tiling)
  local name = ("partitions[%d]"):format(i)
  if type(e) ~= "table" then
    fail("TypeError", "%s must be a table {position=, start=, shape=, location=, data=}, got %s",
         name, typename(e))
  end
  local p = {i = i, position = ints(rawget(e, "position"), name .. ".position", 0),
             start = ints(rawget(e, "start"), name .. ".start", 0),
             shape = ints(rawget(e, "shape"), name .. ".shape", 0), data = rawget(e, "data")}
  same_length(p.position, name .. ".position", shape)
  same_length(p.start, name .. ".start", shape)
  same_length(p.shape, name .. ".shape", shape)
  for d = 1, #shape do
    if p.position[d] >= tiling[d] then
      fail("ValueError", "%s has position %s, outside the grid partition_tiling %s", name,
           tuple(p.position), tuple(tiling))
    end
    if p.start[d] > shape[d] - p.shape[d] then -- start + shape could wrap
      fail("ValueError", "the partition at position %s (start %s, shape %s) extends past the "
           .. "global shape %s", tuple(p.position), tuple(p.start), tuple(p.shape), tuple(shape))
    end
  end
  local location = rawget(e, "location")
  if location ~= nil then
    local n = list(location, name .. ".location", MAX_PARTITIONS,
                   "a list of {process=, device=, replica_id=}")
    local first = rawget(location, 1)
    if n > 0 then
      local device = type(first) == "table" and rawget(first, "device") or nil
      if class_of(device) ~= "Device" then
        fail("TypeError", "%s.location[1].device must be a Device, got %s", name, typename(device))
      end
      p.home = device
    end
  end
  return p
end

local function overlap(a, b)
  for d = 1, #a.start do
    if a.start[d] >= b.start[d] + b.shape[d] or b.start[d] >= a.start[d] + a.shape[d] then
      return false
    end
  end
  return true
end

-- Completeness, disjointness and regularity of the checked entries.
local function check_grid(parts, shape, tiling, count)
  local at = {}
  for _, p in ipairs(parts) do
    local key = table.concat(p.position, ",")
    if at[key] then
      fail("ValueError", "partitions[%d] and partitions[%d] both have position %s", at[key].i, p.i,
           tuple(p.position))
    end
    at[key] = p
  end
  if #parts < count then
    local pos = {}
    for d = 1, #tiling do pos[d] = 0 end
    while at[table.concat(pos, ",")] do
      local d = #tiling
      while pos[d] == tiling[d] - 1 do pos[d], d = 0, d - 1 end
      pos[d] = pos[d] + 1
    end
    fail("ValueError", "the grid partition_tiling %s has %d positions, but no partition has "
         .. "position %s", tuple(tiling), count, tuple(pos))
  end
  for a = 1, #parts do
    for b = a + 1, #parts do
      local p, q = parts[a], parts[b]
      if overlap(p, q) then
        fail("ValueError", "the partitions at positions %s and %s overlap (start %s, shape %s and "
             .. "start %s, shape %s)", tuple(p.position), tuple(q.position), tuple(p.start),
             tuple(p.shape), tuple(q.start), tuple(q.shape))
      end
    end
  end
  local block = {}
  for d = 1, #shape do
    if shape[d] % tiling[d] ~= 0 then
      fail("ValueError", "dimension %d (size %d) does not split into %d equal partitions: dlrun "
           .. "needs a regular grid of equal blocks", d - 1, shape[d], tiling[d])
    end
    block[d] = shape[d] // tiling[d]
  end
  for _, p in ipairs(parts) do
    local start = {}
    for d = 1, #shape do start[d] = p.position[d] * block[d] end
    if table.concat(start, ",") ~= table.concat(p.start, ",")
        or table.concat(block, ",") ~= table.concat(p.shape, ",") then
      fail("ValueError", "the partition at position %s has start %s and shape %s, but a regular "
           .. "grid %s over shape %s puts it at start %s with shape %s", tuple(p.position),
           tuple(p.start), tuple(p.shape), tuple(tiling), tuple(shape), tuple(start), tuple(block))
    end
  end
end

return function(dl)
  -- Import p's data when it belongs on this process, checking shape and dtype.
  local function import(p, first)
    if p.home ~= nil and p.home.process_index ~= dl.process_index() then return nil end
    if p.data == nil then
      if p.home == nil then
        fail("ValueError", "the partition at position %s has neither data nor a location",
             tuple(p.position))
      end
      fail("ValueError", "the partition at position %s is on %s, a device of this process, but "
           .. "has no data", tuple(p.position), tostring(p.home))
    end
    local a = dl.from_dlpack(p.data)
    if table.concat(a.shape, ",") ~= table.concat(p.shape, ",") then
      fail("ValueError", "the partition at position %s has shape %s, but its data has shape %s",
           tuple(p.position), tuple(p.shape), tuple(a.shape))
    end
    if first ~= nil and a.dtype ~= first.array.dtype then
      fail("ValueError", "the partition at position %s has dtype %s, but the one at position %s "
           .. "has %s: every partition must have one dtype", tuple(p.position), a.dtype,
           tuple(first.position), first.array.dtype)
    end
    -- dlrun's own capsules import where they were exported from, memory kind included,
    -- so a round trip moves nothing; other data moves to its location, into the first
    -- partition's memory kind.
    local here, kind = a.addressable_shards[1].device, a.sharding.memory_kind
    local want = first and first.array.sharding.memory_kind or kind
    p.home = p.home or here
    if here ~= p.home or kind ~= want then
      a = dl.device_put(a, dl.SingleDeviceSharding(p.home, want))
    end
    return a
  end

  -- Nested devices table of the grid's shape (row-major parts).
  local function nest(parts, tiling, d, k)
    if d > #tiling then return parts[k].home, k + 1 end
    local t = {}
    for i = 1, tiling[d] do t[i], k = nest(parts, tiling, d + 1, k) end
    return t, k
  end

  -- An array of this shape and dtype over mesh holding no shard of this process's.
  local function empty(shape, mesh, spec, dtype, kind)
    local sharding = dl.NamedSharding(mesh, spec, kind)
    return dl.make_array_from_callback(shape, sharding, function() end, dtype)
  end

  local function no_dtype()
    fail("ValueError", "no partition is on this process (process %d) and none has data, so "
         .. "nothing gives the dtype", dl.process_index())
  end

  -- The array desc describes, on this process (no communication); with a sharding, nil
  -- and the shape and inferred sharding when nothing here gives the dtype.
  local function rebuild(desc, sharding)
    if type(desc) ~= "table" then
      fail("TypeError", "argument 1 (desc) must be a table {shape=, partition_tiling=, "
           .. "partitions=}, got %s", typename(desc))
    end
    if sharding ~= nil and class_of(sharding) ~= "Sharding" then
      fail("TypeError", "argument 2 (sharding) must be a Sharding, got %s", typename(sharding))
    end
    local shape = ints(rawget(desc, "shape"), "shape", 0)
    if not product(shape) then
      fail("ValueError", "shape %s has too many elements (overflows int64)", tuple(shape))
    end
    local tiling = ints(rawget(desc, "partition_tiling"), "partition_tiling", 1)
    same_length(tiling, "partition_tiling", shape)
    local count = product(tiling)
    if not count then
      fail("ValueError", "partition_tiling %s has too many positions (overflows int64)",
           tuple(tiling))
    end
    if count > MAX_PARTITIONS then
      fail("ValueError", "partition_tiling %s has %d positions (at most %d)", tuple(tiling),
           count, MAX_PARTITIONS)
    end
    local partitions = rawget(desc, "partitions")
    local n = list(partitions, "partitions", count,
                   "a list of {position=, start=, shape=, location=, data=}")
    local parts = {}
    for i = 1, n do parts[i] = entry(rawget(partitions, i), i, shape, tiling) end
    check_grid(parts, shape, tiling, count)
    -- Row-major order, as the mesh takes its devices.
    table.sort(parts, function(a, b)
      for d = 1, #shape do
        if a.position[d] ~= b.position[d] then return a.position[d] < b.position[d] end
      end
      return false
    end)
    local arrays, first = {}, nil
    for _, p in ipairs(parts) do
      local a = import(p, first)
      if a ~= nil then
        arrays[#arrays + 1] = a
        first = first or {array = a, position = p.position}
      end
    end
    local seen = {}
    for _, p in ipairs(parts) do
      if p.home == nil then
        fail("ValueError", "the partition at position %s has no location", tuple(p.position))
      end
      if seen[p.home] then
        fail("ValueError", "the partitions at positions %s and %s are both on %s: an inferred "
             .. "sharding needs one device per partition", tuple(seen[p.home].position),
             tuple(p.position), tostring(p.home))
      end
      seen[p.home] = p
    end
    local names, mesh = {}, nil
    if #shape == 0 then
      mesh = dl.Mesh({parts[1].home}, {"p0"})
    else
      for d = 1, #shape do names[d] = "p" .. (d - 1) end
      mesh = dl.Mesh((nest(parts, tiling, 1, 1)), names)
    end
    local spec = dl.P(table.unpack(names))
    if #arrays > 0 then
      local inferred = dl.NamedSharding(mesh, spec, arrays[1].sharding.memory_kind)
      return dl.make_array_from_single_device_arrays(shape, inferred, arrays)
    end
    -- No partition lives on this process's devices: its data for the others' (a replica
    -- here) gives the dtype and memory kind of an array holding no shard.
    local like = nil
    for _, p in ipairs(parts) do
      if like == nil and p.data ~= nil then like = dl.from_dlpack(p.data) end
    end
    -- With a sharding, another process's data gives them (see dl.from_partitioned).
    if like == nil and sharding ~= nil then return nil, shape, mesh, spec end
    if like == nil then no_dtype() end
    return empty(shape, mesh, spec, like.dtype, like.sharding.memory_kind)
  end

  -- The dtype and memory kind of the first process whose rebuilt array has them (mine:
  -- this process's array, or nil): one small collective.
  local function shared_layout(mine)
    local text = mine and mine.dtype .. " " .. mine.sharding.memory_kind or ""
    local bytes = {string.byte(text, 1, -1)}
    for i = #bytes + 1, 32 do bytes[i] = 0 end
    for _, row in ipairs(dl.process_allgather(dl.array(bytes, "uint8")):tolist()) do
      if row[1] ~= 0 then
        local chars = {}
        for i = 1, #row do if row[i] ~= 0 then chars[i] = string.char(row[i]) end end
        return table.concat(chars):match("^(%S+) (%S+)$")
      end
    end
    return nil
  end

  -- With a sharding, in a job of several processes, the call is collective (its device_put
  -- may move data between processes): this process's checks join the agreement first, so
  -- that a description refused on one process is an error on every process.
  function dl.from_partitioned(...)
    local desc, sharding = ...
    if sharding == nil then
      errors.check_nargs("from_partitioned", 2, ...)
      return rebuild(desc)
    end
    local ok, out, shape, mesh, spec = pcall(function(...)
      errors.check_nargs("from_partitioned", 2, ...)
      return rebuild(desc, sharding)
    end, ...)
    dl._agree("from_partitioned", not ok and out or nil)
    -- A process holding no partition and no data (nothing of a sharded array, say) takes
    -- the dtype and memory kind from another process's: every process asks, as none knows
    -- who lacks them.
    local dtype, kind
    if dl.process_count() > 1 then dtype, kind = shared_layout(out) end
    if out == nil then
      if dtype == nil then no_dtype() end
      out = empty(shape, mesh, spec, dtype, kind)
    end
    return dl.device_put(out, sharding)
  end
end
