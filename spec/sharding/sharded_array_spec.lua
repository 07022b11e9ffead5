-- runs: every-platform
-- ipc-off: no
-- devices: 8
-- needs: none

-- Specs for arrays with shardings (docs/lua-api.md, "Arrays with shardings" and
-- "Meshes, specs and shardings"): creation onto a sharding, shards and their
-- memory, the Array members that describe a layout, and assembling arrays
-- from per-device pieces (make_array_from_single_device_arrays,
-- make_array_from_callback).
--
-- Every expectation about a layout comes from the reference in
-- spec/layout_model.lua, which applies JAX's rules directly (it never asks
-- the implementation).
-- The busted process runs on the default runtime: 8 sim devices (ids 0..7)
-- and the host cpu device.
-- Run from the repository root: busted spec/sharding/sharded_array_spec.lua

local dl = require "dlrun"
local helpers = require "helpers"

local expect_error = helpers.expect_error

-- The reference (JAX's layout rules) and the memory utilities shared with
-- spec/sharding/transfer_spec.lua live in spec/layout_model.lua.
local model = require "layout_model"
local D, HOST, ITEMSIZE, round256 = model.D, model.HOST, model.ITEMSIZE, model.round256
local mesh_of, named_layout = model.mesh_of, model.named_layout
local named, single = model.named, model.single
local product, block_shape = model.product, model.block_shape
local nest_values, block_values = model.nest_values, model.block_values
local settle, memory = model.settle, model.memory

local function ids_of(devices)
  local ids = {}
  for i, d in ipairs(devices) do ids[i] = d.id end
  return ids
end

---------------------------------------------------------------------------
-- Memory
---------------------------------------------------------------------------

local function same_memory(before, after, what)
  for key, b in pairs(before) do
    assert.are.equal(b.bytes, after[key].bytes, (what or "") .. ": bytes_in_use of " .. key)
  end
end

-- The pools after making an array with `layout` (shard bytes `shard_nbytes`)
-- in memory `kind` grew by exactly one allocation of round256(shard_nbytes)
-- per shard, on the shard's own device.
local function check_growth(before, after, layout, kind, shard_nbytes)
  local grow = {}
  for _, sh in ipairs(layout) do
    local key = tostring(sh.device) .. " " .. kind
    grow[key] = (grow[key] or 0) + 1
  end
  for key, b in pairs(before) do
    local n = shard_nbytes > 0 and (grow[key] or 0) or 0
    assert.are.equal(b.bytes + n * round256(shard_nbytes), after[key].bytes,
                     "bytes_in_use of " .. key)
    assert.are.equal(b.allocs + n, after[key].allocs, "num_allocs of " .. key)
  end
end

---------------------------------------------------------------------------
-- Checking an array against the reference
---------------------------------------------------------------------------

-- x has `layout` (list of expected shards in order), memory kind `kind`, the
-- full values `flat` (row-major) of `shape`; each shard's data also has the
-- block's shape and lives on one device.
local function check_shards(x, layout, kind, flat, shape, dtype)
  model.check_shards(x, layout, kind, flat, shape, dtype, function(k, want, data)
    assert.are.same(block_shape(want.index), data.shape, "shard " .. k .. " data shape")
    assert.are.equal(1, #data:devices())
  end)
end

---------------------------------------------------------------------------
-- Meshes and sharding cases
---------------------------------------------------------------------------

local M8 = mesh_of({0, 1, 2, 3, 4, 5, 6, 7}, {8}, {"x"})
local M42 = mesh_of({0, 1, 2, 3, 4, 5, 6, 7}, {4, 2}, {"x", "y"})
local MP = mesh_of({7, 3, 5, 1, 6, 2, 4, 0}, {2, 4}, {"a", "b"})
local M4 = mesh_of({6, 2, 4, 0}, {4}, {"x"})
local M222 = mesh_of({0, 1, 2, 3, 4, 5, 6, 7}, {2, 2, 2}, {"x", "y", "z"})

local CASES = {
  {"a 1-D mesh, rows split P('x')", named(M8, dl.P("x")), {16, 33}},
  {"a 1-D mesh, replicated P()", named(M8, dl.P()), {4, 3}},
  {"a 1-D mesh, columns split P(nil, 'x')", named(M8, dl.P(nil, "x")), {3, 16}},
  {"a 2-D mesh, P('x', 'y')", named(M42, dl.P("x", "y")), {8, 2}},
  {"a 2-D mesh, P('y') (replicated over x)", named(M42, dl.P("y")), {8, 2}},
  {"a 2-D mesh, P({'x', 'y'})", named(M42, dl.P({"x", "y"})), {16, 3}},
  {"a 2-D mesh, P(nil, {'y', 'x'})", named(M42, dl.P(nil, {"y", "x"})), {2, 16}},
  {"a 2-D mesh, replicated P()", named(M42, dl.P()), {5}},
  {"a permuted 2-D mesh, P('b', 'a')", named(MP, dl.P("b", "a")), {8, 6}},
  {"a 4-device permuted 1-D mesh, P('x')", named(M4, dl.P("x")), {8, 70}},
  {"a 3-D mesh, P('z', {'x', 'y'})", named(M222, dl.P("z", {"x", "y"})), {4, 8}},
  {"a 2-D mesh in pinned_host memory, P('x')", named(M42, dl.P("x"), "pinned_host"), {8, 3}},
  {"a 1-D mesh in pinned_host memory, P(nil, 'x')", named(M8, dl.P(nil, "x"), "pinned_host"), {2, 8}},
  {"SingleDeviceSharding(device 5)", single(D(5)), {3, 4}},
  {"SingleDeviceSharding(device 2, pinned_host)", single(D(2), "pinned_host"), {3, 4}},
}

---------------------------------------------------------------------------
-- Creators: each makes an array of `shape` on `sharding` and returns it with
-- its dtype and row-major values.
---------------------------------------------------------------------------

local function iota_values(n, f)
  local t = {}
  for i = 0, n - 1 do t[i + 1] = f(i) end
  return t
end

local CREATORS = {
  {"dl.array", function(shape, s)
     local flat = iota_values(product(shape), function(i) return (i * 7 % 101) - 50 + 0.5 end)
     return dl.array(nest_values(flat, shape), "float32", s), "float32", flat
   end},
  {"dl.frombytes", function(shape, s)
     local flat = iota_values(product(shape), function(i) return i * 1000003 % 65536 - 32768 end)
     local parts = {}
     for i, v in ipairs(flat) do parts[i] = string.pack("<i4", v) end
     return dl.frombytes(table.concat(parts), shape, "int32", s), "int32", flat
   end},
  {"dl.zeros", function(shape, s)
     return dl.zeros(shape, "float32", s), "float32", iota_values(product(shape), function() return 0.0 end)
   end},
  {"dl.ones", function(shape, s)
     return dl.ones(shape, "int16", s), "int16", iota_values(product(shape), function() return 1 end)
   end},
  {"dl.full", function(shape, s)
     return dl.full(shape, 2.5, "float64", s), "float64", iota_values(product(shape), function() return 2.5 end)
   end},
}

-- Make, check values, shards and memory, delete, check memory again.
local function check_creation(make, target, shape)
  settle()
  local before = memory()
  local x, dtype, flat = make(shape, target.sharding)
  assert.are.equal(x, x:block_until_ready())
  local after = memory()
  local layout = target.layout(shape)
  local shard_shape = block_shape(layout[1].index)
  local shard_nbytes = product(shard_shape) * ITEMSIZE[dtype]
  check_growth(before, after, layout, target.kind, shard_nbytes)

  assert.are.same(shape, x.shape)
  assert.are.equal(dtype, x.dtype)
  assert(rawequal(target.sharding, x.sharding), "x.sharding is not the Sharding passed")
  assert.are.same(nest_values(flat, shape), x:tolist())
  check_shards(x, layout, target.kind, flat, shape, dtype)

  x:delete()
  assert.is_true(x:is_deleted())
  settle()
  same_memory(before, memory(), "after delete")
end

describe("creating arrays on a sharding", function()
  for _, creator in ipairs(CREATORS) do
    describe(creator[1], function()
      for _, case in ipairs(CASES) do
        it("places each shard on its own device: " .. case[1], function()
          check_creation(creator[2], case[2], case[3])
        end)
      end
    end)
  end

  describe("dl.arange", function()
    local ARANGE_CASES = {
      {"a 1-D mesh, P('x')", named(M8, dl.P("x")), 16},
      {"a 2-D mesh, P({'x', 'y'})", named(M42, dl.P({"x", "y"})), 72},
      {"a 2-D mesh, P('y') (replicated over x)", named(M42, dl.P("y")), 6},
      {"a 2-D mesh, replicated P()", named(M42, dl.P()), 5},
      {"a permuted 2-D mesh, P({'b', 'a'})", named(MP, dl.P({"b", "a"})), 16},
      {"a 4-device permuted mesh, P('x')", named(M4, dl.P("x")), 100},
      {"pinned_host memory, P('x')", named(M8, dl.P("x"), "pinned_host"), 8},
      {"SingleDeviceSharding(device 6)", single(D(6)), 9},
    }
    for _, case in ipairs(ARANGE_CASES) do
      it("arange(n, dtype, sharding) places each shard: " .. case[1], function()
        check_creation(function(shape, s)
          return dl.arange(shape[1], "int32", s), "int32",
            iota_values(shape[1], function(i) return i end)
        end, case[2], {case[3]})
      end)
      it("arange(start, stop, step, dtype, sharding) places each shard: " .. case[1], function()
        local n = case[3]
        check_creation(function(shape, s)
          return dl.arange(10, 10 + 3 * n, 3, "int64", s), "int64",
            iota_values(n, function(i) return 10 + 3 * i end)
        end, case[2], {n})
      end)
    end

    it("arange with a float step on a sharding computes each shard's own values", function()
      local t = named(M8, dl.P("x"))
      check_creation(function()
        return dl.arange(0.5, 8.5, 0.5, "float32", t.sharding), "float32",
          iota_values(16, function(i) return 0.5 + 0.5 * i end)
      end, t, {16})
    end)
  end)

  it("makes a 0-d array replicated on a 2-D mesh (one 4-byte shard per device)", function()
    local t = named(M42, dl.P())
    check_creation(function() return dl.array(3.5, "float32", t.sharding), "float32", {3.5} end,
                   t, {})
  end)

  it("makes zero-size arrays on a sharding without allocating", function()
    local t = named(M8, dl.P(nil, "x"))
    settle()
    local before = memory()
    local xs = {
      dl.zeros({0, 8}, "float32", t.sharding),
      dl.frombytes("", {0, 8}, "int32", t.sharding),
      dl.full({0, 16}, 7, "int8", t.sharding),
    }
    for _, x in ipairs(xs) do x:block_until_ready() end
    same_memory(before, memory(), "zero-size arrays")
    for _, x in ipairs(xs) do
      local layout = named_layout(M8, dl.P(nil, "x"), x.shape)
      check_shards(x, layout, "device", {}, x.shape, x.dtype)
      assert.are.same({}, x:tolist())
    end
    assert.are.same({{1, 0}, {3, 4}}, xs[3].addressable_shards[2].index)
    local r = dl.arange(0, "int32", dl.NamedSharding(M8.mesh, dl.P("x")))
    assert.are.same({0}, r.shape)
    assert.are.same({{1, 0}}, r.addressable_shards[8].index)
    same_memory(before, memory(), "zero-size arange")
  end)

  it("does not stage zeros, full or arange through the host cpu device's memory", function()
    local t = named(M8, dl.P("x"))
    settle()
    local before = HOST:memory_stats().bytes_in_use
    local a = dl.zeros({1024}, "float32", t.sharding)
    local b = dl.full({1024}, 3, "int32", t.sharding)
    local c = dl.arange(1024, "int32", t.sharding)
    a:block_until_ready(); b:block_until_ready(); c:block_until_ready()
    assert.are.equal(before, HOST:memory_stats().bytes_in_use)
  end)
end)

---------------------------------------------------------------------------
-- Array members that describe the layout
---------------------------------------------------------------------------

describe("sharded array members", function()
  local s_xy = dl.NamedSharding(M42.mesh, dl.P("x", "y"))
  local FLAT16 = iota_values(16, function(i) return i end)

  it("addressable_shards follow a worked example (mesh 4x2, P('x','y'), 8x2)", function()
    local x = dl.array(nest_values(FLAT16, {8, 2}), "int32", dl.SingleDeviceSharding(D(0)))
    local y = dl.device_put(x, s_xy)
    local shards = y.addressable_shards
    assert.are.same({{1, 2}, {1, 1}}, shards[1].index)
    assert.are.same({{1, 2}, {2, 2}}, shards[2].index)
    for k = 1, 8 do assert.are.equal(0, shards[k].replica_id) end
    check_shards(y, named_layout(M42, dl.P("x", "y"), {8, 2}), "device", FLAT16, {8, 2}, "int32")
    assert.are.same({{0}, {2}}, shards[1].data:tolist())
    assert.are.same({{13}, {15}}, shards[8].data:tolist())
  end)

  it("replica ids of P('y') on a 4x2 mesh are 0,0,1,1,2,2,3,3", function()
    local x = dl.zeros({8, 2}, "float32", dl.NamedSharding(M42.mesh, dl.P("y")))
    local ids, first = {}, {}
    for k, sh in ipairs(x.addressable_shards) do
      ids[k] = sh.replica_id
      first[k] = sh.index[1][1]
    end
    assert.are.same({0, 0, 1, 1, 2, 2, 3, 3}, ids)
    assert.are.same({1, 5, 1, 5, 1, 5, 1, 5}, first)
  end)

  it("addressable_data(i) is the i-th shard's data (1-based)", function()
    local x = dl.array(nest_values(FLAT16, {8, 2}), "int32", s_xy)
    local layout = named_layout(M42, dl.P("x", "y"), {8, 2})
    for i = 1, 8 do
      local d = x:addressable_data(i)
      assert.are.same({2, 1}, d.shape)
      assert(rawequal(layout[i].device, d:devices()[1]), "device of addressable_data(" .. i .. ")")
      assert.are.same(block_values(FLAT16, {8, 2}, layout[i].index), d:tolist())
    end
  end)

  it("addressable_data(i) out of range raises ValueError", function()
    local x = dl.array(nest_values(FLAT16, {8, 2}), "int32", s_xy)
    expect_error("ValueError", "addressable_data: index 9 is out of range (1 to 8)",
                 x.addressable_data, x, 9)
    expect_error("ValueError", "addressable_data: index 0 is out of range (1 to 8)",
                 x.addressable_data, x, 0)
    expect_error("ValueError", "addressable_data: index -1 is out of range (1 to 8)",
                 x.addressable_data, x, -1)
    expect_error("TypeError", {contains = "addressable_data: argument 2 (i) must be an integer"},
                 x.addressable_data, x, "1")
  end)

  it("addressable_data(i) of a fully replicated array is a full replica for any i", function()
    local rep = dl.NamedSharding(M42.mesh, dl.P())
    local x = dl.array(nest_values(FLAT16, {8, 2}), "int32", rep)
    assert.is_true(x.is_fully_replicated)
    for i = 1, 8 do
      local d = x:addressable_data(i)
      assert.are.same({8, 2}, d.shape)
      assert.are.same(nest_values(FLAT16, {8, 2}), d:tolist())
    end
  end)

  it("is_fully_addressable is true for every array of this process", function()
    for _, case in ipairs(CASES) do
      local x = dl.zeros(case[3], "float32", case[2].sharding)
      assert.is_true(x.is_fully_addressable, case[1])
    end
  end)

  it("is_fully_replicated is true exactly when every device holds the whole array", function()
    local want = {
      [dl.P("x")] = false, [dl.P()] = true, [dl.P("y")] = false,
      [dl.P(nil, "x")] = false, [dl.P(nil, nil)] = true,
    }
    for spec, expected in pairs(want) do
      local x = dl.zeros({8, 8}, "float32", dl.NamedSharding(M42.mesh, spec))
      assert.are.equal(expected, x.is_fully_replicated, tostring(spec))
    end
    assert.is_true(dl.zeros({4}, "float32", D(3)).is_fully_replicated)
    assert.is_true(dl.zeros({4}, "float32", dl.NamedSharding(M8.mesh, dl.P())).is_fully_replicated)
    assert.is_false(dl.zeros({8}, "float32", dl.NamedSharding(M8.mesh, dl.P("x"))).is_fully_replicated)
  end)

  it("devices() lists the devices by id, whatever the mesh order", function()
    local x = dl.zeros({8, 8}, "float32", dl.NamedSharding(MP.mesh, dl.P("a", "b")))
    assert.are.same({0, 1, 2, 3, 4, 5, 6, 7}, ids_of(x:devices()))
    for i, d in ipairs(x:devices()) do assert(rawequal(D(i - 1), d)) end
    local y = dl.zeros({8}, "float32", dl.NamedSharding(M4.mesh, dl.P("x")))
    assert.are.same({0, 2, 4, 6}, ids_of(y:devices()))
    assert.are.same({5}, ids_of(dl.zeros({2}, "float32", D(5)):devices()))
  end)

  it("sharding is the very Sharding value that was passed", function()
    for _, case in ipairs(CASES) do
      local x = dl.ones(case[3], "float32", case[2].sharding)
      assert(rawequal(case[2].sharding, x.sharding), case[1])
      assert(rawequal(x.sharding, x.sharding))
    end
  end)

  it("tostring prints the values of a sharded array like those of a one-device array", function()
    local flat = iota_values(16, function(i) return i end)
    local x = dl.array(nest_values(flat, {8, 2}), "float32", s_xy)
    assert.are.equal(tostring(dl.array(nest_values(flat, {8, 2}), "float32")), tostring(x))
    local y = dl.arange(8, "int32", dl.NamedSharding(MP.mesh, dl.P({"b", "a"})))
    assert.are.equal("Array([0, 1, 2, 3, 4, 5, 6, 7], dtype=int32)", tostring(y))
    local z = dl.arange(1200, "int32", dl.NamedSharding(M8.mesh, dl.P("x")))
    assert.are.equal(tostring(dl.arange(1200, "int32")), tostring(z))
  end)

  -- _elements(first, count) over every range of a few layouts.
  local function check_elements(x, flat)
    local n = #flat
    for first = 1, n do
      for count = 0, n - first + 1 do
        local got = x:_elements(first, count)
        assert.are.equal(count, #got)
        for k = 1, count do
          if got[k] ~= flat[first + k - 1] then
            error(("_elements(%d, %d)[%d] = %s, expected %s"):format(
              first, count, k, tostring(got[k]), tostring(flat[first + k - 1])))
          end
        end
      end
    end
  end

  it("_elements reads any range across shard boundaries (P('x','y') on 4x2, 8x4)", function()
    local flat = iota_values(32, function(i) return i * 3 - 40 end)
    check_elements(dl.array(nest_values(flat, {8, 4}), "int32", s_xy), flat)
  end)

  it("_elements reads any range across shard boundaries (3-D arrays, permuted and 3-D meshes)", function()
    local flat = iota_values(24, function(i) return i + 100 end)
    local s = dl.NamedSharding(M4.mesh, dl.P(nil, nil, "x"))
    check_elements(dl.array(nest_values(flat, {2, 3, 4}), "int16", s), flat)
    local s3 = dl.NamedSharding(M222.mesh, dl.P("y", "z", "x"))
    local flat3 = iota_values(64, function(i) return i end)
    check_elements(dl.array(nest_values(flat3, {2, 4, 8}), "int32", s3), flat3)
  end)

  it("_elements reads partially replicated layouts (P('y') on 4x2)", function()
    local flat = iota_values(16, function(i) return 0.25 * i end)
    check_elements(dl.array(nest_values(flat, {8, 2}), "float32",
                            dl.NamedSharding(M42.mesh, dl.P("y"))), flat)
  end)

  it("_elements outside the array raises ValueError", function()
    local x = dl.arange(16, "int32", dl.NamedSharding(M8.mesh, dl.P("x")))
    expect_error("ValueError", "_elements: range 16+2 outside size 16", x._elements, x, 16, 2)
    expect_error("ValueError", "_elements: range 0+1 outside size 16", x._elements, x, 0, 1)
  end)

  it("a deleted sharded array refuses its shards and data but keeps its metadata", function()
    local x = dl.zeros({8, 2}, "float32", s_xy)
    x:delete()
    local msg = "Array has been deleted with shape=float32[8,2]."
    expect_error("RuntimeError", msg, function() return x.addressable_shards end)
    expect_error("RuntimeError", msg, x.addressable_data, x, 1)
    expect_error("RuntimeError", msg, x.tolist, x)
    expect_error("RuntimeError", msg, x.devices, x)
    assert.are.same({8, 2}, x.shape)
    assert(rawequal(s_xy, x.sharding))
  end)
end)

---------------------------------------------------------------------------
-- make_array_from_single_device_arrays
---------------------------------------------------------------------------

-- One single-device array per shard of `layout`, holding that shard's block.
local function pieces_for(layout, flat, shape, dtype, kind)
  local out = {}
  for k, sh in ipairs(layout) do
    local target = kind and dl.SingleDeviceSharding(sh.device, kind) or sh.device
    out[k] = dl.array(block_values(flat, shape, sh.index), dtype, target)
  end
  return out
end

describe("dl.make_array_from_single_device_arrays", function()
  local shape = {8, 2}
  local flat = iota_values(16, function(i) return i + 0.5 end)
  local s_xy = dl.NamedSharding(M42.mesh, dl.P("x", "y"))
  local layout_xy = named_layout(M42, dl.P("x", "y"), shape)
  local PREFIX_SHAPE = "Expected shard shape (2, 1) doesn't match the single device array shape "

  it("assembles the pieces, sharing their buffers: no bytes moved, no memory added", function()
    local pieces = pieces_for(layout_xy, flat, shape, "float32")
    for _, p in ipairs(pieces) do p:block_until_ready() end
    settle()
    local before = memory()
    dl.reset_transfer_stats()
    local z = dl.make_array_from_single_device_arrays(shape, s_xy, pieces)
    local st = dl.transfer_stats()
    assert.are.equal(0, st.bytes_moved)
    assert.are.equal(0, st.local_bytes)
    assert.are.equal(0, st.copies)
    same_memory(before, memory(), "assembling")
    assert(rawequal(s_xy, z.sharding))
    assert.are.same(shape, z.shape)
    assert.are.equal("float32", z.dtype)
    assert.are.same(nest_values(flat, shape), z:tolist())
    check_shards(z, layout_xy, "device", flat, shape, "float32")
    for k, sh in ipairs(z.addressable_shards) do
      assert.are.equal(pieces[k]:tobytes(), sh.data:tobytes())
    end
  end)

  it("accepts the pieces in any order and lays them out by the sharding", function()
    local pieces = pieces_for(layout_xy, flat, shape, "float32")
    for _, order in ipairs {{8, 7, 6, 5, 4, 3, 2, 1}, {3, 8, 1, 6, 2, 7, 5, 4}} do
      local list = {}
      for i, k in ipairs(order) do list[i] = pieces[k] end
      local z = dl.make_array_from_single_device_arrays(shape, s_xy, list)
      assert.are.same(nest_values(flat, shape), z:tolist())
      check_shards(z, layout_xy, "device", flat, shape, "float32")
    end
  end)

  it("assembles partially replicated, permuted-mesh and pinned_host layouts", function()
    local cases = {
      {dl.NamedSharding(M42.mesh, dl.P("y")), named_layout(M42, dl.P("y"), shape), nil},
      {dl.NamedSharding(MP.mesh, dl.P("b", "a")), named_layout(MP, dl.P("b", "a"), {8, 2}), nil},
      {dl.NamedSharding(M4.mesh, dl.P("x"), "pinned_host"), named_layout(M4, dl.P("x"), shape),
       "pinned_host"},
      {dl.NamedSharding(M42.mesh, dl.P()), named_layout(M42, dl.P(), shape), nil},
    }
    for _, c in ipairs(cases) do
      local pieces = pieces_for(c[2], flat, shape, "float32", c[3])
      local z = dl.make_array_from_single_device_arrays(shape, c[1], pieces)
      assert.are.same(nest_values(flat, shape), z:tolist())
      check_shards(z, c[2], c[3] or "device", flat, shape, "float32")
    end
  end)

  it("raises JAX's ValueError for the wrong number of arrays", function()
    local pieces = pieces_for(layout_xy, flat, shape, "float32")
    local seven = {table.unpack(pieces, 1, 7)}
    expect_error("ValueError",
                 "Expected 8 per-device arrays (this is how many devices are addressable by the "
                   .. "sharding), but got 7",
                 dl.make_array_from_single_device_arrays, shape, s_xy, seven)
    local nine = {table.unpack(pieces)}
    nine[9] = dl.array({{1.0}, {2.0}}, "float32", HOST)
    expect_error("ValueError",
                 "Expected 8 per-device arrays (this is how many devices are addressable by the "
                   .. "sharding), but got 9",
                 dl.make_array_from_single_device_arrays, shape, s_xy, nine)
  end)

  it("raises JAX's ValueError for arrays on the same device", function()
    local pieces = pieces_for(layout_xy, flat, shape, "float32")
    pieces[2] = dl.array({{1.0}, {2.0}}, "float32", D(0))
    expect_error("ValueError",
                 "When making an array from single-device arrays, the input arrays must be from "
                   .. "distinct devices, but got device IDs [0, 0, 2, 3, 4, 5, 6, 7]",
                 dl.make_array_from_single_device_arrays, shape, s_xy, pieces)
  end)

  it("raises JAX's ValueError when the device sets differ", function()
    local M0123 = mesh_of({0, 1, 2, 3}, {4}, {"x"})
    local s = dl.NamedSharding(M0123.mesh, dl.P("x"))
    local pieces = {}
    for i, id in ipairs {0, 1, 4, 5} do pieces[i] = dl.array({{1.0, 2.0}, {3.0, 4.0}}, "float32", D(id)) end
    expect_error("ValueError",
                 "Addressable devices and per-device arrays devices do not match. Sharding "
                   .. "contains devices {2, 3} that are not present in per-device arrays. "
                   .. "Per-device arrays contain devices {4, 5} that are not present in the "
                   .. "sharding.",
                 dl.make_array_from_single_device_arrays, {8, 2}, s, pieces)
  end)

  it("prints the device id sets of a mismatch in ascending order, as Python prints them", function()
    -- Python prints these small sets of ids sorted; the mesh and input orders
    -- must not leak into the message.
    local MR = mesh_of({3, 2, 1, 0}, {4}, {"x"})
    local s = dl.NamedSharding(MR.mesh, dl.P("x"))
    local pieces = {}
    for i, id in ipairs {5, 4, 1, 0} do pieces[i] = dl.array({{1.0, 2.0}, {3.0, 4.0}}, "float32", D(id)) end
    expect_error("ValueError",
                 "Addressable devices and per-device arrays devices do not match. Sharding "
                   .. "contains devices {2, 3} that are not present in per-device arrays. "
                   .. "Per-device arrays contain devices {4, 5} that are not present in the "
                   .. "sharding.",
                 dl.make_array_from_single_device_arrays, {8, 2}, s, pieces)
  end)

  it("names the devices, not their ids, when the sharding and the arrays span platforms", function()
    -- CpuDevice(id=0) and SimDevice(id=0) share an id: ids alone would read alike.
    local s = dl.NamedSharding(dl.Mesh({D(0), HOST}, {"x"}), dl.P("x"))
    local function piece(dev) return dl.array({{1.0, 2.0}}, "float32", dev) end
    expect_error("ValueError",
                 "Addressable devices and per-device arrays devices do not match. Sharding "
                   .. "contains devices {CpuDevice(id=0)} that are not present in per-device "
                   .. "arrays. Per-device arrays contain devices {" .. helpers.dev(1) .. "} that are not "
                   .. "present in the sharding.",
                 dl.make_array_from_single_device_arrays, {2, 2}, s, {piece(D(1)), piece(D(0))})
    expect_error("ValueError",
                 "When making an array from single-device arrays, the input arrays must be from "
                   .. "distinct devices, but got devices [" .. helpers.dev(0) .. ", " .. helpers.dev(0) .. "]",
                 dl.make_array_from_single_device_arrays, {2, 2}, s, {piece(D(0)), piece(D(0))})
    local sims = dl.NamedSharding(dl.Mesh({D(0), D(1)}, {"x"}), dl.P("x"))
    expect_error("ValueError",
                 "Addressable devices and per-device arrays devices do not match. Sharding "
                   .. "contains devices {" .. helpers.dev(1) .. "} that are not present in per-device "
                   .. "arrays. Per-device arrays contain devices {CpuDevice(id=0)} that are not "
                   .. "present in the sharding.",
                 dl.make_array_from_single_device_arrays, {2, 2}, sims, {piece(D(0)), piece(HOST)})
  end)

  it("raises JAX's ValueError for mismatched dtypes", function()
    local pieces = pieces_for(layout_xy, flat, shape, "float32")
    pieces[4] = dl.array({{1}, {2}}, "int32", D(3))
    expect_error("ValueError",
                 {pattern = "^Input buffers to `Array` must have matching dtypes%. Got int32, "
                    .. "expected float32 for buffer: "},
                 dl.make_array_from_single_device_arrays, shape, s_xy, pieces)
  end)

  it("takes the expected dtype from the first array given, as JAX does (arrays[0].dtype)", function()
    -- Inputs in reverse device order; the one on device 0 (last in the list)
    -- is the odd one out, so JAX reports it against the first input's dtype.
    local pieces = pieces_for(layout_xy, flat, shape, "float32")
    pieces[1] = dl.array({{1}, {2}}, "int32", D(0))
    local reversed = {}
    for i = 1, 8 do reversed[i] = pieces[9 - i] end
    expect_error("ValueError",
                 {pattern = "^Input buffers to `Array` must have matching dtypes%. Got int32, "
                    .. "expected float32 for buffer: "},
                 dl.make_array_from_single_device_arrays, shape, s_xy, reversed)
  end)

  it("raises JAX's ValueError for a piece of the wrong shape", function()
    local pieces = pieces_for(layout_xy, flat, shape, "float32")
    pieces[5] = dl.array({{1.0, 2.0}, {3.0, 4.0}}, "float32", D(4))
    expect_error("ValueError",
                 PREFIX_SHAPE .. "(2, 2). Shape of Array is float32[8,2] with sharding "
                   .. tostring(s_xy),
                 dl.make_array_from_single_device_arrays, shape, s_xy, pieces)
    pieces[5] = dl.array({1.0, 2.0}, "float32", D(4))
    expect_error("ValueError",
                 PREFIX_SHAPE .. "(2,). Shape of Array is float32[8,2] with sharding "
                   .. tostring(s_xy),
                 dl.make_array_from_single_device_arrays, shape, s_xy, pieces)
  end)

  it("raises JAX's ValueError for a multi-device array among the inputs", function()
    local pieces = pieces_for(layout_xy, flat, shape, "float32")
    pieces[3] = dl.zeros({2, 2}, "float32", dl.NamedSharding(M8.mesh, dl.P()))
    expect_error("ValueError",
                 "When making an array from single-device arrays the input arrays must have one "
                   .. "shard each. An argument array had 8 shard(s).",
                 dl.make_array_from_single_device_arrays, shape, s_xy, pieces)
  end)

  it("raises TypeError for elements that are not Arrays", function()
    local pieces = pieces_for(layout_xy, flat, shape, "float32")
    pieces[2] = {{1.0}, {2.0}}
    expect_error("TypeError", {contains = "element 2"},
                 dl.make_array_from_single_device_arrays, shape, s_xy, pieces)
    pieces[2] = 7
    expect_error("TypeError", {contains = "element 2"},
                 dl.make_array_from_single_device_arrays, shape, s_xy, pieces)
    expect_error("TypeError", nil, dl.make_array_from_single_device_arrays, shape, s_xy, "x")
    expect_error("TypeError", nil, dl.make_array_from_single_device_arrays, shape, {}, pieces)
  end)

  it("raises RuntimeError for a deleted piece", function()
    local pieces = pieces_for(layout_xy, flat, shape, "float32")
    pieces[6]:delete()
    expect_error("RuntimeError", "Array has been deleted with shape=float32[2,1].",
                 dl.make_array_from_single_device_arrays, shape, s_xy, pieces)
  end)
end)

---------------------------------------------------------------------------
-- make_array_from_callback
---------------------------------------------------------------------------

describe("dl.make_array_from_callback", function()
  local shape = {8, 4}
  local flat = iota_values(32, function(i) return i * 2 end)

  -- A callback giving the block of `flat` for its index, recording the calls.
  local function recorder(as_array, dtype)
    local calls = {}
    local fn = function(index)
      calls[#calls + 1] = index
      local v = block_values(flat, shape, index)
      if as_array then return dl.array(v, dtype or "int32", HOST) end
      return v
    end
    return fn, calls
  end

  local function index_key(index)
    local parts = {}
    for d, p in ipairs(index) do parts[d] = p[1] .. ":" .. p[2] end
    return table.concat(parts, ",")
  end

  it("calls the callback once per device with that device's index (1-based, inclusive)", function()
    local spec = dl.P("x", "y")
    local s = dl.NamedSharding(M42.mesh, spec)
    local fn, calls = recorder(false)
    local z = dl.make_array_from_callback(shape, s, fn)
    assert.are.equal(8, #calls)
    local layout = named_layout(M42, spec, shape)
    local want, got = {}, {}
    for k, sh in ipairs(layout) do want[k] = index_key(sh.index) end
    for k, index in ipairs(calls) do got[k] = index_key(index) end
    table.sort(want)
    table.sort(got)
    assert.are.same(want, got)
    assert.are.equal("int32", z.dtype)
    assert(rawequal(s, z.sharding))
    assert.are.same(nest_values(flat, shape), z:tolist())
    check_shards(z, layout, "device", flat, shape, "int32")
  end)

  it("calls it once per device for a partially replicated sharding (P('y') on 4x2)", function()
    local spec = dl.P("y")
    local fn, calls = recorder(false)
    local z = dl.make_array_from_callback(shape, dl.NamedSharding(M42.mesh, spec), fn)
    assert.are.equal(8, #calls)
    check_shards(z, named_layout(M42, spec, shape), "device", flat, shape, "int32")
  end)

  it("calls it once in all, with the full index, for a fully replicated sharding", function()
    local fn, calls = recorder(false)
    local z = dl.make_array_from_callback(shape, dl.NamedSharding(MP.mesh, dl.P()), fn)
    assert.are.equal(1, #calls)
    assert.are.same({{1, 8}, {1, 4}}, calls[1])
    check_shards(z, named_layout(MP, dl.P(), shape), "device", flat, shape, "int32")
    local fn1, calls1 = recorder(false)
    dl.make_array_from_callback(shape, dl.SingleDeviceSharding(D(3)), fn1)
    assert.are.equal(1, #calls1)
    assert.are.same({{1, 8}, {1, 4}}, calls1[1])
  end)

  it("accepts Arrays from the callback and moves them onto each device", function()
    local spec = dl.P(nil, "x")
    local fn, calls = recorder(true, "int16")
    local z = dl.make_array_from_callback(shape, dl.NamedSharding(M4.mesh, spec), fn)
    assert.are.equal(4, #calls)
    assert.are.equal("int16", z.dtype)
    check_shards(z, named_layout(M4, spec, shape), "device", flat, shape, "int16")
  end)

  it("accepts a sharded Array from the callback (replicated target)", function()
    local src = dl.array(nest_values(flat, shape), "int32", dl.NamedSharding(M8.mesh, dl.P("x")))
    local z = dl.make_array_from_callback(shape, dl.NamedSharding(M42.mesh, dl.P()),
                                          function() return src end)
    check_shards(z, named_layout(M42, dl.P(), shape), "device", flat, shape, "int32")
  end)

  it("converts Lua data to the dtype argument, and infers int32/float32 without it", function()
    local s = dl.NamedSharding(M8.mesh, dl.P("x"))
    local z = dl.make_array_from_callback({16}, s, function(index) return {index[1][1], index[1][2]} end, "float64")
    assert.are.equal("float64", z.dtype)
    local want = {}
    for i = 1, 16 do want[i] = i + 0.0 end
    assert.are.same(want, z:tolist())
    local zi = dl.make_array_from_callback({16}, s, function(index) return {index[1][1], index[1][2]} end)
    assert.are.equal("int32", zi.dtype)
    local zf = dl.make_array_from_callback({16}, s, function(index) return {index[1][1] + 0.5, index[1][2]} end)
    assert.are.equal("float32", zf.dtype)
  end)

  it("puts the pieces in the sharding's memory kind (pinned_host)", function()
    local spec = dl.P("x")
    local fn = recorder(false)
    local z = dl.make_array_from_callback(shape, dl.NamedSharding(M42.mesh, spec, "pinned_host"), fn)
    assert.are.equal("pinned_host", z.sharding.memory_kind)
    check_shards(z, named_layout(M42, spec, shape), "pinned_host", flat, shape, "int32")
  end)

  it("raises the shard-shape ValueError for a wrong-shaped result", function()
    local s = dl.NamedSharding(M42.mesh, dl.P("x", "y"))
    expect_error("ValueError",
                 "Expected shard shape (2, 2) doesn't match the single device array shape (3, 2). "
                   .. "Shape of Array is int32[8,4] with sharding " .. tostring(s),
                 dl.make_array_from_callback, shape, s,
                 function() return {{1, 2}, {3, 4}, {5, 6}} end)
    expect_error("ValueError",
                 "Expected shard shape (2, 2) doesn't match the single device array shape (4,). "
                   .. "Shape of Array is float32[8,4] with sharding " .. tostring(s),
                 dl.make_array_from_callback, shape, s,
                 function() return dl.array({1.0, 2.0, 3.0, 4.0}, "float32", HOST) end)
  end)

  it("raises JAX's ValueError when a given dtype differs from the callback's Arrays", function()
    local s = dl.NamedSharding(M8.mesh, dl.P("x"))
    expect_error("ValueError",
                 {contains = "it must match the dtype of the addressable shards. Got dtype=float32 "
                    .. "and shard dtype=int16"},
                 dl.make_array_from_callback, {16}, s,
                 function() return dl.array({1, 2}, "int16", HOST) end, "float32")
  end)

  it("raises JAX's dtype ValueError when the callback's Arrays disagree on dtype", function()
    local s = dl.NamedSharding(M8.mesh, dl.P("x"))
    local calls = 0
    expect_error("ValueError",
                 {pattern = "^Input buffers to `Array` must have matching dtypes%. Got float32, "
                    .. "expected int32 for buffer: "},
                 dl.make_array_from_callback, {16}, s, function()
                   calls = calls + 1
                   return dl.array({1, 2}, calls == 1 and "int32" or "float32", HOST)
                 end)
  end)

  it("raises errors raised by the callback unchanged", function()
    local s = dl.NamedSharding(M8.mesh, dl.P("x"))
    local err = dl.ValueError("from the callback")
    local ok, got = pcall(dl.make_array_from_callback, {16}, s, function() error(err) end)
    assert.is_false(ok)
    assert(rawequal(err, got))
  end)
end)
