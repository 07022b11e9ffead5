-- runs: every-platform
-- ipc-off: no
-- devices: 8
-- needs: none

-- Meshes, PartitionSpecs and shardings: fields, index maps, shard shapes,
-- replica ids, equivalence, memory kinds, text forms and every validation
-- message (docs/lua-api.md, "Meshes, specs and shardings": JAX's semantics and
-- messages).
--
-- The busted process runs on 8 devices of the default platform (ids 0..7)
-- plus the host cpu device. Every expected table below was worked out by hand from JAX's
-- rules: a device's block along a dimension is the mixed-radix number of its
-- mesh coordinates along that entry's axes (first name most significant);
-- indices are 1-based inclusive {first, last}; the replica id is the number of
-- devices earlier in the mesh's flat order holding an identical index.
-- Run from the repository root: busted spec/sharding/sharding_spec.lua

local helpers = require "helpers"
local dl = require "dlrun"

local expect_error = helpers.expect_error

-- D[id] is the default platform's device with that id.
local D = {}
for _, dev in ipairs(dl.devices()) do D[dev.id] = dev end

-- Nested table of device ids -> nested table of Devices.
local function devs(ids)
  if type(ids) == "number" then return D[ids] end
  local t = {}
  for i, v in ipairs(ids) do t[i] = devs(v) end
  return t
end

local function mesh(ids, names) return dl.Mesh(devs(ids), names) end

local function named(m, spec, kind) return dl.NamedSharding(m, spec, kind) end

-- The meshes used by the tables. Each one is described next to its tables.
local M8 = mesh({0, 1, 2, 3, 4, 5, 6, 7}, {"x"})
local M42 = mesh({{0, 1}, {2, 3}, {4, 5}, {6, 7}}, {"x", "y"})
local M24 = mesh({{0, 1, 2, 3}, {4, 5, 6, 7}}, {"a", "b"})
local M81 = mesh({{0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}}, {"x", "y"})
local M222 = dl.make_mesh({2, 2, 2}, {"a", "b", "c"})

-- devices_indices_map(shape) as a list by device id (entry id + 1), after
-- checking that its keys are exactly the sharding's devices.
local function indices_by_id(sharding, shape)
  local map = sharding:devices_indices_map(shape)
  local out, count = {}, 0
  for dev, index in pairs(map) do
    count = count + 1
    assert.are.equal(helpers.platform, dev.platform)
    assert.is_nil(out[dev.id + 1], "device listed twice")
    out[dev.id + 1] = index
  end
  assert.are.equal(sharding.num_devices, count)
  return out
end

-- The shards of dl.zeros(shape, "float32", sharding), by device id: the
-- replica ids and indices, and each shard's data shape.
local function shards_by_id(sharding, shape)
  local x = dl.zeros(shape, "float32", sharding)
  local replicas, indices, shapes = {}, {}, {}
  for _, shard in ipairs(x.addressable_shards) do
    local k = shard.device.id + 1
    assert.is_nil(replicas[k], "device has two shards")
    replicas[k], indices[k], shapes[k] = shard.replica_id, shard.index, shard.data.shape
  end
  x:delete()
  return replicas, indices, shapes
end

-- Everything a table row states about one sharding of one shape.
local function check_layout(sharding, shape, want)
  local got = indices_by_id(sharding, shape)
  assert.are.same(want.indices, got)
  assert.are.same(want.shard_shape, sharding:shard_shape(shape))
  local replicas, shard_indices, shard_shapes = shards_by_id(sharding, shape)
  assert.are.same(want.replicas, replicas)
  assert.are.same(want.indices, shard_indices)
  for k = 1, #want.indices do assert.are.same(want.shard_shape, shard_shapes[k]) end
  if want.fully_replicated ~= nil then
    assert.are.equal(want.fully_replicated, sharding.is_fully_replicated)
  end
end

local ZEROS = {0, 0, 0, 0, 0, 0, 0, 0}

-- Leave no garbage arrays behind for later spec files that count bytes in use.
teardown(function()
  collectgarbage()
  collectgarbage()
end)

-- ---------------------------------------------------------------------------
describe("a worked example (mesh 4x2 'x','y' over devices 0..7, array 8x2)", function()
  it("P('x', 'y'): one 2x1 block per device, every replica id 0", function()
    check_layout(named(M42, dl.P("x", "y")), {8, 2}, {
      indices = {
        {{1, 2}, {1, 1}}, {{1, 2}, {2, 2}}, -- devices 0, 1: rows [0,2)
        {{3, 4}, {1, 1}}, {{3, 4}, {2, 2}},
        {{5, 6}, {1, 1}}, {{5, 6}, {2, 2}},
        {{7, 8}, {1, 1}}, {{7, 8}, {2, 2}},
      },
      shard_shape = {2, 1},
      replicas = ZEROS,
      fully_replicated = false,
    })
  end)

  it("P('y'): rows [0,4) on device 0, [4,8) on device 1, replica ids 0,0,1,1,2,2,3,3", function()
    check_layout(named(M42, dl.P("y")), {8, 2}, {
      indices = {
        {{1, 4}, {1, 2}}, {{5, 8}, {1, 2}},
        {{1, 4}, {1, 2}}, {{5, 8}, {1, 2}},
        {{1, 4}, {1, 2}}, {{5, 8}, {1, 2}},
        {{1, 4}, {1, 2}}, {{5, 8}, {1, 2}},
      },
      shard_shape = {4, 2},
      replicas = {0, 0, 1, 1, 2, 2, 3, 3},
      fully_replicated = false,
    })
  end)
end)

