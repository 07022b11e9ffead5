-- A Lua model of JAX's layout rules (docs/lua-api.md, "Meshes, specs and shardings")
-- and the test utilities that spec/sharding/sharded_array_spec.lua and
-- spec/sharding/transfer_spec.lua share: meshes built from device ids, the shards
-- (index, replica id) a sharding gives an array, the values of a block, and
-- the memory pools of every device. It applies the rules directly and never
-- asks the implementation what a layout is.
-- The specs run on the default runtime: 8 sim devices (ids 0..7) and the
-- host cpu device.
-- Usage (busted puts spec/ on package.path, see .busted):
--   local model = require "layout_model"

local dl = require "dlrun"
local assert = require "luassert"

local M = {}

local DEV = dl.devices()
local HOST = dl.host_device()
M.DEV, M.HOST = DEV, HOST

-- The device with this id.
function M.D(id) return DEV[id + 1] end
local D = M.D

M.ITEMSIZE = {
  bool = 1, int8 = 1, int16 = 2, int32 = 4, int64 = 8,
  uint8 = 1, uint16 = 2, uint32 = 4, uint64 = 8,
  float16 = 2, bfloat16 = 2, float32 = 4, float64 = 8, complex64 = 8, complex128 = 16,
  float8_e3m4 = 1, float8_e4m3 = 1, float8_e4m3b11fnuz = 1, float8_e4m3fn = 1,
  float8_e4m3fnuz = 1, float8_e5m2 = 1, float8_e5m2fnuz = 1, float8_e8m0fnu = 1,
}

function M.round256(n) return (n + 255) // 256 * 256 end

