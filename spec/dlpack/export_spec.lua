-- runs: every-platform
-- ipc-off: no
-- devices: 8
-- needs: none

-- Export strategies (docs/export.md): dl.export with strategies gather, replica, host,
-- shards and auto; dl.try_export; dl.ensure_single_device; dl.is_dlpack_exportable.
--
-- The busted process runs on 8 devices of the default platform (ids 0..7) plus
-- the host cpu device dl.host_device(). Device types: kDLCPU = 1; kDLDevice =
-- helpers.dl_type for the default platform's device memory. The test array is
-- float32 16x4: N = 256 bytes, 32 bytes (2 rows) per device when split 8 ways.
-- Run from the repository root: busted spec/dlpack/export_spec.lua

local helpers = require "helpers"
local dl = require "dlrun"
if dl.export == nil then require("dlrun.export")(dl) end

local expect_error = helpers.expect_error

-- These specs are about the strategies' transfers: their legacy exports share
-- (legacy_sharing = "share") unless a spec says otherwise. The copy a legacy
-- export makes by default is specced under "legacy exports" below and in
-- dlpack_spec.lua.
local function sharing(f)
  return function(...)
    local args, n = table.pack(...), select("#", ...)
    if n == 1 then args[2], n = {}, 2 end
    local o = args[2]
    if n == 2 and type(o) == "table" and o.max_version == nil and o.legacy_sharing == nil then
      local copy = {legacy_sharing = "share"}
      for k, v in pairs(o) do copy[k] = v end
      args[2] = copy
    end
    return f(table.unpack(args, 1, n))
  end
end
local export, try_export = sharing(dl.export), sharing(dl.try_export)

local kDLCPU, kDLDevice = 1, helpers.dl_type
local N = 256

local D = {}
for _, dev in ipairs(dl.devices()) do D[dev.id] = dev end
local H = dl.host_device()

local M8 = dl.Mesh({D[0], D[1], D[2], D[3], D[4], D[5], D[6], D[7]}, {"x"})
local M42 = dl.Mesh({{D[0], D[1]}, {D[2], D[3]}, {D[4], D[5]}, {D[6], D[7]}}, {"x", "y"})
local M4 = dl.Mesh({D[4], D[5], D[6], D[7]}, {"x"})

local function gc()
  collectgarbage("collect")
  collectgarbage("collect")
end

-- Rows r = 0..15 of {4r, 4r+1, 4r+2, 4r+3}.
local VALUES = {}
for r = 0, 15 do VALUES[r + 1] = {4 * r, 4 * r + 1, 4 * r + 2, 4 * r + 3} end