-- ---------------------------------------------------------------------------
describe("1-D mesh of 8 ('x' over devices 0..7)", function()
  it("P('x') on (16,): two elements per device in device order", function()
    check_layout(named(M8, dl.P("x")), {16}, {
      indices = {{{1, 2}}, {{3, 4}}, {{5, 6}}, {{7, 8}}, {{9, 10}}, {{11, 12}}, {{13, 14}}, {{15, 16}}},
      shard_shape = {2},
      replicas = ZEROS,
      fully_replicated = false,
    })
  end)

  it("a spec shorter than the rank leaves trailing dimensions whole: P('x') on (8, 3)", function()
    local want = {}
    for k = 1, 8 do want[k] = {{k, k}, {1, 3}} end
    check_layout(named(M8, dl.P("x")), {8, 3}, {
      indices = want, shard_shape = {1, 3}, replicas = ZEROS, fully_replicated = false,
    })
  end)

  it("P(nil, 'x') on (2, 16) splits only the second dimension", function()
    check_layout(named(M8, dl.P(nil, "x")), {2, 16}, {
      indices = {
        {{1, 2}, {1, 2}}, {{1, 2}, {3, 4}}, {{1, 2}, {5, 6}}, {{1, 2}, {7, 8}},
        {{1, 2}, {9, 10}}, {{1, 2}, {11, 12}}, {{1, 2}, {13, 14}}, {{1, 2}, {15, 16}},
      },
      shard_shape = {2, 2},
      replicas = ZEROS,
      fully_replicated = false,
    })
  end)

  it("P() replicates: every device holds everything, replica ids 0..7", function()
    local whole = {{1, 4}, {1, 4}}
    check_layout(named(M8, dl.P()), {4, 4}, {
      indices = {whole, whole, whole, whole, whole, whole, whole, whole},
      shard_shape = {4, 4},
      replicas = {0, 1, 2, 3, 4, 5, 6, 7},
      fully_replicated = true,
    })
  end)

  it("a tuple of one name is that name: P({'x'}) lays out like P('x')", function()
    check_layout(named(M8, dl.P({"x"})), {8}, {
      indices = {{{1, 1}}, {{2, 2}}, {{3, 3}}, {{4, 4}}, {{5, 5}}, {{6, 6}}, {{7, 7}}, {{8, 8}}},
      shard_shape = {1},
      replicas = ZEROS,
      fully_replicated = false,
    })
  end)
end)

-- ---------------------------------------------------------------------------
describe("1-D mesh built with dl.Mesh from a permuted device order", function()
  -- Flat order: devices 3, 1, 7, 5, 0, 2, 6, 4 (positions 0..7).
  local PERM = mesh({3, 1, 7, 5, 0, 2, 6, 4}, "x")

  it("keeps the given order in mesh.devices", function()
    local got = {}
    for i, dev in ipairs(PERM.devices) do
      assert.is_true(rawequal(D[dev.id], dev))
      got[i] = dev.id
    end
    assert.are.same({3, 1, 7, 5, 0, 2, 6, 4}, got)
  end)

  it("assigns blocks by mesh position: P('x') on (8,)", function()
    -- device id -> position + 1
    check_layout(named(PERM, dl.P("x")), {8}, {
      indices = {{{5, 5}}, {{2, 2}}, {{6, 6}}, {{1, 1}}, {{8, 8}}, {{4, 4}}, {{7, 7}}, {{3, 3}}},
      shard_shape = {1},
      replicas = ZEROS,
    })
  end)

  it("numbers replicas by mesh position: P() replica ids follow the flat order", function()
    local whole = {{1, 2}}
    check_layout(named(PERM, dl.P()), {2}, {
      indices = {whole, whole, whole, whole, whole, whole, whole, whole},
      shard_shape = {2},
      replicas = {4, 1, 5, 0, 7, 3, 6, 2},
      fully_replicated = true,
    })
  end)

  it("lists device_set by id whatever the mesh order", function()
    local got = {}
    for i, dev in ipairs(named(PERM, dl.P("x")).device_set) do got[i] = dev.id end
    assert.are.same({0, 1, 2, 3, 4, 5, 6, 7}, got)
  end)
end)

-- ---------------------------------------------------------------------------
describe("2-D mesh 2x4 ('a','b' over devices {{0,1,2,3},{4,5,6,7}})", function()
  it("P('a', 'b') on (4, 8): 2x2 blocks", function()
    check_layout(named(M24, dl.P("a", "b")), {4, 8}, {
      indices = {
        {{1, 2}, {1, 2}}, {{1, 2}, {3, 4}}, {{1, 2}, {5, 6}}, {{1, 2}, {7, 8}},
        {{3, 4}, {1, 2}}, {{3, 4}, {3, 4}}, {{3, 4}, {5, 6}}, {{3, 4}, {7, 8}},
      },
      shard_shape = {2, 2},
      replicas = ZEROS,
      fully_replicated = false,
    })
  end)

  it("P({'a', 'b'}) on (16,): first name most significant, block = 4a + b", function()
    check_layout(named(M24, dl.P({"a", "b"})), {16}, {
      indices = {{{1, 2}}, {{3, 4}}, {{5, 6}}, {{7, 8}}, {{9, 10}}, {{11, 12}}, {{13, 14}}, {{15, 16}}},
      shard_shape = {2},
      replicas = ZEROS,
    })
  end)

  it("P({'b', 'a'}) on (16,): block = 2b + a", function()
    check_layout(named(M24, dl.P({"b", "a"})), {16}, {
      indices = {{{1, 2}}, {{5, 6}}, {{9, 10}}, {{13, 14}}, {{3, 4}}, {{7, 8}}, {{11, 12}}, {{15, 16}}},
      shard_shape = {2},
      replicas = ZEROS,
    })
  end)

  it("P('b') on (8, 2): 'a' unused, replica id = a coordinate", function()
    check_layout(named(M24, dl.P("b")), {8, 2}, {
      indices = {
        {{1, 2}, {1, 2}}, {{3, 4}, {1, 2}}, {{5, 6}, {1, 2}}, {{7, 8}, {1, 2}},
        {{1, 2}, {1, 2}}, {{3, 4}, {1, 2}}, {{5, 6}, {1, 2}}, {{7, 8}, {1, 2}},
      },
      shard_shape = {2, 2},
      replicas = {0, 0, 0, 0, 1, 1, 1, 1},
      fully_replicated = false,
    })
  end)

  it("P(nil, 'a') on (3, 4): 'b' unused, replica id = b coordinate", function()
    check_layout(named(M24, dl.P(nil, "a")), {3, 4}, {
      indices = {
        {{1, 3}, {1, 2}}, {{1, 3}, {1, 2}}, {{1, 3}, {1, 2}}, {{1, 3}, {1, 2}},
        {{1, 3}, {3, 4}}, {{1, 3}, {3, 4}}, {{1, 3}, {3, 4}}, {{1, 3}, {3, 4}},
      },
      shard_shape = {3, 2},
      replicas = {0, 1, 2, 3, 0, 1, 2, 3},
    })
  end)

  describe("built from a permuted device order {{7,5,3,1},{6,4,2,0}}", function()
    local PERM24 = mesh({{7, 5, 3, 1}, {6, 4, 2, 0}}, {"a", "b"})

    it("P('a', 'b') on (2, 4): device at mesh (a, b) holds element (a, b)", function()
      check_layout(named(PERM24, dl.P("a", "b")), {2, 4}, {
        indices = {
          {{2, 2}, {4, 4}}, -- device 0 at (1, 3)
          {{1, 1}, {4, 4}}, -- device 1 at (0, 3)
          {{2, 2}, {3, 3}}, {{1, 1}, {3, 3}},
          {{2, 2}, {2, 2}}, {{1, 1}, {2, 2}},
          {{2, 2}, {1, 1}}, {{1, 1}, {1, 1}}, -- device 7 at (0, 0)
        },
        shard_shape = {1, 1},
        replicas = ZEROS,
      })
    end)

    it("P('a') on (2, 4): replica id = b coordinate of the device's position", function()
      check_layout(named(PERM24, dl.P("a")), {2, 4}, {
        indices = {
          {{2, 2}, {1, 4}}, {{1, 1}, {1, 4}}, {{2, 2}, {1, 4}}, {{1, 1}, {1, 4}},
          {{2, 2}, {1, 4}}, {{1, 1}, {1, 4}}, {{2, 2}, {1, 4}}, {{1, 1}, {1, 4}},
        },
        shard_shape = {1, 4},
        replicas = {3, 3, 2, 2, 1, 1, 0, 0},
      })
    end)
  end)
end)