---------------------------------------------------------------------------
-- Reference layouts (JAX's rules): meshes built from device ids, shard indices,
-- replica ids.
---------------------------------------------------------------------------

-- A mesh over the devices with these ids (row-major order), with the flat
-- device list kept for the reference.
function M.mesh_of(ids, sizes, names)
  local flat = {}
  for i, id in ipairs(ids) do flat[i] = D(id) end
  local pos = 0
  local function nest(a)
    local t = {}
    for i = 1, sizes[a] do
      if a == #sizes then
        pos = pos + 1
        t[i] = flat[pos]
      else
        t[i] = nest(a + 1)
      end
    end
    return t
  end
  return {mesh = dl.Mesh(nest(1), names), flat = flat, sizes = sizes, names = names}
end

function M.product(shape)
  local n = 1
  for _, v in ipairs(shape) do n = n * v end
  return n
end

function M.block_shape(index)
  local s = {}
  for d = 1, #index do s[d] = index[d][2] - index[d][1] + 1 end
  return s
end
local block_shape = M.block_shape

-- Whether two indices (lists of {first, last}, 1-based) are the same box.
function M.same_index(a, b)
  for d = 1, #a do
    if a[d][1] ~= b[d][1] or a[d][2] ~= b[d][2] then return false end
  end
  return true
end
local same_index = M.same_index

function M.full_index(shape)
  local index = {}
  for d = 1, #shape do index[d] = {1, shape[d]} end
  return index
end
local full_index = M.full_index

-- The shards of `shape` under `spec` (a dl.P value) on mesh info `Mi` (from
-- mesh_of), in the mesh's flat order: {device=, index=, replica_id=}.
function M.named_layout(Mi, spec, shape)
  local axis = {}
  for a, n in ipairs(Mi.names) do axis[n] = a end
  local out = {}
  for f = 1, #Mi.flat do
    local coords, rem = {}, f - 1
    for a = #Mi.sizes, 1, -1 do
      coords[a] = rem % Mi.sizes[a]
      rem = rem // Mi.sizes[a]
    end
    local index = {}
    for d = 1, #shape do
      local entry = d <= spec.n and spec[d] or nil
      local names = entry == nil and {} or type(entry) == "string" and {entry} or entry
      local p, k = 1, 0
      for _, n in ipairs(names) do
        k = k * Mi.sizes[axis[n]] + coords[axis[n]]
        p = p * Mi.sizes[axis[n]]
      end
      local size = shape[d] // p
      index[d] = {k * size + 1, (k + 1) * size}
    end
    local r = 0
    for g = 1, f - 1 do
      if same_index(out[g].index, index) then r = r + 1 end
    end
    out[f] = {device = Mi.flat[f], index = index, replica_id = r}
  end
  return out
end
local named_layout = M.named_layout

-- A target: {sharding=, kind=, layout=function(shape), describe=}: the
-- Sharding value, its memory kind, the reference layout and a description
-- for messages.
function M.named(Mi, spec, kind)
  local ids = {}
  for i, d in ipairs(Mi.flat) do ids[i] = d.id end
  return {
    sharding = kind and dl.NamedSharding(Mi.mesh, spec, kind) or dl.NamedSharding(Mi.mesh, spec),
    kind = kind or "device",
    layout = function(shape) return named_layout(Mi, spec, shape) end,
    describe = ("%s on mesh %s of %s"):format(tostring(spec), table.concat(Mi.sizes, "x"),
                                              table.concat(ids, ",")) .. " " .. (kind or "device"),
  }
end

function M.single(dev, kind)
  return {
    sharding = kind and dl.SingleDeviceSharding(dev, kind) or dl.SingleDeviceSharding(dev),
    kind = kind or "device",
    layout = function(shape) return {{device = dev, index = full_index(shape), replica_id = 0}} end,
    describe = tostring(dev) .. " " .. (kind or "device"),
  }
end

-- 0-based row-major offsets of the elements of box `index` in `shape`.
function M.box_positions(shape, index)
  local strides, s = {}, 1
  for d = #shape, 1, -1 do
    strides[d] = s
    s = s * shape[d]
  end
  local out = {}
  local function rec(d, off)
    if d > #shape then
      out[#out + 1] = off
      return
    end
    for i = index[d][1], index[d][2] do rec(d + 1, off + (i - 1) * strides[d]) end
  end
  rec(1, 0)
  return out
end
local box_positions = M.box_positions

-- Nested list of `shape` from a flat list of values (the value itself for 0-d).
function M.nest_values(values, shape)
  local pos = 0
  local function build(d)
    if d > #shape then
      pos = pos + 1
      return values[pos]
    end
    local t = {}
    for i = 1, shape[d] do t[i] = build(d + 1) end
    return t
  end
  return build(1)
end
local nest_values = M.nest_values

-- The nested values of box `index` of an array of `shape` whose row-major
-- values are `flat` (0-based offsets map to flat[offset + 1]).
function M.block_values(flat, shape, index)
  local vals = {}
  for i, p in ipairs(box_positions(shape, index)) do vals[i] = flat[p + 1] end
  return nest_values(vals, block_shape(index))
end

---------------------------------------------------------------------------
-- Checking an array against the reference
---------------------------------------------------------------------------

-- x has `layout` (list of expected shards in order), memory kind `kind`,
-- dtype `dtype` and the full values `flat` (row-major) of `shape`: checked
-- shard by shard (device, index, replica id, and the shard's data: dtype,
-- device, memory kind, values). check_data(k, want, data), when given, adds
-- a spec's own checks of shard k's data.
function M.check_shards(x, layout, kind, flat, shape, dtype, check_data)
  local shards = x.addressable_shards
  assert.are.equal(#layout, #shards, "number of shards")
  for k, want in ipairs(layout) do
    local sh = shards[k]
    assert(rawequal(want.device, sh.device),
           ("shard %d: device %s, expected %s"):format(k, tostring(sh.device), tostring(want.device)))
    assert.are.same(want.index, sh.index, "shard " .. k .. " index")
    assert.are.equal(want.replica_id, sh.replica_id, "shard " .. k .. " replica_id")
    local data = sh.data
    if check_data then check_data(k, want, data) end
    assert.are.equal(dtype, data.dtype)
    assert(rawequal(want.device, data:devices()[1]), "shard " .. k .. " data device")
    assert.are.equal(kind, data.sharding.memory_kind, "shard " .. k .. " memory kind")
    assert.are.same(M.block_values(flat, shape, want.index), data:tolist(), "shard " .. k .. " data")
  end
end

---------------------------------------------------------------------------
-- Memory
---------------------------------------------------------------------------

local ALL_DEVICES = {}
for i, d in ipairs(DEV) do ALL_DEVICES[i] = d end
ALL_DEVICES[#ALL_DEVICES + 1] = HOST
M.ALL_DEVICES = ALL_DEVICES

-- Wait for every device, then collect garbage (twice, so finalizers run).
function M.settle()
  for _, d in ipairs(ALL_DEVICES) do d:synchronize() end
  collectgarbage()
  collectgarbage()
  for _, d in ipairs(ALL_DEVICES) do d:synchronize() end
end

-- bytes_in_use and num_allocs of both memory kinds of every device:
-- {["<device> <kind>"] = {bytes=, allocs=}}.
function M.memory()
  local m = {}
  for _, d in ipairs(ALL_DEVICES) do
    for _, kind in ipairs {"device", "pinned_host"} do
      local s = d:memory_stats(kind)
      m[tostring(d) .. " " .. kind] = {bytes = s.bytes_in_use, allocs = s.num_allocs}
    end
  end
  return m
end

return M