local function rows(first, last)
  local t = {}
  for r = first, last do t[#t + 1] = VALUES[r] end
  return t
end

-- The 16x4 float32 test array on `target` (a Device or Sharding).
local function make(target) return dl.array(VALUES, "float32", target) end
local function named(mesh, spec, kind) return dl.NamedSharding(mesh, spec, kind) end
local function split8() return make(named(M8, dl.P("x"))) end
local function replicated8() return make(named(M8, dl.P())) end

local function imported(capsule) return dl.from_dlpack(capsule):tolist() end

local function moved()
  local s = dl.transfer_stats()
  return s.bytes_moved + s.local_bytes
end

local VALID = '"auto", "gather", "allgather", "replica", "host" or "shards"'
local SHARDED8 = "to_dlpack can only pack a dlpack tensor from an array on a singular device, "
                 .. "but an array with a Sharding over 8 devices was provided."
local DELETED = "Array has been deleted with shape=float32[16,4]."

local function replica_text(x)
  return 'export: strategy "replica" needs a fully replicated array, but the array is sharded as '
         .. tostring(x.sharding)
end

local function copy_false_text(strategy, size, device)
  return ('export: copy=false forbids copies, but strategy "%s" had to copy %s to put the array '
          .. 'on %s; pass copy=nil, or use strategy "replica" or "shards"')
         :format(strategy, size, tostring(device))
end

--------------------------------------------------------------------------
describe("dl.export, strategy gather", function()
  it("gathers an 8-way row-sharded array onto its first device: 7/8 N moved, 1/8 N local", function()
    local x = split8()
    dl.reset_transfer_stats()
    local r = export(x, {strategy = "gather"})
    local s = dl.transfer_stats()
    assert.are.equal(224, s.bytes_moved)
    assert.are.equal(32, s.local_bytes)
    assert.are.equal("gather", r.strategy)
    assert.are.equal(N, r.bytes_moved)
    assert.are.equal(D[0], r.device)
    assert.are.same({kDLDevice, 0}, r.capsule.device)
    assert.are.same({16, 4}, r.capsule.shape)
    assert.are.equal("float32", r.capsule.dtype)
    assert.is_nil(r.reason)
    assert.are.same(VALUES, imported(r.capsule))
    assert.is_false(x:is_deleted())
    assert.are.same(VALUES, x:tolist())
  end)

  it("gathers onto opts.device", function()
    local r = export(split8(), {strategy = "gather", device = D[5]})
    assert.are.equal(N, r.bytes_moved)
    assert.are.equal(D[5], r.device)
    assert.are.same({kDLDevice, 5}, r.capsule.device)
    assert.are.same(VALUES, imported(r.capsule))
  end)

  it("gathers onto the first device in assignment order, not the lowest id", function()
    local x = make(named(dl.Mesh({D[6], D[1], D[3], D[0]}, {"x"}), dl.P("x")))
    local r = export(x, {strategy = "gather"})
    assert.are.equal(D[6], r.device)
    assert.are.same({kDLDevice, 6}, r.capsule.device)
    assert.are.equal(N, r.bytes_moved)
    assert.are.same(VALUES, imported(r.capsule))
  end)

  it("exports a one-device array as it is, moving nothing", function()
    local x = make(D[3])
    local r = export(x, {strategy = "gather"})
    assert.are.equal("gather", r.strategy)
    assert.are.equal(0, r.bytes_moved)
    assert.are.equal(D[3], r.device)
    assert.are.same({kDLDevice, 3}, r.capsule.device)
    assert.are.same(VALUES, imported(r.capsule))
    local again = export(x, {strategy = "gather", device = D[3]})
    assert.are.equal(0, again.bytes_moved)
    assert.are.equal(D[3], again.device)
  end)

  it("moves a one-device array to another opts.device", function()
    local r = export(make(D[3]), {strategy = "gather", device = D[6]})
    assert.are.equal(N, r.bytes_moved)
    assert.are.equal(D[6], r.device)
    assert.are.same({kDLDevice, 6}, r.capsule.device)
    assert.are.same(VALUES, imported(r.capsule))
  end)

  it("shares a replica when gathering a fully replicated array (nothing moved)", function()
    local r = export(replicated8(), {strategy = "gather", device = D[2]})
    assert.are.equal("gather", r.strategy)
    assert.are.equal(0, r.bytes_moved)
    assert.are.equal(D[2], r.device)
    assert.are.same({kDLDevice, 2}, r.capsule.device)
    assert.are.same(VALUES, imported(r.capsule))
  end)

  it("gathers a 4x2-mesh P('x') array (replicas along y) moving N bytes", function()
    local r = export(make(named(M42, dl.P("x"))), {strategy = "gather"})
    assert.are.equal(N, r.bytes_moved)
    assert.are.equal(D[0], r.device)
    assert.are.same(VALUES, imported(r.capsule))
  end)

  it("keeps pinned_host memory: the capsule is the platform's pinned type without a further copy",
     function()
    local x = make(named(M8, dl.P("x"), "pinned_host"))
    local r = export(x, {strategy = "gather", max_version = {1, 0}})
    assert.are.equal(N, r.bytes_moved)
    assert.are.equal(D[0], r.device)
    assert.are.same({helpers.pinned_dl_type(), 0}, r.capsule.device)
    assert.is_false(r.capsule.is_copied)
    assert.are.same(VALUES, imported(r.capsule))
  end)

  it("passes max_version to __dlpack__", function()
    local r = export(split8(), {strategy = "gather", max_version = {1, 1}})
    assert.are.equal("dltensor_versioned", r.capsule.name)
    assert.are.same({1, 1}, r.capsule.version)
    assert.is_true(r.capsule.read_only)
    local legacy = export(split8(), {strategy = "gather"})
    assert.are.equal("dltensor", legacy.capsule.name)
    assert.is_nil(legacy.capsule.version)
  end)

  it("passes dl_device to __dlpack__, counting the second copy", function()
    local r = export(split8(), {strategy = "gather", dl_device = {kDLCPU, 0}, max_version = {1, 0}})
    assert.are.equal(2 * N, r.bytes_moved)
    assert.are.equal(D[0], r.device)
    assert.are.same({kDLCPU, 0}, r.capsule.device)
    assert.is_true(r.capsule.is_copied)
    assert.are.same(VALUES, imported(r.capsule))
  end)

  it("refuses copy=false when the gather has to copy, and allows it when nothing moves", function()
    expect_error("ValueError", copy_false_text("gather", "256B", D[0]),
                 export, split8(), {strategy = "gather", copy = false})
    local r = export(replicated8(), {strategy = "gather", copy = false})
    assert.are.equal(0, r.bytes_moved)
    assert.are.same(VALUES, imported(r.capsule))
  end)
end)

--------------------------------------------------------------------------
describe("dl.export, strategy replica", function()
  it("exports the first replica of a fully replicated array without a copy", function()
    local x = replicated8()
    dl.reset_transfer_stats()
    local r = export(x, {strategy = "replica"})
    local s = dl.transfer_stats()
    assert.are.equal(0, s.bytes_moved + s.local_bytes + s.copies)
    assert.are.equal("replica", r.strategy)
    assert.are.equal(0, r.bytes_moved)
    assert.are.equal(D[0], r.device)
    assert.are.same({kDLDevice, 0}, r.capsule.device)
    assert.is_nil(r.reason)
    assert.are.same(VALUES, imported(r.capsule))
  end)

  it("prefers the replica on opts.device", function()
    local r = export(replicated8(), {strategy = "replica", device = D[4]})
    assert.are.equal(0, r.bytes_moved)
    assert.are.equal(D[4], r.device)
    assert.are.same({kDLDevice, 4}, r.capsule.device)
    assert.are.same(VALUES, imported(r.capsule))
  end)

  it("raises a ValueError naming the replicas' devices when opts.device holds none", function()
    expect_error("ValueError", 'export: strategy "replica" found no replica on ' .. helpers.dev(0) .. '; '
                 .. "the array's replicas are on [" .. helpers.dev(4) .. ", " .. helpers.dev(5) .. ", "
                 .. helpers.dev(6) .. ', ' .. helpers.dev(7) .. ']; pass one of those as device, or use '
                 .. 'strategy "gather"',
                 export, make(named(M4, dl.P())), {strategy = "replica", device = D[0]})
    expect_error("ValueError", 'export: strategy "replica" found no replica on ' .. helpers.dev(2) .. '; '
                 .. "the array's replicas are on [" .. helpers.dev(5) .. "]; pass one of those as "
                 .. 'device, or use strategy "gather"',
                 export, make(D[5]), {strategy = "replica", device = D[2]})
  end)

  it("names the platform of each replica, so a cpu device never reads as a sim one", function()
    local C0 = dl.devices("cpu")[1]
    local mixed = make(named(dl.Mesh({D[0], H}, {"x"}), dl.P()))
    assert.is_true(mixed.is_fully_replicated)
    expect_error("ValueError", 'export: strategy "replica" found no replica on ' .. helpers.dev(1) .. '; '
                 .. "the array's replicas are on [" .. helpers.dev(0) .. ", CpuDevice(id=0)]; pass one "
                 .. 'of those as device, or use strategy "gather"',
                 export, mixed, {strategy = "replica", device = D[1]})
    local r = export(mixed, {strategy = "replica", device = C0})
    assert.are.equal(H, r.device)
    assert.are.same({kDLCPU, 0}, r.capsule.device)
    assert.are.same(VALUES, imported(r.capsule))
  end)

  it("exports a replicated array on a 4x2 mesh and one split over a size-1 axis", function()
    local r = export(make(named(M42, dl.P())), {strategy = "replica", device = D[7]})
    assert.are.equal(0, r.bytes_moved)
    assert.are.equal(D[7], r.device)
    assert.are.same(VALUES, imported(r.capsule))
    local m18 = dl.Mesh({{D[0], D[1], D[2], D[3], D[4], D[5], D[6], D[7]}}, {"x", "y"})
    local x = make(named(m18, dl.P("x")))
    assert.is_true(x.is_fully_replicated)
    local q = export(x, {strategy = "replica"})
    assert.are.equal(0, q.bytes_moved)
    assert.are.equal(D[0], q.device)
    assert.are.same(VALUES, imported(q.capsule))
  end)

  it("exports a one-device array as its own replica", function()
    local r = export(make(D[5]), {strategy = "replica"})
    assert.are.equal("replica", r.strategy)
    assert.are.equal(0, r.bytes_moved)
    assert.are.equal(D[5], r.device)
    assert.are.same(VALUES, imported(r.capsule))
  end)

  it("raises a ValueError naming the sharding of an array that is not fully replicated", function()
    local x = split8()
    local err = expect_error("ValueError", replica_text(x), export, x, {strategy = "replica"})
    assert.are.equal('export: strategy "replica" needs a fully replicated array, but the array '
                     .. "is sharded as NamedSharding(mesh=Mesh('x': 8), spec=PartitionSpec('x',), "
                     .. "memory_kind=device)", err.message)
    local y = make(named(M42, dl.P("x")))
    expect_error("ValueError", replica_text(y), export, y, {strategy = "replica"})
  end)
end)

--------------------------------------------------------------------------
describe("dl.export, strategy host", function()
  it("puts a sharded array straight into host memory and exports kDLCPU", function()
    local x = split8()
    dl.reset_transfer_stats()
    local r = export(x, {strategy = "host"})
    local s = dl.transfer_stats()
    assert.are.equal(N, s.bytes_moved)
    assert.are.equal(0, s.local_bytes)
    assert.are.equal("host", r.strategy)
    assert.are.equal(N, r.bytes_moved)
    assert.are.equal(H, r.device)
    assert.are.same({kDLCPU, 0}, r.capsule.device)
    assert.are.same(VALUES, imported(r.capsule))
  end)

  it("reads one replica of a replicated array (N bytes) and a one-device array (N bytes)", function()
    local r = export(replicated8(), {strategy = "host"})
    assert.are.equal(N, r.bytes_moved)
    assert.are.same({kDLCPU, 0}, r.capsule.device)
    assert.are.same(VALUES, imported(r.capsule))
    local q = export(make(D[2]), {strategy = "host"})
    assert.are.equal(N, q.bytes_moved)
    assert.are.equal(H, q.device)
    assert.are.same(VALUES, imported(q.capsule))
  end)

  it("moves nothing for an array already on the host device", function()
    local r = export(make(H), {strategy = "host"})
    assert.are.equal(0, r.bytes_moved)
    assert.are.equal(H, r.device)
    assert.are.same({kDLCPU, 0}, r.capsule.device)
    assert.are.same(VALUES, imported(r.capsule))
  end)

  it("refuses copy=false when it has to copy", function()
    expect_error("ValueError", copy_false_text("host", "256B", H),
                 export, split8(), {strategy = "host", copy = false})
    local r = export(make(H), {strategy = "host", copy = false})
    assert.are.equal(0, r.bytes_moved)
  end)
end)

--------------------------------------------------------------------------
describe("dl.export, strategy shards", function()
  it("exports each of the 8 row blocks once, in assignment order, moving nothing", function()
    local x = split8()
    dl.reset_transfer_stats()
    local r = export(x, {strategy = "shards"})
    assert.are.equal(0, moved())
    assert.are.equal("shards", r.strategy)
    assert.are.equal(0, r.bytes_moved)
    assert.is_nil(r.capsule)
    assert.are.equal(8, #r.shards)
    for k, e in ipairs(r.shards) do
      local first = 2 * (k - 1) + 1
      assert.are.equal(D[k - 1], e.device)
      assert.are.equal(0, e.replica_id)
      assert.are.same({{first, first + 1}, {1, 4}}, e.index)
      assert.are.same({kDLDevice, k - 1}, e.capsule.device)
      assert.are.same({2, 4}, e.capsule.shape)
      assert.are.same(rows(first, first + 1), imported(e.capsule))
    end
  end)

  it("lists each distinct block once on a 4x2 mesh with P('x') (4 of 8 shards)", function()
    local x = make(named(M42, dl.P("x")))
    assert.are.equal(8, #x.addressable_shards)
    local r = export(x, {strategy = "shards"})
    assert.are.equal(0, r.bytes_moved)
    assert.are.equal(4, #r.shards)
    for k, e in ipairs(r.shards) do
      local first = 4 * (k - 1) + 1
      assert.are.equal(D[2 * (k - 1)], e.device)
      assert.are.equal(0, e.replica_id)
      assert.are.same({{first, first + 3}, {1, 4}}, e.index)
      assert.are.same(rows(first, first + 3), imported(e.capsule))
    end
  end)

  it("lists the replicas-0 of a 4x2 mesh with P('y') (2 blocks, on devices 0 and 1)", function()
    local r = export(make(named(M42, dl.P("y"))), {strategy = "shards"})
    assert.are.equal(2, #r.shards)
    assert.are.equal(D[0], r.shards[1].device)
    assert.are.equal(D[1], r.shards[2].device)
    assert.are.same({{1, 8}, {1, 4}}, r.shards[1].index)
    assert.are.same({{9, 16}, {1, 4}}, r.shards[2].index)
    assert.are.same(rows(1, 8), imported(r.shards[1].capsule))
    assert.are.same(rows(9, 16), imported(r.shards[2].capsule))
  end)

  it("splits rows and columns on a 4x2 mesh with P('x', 'y')", function()
    local r = export(make(named(M42, dl.P("x", "y"))), {strategy = "shards"})
    assert.are.equal(8, #r.shards)
    for k, e in ipairs(r.shards) do
      local i, j = (k - 1) // 2, (k - 1) % 2
      assert.are.equal(D[k - 1], e.device)
      assert.are.same({{4 * i + 1, 4 * i + 4}, {2 * j + 1, 2 * j + 2}}, e.index)
      local want = {}
      for row = 4 * i + 1, 4 * i + 4 do
        want[#want + 1] = {VALUES[row][2 * j + 1], VALUES[row][2 * j + 2]}
      end
      assert.are.same(want, imported(e.capsule))
    end
  end)

  it("gives one whole block for a fully replicated or a one-device array", function()
    local r = export(replicated8(), {strategy = "shards"})
    assert.are.equal(1, #r.shards)
    assert.are.equal(D[0], r.shards[1].device)
    assert.are.same({{1, 16}, {1, 4}}, r.shards[1].index)
    assert.are.same(VALUES, imported(r.shards[1].capsule))
    local q = export(make(D[6]), {strategy = "shards"})
    assert.are.equal(1, #q.shards)
    assert.are.equal(D[6], q.shards[1].device)
    assert.are.equal(0, q.shards[1].replica_id)
    assert.are.same(VALUES, imported(q.shards[1].capsule))
  end)

  it("lets a consumer reassemble the array without a gather", function()
    local x = split8()
    local r = export(x, {strategy = "shards"})
    local pieces = {}
    for k, e in ipairs(r.shards) do pieces[k] = dl.from_dlpack(e.capsule) end
    dl.reset_transfer_stats()
    local y = dl.make_array_from_single_device_arrays({16, 4}, x.sharding, pieces)
    assert.are.equal(0, moved())
    assert.are.same(VALUES, y:tolist())
  end)

  it("passes the DLPack options to every shard's export", function()
    local r = export(split8(), {strategy = "shards", max_version = {1, 0}, dl_device = {kDLCPU, 0}})
    assert.are.equal(N, r.bytes_moved)
    assert.are.equal(8, #r.shards)
    for k, e in ipairs(r.shards) do
      assert.are.equal(D[k - 1], e.device)
      assert.are.equal("dltensor_versioned", e.capsule.name)
      assert.are.same({kDLCPU, 0}, e.capsule.device)
      assert.is_true(e.capsule.is_copied)
      assert.are.same(rows(2 * k - 1, 2 * k), imported(e.capsule))
    end
  end)

  it("leaves no export alive once the capsules are collected", function()
    gc()
    local before = dl.live_exports()
    local r = export(split8(), {strategy = "shards"})
    assert.are.equal(before + 8, dl.live_exports())
    r = nil
    gc()
    assert.are.equal(before, dl.live_exports())
  end)
end)

--------------------------------------------------------------------------
describe("dl.export, strategy auto", function()
  it("exports one replica of a fully replicated array", function()
    local r = export(replicated8(), {strategy = "auto"})
    assert.are.equal("replica", r.strategy)
    assert.are.equal("fully replicated: exported one replica, gathering nothing", r.reason)
    assert.are.equal(0, r.bytes_moved)
    assert.are.equal(D[0], r.device)
    assert.are.same(VALUES, imported(r.capsule))
  end)

  it("is the default strategy", function()
    local r = export(split8())
    assert.are.equal("gather", r.strategy)
    assert.are.equal("gathered onto " .. helpers.dev(0) .. ", which has room", r.reason)
    assert.are.equal(N, r.bytes_moved)
    local q = export(replicated8(), {})
    assert.are.equal("replica", q.strategy)
  end)

  it("gathers a sharded array onto a device with room", function()
    local r = export(split8(), {strategy = "auto", device = D[3]})
    assert.are.equal("gather", r.strategy)
    assert.are.equal("gathered onto " .. helpers.dev(3) .. ", which has room", r.reason)
    assert.are.equal(N, r.bytes_moved)
    assert.are.equal(D[3], r.device)
    assert.are.same({kDLDevice, 3}, r.capsule.device)
    assert.are.same(VALUES, imported(r.capsule))
  end)

  it("exports a one-device array as it is", function()
    local r = export(make(D[2]))
    assert.are.equal("gather", r.strategy)
    assert.are.equal("already on one device (" .. helpers.dev(2) .. "): exported as it is, gathering nothing", r.reason)
    assert.are.equal(0, r.bytes_moved)
    assert.are.equal(D[2], r.device)
    assert.are.same(VALUES, imported(r.capsule))
  end)

  it("uses a replica on opts.device, and gathers when no replica lives there", function()
    local r = export(replicated8(), {device = D[6]})
    assert.are.equal("replica", r.strategy)
    assert.are.equal(D[6], r.device)
    assert.are.equal(0, r.bytes_moved)
    local q = export(make(named(M4, dl.P())), {device = D[1]})
    assert.are.equal("gather", q.strategy)
    assert.are.equal("gathered onto " .. helpers.dev(1) .. ", which has room", q.reason)
    assert.are.equal(N, q.bytes_moved)
    assert.are.equal(D[1], q.device)
    assert.are.same(VALUES, imported(q.capsule))
    local o = export(make(D[2]), {device = D[5]})
    assert.are.equal("gather", o.strategy)
    assert.are.equal(D[5], o.device)
    assert.are.equal(N, o.bytes_moved)
  end)

  it("falls back to host memory when the target device cannot hold the array", function()
    local code = [[
local dl = require "dlrun"
if dl.export == nil then require("dlrun.export")(dl) end
local D = dl.devices()
assert(#D == 8, "expected 8 devices, got " .. #D)
local m = dl.make_mesh({8}, {"x"})
local n = 1 << 19 -- float32: 2 MiB in all, 256 KiB per device
local x = dl.arange(n, "float32", dl.NamedSharding(m, dl.P("x")))
local ok, err = pcall(dl.export, x, {strategy = "gather"})
print(ok, err.name)
local r = dl.export(x)
print(r.strategy, r.bytes_moved, r.device, r.capsule.device[1], r.capsule.device[2])
print(r.reason)
local y = dl.from_dlpack(r.capsule)
local list = y:tolist()
local good = #list == n
for i = 1, n do good = good and list[i] == i - 1 end
print(good, y.sharding)
local small = dl.arange(n // 8, "float32", dl.NamedSharding(m, dl.P("x")))
local s = dl.export(small)
print(s.strategy, s.bytes_moved, s.reason)
]]
    local out, err, status = helpers.run_code(code, {"--devices", "sim:8", "--device-memory", "1MiB"},
                                              {DLRUN_DEVICES = "", DLRUN_DEVICE_MEMORY = ""})
    assert.are.equal(table.concat({
      "false\tResourceExhaustedError",
      "host\t2097152\tCpuDevice(id=0)\t1\t0",
      "SimDevice(id=0) cannot hold 2.00MiB (largest free block 768.00KiB): gathered into host memory",
      "true\tSingleDeviceSharding(device=CpuDevice(id=0), memory_kind=device)",
      "gather\t262144\tgathered onto SimDevice(id=0), which has room",
    }, "\n") .. "\n", out, err)
    assert.are.equal(0, status)
  end)
end)

--------------------------------------------------------------------------
describe("dl.export bytes_moved", function()
  -- Run fn(...) while a count hook, every few VM instructions, resets the runtime's
  -- transfer statistics and makes a transfer of its own, as another thread or Lua state
  -- sharing the runtime may at any time (spec/stress/stress_lua_states.c does it from a
  -- real second state): an export counts only what it copied itself.
  local function interfered(fn, ...)
    local other = make(D[7])
    local interruptions = 0
    debug.sethook(function()
      interruptions = interruptions + 1
      dl.reset_transfer_stats()
      dl.device_put(other, D[6]) -- 256 bytes that are not the export's
    end, "", 3)
    local ok, r = pcall(fn, ...)
    debug.sethook()
    assert(ok, r)
    assert.is_true(interruptions > 0)
    return r
  end

  local cases = {
    {"gather", split8, {strategy = "gather"}, N},
    {"gather then dl_device to the host", split8, {strategy = "gather", dl_device = {kDLCPU, 0}}, 2 * N},
    {"host", split8, {strategy = "host"}, N},
    {"auto (gather)", split8, nil, N},
    {"replica", replicated8, {strategy = "replica", device = D[3]}, 0},
    {"shards, each copied", split8, {strategy = "shards", copy = true}, N},
    {"gather of a one-device array", function() return make(D[2]) end, {strategy = "gather"}, 0},
  }
  for _, case in ipairs(cases) do
    local what, build, opts, want = case[1], case[2], case[3], case[4]
    it(("is exact for %s while another transfer resets and copies"):format(what), function()
      local x = build()
      local r = interfered(export, x, opts)
      assert.are.equal(want, r.bytes_moved)
    end)
  end

  it("is exact for try_export, direct and by fallback, while another transfer interferes", function()
    local direct = interfered(try_export, make(D[0]), {dl_device = {kDLCPU, 0}})
    assert.are.equal("direct", direct.strategy)
    assert.are.equal(N, direct.bytes_moved)
    local fallback = interfered(try_export, split8(), {strategy = "host"})
    assert.are.equal("host", fallback.strategy)
    assert.are.equal(N, fallback.bytes_moved)
  end)

  it("is still counted in the runtime's statistics", function()
    local x = split8()
    dl.reset_transfer_stats()
    local r = export(x, {strategy = "gather", dl_device = {kDLCPU, 0}})
    assert.are.equal(2 * N, r.bytes_moved)
    assert.are.equal(2 * N, moved())
  end)
end)

--------------------------------------------------------------------------
describe("dl.export legacy exports", function()
  it("copy a replica or a one-device array by default, and share it when asked", function()
    for _, x in ipairs {replicated8(), make(D[1])} do
      local r = dl.export(x, {strategy = "replica"})
      assert.are.equal(N, r.bytes_moved)
      assert.is_true(r.capsule.is_copied)
      local s = dl.export(x, {strategy = "replica", legacy_sharing = "share"})
      assert.are.equal(0, s.bytes_moved)
      assert.is_false(s.capsule.is_copied)
    end
  end)

  it("copy each shard once by default", function()
    local r = dl.export(split8(), {strategy = "shards"})
    assert.are.equal(N, r.bytes_moved)
    for _, part in ipairs(r.shards) do assert.is_true(part.capsule.is_copied) end
  end)

  it("do not copy again what a gather has just copied", function()
    local r = dl.export(split8(), {strategy = "gather"})
    assert.are.equal(N, r.bytes_moved)
    assert.is_false(r.capsule.is_copied)
  end)

  it("refuse copy=false, naming the ways out", function()
    expect_error("ValueError", "a legacy DLPack tensor cannot be marked read-only, so exporting "
                 .. "the array on " .. helpers.dev(1) .. " as one needs a copy (a consumer could write "
                 .. "into memory dlrun's arrays share), but copy=False. Ask for max_version (1, "
                 .. "0) or later (READ_ONLY), or for legacy_sharing=share if the consumer never "
                 .. "writes.", dl.export, make(D[1]),
                 {strategy = "replica", copy = false})
  end)
end)

describe("dl.export errors", function()
  it("rejects a value that is not an Array", function()
    expect_error("TypeError", "export: argument 1 (x) must be an Array, got nil", export, nil)
    expect_error("TypeError", "export: argument 1 (x) must be an Array, got number", export, 3)
    expect_error("TypeError", "export: argument 1 (x) must be an Array, got table", export, {1, 2})
    expect_error("TypeError", "export: argument 1 (x) must be an Array, got Device", export, D[0])
    expect_error("TypeError", "export: argument 1 (x) must be an Array, got Sharding",
                 export, named(M8, dl.P()))
  end)

  it("rejects an unknown strategy, listing the valid ones", function()
    local err = expect_error("ValueError", 'export: unknown strategy "everything" (expected ' .. VALID .. ")",
                             export, split8(), {strategy = "everything"})
    assert.is_true(dl.ValueError:is_instance(err))
    expect_error("ValueError", 'export: unknown strategy "Gather" (expected ' .. VALID .. ")",
                 export, make(D[0]), {strategy = "Gather"})
    expect_error("TypeError", "export: option strategy must be a string, got number",
                 export, split8(), {strategy = 1})
  end)

  it("rejects bad options", function()
    expect_error("TypeError", "export: argument 2 (opts) must be a table {strategy=, device=, "
                 .. "max_version=, dl_device=, copy=, stream=, legacy_sharing=, legacy_knows_1_1=}, got string",
                 export, split8(), "gather")
    expect_error("TypeError", "export: unexpected option 'target' (expected strategy, device, "
                 .. "max_version, dl_device, copy, stream, legacy_sharing, legacy_knows_1_1)", export, split8(),
                 {target = D[0]})
    expect_error("TypeError", "export: option device must be a Device, got number",
                 export, split8(), {device = 0})
  end)

  it("raises the core's RuntimeError for a deleted array under every strategy", function()
    for _, strategy in ipairs {"auto", "gather", "replica", "host", "shards"} do
      for _, x in ipairs {split8(), replicated8(), make(D[1])} do
        x:delete()
        expect_error("RuntimeError", DELETED, export, x, {strategy = strategy})
      end
    end
  end)

  it("passes __dlpack__'s own errors through", function()
    expect_error("BufferError", "dlrun does not support any version below (0, 5) but version (0, 4) "
                 .. "was requested.", export, split8(), {strategy = "gather", max_version = {0, 4}})
    expect_error("BufferError", "The device specification passed to to_dlpack contains an "
                 .. "unsupported device type (DLDeviceType: 7)",
                 export, replicated8(), {dl_device = {7, 0}})
  end)
end)

--------------------------------------------------------------------------
describe("dl.ensure_single_device", function()
  it("returns the same array when it lives on one device", function()
    local x = make(D[4])
    assert.is_true(rawequal(x, dl.ensure_single_device(x)))
    assert.is_true(rawequal(x, dl.ensure_single_device(x, D[4])))
    local h = make(H)
    assert.is_true(rawequal(h, dl.ensure_single_device(h)))
    local one = make(named(dl.Mesh({D[7]}, {"x"}), dl.P("x")))
    assert.is_true(rawequal(one, dl.ensure_single_device(one)))
  end)

  it("moves a one-device array to another device when asked", function()
    local x = make(D[4])
    dl.reset_transfer_stats()
    local y = dl.ensure_single_device(x, D[1])
    assert.are.equal(N, moved())
    assert.is_false(rawequal(x, y))
    assert.are.same({D[1]}, y:devices())
    assert.are.same(VALUES, y:tolist())
  end)

  it("gathers a sharded array onto the first device of its sharding", function()
    local x = make(named(dl.Mesh({D[5], D[2], D[7], D[0]}, {"x"}), dl.P("x")))
    dl.reset_transfer_stats()
    local y = dl.ensure_single_device(x)
    assert.are.equal(N, moved())
    assert.are.same({D[5]}, y:devices())
    assert.are.equal(1, y.sharding.num_devices)
    assert.are.same(VALUES, y:tolist())
    assert.is_true(dl.is_dlpack_exportable(y))
  end)

  it("honours a device argument", function()
    local y = dl.ensure_single_device(split8(), D[7])
    assert.are.same({D[7]}, y:devices())
    assert.are.same(VALUES, y:tolist())
    local z = dl.ensure_single_device(split8(), H)
    assert.are.same({H}, z:devices())
    assert.are.same(VALUES, z:tolist())
  end)

  it("rejects bad arguments and deleted arrays", function()
    expect_error("TypeError", "ensure_single_device: argument 1 (x) must be an Array, got string",
                 dl.ensure_single_device, "x")
    expect_error("TypeError", "ensure_single_device: argument 2 (device) must be a Device, got number",
                 dl.ensure_single_device, split8(), 3)
    local x = split8()
    x:delete()
    expect_error("RuntimeError", DELETED, dl.ensure_single_device, x)
  end)
end)

--------------------------------------------------------------------------
describe("dl.is_dlpack_exportable", function()
  local deleted = make(D[0])
  deleted:delete()
  local cases = {
    {"a one-device sim array", function() return make(D[2]) end, true},
    {"a host array", function() return make(H) end, true},
    {"an array on a one-device mesh", function() return make(named(dl.Mesh({D[3]}, {"x"}), dl.P("x"))) end, true},
    {"a scalar array", function() return dl.array(1.5, "float32", D[0]) end, true},
    {"an 8-way sharded array", split8, false},
    {"a fully replicated array", replicated8, false},
    {"a 4x2-mesh P('x') array", function() return make(named(M42, dl.P("x"))) end, false},
    {"a deleted array", function() return deleted end, false},
    {"a deleted sharded array", function() local x = split8(); x:delete(); return x end, false},
    {"nil", function() return nil end, false},
    {"a number", function() return 1 end, false},
    {"a string", function() return "array" end, false},
    {"a table", function() return {1, 2, 3} end, false},
    {"a Device", function() return D[0] end, false},
    {"a Sharding", function() return named(M8, dl.P()) end, false},
    {"a Capsule", function() return make(D[0]):__dlpack__() end, false},
    {"a table posing as an Array", function()
      return setmetatable({}, {__name = "Array", __index = function() error("boom") end})
    end, false},
  }
  for _, case in ipairs(cases) do
    local what, value, want = case[1], case[2], case[3]
    it(("is %s for %s, as __dlpack__ agrees"):format(want, what), function()
      local v = value()
      assert.are.equal(want, dl.is_dlpack_exportable(v))
      if want then
        assert.are.equal("dltensor", v:__dlpack__().name)
      elseif getmetatable(v) and getmetatable(v).__name == "Array" and type(v) == "userdata" then
        assert.is_false((pcall(v.__dlpack__, v)))
      end
    end)
  end

  it("never raises: more than one argument is false, even for an exportable array", function()
    local x = make(D[2])
    assert.is_true(dl.is_dlpack_exportable(x))
    assert.are.same({true, false}, {pcall(dl.is_dlpack_exportable, x, {copy = true})})
    assert.are.same({true, false}, {pcall(dl.is_dlpack_exportable, x, nil)})
    assert.are.same({true, false}, {pcall(dl.is_dlpack_exportable, x, 1, 2)})
    assert.are.same({true, false}, {pcall(dl.is_dlpack_exportable, split8(), "x")})
    assert.are.same({true, false}, {pcall(dl.is_dlpack_exportable)})
  end)
end)

--------------------------------------------------------------------------
describe("dl.try_export", function()
  it("exports a one-device array directly", function()
    local x = make(D[3])
    local r = try_export(x)
    assert.are.equal("direct", r.strategy)
    assert.are.equal(0, r.bytes_moved)
    assert.are.equal(D[3], r.device)
    assert.are.same({kDLDevice, 3}, r.capsule.device)
    assert.is_nil(r.buffer_error)
    assert.are.same(VALUES, imported(r.capsule))
  end)

  it("passes the DLPack options to the direct export", function()
    local r = try_export(make(D[3]), {dl_device = {kDLCPU, 0}, max_version = {1, 0}})
    assert.are.equal("direct", r.strategy)
    assert.are.equal(N, r.bytes_moved)
    assert.are.equal(D[3], r.device)
    assert.are.same({kDLCPU, 0}, r.capsule.device)
    assert.is_true(r.capsule.is_copied)
    assert.are.same(VALUES, imported(r.capsule))
  end)

  it("falls back on the BufferError of a multi-device array and says what ran", function()
    local r = try_export(split8())
    assert.are.equal("gather", r.strategy)
    assert.are.equal("gathered onto " .. helpers.dev(0) .. ", which has room", r.reason)
    assert.are.equal(N, r.bytes_moved)
    assert.are.equal(D[0], r.device)
    assert.is_true(dl.BufferError:is_instance(r.buffer_error))
    assert.are.equal(SHARDED8, r.buffer_error.message)
    assert.are.same(VALUES, imported(r.capsule))
  end)

  it("falls back by the strategy in opts", function()
    local r = try_export(replicated8())
    assert.are.equal("replica", r.strategy)
    assert.are.equal(0, r.bytes_moved)
    local h = try_export(split8(), {strategy = "host"})
    assert.are.equal("host", h.strategy)
    assert.are.equal(N, h.bytes_moved)
    assert.are.same({kDLCPU, 0}, h.capsule.device)
    local s = try_export(split8(), {strategy = "shards"})
    assert.are.equal("shards", s.strategy)
    assert.are.equal(8, #s.shards)
    assert.are.equal(SHARDED8, s.buffer_error.message)
    local d = try_export(make(D[1]), {strategy = "shards"})
    assert.are.equal("direct", d.strategy)
  end)

  it("re-raises a ValueError (copy=false to the host from a sim array) unchanged", function()
    dl.reset_transfer_stats()
    expect_error("ValueError", "Specified device=CpuDevice(id=0) which requires a copy since the "
                 .. "source device is " .. helpers.dev(1) .. ", however copy=False. Set copy=True or "
                 .. "copy=None to perform the requested operation.",
                 try_export, make(D[1]), {copy = false, dl_device = {kDLCPU, 0}})
    assert.are.equal(0, moved())
  end)

  it("re-raises a deleted array's RuntimeError without trying a strategy", function()
    for _, x in ipairs {make(D[1]), split8()} do
      x:delete()
      dl.reset_transfer_stats()
      expect_error("RuntimeError", DELETED, try_export, x)
      assert.are.equal(0, moved())
    end
  end)

  it("re-raises exactly the value __dlpack__ raised, and falls back only on BufferError", function()
    -- try_export's direct attempt is __dlpack__ through dl._dlpack_counted (which also
    -- says what that export copied): make it raise.
    local x = make(D[0])
    local original = dl._dlpack_counted
    assert.are.equal("function", type(original))
    local raise, calls
    dl._dlpack_counted = function(self, opts)
      calls = calls + 1
      if calls == 1 then error(raise, 0) end
      return original(self, opts)
    end
    local ok, failure = pcall(function()
      for _, value in ipairs {dl.ValueError("sentinel"), dl.RuntimeError("sentinel"),
                              dl.TypeError("sentinel"), "a plain string", {plain = true}} do
        raise, calls = value, 0
        local good, err = pcall(try_export, x)
        assert.is_false(good)
        assert.is_true(rawequal(value, err))
        assert.are.equal(1, calls)
      end
      raise, calls = dl.BufferError("sentinel"), 0
      local r = try_export(x)
      assert.are.equal(2, calls)
      assert.is_true(rawequal(raise, r.buffer_error))
      assert.are.equal("gather", r.strategy)
      assert.are.equal(0, r.bytes_moved)
      assert.are.same(VALUES, imported(r.capsule))
    end)
    dl._dlpack_counted = original
    assert(ok, failure)
  end)

  it("raises the fallback's error when the fallback fails too", function()
    expect_error("ValueError", copy_false_text("gather", "256B", D[0]),
                 try_export, split8(), {copy = false})
    expect_error("BufferError", "stream must be " .. helpers.streams() .. " for "
                 .. "arrays on " .. helpers.dev(0) .. ", got 5", try_export, make(D[0]), {stream = 5})
  end)

  it("checks its arguments before exporting", function()
    expect_error("TypeError", "try_export: argument 1 (x) must be an Array, got nil", dl.try_export)
    expect_error("ValueError", 'try_export: unknown strategy "best" (expected ' .. VALID .. ")",
                 try_export, make(D[0]), {strategy = "best"})
  end)
end)