-- ---------------------------------------------------------------------------
describe("2-D mesh 4x2 ('x','y' over devices {{0,1},{2,3},{4,5},{6,7}})", function()
  it("P({'x', 'y'}) on (8,): block = 2x + y = device id", function()
    check_layout(named(M42, dl.P({"x", "y"})), {8}, {
      indices = {{{1, 1}}, {{2, 2}}, {{3, 3}}, {{4, 4}}, {{5, 5}}, {{6, 6}}, {{7, 7}}, {{8, 8}}},
      shard_shape = {1},
      replicas = ZEROS,
    })
  end)

  it("P({'y', 'x'}) on (8,): block = 4y + x", function()
    check_layout(named(M42, dl.P({"y", "x"})), {8}, {
      indices = {{{1, 1}}, {{5, 5}}, {{2, 2}}, {{6, 6}}, {{3, 3}}, {{7, 7}}, {{4, 4}}, {{8, 8}}},
      shard_shape = {1},
      replicas = ZEROS,
    })
  end)

  it("P('x') on (4, 6): 'y' unused, replica ids alternate 0, 1", function()
    check_layout(named(M42, dl.P("x")), {4, 6}, {
      indices = {
        {{1, 1}, {1, 6}}, {{1, 1}, {1, 6}}, {{2, 2}, {1, 6}}, {{2, 2}, {1, 6}},
        {{3, 3}, {1, 6}}, {{3, 3}, {1, 6}}, {{4, 4}, {1, 6}}, {{4, 4}, {1, 6}},
      },
      shard_shape = {1, 6},
      replicas = {0, 1, 0, 1, 0, 1, 0, 1},
    })
  end)
end)

-- ---------------------------------------------------------------------------
describe("2-D mesh 8x1 ('x','y'; 'y' has size 1)", function()
  it("P('x', 'y') on (8, 5): the size-1 axis leaves its dimension whole", function()
    local want = {}
    for k = 1, 8 do want[k] = {{k, k}, {1, 5}} end
    check_layout(named(M81, dl.P("x", "y")), {8, 5}, {
      indices = want, shard_shape = {1, 5}, replicas = ZEROS, fully_replicated = false,
    })
  end)

  it("P('y') on (8, 5) is fully replicated, replica ids 0..7 over the unused 'x'", function()
    local whole = {{1, 8}, {1, 5}}
    check_layout(named(M81, dl.P("y")), {8, 5}, {
      indices = {whole, whole, whole, whole, whole, whole, whole, whole},
      shard_shape = {8, 5},
      replicas = {0, 1, 2, 3, 4, 5, 6, 7},
      fully_replicated = true,
    })
  end)

  it("P({'y', 'x'}) on (8,): a size-1 leading axis changes nothing", function()
    check_layout(named(M81, dl.P({"y", "x"})), {8}, {
      indices = {{{1, 1}}, {{2, 2}}, {{3, 3}}, {{4, 4}}, {{5, 5}}, {{6, 6}}, {{7, 7}}, {{8, 8}}},
      shard_shape = {1},
      replicas = ZEROS,
    })
  end)

  it("a size-1 axis needs no divisibility: P(nil, 'y') on (3, 7)", function()
    local whole = {{1, 3}, {1, 7}}
    check_layout(named(M81, dl.P(nil, "y")), {3, 7}, {
      indices = {whole, whole, whole, whole, whole, whole, whole, whole},
      shard_shape = {3, 7},
      replicas = {0, 1, 2, 3, 4, 5, 6, 7},
      fully_replicated = true,
    })
  end)
end)

-- ---------------------------------------------------------------------------
describe("3-D mesh 2x2x2 (make_mesh, 'a','b','c' over devices 0..7; id = 4a + 2b + c)", function()
  it("P('a', 'b', 'c') on (2, 4, 6)", function()
    check_layout(named(M222, dl.P("a", "b", "c")), {2, 4, 6}, {
      indices = {
        {{1, 1}, {1, 2}, {1, 3}}, {{1, 1}, {1, 2}, {4, 6}},
        {{1, 1}, {3, 4}, {1, 3}}, {{1, 1}, {3, 4}, {4, 6}},
        {{2, 2}, {1, 2}, {1, 3}}, {{2, 2}, {1, 2}, {4, 6}},
        {{2, 2}, {3, 4}, {1, 3}}, {{2, 2}, {3, 4}, {4, 6}},
      },
      shard_shape = {1, 2, 3},
      replicas = ZEROS,
      fully_replicated = false,
    })
  end)

  it("P({'a', 'c'}, 'b') on (8, 2): rows by 2a + c, columns by b", function()
    check_layout(named(M222, dl.P({"a", "c"}, "b")), {8, 2}, {
      indices = {
        {{1, 2}, {1, 1}}, {{3, 4}, {1, 1}}, {{1, 2}, {2, 2}}, {{3, 4}, {2, 2}},
        {{5, 6}, {1, 1}}, {{7, 8}, {1, 1}}, {{5, 6}, {2, 2}}, {{7, 8}, {2, 2}},
      },
      shard_shape = {2, 1},
      replicas = ZEROS,
    })
  end)

  it("P('b') on (4,): 'a' and 'c' unused, replica id = 2a + c", function()
    check_layout(named(M222, dl.P("b")), {4}, {
      indices = {{{1, 2}}, {{1, 2}}, {{3, 4}}, {{3, 4}}, {{1, 2}}, {{1, 2}}, {{3, 4}}, {{3, 4}}},
      shard_shape = {2},
      replicas = {0, 1, 0, 1, 2, 3, 2, 3},
    })
  end)

  it("P(nil, {'c', 'a'}) on (3, 8, 2): block 2c + a, replica id = b", function()
    check_layout(named(M222, dl.P(nil, {"c", "a"})), {3, 8, 2}, {
      indices = {
        {{1, 3}, {1, 2}, {1, 2}}, {{1, 3}, {5, 6}, {1, 2}},
        {{1, 3}, {1, 2}, {1, 2}}, {{1, 3}, {5, 6}, {1, 2}},
        {{1, 3}, {3, 4}, {1, 2}}, {{1, 3}, {7, 8}, {1, 2}},
        {{1, 3}, {3, 4}, {1, 2}}, {{1, 3}, {7, 8}, {1, 2}},
      },
      shard_shape = {3, 2, 2},
      replicas = {0, 0, 1, 1, 0, 0, 1, 1},
    })
  end)

  describe("with a size-1 middle axis (make_mesh {4, 1, 2}, 'x','one','y'; id = 2x + y)", function()
    local M412 = dl.make_mesh({4, 1, 2}, {"x", "one", "y"})

    it("P('one') on (3, 5) is fully replicated with replica ids 0..7", function()
      local whole = {{1, 3}, {1, 5}}
      check_layout(named(M412, dl.P("one")), {3, 5}, {
        indices = {whole, whole, whole, whole, whole, whole, whole, whole},
        shard_shape = {3, 5},
        replicas = {0, 1, 2, 3, 4, 5, 6, 7},
        fully_replicated = true,
      })
    end)

    it("P({'x', 'one', 'y'}) on (8,): block = device id", function()
      check_layout(named(M412, dl.P({"x", "one", "y"})), {8}, {
        indices = {{{1, 1}}, {{2, 2}}, {{3, 3}}, {{4, 4}}, {{5, 5}}, {{6, 6}}, {{7, 7}}, {{8, 8}}},
        shard_shape = {1},
        replicas = ZEROS,
        fully_replicated = false,
      })
    end)

    it("P('one', 'y') on (3, 4): rows whole, columns by y, replica id = x", function()
      local even, odd = {{1, 3}, {1, 2}}, {{1, 3}, {3, 4}}
      check_layout(named(M412, dl.P("one", "y")), {3, 4}, {
        indices = {even, odd, even, odd, even, odd, even, odd},
        shard_shape = {3, 2},
        replicas = {0, 0, 1, 1, 2, 2, 3, 3},
        fully_replicated = false,
      })
    end)
  end)
end)

