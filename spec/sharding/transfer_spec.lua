-- runs: every-platform
-- ipc-off: no
-- devices: 8
-- needs: none

-- Specs for moving arrays between layouts (docs/lua-api.md, "Transfers";
-- docs/transfers.md): every combination of source and
-- target, the statistics that prove each needed byte moves once (and that a
-- replica already on the destination device is read locally), aliasing,
-- donation, errors, device_get, randomised round trips, out-of-memory
-- rollback and asynchrony.
--
-- Expected layouts and byte counts come from the reference (in
-- spec/layout_model.lua and below), which applies JAX's rules directly (it
-- never asks the implementation).
-- The busted process runs on the default runtime: 8 sim devices (ids 0..7)
-- and the host cpu device.
-- Run from the repository root: busted spec/sharding/transfer_spec.lua

local dl = require "dlrun"
local helpers = require "helpers"

local expect_error = helpers.expect_error

-- The reference (JAX's layout rules) and the memory utilities shared with
-- spec/sharding/sharded_array_spec.lua live in spec/layout_model.lua.
local model = require "layout_model"
local D, HOST, ITEMSIZE, round256 = model.D, model.HOST, model.ITEMSIZE, model.round256
local mesh_of, named, single = model.mesh_of, model.named, model.single
local product, block_shape, same_index = model.product, model.block_shape, model.same_index
local nest_values = model.nest_values
local settle, memory = model.settle, model.memory

local DTYPES = {
  "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
  "float16", "bfloat16", "float32", "float64", "complex64", "complex128",
}

---------------------------------------------------------------------------
-- Reference bytes and transfer statistics (docs/transfers.md, "Counting")
---------------------------------------------------------------------------

-- The bytes of box `index` of a row-major array of `shape` whose bytes are
-- `bytes` (elements of `esize` bytes).
local function block_bytes(bytes, shape, esize, index)
  local nd = #shape
  if nd == 0 then return bytes end
  if product(block_shape(index)) == 0 then return "" end
  local strides, s = {}, 1
  for d = nd, 1, -1 do
    strides[d] = s
    s = s * shape[d]
  end
  local first, run = index[nd][1] - 1, (index[nd][2] - index[nd][1] + 1) * esize
  local parts = {}
  local function rec(d, off)
    if d == nd then
      local start = (off + first) * esize
      parts[#parts + 1] = bytes:sub(start + 1, start + run)
      return
    end
    for i = index[d][1], index[d][2] do rec(d + 1, off + (i - 1) * strides[d]) end
  end
  rec(1, 0)
  return table.concat(parts)
end

local function overlap(a, b)
  local n = 1
  for d = 1, #a do
    local lo, hi = math.max(a[d][1], b[d][1]), math.min(a[d][2], b[d][2])
    if hi < lo then return 0 end
    n = n * (hi - lo + 1)
  end
  return n
end

-- What a put of an array of `shape` (elements of `esize` bytes) from layout
-- `src` in memory `src_kind` to layout `dst` in `dst_kind` must do: a
-- destination shard is shared when the source has a shard with the same
-- index on that device and memory (and sharing is allowed); otherwise each
-- of its bytes is copied once, locally where the source holds it on the same
-- device and memory, across devices or memories otherwise.
local function expected_stats(shape, esize, src, src_kind, dst, dst_kind, may_share)
  local held = {}
  for _, sh in ipairs(src) do held[sh.device] = sh.index end
  local e = {bytes_moved = 0, local_bytes = 0, shares = 0, needed = 0}
  for _, sh in ipairs(dst) do
    local mine = src_kind == dst_kind and held[sh.device] or nil
    local n = product(block_shape(sh.index)) * esize
    if may_share and mine and same_index(mine, sh.index) then
      e.shares = e.shares + 1
    else
      local l = mine and overlap(mine, sh.index) * esize or 0
      e.local_bytes = e.local_bytes + l
      e.bytes_moved = e.bytes_moved + n - l
      e.needed = e.needed + n
    end
  end
  return e
end

---------------------------------------------------------------------------
-- Memory and checks
---------------------------------------------------------------------------

-- after - before of bytes_in_use for each pool (memory() records), as
-- {key = delta} without the zeros.
local function growth(before, after)
  local g = {}
  for k, v in pairs(after) do
    if v.bytes ~= before[k].bytes then g[k] = v.bytes - before[k].bytes end
  end
  return g
end

-- The growth an array with `layout` in memory `kind` of shard size `nbytes`
-- allocates.
local function layout_growth(layout, kind, nbytes)
  local g = {}
  if nbytes == 0 then return g end
  for _, sh in ipairs(layout) do
    local k = tostring(sh.device) .. " " .. kind
    g[k] = (g[k] or 0) + round256(nbytes)
  end
  return g
end

local function stats_of(st)
  return {bytes_moved = st.bytes_moved, local_bytes = st.local_bytes, copies = st.copies,
          shares = st.shares}
end

-- Run fn() with fresh transfer statistics; returns its result and the stats.
local function counted(fn)
  dl.reset_transfer_stats()
  local r = fn()
  return r, stats_of(dl.transfer_stats())
end

local ZERO = {bytes_moved = 0, local_bytes = 0, copies = 0, shares = 0}

-- y has `layout` (in order), memory `kind`, dtype and the row-major values
-- `flat` of `shape`, shard by shard and as a whole.
local function check_shards(y, layout, kind, flat, shape, dtype)
  model.check_shards(y, layout, kind, flat, shape, dtype)
  assert.are.same(nest_values(flat, shape), y:tolist())
end

-- Meshes used below.
local M8 = mesh_of({0, 1, 2, 3, 4, 5, 6, 7}, {8}, {"x"})
local M8R = mesh_of({7, 6, 5, 4, 3, 2, 1, 0}, {8}, {"x"})
local M42 = mesh_of({0, 1, 2, 3, 4, 5, 6, 7}, {4, 2}, {"x", "y"})
local MP = mesh_of({7, 3, 5, 1, 6, 2, 4, 0}, {2, 4}, {"a", "b"})
local M222 = mesh_of({5, 0, 3, 6, 1, 4, 7, 2}, {2, 2, 2}, {"p", "q", "r"})
local MLO = mesh_of({0, 1, 2, 3}, {4}, {"x"})
local MHI = mesh_of({4, 5, 6, 7}, {2, 2}, {"u", "v"})

local function iota(n, f)
  local t = {}
  for i = 0, n - 1 do t[i + 1] = f and f(i) or i end
  return t
end

-- An 8x8 float32 array with distinct values, on `target`.
local FLAT64 = iota(64, function(i) return i + 0.25 end)
local SHAPE88 = {8, 8}
local N88 = 64 * 4
local function make88(target)
  return dl.array(nest_values(FLAT64, SHAPE88), "float32", target.sharding)
end

-- Put x (laid out as `from`) onto `to`, checking the result's layout, data
-- and statistics against the reference. Returns the result and its stats.
local function put_and_check(x, from, to, shape, flat, dtype, opts)
  local y, st = counted(function() return dl.device_put(x, to.sharding, opts) end)
  assert(not rawequal(x, y), "expected a new array")
  assert(rawequal(to.sharding, y.sharding), "the result's sharding is not the target")
  check_shards(y, to.layout(shape), to.kind, flat, shape, dtype)
  local may_share = not (opts and opts.may_alias == false)
  local e = expected_stats(shape, ITEMSIZE[dtype], from.layout(shape), from.kind, to.layout(shape),
                           to.kind, may_share)
  assert.are.same({bytes_moved = e.bytes_moved, local_bytes = e.local_bytes, shares = e.shares},
                  {bytes_moved = st.bytes_moved, local_bytes = st.local_bytes, shares = st.shares})
  return y, st
end

---------------------------------------------------------------------------
-- device_put: every combination
---------------------------------------------------------------------------

describe("device_put", function()
  describe("Lua data", function()
    it("goes onto a device", function()
      local y = dl.device_put({{1, 2}, {3, 4}}, D(3))
      assert.are.equal("int32", y.dtype)
      assert.are.same({{1, 2}, {3, 4}}, y:tolist())
      assert.are.equal(1, #y:devices())
      assert(rawequal(D(3), y:devices()[1]))
      local z = dl.device_put(2.5, D(6))
      assert.are.equal("float32", z.dtype)
      assert.are.equal(2.5, z:item())
      assert(rawequal(D(6), z:devices()[1]))
    end)

    it("goes onto the default device without a target", function()
      local y = dl.device_put({1.5, 2.5})
      assert.are.same({1.5, 2.5}, y:tolist())
      assert(rawequal(dl.devices()[1], y:devices()[1]))
    end)

    it("goes onto a sharding, each device holding its block", function()
      local t = named(M42, dl.P("x", "y"))
      local flat = iota(16)
      local y = dl.device_put(nest_values(flat, {8, 2}), t.sharding)
      assert(rawequal(t.sharding, y.sharding))
      check_shards(y, t.layout({8, 2}), "device", flat, {8, 2}, "int32")
      local tp = named(MP, dl.P("a"), "pinned_host")
      local z = dl.device_put(nest_values(flat, {8, 2}), tp.sharding)
      check_shards(z, tp.layout({8, 2}), "pinned_host", flat, {8, 2}, "int32")
    end)
  end)

  describe("tables of arrays", function()
    it("maps each array (and each Lua value) of a table onto the target, keys kept", function()
      local t = named(M8, dl.P("x"))
      local a = make88(single(D(1)))
      local b = make88(named(M42, dl.P("y")))
      local tree = {a, {inner = b}, key = a}
      local out = dl.device_put(tree, t.sharding)
      assert(not rawequal(tree, out))
      check_shards(out[1], t.layout(SHAPE88), "device", FLAT64, SHAPE88, "float32")
      check_shards(out[2].inner, t.layout(SHAPE88), "device", FLAT64, SHAPE88, "float32")
      check_shards(out.key, t.layout(SHAPE88), "device", FLAT64, SHAPE88, "float32")
      assert(rawequal(a, tree[1]))
      local mixed = dl.device_put({a, {1, 2, 3}}, D(6))
      assert(rawequal(D(6), mixed[1]:devices()[1]))
      assert(rawequal(D(6), mixed[2]:devices()[1]))
      assert.are.same({1, 2, 3}, mixed[2]:tolist())
    end)

    it("leaves each array of a table where it is without a target (as JAX)", function()
      local a = make88(single(D(1)))
      local b = make88(named(M42, dl.P("y")))
      local out = dl.device_put({a, {inner = b}})
      assert(rawequal(a, out[1]))
      assert(rawequal(b, out[2].inner))
    end)
  end)

  describe("between layouts", function()
    it("moves an array from one device to another: all bytes moved, one copy", function()
      local from, to = single(D(1)), single(D(6))
      local x = make88(from)
      local _, st = put_and_check(x, from, to, SHAPE88, FLAT64, "float32")
      assert.are.same({bytes_moved = N88, local_bytes = 0, copies = 1, shares = 0}, st)
      assert.are.same(nest_values(FLAT64, SHAPE88), x:tolist())
    end)

    it("gathers an 8-way row-sharded array to device 0: 7/8 moved, 1/8 local", function()
      local from = named(M8, dl.P("x"))
      local x = make88(from)
      local _, st = put_and_check(x, from, single(D(0)), SHAPE88, FLAT64, "float32")
      assert.are.equal(N88 * 7 // 8, st.bytes_moved)
      assert.are.equal(N88 // 8, st.local_bytes)
      assert.are.equal(0, st.shares)
      local _, st5 = put_and_check(x, from, single(D(5)), SHAPE88, FLAT64, "float32")
      assert.are.equal(N88 * 7 // 8, st5.bytes_moved)
      assert.are.equal(N88 // 8, st5.local_bytes)
    end)

    it("gathers a P('y') array (replicated 4x) reading the replica on the destination", function()
      local from = named(M42, dl.P("y"))
      local x = make88(from)
      for _, id in ipairs {0, 6, 3} do
        local _, st = put_and_check(x, from, single(D(id)), SHAPE88, FLAT64, "float32")
        assert.are.equal(N88 // 2, st.local_bytes, "local bytes gathering to device " .. id)
        assert.are.equal(N88 // 2, st.bytes_moved, "bytes moved gathering to device " .. id)
      end
    end)

    it("scatters from one device to 8: (n-1)/n moved, the device's own block local", function()
      local to = named(M8, dl.P("x"))
      local x = make88(single(D(0)))
      local _, st = put_and_check(x, single(D(0)), to, SHAPE88, FLAT64, "float32")
      assert.are.equal(N88 * 7 // 8, st.bytes_moved)
      assert.are.equal(N88 // 8, st.local_bytes)
      local x3 = make88(single(D(3)))
      local to2 = named(M42, dl.P(nil, {"y", "x"}))
      local _, st3 = put_and_check(x3, single(D(3)), to2, SHAPE88, FLAT64, "float32")
      assert.are.equal(N88 * 7 // 8, st3.bytes_moved)
      assert.are.equal(N88 // 8, st3.local_bytes)
    end)

    it("scatters onto devices that do not include the source's: everything moved", function()
      local x = make88(single(D(2)))
      local _, st = put_and_check(x, single(D(2)), named(MHI, dl.P("u", "v")), SHAPE88, FLAT64,
                                  "float32")
      assert.are.same({bytes_moved = N88, local_bytes = 0}, {bytes_moved = st.bytes_moved,
                                                             local_bytes = st.local_bytes})
    end)

    it("reshards replicated -> sharded with local copies only", function()
      local from, to = named(M8, dl.P()), named(M8, dl.P("x"))
      local x = make88(from)
      local _, st = put_and_check(x, from, to, SHAPE88, FLAT64, "float32")
      assert.are.same({bytes_moved = 0, local_bytes = N88, copies = 8, shares = 0}, st)
    end)

    it("reshards sharded -> replicated: each device reads its own block locally", function()
      local from, to = named(M8, dl.P("x")), named(M8, dl.P())
      local x = make88(from)
      local _, st = put_and_check(x, from, to, SHAPE88, FLAT64, "float32")
      assert.are.equal(7 * N88, st.bytes_moved)
      assert.are.equal(N88, st.local_bytes)
      assert.are.equal(0, st.shares)
    end)

    it("reshards rows -> columns on 8 devices: 7/8 moved, 1/8 local, 64 copies", function()
      local from, to = named(M8, dl.P("x")), named(M8, dl.P(nil, "x"))
      local x = make88(from)
      local _, st = put_and_check(x, from, to, SHAPE88, FLAT64, "float32")
      assert.are.same({bytes_moved = N88 * 7 // 8, local_bytes = N88 // 8, copies = 64, shares = 0}, st)
    end)

    it("reshards between different meshes of the same devices (2-D, permuted, 3-D)", function()
      local chain = {
        named(M42, dl.P("x", "y")), named(MP, dl.P("a")), named(M222, dl.P({"q", "p"}, "r")),
        named(M8, dl.P(nil, "x")), named(MP, dl.P({"b", "a"})), named(M42, dl.P("y", "x")),
      }
      local x = make88(chain[1])
      for i = 2, #chain do
        x = put_and_check(x, chain[i - 1], chain[i], SHAPE88, FLAT64, "float32")
      end
    end)

    it("reshards onto the same devices in another order (reversed mesh): every byte moves", function()
      local from, to = named(M8, dl.P("x")), named(M8R, dl.P("x"))
      local x = make88(from)
      local _, st = put_and_check(x, from, to, SHAPE88, FLAT64, "float32")
      assert.are.same({bytes_moved = N88, local_bytes = 0, copies = 8, shares = 0}, st)
    end)

    it("reshards from a 4-device mesh to another 4-device mesh", function()
      local from, to = named(MLO, dl.P("x")), named(MHI, dl.P({"u", "v"}))
      local x = make88(from)
      local _, st = put_and_check(x, from, to, SHAPE88, FLAT64, "float32")
      assert.are.same({bytes_moved = N88, local_bytes = 0, copies = 4, shares = 0}, st)
      local back = put_and_check(x, from, named(MLO, dl.P(nil, "x")), SHAPE88, FLAT64, "float32")
      assert.are.same(nest_values(FLAT64, SHAPE88), back:tolist())
    end)

    it("partially overlapping device sets copy locally where the source holds the data", function()
      local from = named(MLO, dl.P("x"))        -- devices 0..3, rows in blocks of 2
      local to = named(M42, dl.P({"x", "y"}))   -- devices 0..7, one row each
      local x = make88(from)
      local _, st = put_and_check(x, from, to, SHAPE88, FLAT64, "float32")
      -- device d (0..3) holds rows 2d+1, 2d+2 (1-based) and needs row d+1:
      -- only device 0 finds its row locally.
      assert.are.equal(32, st.local_bytes)
      assert.are.equal(N88 - 32, st.bytes_moved)
    end)
  end)

  describe("memory kinds", function()
    it("moves device -> pinned_host on the same devices, allocating in the pinned pools", function()
      local from, to = named(M8, dl.P("x")), named(M8, dl.P("x"), "pinned_host")
      local x = make88(from)
      x:block_until_ready()
      settle()
      local before = memory()
      local y, st = put_and_check(x, from, to, SHAPE88, FLAT64, "float32")
      y:block_until_ready()
      assert.are.same({bytes_moved = N88, local_bytes = 0, copies = 8, shares = 0}, st)
      assert.are.same(layout_growth(to.layout(SHAPE88), "pinned_host", N88 // 8),
                      growth(before, memory()))
    end)

    it("moves pinned_host -> device, and between a device and its own pinned memory", function()
      local from = named(M42, dl.P("x"), "pinned_host")
      local x = make88(from)
      local y, st = put_and_check(x, from, named(MP, dl.P(nil, "b")), SHAPE88, FLAT64, "float32")
      -- P(nil, 'b') on the 2x4 mesh holds each column block twice: 2 x N bytes,
      -- all of them crossing from pinned_host to device memory.
      assert.are.same({bytes_moved = 2 * N88, local_bytes = 0},
                      {bytes_moved = st.bytes_moved, local_bytes = st.local_bytes})
      local s1 = single(D(2))
      local a = make88(s1)
      local b, st1 = put_and_check(a, s1, single(D(2), "pinned_host"), SHAPE88, FLAT64, "float32")
      assert.are.same({bytes_moved = N88, local_bytes = 0, copies = 1, shares = 0}, st1)
      -- a Device target means that device's default memory: back it comes.
      local c, st2 = counted(function() return dl.device_put(b, D(2)) end)
      assert.are.equal("device", c.sharding.memory_kind)
      assert.are.equal(N88, st2.bytes_moved)
      assert.are.same(nest_values(FLAT64, SHAPE88), c:tolist())
      assert.are.same(nest_values(FLAT64, SHAPE88), y:tolist())
    end)

    it("reshards within pinned_host memory with local copies", function()
      local from, to = named(M8, dl.P()), named(M8, dl.P(nil, "x"))
      from = named(M8, dl.P(), "pinned_host")
      to = named(M8, dl.P(nil, "x"), "pinned_host")
      local x = make88(from)
      local _, st = put_and_check(x, from, to, SHAPE88, FLAT64, "float32")
      assert.are.same({bytes_moved = 0, local_bytes = N88, copies = 8, shares = 0}, st)
    end)
  end)
end)

---------------------------------------------------------------------------
-- Sharing, identity, may_alias, donate
---------------------------------------------------------------------------

describe("device_put aliasing and donation", function()
  it("returns the same object when the sharding is the array's own", function()
    local t = named(M8, dl.P("x"))
    local x = make88(t)
    local y, st = counted(function() return dl.device_put(x, x.sharding) end)
    assert(rawequal(x, y))
    assert.are.same(ZERO, st)
    assert(rawequal(x, dl.device_put(x, t.sharding)))
  end)

  it("returns the same object for an equal sharding (same mesh and spec, new value)", function()
    local x = make88(named(M8, dl.P("x")))
    assert(rawequal(x, dl.device_put(x, dl.NamedSharding(M8.mesh, dl.P("x")))))
    assert(rawequal(x, dl.device_put(x, dl.NamedSharding(dl.make_mesh({8}, {"x"}), dl.P("x")))))
    local s = make88(single(D(4)))
    assert(rawequal(s, dl.device_put(s, D(4))))
    assert(rawequal(s, dl.device_put(s, dl.SingleDeviceSharding(D(4)))))
  end)

  it("returns the same object without a target, with or without neutral options", function()
    local x = make88(named(M42, dl.P("y")))
    local y, st = counted(function() return dl.device_put(x) end)
    assert(rawequal(x, y))
    assert.are.same(ZERO, st)
    assert(rawequal(x, dl.device_put(x, {})))
    assert(rawequal(x, dl.device_put(x, nil, {})))
    assert(rawequal(x, dl.device_put(x, {may_alias = true})))
    assert(rawequal(x, dl.device_put(x, nil, {donate = false})))
  end)

  it("shares every shard when resharding onto an equivalent sharding of another mesh", function()
    -- JAX returns the input itself only when x.sharding == target; an
    -- equivalent layout on another mesh (other axis names) gives a new Array
    -- with the target sharding whose shards are the input's buffers.
    local t = named(M8, dl.P("x"))
    local x = make88(t)
    x:block_until_ready()
    local other = dl.NamedSharding(dl.make_mesh({8}, {"a"}), dl.P("a"))
    settle()
    local before = memory()
    local y, st = counted(function() return dl.device_put(x, other) end)
    assert.are.same({bytes_moved = 0, local_bytes = 0, copies = 0, shares = 8}, st)
    assert(not rawequal(x, y), "expected a new Array")
    assert(rawequal(other, y.sharding), "the result's sharding is not the target")
    assert.are.same({"a"}, y.sharding.mesh.axis_names)
    assert.are.same({}, growth(before, memory()))
    assert.are.same(nest_values(FLAT64, SHAPE88), y:tolist())
  end)

  it("gives a new Array sharing every shard for an equivalent sharding that is not equal", function()
    -- Only an equal sharding (==) gives x itself back. These targets put the
    -- same blocks on the same devices as the source (equivalent) but differ
    -- from it (another spec, another kind of sharding): the result is a new
    -- Array with the target sharding over the source's buffers, with no copy
    -- and no new memory.
    local rows = make88(named(M8, dl.P("x")))
    local one = make88(single(D(4)))
    local mesh4 = dl.Mesh({D(4)}, {"z"})
    local cases = {
      {rows, dl.NamedSharding(M8.mesh, dl.P("x", nil)), 8},
      {one, dl.NamedSharding(mesh4, dl.P()), 1},
      {one, dl.NamedSharding(mesh4, dl.P("z")), 1},
    }
    rows:block_until_ready()
    one:block_until_ready()
    for _, c in ipairs(cases) do
      local x, target, nshards = c[1], c[2], c[3]
      assert.is_true(x.sharding:is_equivalent_to(target, 2))
      assert.is_false(x.sharding == target)
      settle()
      local before = memory()
      local y, st = counted(function() return dl.device_put(x, target) end)
      assert(not rawequal(x, y), "expected a new Array for " .. tostring(target))
      assert(rawequal(target, y.sharding), "the result's sharding is not the target")
      assert.are.same({bytes_moved = 0, local_bytes = 0, copies = 0, shares = nshards}, st)
      assert.are.same({}, growth(before, memory()))
      assert.are.same(nest_values(FLAT64, SHAPE88), y:tolist())
    end
  end)

  it("shares every shard of a replicated array put onto the same devices in another order", function()
    local x = make88(named(M8, dl.P()))
    x:block_until_ready()
    local rev = dl.NamedSharding(M8R.mesh, dl.P())
    local y, st = counted(function() return dl.device_put(x, rev) end)
    assert.are.same({bytes_moved = 0, local_bytes = 0, copies = 0, shares = 8}, st)
    assert(rawequal(rev, y.sharding), "the result's sharding is not the target")
    assert.are.equal(7, y.addressable_shards[1].device.id)
  end)

  it("shares the replica already on the device when a replicated array goes to one device", function()
    local x = make88(named(M8, dl.P()))
    x:block_until_ready()
    settle()
    local before = memory()
    local y, st = counted(function() return dl.device_put(x, D(3)) end)
    assert.are.same({bytes_moved = 0, local_bytes = 0, copies = 0, shares = 1}, st)
    assert.are.same({}, growth(before, memory()))
    assert(rawequal(D(3), y:devices()[1]))
    assert.are.same(nest_values(FLAT64, SHAPE88), y:tolist())
  end)

  it("shares the shards that stay in place and copies the rest", function()
    -- P('x') on 4x2 -> P('x') on the 4-device mesh 0..3: device 0 keeps
    -- rows 1-2; devices 1, 2, 3 need rows held elsewhere.
    local from, to = named(M42, dl.P("x")), named(MLO, dl.P("x"))
    local x = make88(from)
    local _, st = put_and_check(x, from, to, SHAPE88, FLAT64, "float32")
    assert.are.equal(1, st.shares) -- device 0 holds rows 1-2 in both
    assert.are.same({bytes_moved = 3 * 64, local_bytes = 0}, {bytes_moved = st.bytes_moved,
                                                              local_bytes = st.local_bytes})
  end)

  it("may_alias=false always copies: a new object, no shares, new memory", function()
    local t = named(M8, dl.P("x"))
    local x = make88(t)
    x:block_until_ready()
    settle()
    local before = memory()
    local y, st = counted(function() return dl.device_put(x, t.sharding, {may_alias = false}) end)
    y:block_until_ready()
    assert(not rawequal(x, y))
    assert.are.same({bytes_moved = 0, local_bytes = N88, copies = 8, shares = 0}, st)
    assert.are.same(layout_growth(t.layout(SHAPE88), "device", N88 // 8), growth(before, memory()))
    x:delete()
    assert.are.same(nest_values(FLAT64, SHAPE88), y:tolist())
    local z = make88(single(D(5)))
    local w, st2 = counted(function() return dl.device_put(z, {may_alias = false}) end)
    assert(not rawequal(z, w))
    assert.are.same({bytes_moved = 0, local_bytes = N88, copies = 1, shares = 0}, st2)
    assert(rawequal(D(5), w:devices()[1]))
    local r = make88(named(M8, dl.P()))
    local q, st3 = counted(function() return dl.device_put(r, D(3), {may_alias = false}) end)
    assert.are.same({bytes_moved = 0, local_bytes = N88, copies = 1, shares = 0}, st3)
    assert.are.same(nest_values(FLAT64, SHAPE88), q:tolist())
  end)

  it("donate=true deletes the input and gives the right result", function()
    local from, to = named(M8, dl.P("x")), named(M42, dl.P(nil, "y"))
    local x = make88(from)
    local y = dl.device_put(x, to.sharding, {donate = true})
    assert.is_true(x:is_deleted())
    check_shards(y, to.layout(SHAPE88), "device", FLAT64, SHAPE88, "float32")
    local msg = "Array has been deleted with shape=float32[8,8]."
    expect_error("RuntimeError", msg, x.tolist, x)
    expect_error("RuntimeError", msg, x.block_until_ready, x)
    expect_error("RuntimeError", msg, dl.device_put, x, D(1))
  end)

  it("donate=true onto the same layout hands the buffers over: no copy, no new memory", function()
    local t = named(M42, dl.P("x", "y"))
    local x = make88(t)
    x:block_until_ready()
    settle()
    local before = memory()
    local y, st = counted(function() return dl.device_put(x, t.sharding, {donate = true}) end)
    assert.is_true(x:is_deleted())
    assert(not rawequal(x, y))
    assert.are.same({bytes_moved = 0, local_bytes = 0, copies = 0, shares = 8}, st)
    assert.are.same({}, growth(before, memory()))
    check_shards(y, t.layout(SHAPE88), "device", FLAT64, SHAPE88, "float32")
    local z = make88(single(D(7)))
    local w = dl.device_put(z, {donate = true})
    assert.is_true(z:is_deleted())
    assert(rawequal(D(7), w:devices()[1]))
    assert.are.same(nest_values(FLAT64, SHAPE88), w:tolist())
  end)

  it("donate=true with may_alias=false is plain donation (JAX: may_alias defaults to not donate)", function()
    local t = named(M8, dl.P("x"))
    local x = make88(t)
    local y, st = counted(function()
      return dl.device_put(x, t.sharding, {donate = true, may_alias = false})
    end)
    assert.is_true(x:is_deleted())
    assert.are.same({bytes_moved = 0, local_bytes = 0, copies = 0, shares = 8}, st)
    assert.are.same(nest_values(FLAT64, SHAPE88), y:tolist())
  end)

  it("may_alias=true with donate=true raises JAX's ValueError and leaves x alone", function()
    local x = make88(named(M8, dl.P("x")))
    expect_error("ValueError", "may_alias and donate cannot be True at the same time.",
                 dl.device_put, x, D(1), {may_alias = true, donate = true})
    expect_error("ValueError", "may_alias and donate cannot be True at the same time.",
                 dl.device_put, x, {may_alias = true, donate = true})
    assert.is_false(x:is_deleted())
    assert.are.same(nest_values(FLAT64, SHAPE88), x:tolist())
  end)

  it("deleted inputs raise JAX's RuntimeError, with or without a target", function()
    local x = make88(named(M8, dl.P("x")))
    x:delete()
    local msg = "Array has been deleted with shape=float32[8,8]."
    expect_error("RuntimeError", msg, dl.device_put, x, D(1))
    expect_error("RuntimeError", msg, dl.device_put, x)
    expect_error("RuntimeError", msg, dl.device_put, x, {may_alias = false})
    expect_error("RuntimeError", msg, dl.device_put, x, dl.NamedSharding(M8.mesh, dl.P("x")))
    expect_error("RuntimeError", msg, dl.device_put, x, dl.NamedSharding(M8.mesh, dl.P()))
    expect_error("RuntimeError", msg, dl.device_put, {x}, D(1))
    expect_error("RuntimeError", msg, dl.device_get, x)
    expect_error("RuntimeError", msg, dl.device_get, {a = {b = x}})
  end)

  it("bad targets raise TypeError", function()
    local x = make88(single(D(1)))
    local pre = "device_put: argument 2 (target) must be a Device or a Sharding, got "
    expect_error("TypeError", pre .. "string", dl.device_put, x, "sim:1")
    expect_error("TypeError", pre .. "number", dl.device_put, x, 3)
    expect_error("TypeError", pre .. "Mesh", dl.device_put, x, M8.mesh)
    expect_error("TypeError", pre .. "PartitionSpec", dl.device_put, x, dl.P("x"))
    expect_error("TypeError", pre .. "Array", dl.device_put, x, x)
    expect_error("TypeError", nil, dl.device_put)
  end)

  it("a target that does not divide the shape raises IndivisibleError", function()
    local x = dl.arange(6, "int32")
    local err = expect_error("IndivisibleError",
                             {contains = "implies that array axis 0 is partitioned 8 times, but the "
                                .. "dimension size is 6"},
                             dl.device_put, x, dl.NamedSharding(M8.mesh, dl.P("x")))
    assert.is_true(dl.ValueError:is_instance(err))
  end)

  it("bad options raise ValueError (unknown key) or TypeError (not a boolean)", function()
    local x = make88(single(D(1)))
    expect_error("ValueError", "device_put: unknown option 'foo' (expected donate, may_alias)",
                 dl.device_put, x, D(2), {foo = true})
    expect_error("ValueError", "device_put: unknown option 'copy' (expected donate, may_alias)",
                 dl.device_put, x, {copy = true})
    expect_error("TypeError", "device_put: option donate must be a boolean, got string",
                 dl.device_put, x, D(2), {donate = "yes"})
    expect_error("TypeError", "device_put: option may_alias must be a boolean, got number",
                 dl.device_put, x, D(2), {may_alias = 1})
    expect_error("TypeError", {pattern = "^device_put: argument 3 %(options%)"},
                 dl.device_put, x, D(2), 5)
    assert.is_false(x:is_deleted())
  end)
end)

---------------------------------------------------------------------------
-- device_get
---------------------------------------------------------------------------

describe("device_get", function()
  local function check_host(g, flat, shape, dtype)
    assert.are.equal(1, #g:devices())
    assert(rawequal(HOST, g:devices()[1]), "not on the host cpu device")
    assert.are.equal(dtype, g.dtype)
    assert.are.same(shape, g.shape)
    assert.are.same(nest_values(flat, shape), g:tolist())
  end

  it("gathers a sharded array onto the host cpu device", function()
    for _, t in ipairs {named(M42, dl.P("x", "y")), named(MP, dl.P(nil, {"a", "b"})),
                        named(M8, dl.P("x"), "pinned_host"), single(D(4)), named(M42, dl.P("y"))} do
      local x = make88(t)
      local g, st = counted(function() return dl.device_get(x) end)
      check_host(g, FLAT64, SHAPE88, "float32")
      assert.are.same({bytes_moved = N88, local_bytes = 0}, {bytes_moved = st.bytes_moved,
                                                             local_bytes = st.local_bytes})
      assert.are.same(nest_values(FLAT64, SHAPE88), x:tolist())
    end
  end)

  it("keeps dtype and values of every dtype", function()
    local all = {table.unpack(DTYPES)}
    for _, dtype in ipairs({"float8_e3m4", "float8_e4m3", "float8_e4m3b11fnuz",
                            "float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz",
                            "float8_e8m0fnu"}) do
      all[#all + 1] = dtype
    end
    for _, dtype in ipairs(all) do
      local raw = {}
      for i = 1, 16 * ITEMSIZE[dtype] do raw[i] = string.char(dtype == "bool" and i % 2 or (i * 37) % 256) end
      local bytes = table.concat(raw)
      local x = dl.frombytes(bytes, {16}, dtype, dl.NamedSharding(M8.mesh, dl.P("x")))
      local g = dl.device_get(x)
      assert.are.equal(dtype, g.dtype)
      assert.are.equal(bytes, g:tobytes(), dtype)
      assert(rawequal(HOST, g:devices()[1]))
    end
  end)

  it("passes non-array values through unchanged", function()
    assert.are.equal(5, dl.device_get(5))
    assert.are.equal(math.type(2.5), math.type(dl.device_get(2.5)))
    assert.are.equal("s", dl.device_get("s"))
    assert.are.equal(nil, dl.device_get(nil))
    assert.are.equal(1, select("#", dl.device_get(nil)))
    assert.are.equal(true, dl.device_get(true))
    assert(rawequal(print, dl.device_get(print)))
    local t = {1, "a", {2}}
    assert(rawequal(t, dl.device_get(t)))
    assert(rawequal(D(2), dl.device_get(D(2))))
  end)

  it("maps tables of arrays element-wise, nested, keeping keys and other entries", function()
    local a = make88(named(M8, dl.P("x")))
    local b = dl.array({1, 2, 3}, "int8", D(5))
    local plain = {9, 8}
    local tree = {a, "text", 7, {inner = b, deeper = {b, a}, n = 1.5}, key = a, plain = plain,
                  fn = print}
    local g = dl.device_get(tree)
    assert(not rawequal(tree, g))
    check_host(g[1], FLAT64, SHAPE88, "float32")
    assert.are.equal("text", g[2])
    assert.are.equal(7, g[3])
    check_host(g[4].inner, {1, 2, 3}, {3}, "int8")
    check_host(g[4].deeper[1], {1, 2, 3}, {3}, "int8")
    check_host(g[4].deeper[2], FLAT64, SHAPE88, "float32")
    assert.are.equal(1.5, g[4].n)
    check_host(g.key, FLAT64, SHAPE88, "float32")
    assert(rawequal(plain, g.plain))
    assert(rawequal(print, g.fn))
    local keys = {}
    for k in pairs(g) do keys[#keys + 1] = tostring(k) end
    table.sort(keys)
    assert.are.same({"1", "2", "3", "4", "fn", "key", "plain"}, keys)
    -- the input tree is left as it was
    assert(rawequal(a, tree[1]))
    assert(rawequal(b, tree[4].inner))
    assert.is_false(a:is_deleted())
  end)
end)

---------------------------------------------------------------------------
-- Randomised round trips
---------------------------------------------------------------------------

describe("randomised round trips", function()
  local MESH_SHAPES = {
    {1}, {2}, {3}, {4}, {6}, {8}, {2, 2}, {2, 4}, {4, 2}, {8, 1}, {1, 8}, {2, 3}, {3, 2},
    {2, 2, 2}, {2, 1, 4}, {1, 2, 2}, {4, 1, 2},
  }
  local DIMS = {1, 2, 3, 4, 6, 8, 12, 16, 24}

  local function shuffled(list)
    local t = {table.unpack(list)}
    for i = #t, 2, -1 do
      local j = math.random(i)
      t[i], t[j] = t[j], t[i]
    end
    return t
  end

  local function random_shape()
    while true do
      local nd = math.random(0, 3)
      local shape = {}
      for d = 1, nd do
        shape[d] = math.random() < 0.04 and 0 or DIMS[math.random(#DIMS)]
      end
      if product(shape) <= 1536 then return shape end
    end
  end

  -- A random divisible spec for `shape` on mesh info M.
  local function random_spec(M, shape)
    local len = math.random(0, #shape)
    local free = {}
    for a, n in ipairs(M.names) do free[n] = M.sizes[a] end
    local entries = {}
    for d = 1, len do
      local options = {false, false}
      for n, size in pairs(free) do
        if shape[d] % size == 0 then options[#options + 1] = {n} end
        for m, size2 in pairs(free) do
          if m ~= n and shape[d] % (size * size2) == 0 then options[#options + 1] = {n, m} end
        end
      end
      table.sort(options, function(p, q) -- deterministic order for a fixed seed
        local a = p and table.concat(p, ",") or ""
        local b = q and table.concat(q, ",") or ""
        return a < b
      end)
      local pick = options[math.random(#options)]
      if pick then
        for _, n in ipairs(pick) do free[n] = nil end
        entries[d] = #pick == 1 and pick[1] or pick
      end
    end
    return dl.P(table.unpack(entries, 1, len))
  end

  local function random_target(shape)
    local kind = math.random() < 0.25 and "pinned_host" or nil
    if math.random() < 0.2 then
      local dev = math.random() < 0.25 and HOST or D(math.random(0, 7))
      if dev == HOST then kind = nil end
      return single(dev, kind)
    end
    local sizes = MESH_SHAPES[math.random(#MESH_SHAPES)]
    local ids = {}
    for i, id in ipairs(shuffled {0, 1, 2, 3, 4, 5, 6, 7}) do
      if i <= product(sizes) then ids[i] = id end
    end
    local names = {}
    for i, n in ipairs(shuffled {"a", "b", "c"}) do
      if i <= #sizes then names[i] = n end
    end
    local M = mesh_of(ids, sizes, names)
    return named(M, random_spec(M, shape), kind)
  end

  local function random_bytes(n, dtype)
    if dtype == "bool" then
      local t = {}
      for i = 1, n do t[i] = string.char(math.random(0, 1)) end
      return table.concat(t)
    end
    local t = {}
    for i = 1, (n + 3) // 4 do t[i] = string.pack("<I4", math.random(0, 0xffffffff)) end
    return table.concat(t):sub(1, n)
  end

  -- One step: put x (laid out as `from`) onto `to`; check bytes, shards and
  -- that no byte moved more than once.
  local function step(trial, x, from, to, shape, dtype, bytes)
    local esize = ITEMSIZE[dtype]
    local y, st = counted(function() return dl.device_put(x, to.sharding) end)
    local what = ("trial %d: %s %s from %s to %s"):format(trial, dtype,
                                                          "{" .. table.concat(shape, ",") .. "}",
                                                          from.describe, to.describe)
    local src, dst = from.layout(shape), to.layout(shape)
    local e = expected_stats(shape, esize, src, from.kind, dst, to.kind, true)
    if rawequal(x, y) then
      -- only when nothing needs to change: every destination shard is shared
      assert(e.shares == #dst and #src == #dst, what .. ": the same object came back")
      assert.are.same(ZERO, st, what)
    else
      assert(rawequal(to.sharding, y.sharding), what .. ": sharding")
      local shard_nbytes = product(block_shape(dst[1].index)) * esize
      assert.are.equal((#dst - st.shares) * shard_nbytes, st.bytes_moved + st.local_bytes,
                       what .. ": bytes moved + local bytes")
      assert.are.same({bytes_moved = e.bytes_moved, local_bytes = e.local_bytes, shares = e.shares},
                      {bytes_moved = st.bytes_moved, local_bytes = st.local_bytes, shares = st.shares},
                      what)
      local shards = y.addressable_shards
      assert.are.equal(#dst, #shards, what)
      for k, sh in ipairs(shards) do
        assert(rawequal(dst[k].device, sh.device), what .. ": shard device")
        assert.are.same(dst[k].index, sh.index, what .. ": shard index")
        assert.are.equal(dst[k].replica_id, sh.replica_id, what .. ": replica id")
        assert.are.equal(to.kind, sh.data.sharding.memory_kind, what .. ": memory kind")
        if block_bytes(bytes, shape, esize, dst[k].index) ~= sh.data:tobytes() then
          error(what .. ": wrong data in shard " .. k)
        end
      end
    end
    assert.are.same(shape, y.shape, what)
    assert.are.equal(dtype, y.dtype, what)
    if bytes ~= y:tobytes() then error(what .. ": bytes differ") end
    return y
  end

  it("200 trials: put, 3 reshards and get give back the bytes, each byte moved once", function()
    math.randomseed(20240611)
    local host = single(HOST)
    for trial = 1, 200 do
      local dtype = DTYPES[math.random(#DTYPES)]
      local shape = random_shape()
      local bytes = random_bytes(product(shape) * ITEMSIZE[dtype], dtype)
      local x = dl.frombytes(bytes, shape, dtype, HOST)
      local from = host
      for _ = 1, 4 do
        local to = random_target(shape)
        x = step(trial, x, from, to, shape, dtype, bytes)
        from = to
      end
      local g, st = counted(function() return dl.device_get(x) end)
      assert(rawequal(HOST, g:devices()[1]), "trial " .. trial .. ": device_get placement")
      if bytes ~= g:tobytes() then error("trial " .. trial .. ": device_get bytes differ") end
      local e = expected_stats(shape, ITEMSIZE[dtype], from.layout(shape), from.kind,
                               host.layout(shape), "device", true)
      if not rawequal(g, x) then
        assert.are.equal(e.bytes_moved, st.bytes_moved, "trial " .. trial .. ": get bytes moved")
        assert.are.equal(e.local_bytes, st.local_bytes, "trial " .. trial .. ": get local bytes")
      end
      if trial % 50 == 0 then collectgarbage() end
    end
  end)
end)

---------------------------------------------------------------------------
-- Out-of-memory rollback (small device memory, in a child process)
---------------------------------------------------------------------------

describe("a device_put that runs out of memory", function()
  it("frees what it allocated, leaves the source untouched, and succeeds once memory is free", function()
    local code = [[
local dl = require "dlrun"
local D = dl.devices()
assert(#D == 4, "expected 4 devices")
local function used()
  local t = {}
  for i, d in ipairs(D) do
    t[i] = d:memory_stats().bytes_in_use .. "/" .. d:memory_stats("pinned_host").bytes_in_use
  end
  return table.concat(t, " ")
end
local m = dl.make_mesh({4}, {"x"})
local src = dl.arange(4096, "int32", dl.NamedSharding(m, dl.P("x"))) -- 4 KiB per device
src:block_until_ready()
local want = {}
for i = 1, 4096 do want[i] = i - 1 end
local function same(list)
  for i = 1, 4096 do
    if list[i] ~= want[i] then return false end
  end
  return #list == 4096
end
for _, fill_id in ipairs {2, 3, 0} do
  -- 52 KiB more on one device: 8 KiB left there, the others have 60 KiB free.
  local filler = dl.zeros({13 * 1024}, "float32", D[fill_id + 1])
  filler:block_until_ready()
  collectgarbage()
  local before = used()
  dl.reset_transfer_stats()
  local ok, err = pcall(dl.device_put, src, dl.NamedSharding(m, dl.P())) -- 16 KiB per device
  assert(not ok, "the put succeeded")
  assert(type(err) == "table" and err.name == "ResourceExhaustedError", tostring(err))
  assert(err.message:find("SimDevice(id=" .. fill_id .. ")", 1, true), err.message)
  collectgarbage()
  for _, d in ipairs(D) do d:synchronize() end
  assert(used() == before, "memory after the failed put: " .. used() .. ", before: " .. before)
  local st = dl.transfer_stats()
  assert(st.bytes_moved == 0 and st.local_bytes == 0 and st.shares == 0,
         "a failed put counted transfers")
  assert(not src:is_deleted(), "the source was deleted")
  assert(same(src:tolist()), "the source changed")
  -- a donating put that fails must not delete its input either
  local ok2, err2 = pcall(dl.device_put, src, dl.NamedSharding(m, dl.P()), {donate = true})
  assert(not ok2 and err2.name == "ResourceExhaustedError", tostring(err2))
  assert(not src:is_deleted(), "a failed donating put deleted the source")
  assert(used() == before, "memory after the failed donating put: " .. used())
  filler:delete()
  local y = dl.device_put(src, dl.NamedSharding(m, dl.P()))
  assert(same(y:tolist()), "the retried put gave wrong values")
  for k, sh in ipairs(y.addressable_shards) do
    assert(same(sh.data:tolist()), "replica " .. k .. " is wrong")
  end
  y:delete()
  y = nil
  collectgarbage()
  collectgarbage()
end
print("ok")
]]
    local out, err, status = helpers.run_code(code, {"--devices", "sim:4", "--device-memory", "64KiB"},
                                              {DLRUN_DEVICES = "", DLRUN_DEVICE_MEMORY = ""})
    assert.are.equal("ok\n", out, err)
    assert.are.equal(0, status)
  end)
end)

---------------------------------------------------------------------------
-- Asynchrony
---------------------------------------------------------------------------

describe("asynchronous transfers", function()
  local N = 1 << 18
  local function arange_bytes(n)
    local t = {}
    for i = 0, n - 1 do t[i + 1] = string.pack("<f", i) end
    return table.concat(t)
  end
  local EXPECTED = arange_bytes(N)

  it("deleting the source right after device_put still gives the right result", function()
    local x = dl.arange(N, "float32", dl.NamedSharding(M8.mesh, dl.P("x")))
    local y = dl.device_put(x, dl.NamedSharding(MP.mesh, dl.P()))
    x:delete()
    local z = dl.device_put(y, D(3))
    y:delete()
    assert.are.equal(EXPECTED, z:tobytes())
  end)

  it("a chain of puts whose intermediates are deleted at once ends with the right bytes", function()
    local x = dl.arange(N, "float32", D(0))
    local a = dl.device_put(x, dl.NamedSharding(M8R.mesh, dl.P("x")))
    x:delete()
    local b = dl.device_put(a, dl.NamedSharding(M42.mesh, dl.P({"y", "x"}), "pinned_host"))
    a:delete()
    local c = dl.device_put(b, dl.NamedSharding(MP.mesh, dl.P("b")))
    b:delete()
    local g = dl.device_get(c)
    c:delete()
    assert.are.equal(EXPECTED, g:tobytes())
  end)

  it("dropping every reference to the source (garbage collected) is safe too", function()
    local y
    do
      local x = dl.arange(N, "float32", dl.NamedSharding(M42.mesh, dl.P("x")))
      y = dl.device_put(x, dl.NamedSharding(M8.mesh, dl.P()), {donate = true})
    end
    collectgarbage()
    collectgarbage()
    for k = 1, 8, 3 do assert.are.equal(EXPECTED, y:addressable_data(k):tobytes()) end
    assert.are.equal(EXPECTED, y:tobytes())
  end)
end)