-- ---------------------------------------------------------------------------
describe("zero-size dimensions", function()
  it("index a zero-size dimension as {1, 0}", function()
    local s = named(M8, dl.P("x"))
    local got = indices_by_id(s, {0, 3})
    for k = 1, 8 do assert.are.same({{1, 0}, {1, 3}}, got[k]) end
    assert.are.same({0, 3}, s:shard_shape({0, 3}))
    local single = dl.SingleDeviceSharding(D[2])
    assert.are.same({{1, 3}, {1, 0}}, single:devices_indices_map({3, 0})[D[2]])
    assert.are.same({3, 0}, single:shard_shape({3, 0}))
  end)

  it("count replicas by identical index: P('x') on (0,) gives replica ids 0..7", function()
    -- Every device's index is {{1, 0}}, so by JAX's rule ("how many devices
    -- earlier in flat order hold an identical index") they are replicas.
    local replicas = shards_by_id(named(M8, dl.P("x")), {0})
    assert.are.same({0, 1, 2, 3, 4, 5, 6, 7}, replicas)
  end)
end)

-- ---------------------------------------------------------------------------
describe("Mesh", function()
  it("has axis_names, axis_sizes, shape, size and nested devices", function()
    assert.are.same({"x", "y"}, M42.axis_names)
    assert.are.same({4, 2}, M42.axis_sizes)
    assert.are.same({x = 4, y = 2}, M42.shape)
    assert.are.equal(8, M42.size)
    local nested = M42.devices
    assert.are.equal(4, #nested)
    for i = 1, 4 do
      assert.are.equal(2, #nested[i])
      for j = 1, 2 do assert.is_true(rawequal(D[(i - 1) * 2 + (j - 1)], nested[i][j])) end
    end
  end)

  it("accepts a single string as the axis names of a 1-D mesh", function()
    local m = dl.Mesh(devs({0, 1, 2, 3}), "data")
    assert.are.same({"data"}, m.axis_names)
    assert.are.same({4}, m.axis_sizes)
    assert.are.same({data = 4}, m.shape)
    assert.are.equal(4, m.size)
    assert.are.equal("Mesh('data': 4)", tostring(m))
  end)

  it("make_mesh uses the default devices in id order", function()
    local m = dl.make_mesh({2, 4}, {"a", "b"})
    assert.are.same({"a", "b"}, m.axis_names)
    assert.are.same({2, 4}, m.axis_sizes)
    assert.are.equal(8, m.size)
    for a = 1, 2 do
      for b = 1, 4 do assert.is_true(rawequal(D[(a - 1) * 4 + (b - 1)], m.devices[a][b])) end
    end
    local m3 = M222.devices
    assert.is_true(rawequal(D[6], m3[2][2][1]))
    assert.is_true(rawequal(D[3], m3[1][2][2]))
  end)

  it("make_mesh takes an explicit device list in the given order", function()
    local m = dl.make_mesh({2, 2}, {"a", "b"}, {D[3], D[2], D[1], D[0]})
    assert.are.equal(4, m.size)
    assert.is_true(rawequal(D[3], m.devices[1][1]))
    assert.is_true(rawequal(D[2], m.devices[1][2]))
    assert.is_true(rawequal(D[1], m.devices[2][1]))
    assert.is_true(rawequal(D[0], m.devices[2][2]))
  end)

  it("prints as JAX does", function()
    assert.are.equal("Mesh('x': 4, 'y': 2)", tostring(M42))
    assert.are.equal("Mesh('x': 8)", tostring(M8))
    assert.are.equal("Mesh('a': 2, 'b': 2, 'c': 2)", tostring(M222))
    assert.are.equal("Mesh('x': 8, 'y': 1)", tostring(M81))
  end)
end)

-- ---------------------------------------------------------------------------
describe("PartitionSpec", function()
  it("prints as JAX does", function()
    assert.are.equal("PartitionSpec('x', None, ('x', 'y'))", tostring(dl.P("x", nil, {"x", "y"})))
    assert.are.equal("PartitionSpec('x',)", tostring(dl.P("x")))
    assert.are.equal("PartitionSpec()", tostring(dl.P()))
    assert.are.equal("PartitionSpec(None,)", tostring(dl.P(nil)))
    assert.are.equal("PartitionSpec(None, 'y')", tostring(dl.P(nil, "y")))
    assert.are.equal("PartitionSpec(('a', 'b', 'c'),)", tostring(dl.P({"a", "b", "c"})))
  end)

  it("canonicalises entries: a one-name list is the name, an empty list is None", function()
    assert.are.equal("PartitionSpec('x',)", tostring(dl.P({"x"})))
    assert.are.equal("PartitionSpec(None, 'y')", tostring(dl.P({}, "y")))
    assert.is_true(dl.P({"x"}) == dl.P("x"))
    assert.is_true(dl.P({}) == dl.P(nil))
  end)

  it("has a length counting trailing nils", function()
    assert.are.equal(0, #dl.P())
    assert.are.equal(1, #dl.P("x"))
    assert.are.equal(2, #dl.P("x", nil))
    assert.are.equal(3, #dl.P(nil, nil, {"a", "b"}))
  end)

  it("compares entry by entry", function()
    assert.is_true(dl.P("x", {"a", "b"}) == dl.P("x", {"a", "b"}))
    assert.is_false(dl.P({"a", "b"}) == dl.P({"b", "a"}))
    assert.is_false(dl.P("x") == dl.P("x", nil))
    assert.is_false(dl.P("x") == dl.P("y"))
    assert.is_true(dl.P() == dl.P())
  end)

  it("is also reachable as dl.PartitionSpec", function()
    assert.are.equal("PartitionSpec('x',)", tostring(dl.PartitionSpec("x")))
  end)
end)

-- ---------------------------------------------------------------------------
describe("NamedSharding and SingleDeviceSharding fields", function()
  it("NamedSharding keeps its mesh and spec and reports its devices", function()
    local spec = dl.P("x", "y")
    local s = named(M42, spec)
    assert.is_true(rawequal(M42, s.mesh))
    assert.is_true(s.spec == dl.P("x", "y"))
    assert.are.equal("NamedSharding", s.kind)
    assert.are.equal(8, s.num_devices)
    assert.are.equal("device", s.memory_kind)
    assert.is_true(s.is_fully_addressable)
    assert.is_false(s.is_fully_replicated)
    local ids = {}
    for i, dev in ipairs(s.device_set) do
      assert.is_true(rawequal(D[dev.id], dev))
      ids[i] = dev.id
    end
    assert.are.same({0, 1, 2, 3, 4, 5, 6, 7}, ids)
  end)

  it("SingleDeviceSharding is one fully replicated device", function()
    local s = dl.SingleDeviceSharding(D[3])
    assert.are.equal("SingleDeviceSharding", s.kind)
    assert.are.equal(1, s.num_devices)
    assert.are.equal(1, #s.device_set)
    assert.is_true(rawequal(D[3], s.device_set[1]))
    assert.is_true(s.is_fully_replicated)
    assert.is_true(s.is_fully_addressable)
    assert.are.equal("device", s.memory_kind)
    assert.are.same({5, 2}, s:shard_shape({5, 2}))
    local map = s:devices_indices_map({5, 2})
    local n = 0
    for dev, index in pairs(map) do
      n = n + 1
      assert.is_true(rawequal(D[3], dev))
      assert.are.same({{1, 5}, {1, 2}}, index)
    end
    assert.are.equal(1, n)
  end)

  it("is_fully_replicated: P() and specs using only size-1 axes are; others are not", function()
    assert.is_true(named(M8, dl.P()).is_fully_replicated)
    assert.is_true(named(M42, dl.P(nil, nil)).is_fully_replicated)
    assert.is_true(named(M81, dl.P("y")).is_fully_replicated)
    assert.is_true(named(M81, dl.P(nil, {"y"})).is_fully_replicated)
    assert.is_true(named(mesh({5}, "x"), dl.P("x")).is_fully_replicated)
    assert.is_false(named(M8, dl.P("x")).is_fully_replicated)
    assert.is_false(named(M81, dl.P({"y", "x"})).is_fully_replicated)
    assert.is_false(named(M42, dl.P(nil, "y")).is_fully_replicated)
  end)

  it("scalars take P() and a SingleDeviceSharding", function()
    assert.are.same({}, named(M8, dl.P()):shard_shape({}))
    local map = named(M8, dl.P()):devices_indices_map({})
    for k = 0, 7 do assert.are.same({}, map[D[k]]) end
    assert.are.same({}, dl.SingleDeviceSharding(D[0]):shard_shape({}))
  end)
end)

-- ---------------------------------------------------------------------------
describe("is_equivalent_to", function()
  it("holds for the same layout from different meshes and specs", function()
    local a = named(M8, dl.P("x"))
    local b = named(M24, dl.P({"a", "b"}))
    assert.is_true(a:is_equivalent_to(b, 1))
    assert.is_true(b:is_equivalent_to(a, 1))
    assert.is_true(a:is_equivalent_to(named(M42, dl.P({"x", "y"})), 1))
    assert.is_true(a:is_equivalent_to(named(M81, dl.P("x", "y")), 2))
    assert.is_true(a:is_equivalent_to(named(M8, dl.P("x", nil)), 2))
    assert.is_true(named(M8, dl.P()):is_equivalent_to(named(M42, dl.P()), 2))
    assert.is_true(named(M8, dl.P()):is_equivalent_to(named(M81, dl.P(nil, "y")), 2))
  end)

  it("holds for a sharding and itself", function()
    local s = named(M222, dl.P({"a", "c"}, "b"))
    assert.is_true(s:is_equivalent_to(s, 2))
  end)

  it("fails when the device order differs", function()
    local a = named(M8, dl.P("x"))
    assert.is_false(a:is_equivalent_to(named(M24, dl.P({"b", "a"})), 1))
    assert.is_false(a:is_equivalent_to(named(mesh({3, 1, 7, 5, 0, 2, 6, 4}, "x"), dl.P("x")), 1))
    assert.is_false(a:is_equivalent_to(named(mesh({7, 6, 5, 4, 3, 2, 1, 0}, "x"), dl.P("x")), 1))
  end)

  it("fails when a different dimension is split", function()
    assert.is_false(named(M8, dl.P("x")):is_equivalent_to(named(M8, dl.P(nil, "x")), 2))
    assert.is_false(named(M8, dl.P("x")):is_equivalent_to(named(M8, dl.P()), 1))
    assert.is_false(named(M42, dl.P("x")):is_equivalent_to(named(M42, dl.P("x", "y")), 2))
  end)

  it("fails when the device sets differ", function()
    assert.is_false(named(M8, dl.P()):is_equivalent_to(named(mesh({0, 1}, "x"), dl.P()), 1))
    assert.is_false(dl.SingleDeviceSharding(D[0]):is_equivalent_to(dl.SingleDeviceSharding(D[1]), 1))
  end)

  it("fails when the memory kinds differ", function()
    local a = named(M8, dl.P("x"))
    assert.is_false(a:is_equivalent_to(named(M8, dl.P("x"), "pinned_host"), 1))
    assert.is_false(a:is_equivalent_to(a:with_memory_kind("pinned_host"), 1))
    assert.is_false(dl.SingleDeviceSharding(D[0]):is_equivalent_to(
      dl.SingleDeviceSharding(D[0], "pinned_host"), 1))
  end)

  it("holds between SingleDeviceSharding(dev) and a NamedSharding of a 1-device mesh", function()
    local single = dl.SingleDeviceSharding(D[0])
    local m1 = mesh({0}, "x")
    assert.is_true(single:is_equivalent_to(named(m1, dl.P("x")), 2))
    assert.is_true(single:is_equivalent_to(named(m1, dl.P()), 2))
    assert.is_true(named(m1, dl.P(nil, "x")):is_equivalent_to(single, 2))
    assert.is_false(single:is_equivalent_to(named(mesh({1}, "x"), dl.P()), 2))
  end)
end)

-- ---------------------------------------------------------------------------
describe("memory kinds", function()
  it("default to device; pinned_host by string or {memory_kind=}", function()
    assert.are.equal("device", named(M8, dl.P()).memory_kind)
    assert.are.equal("device", named(M8, dl.P(), "device").memory_kind)
    assert.are.equal("pinned_host", named(M8, dl.P(), "pinned_host").memory_kind)
    assert.are.equal("pinned_host", named(M8, dl.P(), {memory_kind = "pinned_host"}).memory_kind)
    assert.are.equal("device", dl.SingleDeviceSharding(D[0]).memory_kind)
    assert.are.equal("pinned_host", dl.SingleDeviceSharding(D[0], "pinned_host").memory_kind)
    assert.are.equal("pinned_host",
                     dl.SingleDeviceSharding(D[0], {memory_kind = "pinned_host"}).memory_kind)
  end)

  it("with_memory_kind keeps the mesh, spec and layout", function()
    local s = named(M42, dl.P("y"))
    local h = s:with_memory_kind("pinned_host")
    assert.are.equal("pinned_host", h.memory_kind)
    assert.are.equal("device", s.memory_kind)
    assert.is_true(rawequal(M42, h.mesh))
    assert.is_true(h.spec == dl.P("y"))
    assert.are.same(indices_by_id(s, {8, 2}), indices_by_id(h, {8, 2}))
    assert.is_true(h:with_memory_kind("device"):is_equivalent_to(s, 2))
    local single = dl.SingleDeviceSharding(D[2]):with_memory_kind("pinned_host")
    assert.are.equal("SingleDeviceSharding", single.kind)
    assert.are.equal("pinned_host", single.memory_kind)
    assert.is_true(rawequal(D[2], single.device_set[1]))
  end)

  it("pinned_host shards come from the pinned_host pool, not the device pool", function()
    local dev0 = D[0]
    local pinned0 = dev0:memory_stats("pinned_host").bytes_in_use
    local device0 = dev0:memory_stats().bytes_in_use
    local x = dl.zeros({8, 32}, "float32", named(M8, dl.P("x"), "pinned_host"))
    x:block_until_ready()
    assert.are.equal("pinned_host", x.sharding.memory_kind)
    assert.are.equal(256, dev0:memory_stats("pinned_host").bytes_in_use - pinned0)
    assert.are.equal(0, dev0:memory_stats().bytes_in_use - device0)
    x:delete()
  end)

  it("reject an unknown kind with a ValueError", function()
    expect_error("ValueError",
                 [[NamedSharding: unknown memory kind 'hbm' (expected "device" or "pinned_host")]],
                 dl.NamedSharding, M8, dl.P(), "hbm")
    expect_error("ValueError",
                 [[SingleDeviceSharding: unknown memory kind 'unpinned_host' (expected "device" or "pinned_host")]],
                 dl.SingleDeviceSharding, D[0], "unpinned_host")
    expect_error("ValueError",
                 [[with_memory_kind: unknown memory kind 'host' (expected "device" or "pinned_host")]],
                 function() return named(M8, dl.P()):with_memory_kind("host") end)
    expect_error("ValueError",
                 [[NamedSharding: unknown memory kind 'hbm' (expected "device" or "pinned_host")]],
                 dl.NamedSharding, M8, dl.P(), {memory_kind = "hbm"})
  end)
end)

-- ---------------------------------------------------------------------------
describe("tostring of shardings", function()
  it("NamedSharding in both memory kinds", function()
    assert.are.equal("NamedSharding(mesh=Mesh('x': 8), spec=PartitionSpec('x',), memory_kind=device)",
                     tostring(named(M8, dl.P("x"))))
    assert.are.equal(
      "NamedSharding(mesh=Mesh('x': 4, 'y': 2), spec=PartitionSpec(None, ('x', 'y')), memory_kind=pinned_host)",
      tostring(named(M42, dl.P(nil, {"x", "y"}), "pinned_host")))
    assert.are.equal("NamedSharding(mesh=Mesh('a': 2, 'b': 4), spec=PartitionSpec(), memory_kind=device)",
                     tostring(named(M24, dl.P())))
  end)

  it("SingleDeviceSharding in both memory kinds", function()
    assert.are.equal("SingleDeviceSharding(device=" .. helpers.dev(0) .. ", memory_kind=device)",
                     tostring(dl.SingleDeviceSharding(D[0])))
    assert.are.equal("SingleDeviceSharding(device=" .. helpers.dev(5) .. ", memory_kind=pinned_host)",
                     tostring(dl.SingleDeviceSharding(D[5], "pinned_host")))
  end)
end)

-- ---------------------------------------------------------------------------
describe("validation", function()
  it("an axis the mesh lacks", function()
    expect_error("ValueError",
                 "Resource axis: z of PartitionSpec('z',) is not found in mesh: ('x', 'y').",
                 dl.NamedSharding, M42, dl.P("z"))
    expect_error("ValueError",
                 "Resource axis: z of PartitionSpec(None, ('x', 'z')) is not found in mesh: ('x', 'y').",
                 dl.NamedSharding, M42, dl.P(nil, {"x", "z"}))
    expect_error("ValueError",
                 "Resource axis: y of PartitionSpec('y',) is not found in mesh: ('x',).",
                 dl.NamedSharding, M8, dl.P("y"))
  end)

  it("an axis used twice is a DuplicateSpecError, also a ValueError", function()
    local err = expect_error("DuplicateSpecError",
      "A single NamedSharding spec specification can map every mesh axis to at most one positional "
        .. "dimension, but PartitionSpec('x', 'x') has duplicate entries for `x`",
      dl.NamedSharding, M42, dl.P("x", "x"))
    assert.is_true(dl.DuplicateSpecError:is_instance(err))
    assert.is_true(dl.ValueError:is_instance(err))
    assert.is_false(dl.IndivisibleError:is_instance(err))
    assert.are.equal("DuplicateSpecError: " .. err.message, tostring(err))
    expect_error("DuplicateSpecError",
      "A single NamedSharding spec specification can map every mesh axis to at most one positional "
        .. "dimension, but PartitionSpec(('x', 'y'), 'y') has duplicate entries for `y`",
      dl.NamedSharding, M42, dl.P({"x", "y"}, "y"))
    expect_error("DuplicateSpecError",
      "A single NamedSharding spec specification can map every mesh axis to at most one positional "
        .. "dimension, but PartitionSpec(('a', 'a'),) has duplicate entries for `a`",
      dl.NamedSharding, M24, dl.P({"a", "a"}))
  end)

  it("a nested list inside P", function()
    expect_error("ValueError",
                 "A tuple inside PartitionSpec cannot contain a nested tuple. Got partition: "
                   .. "{'x', {'y'}} and the nested tuple: {'y'}",
                 dl.P, {"x", {"y"}})
    expect_error("ValueError", {contains = "A tuple inside PartitionSpec cannot contain a nested tuple."},
                 dl.P, nil, {{"a", "b"}})
  end)

  it("a spec longer than the rank", function()
    local s = named(M42, dl.P("x", "y"))
    local msg = "Sharding NamedSharding(mesh=Mesh('x': 4, 'y': 2), spec=PartitionSpec('x', 'y'), "
      .. "memory_kind=device) is only valid for values of rank at least 2, but was applied to a "
      .. "value of rank 1."
    expect_error("ValueError", msg, function() return s:shard_shape({8}) end)
    expect_error("ValueError", msg, function() return s:devices_indices_map({8}) end)
    expect_error("ValueError", msg, dl.zeros, {8}, "float32", s)
  end)

  it("a spec longer than the rank of a scalar adds the P() hint", function()
    local msg = "Sharding NamedSharding(mesh=Mesh('x': 8), spec=PartitionSpec('x',), "
      .. "memory_kind=device) is only valid for values of rank at least 1, but was applied to a "
      .. "value of rank 0. For scalars the PartitionSpec should be P()"
    local s = named(M8, dl.P("x"))
    expect_error("ValueError", msg, function() return s:shard_shape({}) end)
    expect_error("ValueError", msg, dl.zeros, {}, "float32", s)
  end)

  it("a shape the partitioning does not divide is an IndivisibleError, also a ValueError", function()
    local err = expect_error("IndivisibleError",
      "NamedSharding(mesh=Mesh('x': 4, 'y': 2), spec=PartitionSpec('x', 'y'), memory_kind=device) "
        .. "implies that array axis 0 is partitioned 4 times, but the dimension size is 6 (full "
        .. "shape: (6, 2), per-dimension tiling factors: (4, 2) should evenly divide the shape)",
      function() return named(M42, dl.P("x", "y")):shard_shape({6, 2}) end)
    assert.is_true(dl.IndivisibleError:is_instance(err))
    assert.is_true(dl.ValueError:is_instance(err))
    assert.is_false(dl.DuplicateSpecError:is_instance(err))
    assert.are.equal("IndivisibleError: " .. err.message, tostring(err))
  end)

  it("IndivisibleError names the first bad axis, tuple products and trailing factors", function()
    expect_error("IndivisibleError",
      "NamedSharding(mesh=Mesh('x': 4, 'y': 2), spec=PartitionSpec(None, 'x'), memory_kind=device) "
        .. "implies that array axis 1 is partitioned 4 times, but the dimension size is 2 (full "
        .. "shape: (6, 2, 3), per-dimension tiling factors: (1, 4, 1) should evenly divide the shape)",
      function() return named(M42, dl.P(nil, "x")):devices_indices_map({6, 2, 3}) end)
    expect_error("IndivisibleError",
      "NamedSharding(mesh=Mesh('x': 4, 'y': 2), spec=PartitionSpec(('x', 'y'),), memory_kind=device) "
        .. "implies that array axis 0 is partitioned 8 times, but the dimension size is 12 (full "
        .. "shape: (12,), per-dimension tiling factors: (8,) should evenly divide the shape)",
      dl.zeros, {12}, "float32", named(M42, dl.P({"x", "y"})))
    expect_error("IndivisibleError",
      "NamedSharding(mesh=Mesh('x': 8), spec=PartitionSpec('x',), memory_kind=pinned_host) "
        .. "implies that array axis 0 is partitioned 8 times, but the dimension size is 3 (full "
        .. "shape: (3,), per-dimension tiling factors: (8,) should evenly divide the shape)",
      function() return named(M8, dl.P("x"), "pinned_host"):shard_shape({3}) end)
  end)

  it("Mesh devices ndim must equal the number of axis names (JAX's text)", function()
    expect_error("ValueError",
      "Mesh requires the ndim of its first argument (`devices`) to equal the length of its second "
        .. "argument (`axis_names`), but got devices.ndim == 1 and len(axis_names) == 2.",
      dl.Mesh, devs({0, 1}), {"x", "y"})
    expect_error("ValueError",
      "Mesh requires the ndim of its first argument (`devices`) to equal the length of its second "
        .. "argument (`axis_names`), but got devices.ndim == 2 and len(axis_names) == 1.",
      dl.Mesh, devs({{0, 1}, {2, 3}}), "x")
    expect_error("ValueError",
      "Mesh requires the ndim of its first argument (`devices`) to equal the length of its second "
        .. "argument (`axis_names`), but got devices.ndim == 3 and len(axis_names) == 2.",
      dl.Mesh, devs({{{0, 1}}, {{2, 3}}}), {"a", "b"})
  end)

  it("a ragged devices table", function()
    expect_error("ValueError", "Mesh: the devices table is ragged: a level has 1 entries, expected 2",
                 dl.Mesh, devs({{0, 1}, {2}}), {"x", "y"})
  end)

  it("duplicate devices in a mesh", function()
    expect_error("ValueError", "Mesh contains duplicate devices: " .. helpers.dev(0) .. " appears twice",
                 dl.Mesh, devs({0, 0}), "x")
    expect_error("ValueError", "Mesh contains duplicate devices: " .. helpers.dev(3) .. " appears twice",
                 dl.Mesh, devs({{0, 3}, {3, 1}}), {"x", "y"})
    expect_error("ValueError", "Mesh contains duplicate devices: " .. helpers.dev(2) .. " appears twice",
                 dl.make_mesh, {2}, "x", {D[2], D[2]})
  end)

  it("duplicate axis names", function()
    expect_error("ValueError", "mesh axis names must be unique, got 'x' twice",
                 dl.Mesh, devs({{0, 1}, {2, 3}}), {"x", "x"})
    expect_error("ValueError", "mesh axis names must be unique, got 'b' twice",
                 dl.make_mesh, {2, 2, 2}, {"a", "b", "b"})
  end)

  it("an empty axis name", function()
    expect_error("ValueError", "mesh axis 1 has an empty name", dl.Mesh, devs({0}), "")
  end)

  it("make_mesh refuses more devices than there are (JAX's text)", function()
    expect_error("ValueError", "Number of devices 8 must be >= the product of mesh_shape (16,)",
                 dl.make_mesh, {16}, {"x"})
    expect_error("ValueError", "Number of devices 8 must be >= the product of mesh_shape (4, 4)",
                 dl.make_mesh, {4, 4}, {"x", "y"})
    expect_error("ValueError", "Number of devices 3 must be >= the product of mesh_shape (2, 2)",
                 dl.make_mesh, {2, 2}, {"a", "b"}, {D[0], D[1], D[2]})
    expect_error("ValueError", "make_mesh: every axis size must be at least 1, got mesh_shape (2, 0)",
                 dl.make_mesh, {2, 0}, {"a", "b"})
  end)

  it("make_mesh with fewer devices than there are takes the first ones, as jax.make_mesh", function()
    local m = dl.make_mesh({4}, {"x"})
    assert.are.equal(4, m.size)
    local ids = {}
    for i, d in ipairs(m.devices) do ids[i] = d.id end
    assert.are.same({0, 1, 2, 3}, ids)
    local m2 = dl.make_mesh({2, 1}, {"a", "b"}, {D[5], D[3], D[1]})
    assert.are.same({a = 2, b = 1}, m2.shape)
    assert.are.equal(D[5], m2.devices[1][1])
    assert.are.equal(D[3], m2.devices[2][1])
    local x = dl.arange(8, "int32", dl.NamedSharding(m, dl.P("x")))
    assert.are.equal(4, #x.addressable_shards)
    assert.are.same({0, 1, 2, 3, 4, 5, 6, 7}, x:tolist())
  end)

  it("make_mesh needs one name per axis size", function()
    expect_error("ValueError", "make_mesh: 2 axis sizes but 1 axis names were given",
                 dl.make_mesh, {4, 2}, {"x"})
  end)

  it("wrong argument types to Mesh and make_mesh are TypeErrors naming function and argument", function()
    expect_error("TypeError", "Mesh: argument 1 (devices) must be a nested table of Devices, got number",
                 dl.Mesh, 5, "x")
    expect_error("TypeError", "Mesh: element [2] of devices must be a Device, got string",
                 dl.Mesh, {D[0], "x"}, "x")
    expect_error("TypeError", "Mesh: argument 2 (axis_names) must be a list of axis names, got number",
                 dl.Mesh, devs({0}), 5)
    expect_error("TypeError", "Mesh: axis name 1 must be a string, got number",
                 dl.Mesh, devs({0}), {5})
    expect_error("TypeError", "make_mesh: argument 1 (axis_sizes) must be a list of integers, got string",
                 dl.make_mesh, "x", {"x"})
    expect_error("TypeError", "make_mesh: element 2 of devices must be a Device, got string",
                 dl.make_mesh, {2}, "x", {D[0], "x"})
  end)

  it("a non-table device list for make_mesh is a TypeError, not a raw Lua error", function()
    expect_error("TypeError", "make_mesh: argument 3 (devices) must be a list of Devices, got number",
                 dl.make_mesh, {2, 4}, {"a", "b"}, 5)
  end)

  it("wrong argument types to P are TypeErrors", function()
    expect_error("TypeError", "P: entry 1 must be nil, an axis name or a list of axis names, got number",
                 dl.P, 5)
    expect_error("TypeError", "P: entry 2 lists a number where an axis name was expected",
                 dl.P, "x", {"y", 3})
  end)

  it("wrong argument types to shardings and their methods are TypeErrors", function()
    expect_error("TypeError", "NamedSharding: argument 1 (mesh) must be a Mesh, got number",
                 dl.NamedSharding, 5, dl.P())
    expect_error("TypeError",
                 "NamedSharding: argument 2 (spec) must be a PartitionSpec made by dl.P(...), got table",
                 dl.NamedSharding, M8, {"x"})
    expect_error("TypeError",
                 [[NamedSharding: argument 3 (memory_kind) must be "device" or "pinned_host", got number]],
                 dl.NamedSharding, M8, dl.P(), 5)
    expect_error("TypeError", "SingleDeviceSharding: argument 1 (device) must be a Device, got number",
                 dl.SingleDeviceSharding, 5)
    local s = named(M8, dl.P("x"))
    expect_error("TypeError", "is_equivalent_to: argument 2 (sharding) must be a Sharding, got number",
                 function() return s:is_equivalent_to(5, 1) end)
    expect_error("TypeError",
                 "is_equivalent_to: argument 3 (ndim) must be an integer from 0 to 32, got no value",
                 function() return s:is_equivalent_to(s) end)
    expect_error("TypeError",
                 "shard_shape: argument 2 (shape) must be an integer or a list of integers, got string",
                 function() return s:shard_shape("x") end)
    expect_error("TypeError",
                 "devices_indices_map: argument 2 (shape) must be an integer or a list of integers, got string",
                 function() return s:devices_indices_map("x") end)
  end)
end)

-- ---------------------------------------------------------------------------
describe("index maps for thousands of devices", function()
  it("a 64x64 mesh over 4096 sim devices maps (4096, 64) quickly", function()
    local code = [==[
local dl = require "dlrun"
local devices = dl.devices()
local t0 = os.clock()
local m = dl.make_mesh({64, 64}, {"x", "y"})
local s = dl.NamedSharding(m, dl.P("x", "y"))
local map = s:devices_indices_map({4096, 64})
local t1 = os.clock()
local n = 0
for _ in pairs(map) do n = n + 1 end
local function show(id)
  local i = map[devices[id + 1]]
  return ("%d:%d-%d,%d-%d"):format(id, i[1][1], i[1][2], i[2][1], i[2][2])
end
local t = dl.NamedSharding(m, dl.P({"y", "x"}))
local t2 = os.clock()
local map2 = t:devices_indices_map({4096 * 2, 3})
local t3 = os.clock()
local j = map2[devices[65 + 1]] -- x = 1, y = 1: block 64*1 + 1 = 65
print(#devices, n, show(0), show(65), show(4095), s.num_devices,
      ("%d-%d"):format(j[1][1], j[1][2]), s:is_equivalent_to(t, 2),
      (t1 - t0) < 2 and (t3 - t2) < 2)
]==]
    local out, err, status = helpers.run_code(code, {"--devices", "sim:4096"},
                                              {DLRUN_DEVICES = "", DLRUN_DEVICE_MEMORY = ""})
    assert.are.equal(0, status, err)
    assert.are.equal(table.concat({
      "4096", "4096", "0:1-64,1-1", "65:65-128,2-2", "4095:4033-4096,64-64", "4096",
      "131-132", "false", "true",
    }, "\t") .. "\n", out)
  end)
end)
