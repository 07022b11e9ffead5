-- runs: every-platform
-- ipc-off: no
-- devices: 8
-- needs: none

-- DLPack from Lua: export (x:__dlpack__, dl.to_dlpack, x:__dlpack_device__),
-- Capsules, import (dl.from_dlpack) and round trips for every dtype
-- (docs/dlpack.md; docs/lua-api.md, "DLPack": JAX's messages).
--
-- The busted process runs on 8 devices of the default platform (ids 0..7:
-- sim, or opencl in the suite's second run) plus the host cpu device
-- dl.host_device(). Device types: kDLCPU = 1; the default platform's device
-- memory exports as kDLDevice = helpers.dl_type (sim: kDLExtDev = 12, opencl:
-- kDLOpenCL = 4).
-- Run from the repository root: busted spec/dlpack/dlpack_spec.lua

local helpers = require "helpers"
local dl = require "dlrun"

local expect_error = helpers.expect_error

local kDLCPU, kDLDevice = 1, helpers.dl_type
-- pinned_host memory: kDLCPU, or kDLCUDAHost (3) on cuda (helpers.pinned_dl_type)
local kDLPinned = helpers.pinned_dl_type()
local READ_ONLY, IS_COPIED = 1, 2

-- D[id] is the default platform's device with that id; H the host cpu device.
local D = {}
for _, dev in ipairs(dl.devices()) do D[dev.id] = dev end
local H = dl.host_device()

local function gc()
  collectgarbage("collect")
  collectgarbage("collect")
end

local function sharded_text(n)
  return ("to_dlpack can only pack a dlpack tensor from an array on a singular device, "
          .. "but an array with a Sharding over %d devices was provided."):format(n)
end

local function import_sharding_text(n)
  return ("from_dlpack can only unpack a dlpack tensor onto a singular device, "
          .. "but a Sharding with %d devices was provided."):format(n)
end

local function copy_false_text(dst, src)
  return ("Specified device=%s which requires a copy since the source device is %s, "
          .. "however copy=False. Set copy=True or copy=None to perform the requested "
          .. "operation."):format(tostring(dst), tostring(src))
end

local NO_METHODS = "The array passed to from_dlpack must have __dlpack__ and __dlpack_device__ methods."
local UNSHARDED = "__dlpack__ only supported for unsharded arrays."

-- A float32 array 0..5 on `target` (a Device or Sharding).
local function arange6(target) return dl.arange(6, "float32", target) end
local VALUES6 = {0, 1, 2, 3, 4, 5}

local function mesh(devices, names) return dl.Mesh(devices, names or {"x"}) end
local function pinned(dev) return dl.SingleDeviceSharding(dev, "pinned_host") end

--------------------------------------------------------------------------
describe("export of sharded arrays", function()
  local M8 = mesh({D[0], D[1], D[2], D[3], D[4], D[5], D[6], D[7]})
  local M42 = mesh({{D[0], D[1]}, {D[2], D[3]}, {D[4], D[5]}, {D[6], D[7]}}, {"x", "y"})
  local M2 = mesh({D[3], D[6]})
  local M4 = mesh({D[4], D[5], D[6], D[7]})

  local cases = {
    {"split over 8 devices", function() return dl.zeros({8, 2}, "float32", dl.NamedSharding(M8, dl.P("x"))) end, 8},
    {"fully replicated over 8 devices", function() return dl.zeros({8, 2}, "float32", dl.NamedSharding(M8, dl.P())) end, 8},
    {"split over x of a 4x2 mesh (8 devices, partly replicated)", function() return dl.zeros({8, 2}, "float32", dl.NamedSharding(M42, dl.P("x"))) end, 8},
    {"split over 2 devices", function() return dl.zeros({4}, "int32", dl.NamedSharding(M2, dl.P("x"))) end, 2},
    {"fully replicated over 2 devices", function() return dl.zeros({4}, "int32", dl.NamedSharding(M2, dl.P())) end, 2},
    {"split over 4 devices", function() return dl.zeros({4, 4}, "float64", dl.NamedSharding(M4, dl.P("x"))) end, 4},
    {"fully replicated over 4 devices", function() return dl.zeros({}, "float64", dl.NamedSharding(M4, dl.P())) end, 4},
    {"in pinned_host memory over 8 devices", function() return dl.zeros({8}, "float32", dl.NamedSharding(M8, dl.P("x"), "pinned_host")) end, 8},
  }
  for _, case in ipairs(cases) do
    local what, make, n = case[1], case[2], case[3]
    it("__dlpack__ on an array " .. what .. " raises JAX's BufferError naming " .. n, function()
      local x = make()
      expect_error("BufferError", sharded_text(n), x.__dlpack__, x)
      expect_error("BufferError", sharded_text(n), x.__dlpack__, x, {max_version = {1, 0}})
      expect_error("BufferError", sharded_text(n), x.__dlpack__, x, {dl_device = {1, 0}, copy = true})
    end)
    it("dl.to_dlpack on an array " .. what .. " raises the same text", function()
      local x = make()
      expect_error("BufferError", sharded_text(n), dl.to_dlpack, x)
      expect_error("BufferError", sharded_text(n), dl.to_dlpack, x, {max_version = {1, 1}})
    end)
    it("__dlpack_device__ on an array " .. what .. " raises JAX's BufferError", function()
      local x = make()
      expect_error("BufferError", UNSHARDED, x.__dlpack_device__, x)
    end)
  end

  it("a single shard of a sharded array exports from its own device", function()
    local x = dl.arange(8, "int32", dl.NamedSharding(M8, dl.P("x")))
    local shard = x:addressable_data(4)
    local t, id = shard:__dlpack_device__()
    assert.are.same({kDLDevice, 3}, {t, id})
    local c = shard:__dlpack__()
    assert.are.same({kDLDevice, 3}, c.device)
    assert.are.same({3}, dl.from_dlpack(c):tolist())
  end)

  it("an array on a one-device mesh exports", function()
    local x = arange6(dl.NamedSharding(mesh({D[6]}), dl.P("x")))
    assert.are.same({kDLDevice, 6}, {x:__dlpack_device__()})
    assert.are.same({kDLDevice, 6}, x:__dlpack__().device)
  end)
end)

--------------------------------------------------------------------------
describe("max_version", function()
  local legacy_cases = {{"absent", nil}, {"{0, 5}", {0, 5}}, {"{0, 9}", {0, 9}}}
  for _, case in ipairs(legacy_cases) do
    for _, src in ipairs({helpers.platform, "cpu"}) do
      it(case[1] .. " gives a legacy dltensor capsule (" .. src .. ")", function()
        local x = arange6(src ~= "cpu" and D[0] or H)
        local c = x:__dlpack__(case[2] and {max_version = case[2]} or nil)
        assert.are.equal("dltensor", c.name)
        assert.is_nil(c.version)
        assert.are.equal(0, c.flags)
        assert.is_false(c.read_only)
        assert.is_true(c.is_copied) -- a legacy tensor cannot say READ_ONLY: a copy
        local y = dl.from_dlpack(c)
        assert.are.same(VALUES6, y:tolist())
        assert.are.equal("wrapped", c.imported)
        assert.are.equal("wrapped", y.imported)
        local opts = {legacy_sharing = "share"}
        if case[2] then opts.max_version = case[2] end
        assert.is_false(x:__dlpack__(opts).is_copied)
      end)
    end
  end

  it("a call with no arguments and one with an empty table both give dltensor", function()
    local x = arange6(D[1])
    assert.are.equal("dltensor", x:__dlpack__().name)
    assert.are.equal("dltensor", x:__dlpack__({}).name)
    assert.are.equal("dltensor", dl.to_dlpack(x).name)
    assert.are.equal("dltensor", dl.to_dlpack(x, {}).name)
  end)

  local versioned_cases = {{1, 0}, {1, 1}, {1, 5}, {2, 0}}
  for _, mv in ipairs(versioned_cases) do
    for _, src in ipairs({helpers.platform, "cpu"}) do
      it(("{%d, %d} gives dltensor_versioned {1, 1}, READ_ONLY without a copy (%s)"):format(mv[1], mv[2], src), function()
        local x = arange6(src ~= "cpu" and D[0] or H)
        local c = x:__dlpack__{max_version = mv}
        assert.are.equal("dltensor_versioned", c.name)
        assert.are.same({1, 1}, c.version)
        assert.are.equal(READ_ONLY, c.flags)
        assert.is_true(c.read_only)
        assert.is_false(c.is_copied)
        assert.are.same(VALUES6, dl.from_dlpack(c):tolist())
      end)
      it(("{%d, %d} with copy=true sets IS_COPIED and not READ_ONLY (%s)"):format(mv[1], mv[2], src), function()
        local x = arange6(src ~= "cpu" and D[0] or H)
        local c = dl.to_dlpack(x, {max_version = mv, copy = true})
        assert.are.equal("dltensor_versioned", c.name)
        assert.are.same({1, 1}, c.version)
        assert.are.equal(IS_COPIED, c.flags)
        assert.is_false(c.read_only)
        assert.is_true(c.is_copied)
        assert.are.same(VALUES6, dl.from_dlpack(c):tolist())
      end)
    end
  end

  it("a copy to another device is flagged IS_COPIED only", function()
    local c = arange6(D[0]):__dlpack__{max_version = {1, 0}, dl_device = {kDLCPU, 0}}
    assert.are.equal(IS_COPIED, c.flags)
    assert.is_true(c.is_copied)
    assert.is_false(c.read_only)
  end)

  it("{0, 4} raises the BufferError with dlrun in JAX's text", function()
    local x = arange6(D[0])
    expect_error("BufferError",
                 "dlrun does not support any version below (0, 5) but version (0, 4) was requested.",
                 x.__dlpack__, x, {max_version = {0, 4}})
    expect_error("BufferError",
                 "dlrun does not support any version below (0, 5) but version (0, 4) was requested.",
                 dl.to_dlpack, arange6(H), {max_version = {0, 4}})
  end)

  it("{0, 0} raises the same BufferError with its numbers", function()
    local x = arange6(H)
    expect_error("BufferError",
                 "dlrun does not support any version below (0, 5) but version (0, 0) was requested.",
                 x.__dlpack__, x, {max_version = {0, 0}})
  end)

  it("a refused version makes no export", function()
    local x = arange6(D[0])
    gc()
    local before = dl.live_exports()
    pcall(x.__dlpack__, x, {max_version = {0, 4}})
    assert.are.equal(before, dl.live_exports())
  end)
end)

--------------------------------------------------------------------------
describe("export devices", function()
  it("cpu arrays export as (kDLCPU, 0) without a copy", function()
    local x = arange6(H)
    assert.are.same({kDLCPU, 0}, {x:__dlpack_device__()})
    local c = x:__dlpack__{max_version = {1, 1}}
    assert.are.same({kDLCPU, 0}, c.device)
    assert.is_false(c.is_copied)
    local legacy = x:__dlpack__()
    assert.are.same({kDLCPU, 0}, legacy.device)
  end)

  for _, id in ipairs({0, 3, 7}) do
    it("device-memory arrays export as (kDLDevice, " .. id .. ")", function()
      local x = arange6(D[id])
      assert.are.same({kDLDevice, id}, {x:__dlpack_device__()})
      local c = x:__dlpack__{max_version = {1, 1}}
      assert.are.same({kDLDevice, id}, c.device)
      assert.is_false(c.is_copied)
      assert.are.same({kDLDevice, id}, x:__dlpack__().device)
    end)
  end

  it("sim arrays in pinned_host memory (SingleDeviceSharding) export as (kDLPinned, 0) without a copy", function()
    local x = arange6(pinned(D[2]))
    assert.are.same({kDLPinned, 0}, {x:__dlpack_device__()})
    local c = x:__dlpack__{max_version = {1, 1}}
    assert.are.same({kDLPinned, 0}, c.device)
    assert.is_false(c.is_copied)
    assert.is_true(c.read_only)
    assert.are.same(VALUES6, dl.from_dlpack(c):tolist())
  end)

  it("sim arrays in pinned_host memory (NamedSharding) export as (kDLPinned, 0) without a copy", function()
    local x = arange6(dl.NamedSharding(mesh({D[5]}), dl.P(), "pinned_host"))
    assert.are.same({kDLPinned, 0}, {x:__dlpack_device__()})
    local c = x:__dlpack__{max_version = {1, 1}}
    assert.are.same({kDLPinned, 0}, c.device)
    assert.is_false(c.is_copied)
    assert.are.same(VALUES6, dl.from_dlpack(c):tolist())
  end)

  -- (kDLCUDAHost, 0) by default on cuda, but a consumer that asks for kDLCPU
  -- gets the same host-readable memory named as it asked.
  it("pinned_host arrays asked for dl_device={1, 0} export as (kDLCPU, 0) without a copy, copy=false included", function()
    local x = arange6(pinned(D[1]))
    assert.are.same({kDLPinned, 0}, x:__dlpack__{max_version = {1, 1}}.device)
    local c = x:__dlpack__{max_version = {1, 1}, dl_device = {kDLCPU, 0}, copy = false}
    assert.are.same({kDLCPU, 0}, c.device)
    assert.is_false(c.is_copied)
    local y = dl.from_dlpack(c)
    assert.are.equal("wrapped", c.imported) -- the same memory, not a copy of it
    assert.are.same(VALUES6, y:tolist())
  end)

  it("dl_device={1, 0} on a sim array copies to the host (IS_COPIED)", function()
    local x = arange6(D[4])
    local c = x:__dlpack__{max_version = {1, 1}, dl_device = {kDLCPU, 0}}
    assert.are.same({kDLCPU, 0}, c.device)
    assert.is_true(c.is_copied)
    local y = dl.from_dlpack(c)
    assert.are.equal(H, y:devices()[1])
    assert.are.same(VALUES6, y:tolist())
  end)

  it("dl_device={1, 0} on a sim array makes a legacy host copy too", function()
    local c = arange6(D[4]):__dlpack__{dl_device = {kDLCPU, 0}}
    assert.are.equal("dltensor", c.name)
    assert.are.same({kDLCPU, 0}, c.device)
    assert.are.same(VALUES6, dl.from_dlpack(c):tolist())
  end)

  it("dl_device={1, 0} with copy=false on a sim array raises JAX's ValueError", function()
    local x = arange6(D[0])
    expect_error("ValueError", copy_false_text(H, D[0]),
                 x.__dlpack__, x, {dl_device = {kDLCPU, 0}, copy = false})
    expect_error("ValueError", copy_false_text(H, D[0]),
                 dl.to_dlpack, x, {max_version = {1, 0}, dl_device = {kDLCPU, 0}, copy = false})
  end)

  it("dl_device={kDLDevice, 3} with copy=false on a device-0 array raises JAX's ValueError", function()
    local x = arange6(D[0])
    expect_error("ValueError", copy_false_text(D[3], D[0]),
                 x.__dlpack__, x, {dl_device = {kDLDevice, 3}, copy = false})
  end)

  it("dl_device={kDLDevice, 1} with copy=false on a pinned_host device-1 array names both memory kinds", function()
    local x = arange6(pinned(D[1]))
    expect_error("ValueError", "Specified device=" .. helpers.dev(1) .. " (memory_kind=device) which requires "
                 .. "a copy since the source device is " .. helpers.dev(1) .. " (memory_kind=pinned_host), "
                 .. "however copy=False. Set copy=True or copy=None to perform the requested "
                 .. "operation.",
                 x.__dlpack__, x, {dl_device = {kDLDevice, 1}, copy = false})
    local c = x:__dlpack__{dl_device = {kDLDevice, 1}, max_version = {1, 1}}
    assert.are.same({kDLDevice, 1}, c.device)
    assert.is_true(c.is_copied)
  end)

  it("dl_device={kDLDevice, 2} with copy=false on a cpu array raises JAX's ValueError", function()
    local x = arange6(H)
    expect_error("ValueError", copy_false_text(D[2], H),
                 x.__dlpack__, x, {dl_device = {kDLDevice, 2}, copy = false})
  end)

  for _, t in ipairs({2, 4, 10, 13}) do
    if t ~= kDLDevice then it("an unknown device type {" .. t .. ", 0} raises JAX's BufferError", function()
      local x = arange6(D[0])
      expect_error("BufferError",
                   "The device specification passed to to_dlpack contains an unsupported device type (DLDeviceType: " .. t .. ")",
                   x.__dlpack__, x, {dl_device = {t, 0}})
    end) end
  end

  it("a device id that does not exist raises a BufferError naming it", function()
    local x = arange6(D[0])
    expect_error("BufferError", "The device specification passed to to_dlpack names device id 99, "
                 .. "which does not exist for DLDeviceType " .. kDLDevice,
                 x.__dlpack__, x, {dl_device = {kDLDevice, 99}})
  end)

  it("copy=true on the same sim device exports a fresh copy", function()
    local x = arange6(D[1])
    gc()
    local before = D[1]:memory_stats().bytes_in_use
    local c = x:__dlpack__{max_version = {1, 1}, copy = true}
    assert.are.same({kDLDevice, 1}, c.device)
    assert.is_true(c.is_copied)
    assert.is_true(D[1]:memory_stats().bytes_in_use > before)
    assert.are.same(VALUES6, dl.from_dlpack(c):tolist())
  end)

  it("no copy on the same sim device allocates nothing", function()
    local x = arange6(D[1])
    gc()
    local before = D[1]:memory_stats().bytes_in_use
    local c = x:__dlpack__{max_version = {1, 1}, copy = false, dl_device = {kDLDevice, 1}}
    assert.is_false(c.is_copied)
    assert.are.equal(before, D[1]:memory_stats().bytes_in_use)
  end)

  it("copy=true on a cpu array exports a fresh host copy", function()
    local x = arange6(H)
    gc()
    local before = H:memory_stats().bytes_in_use
    local c = x:__dlpack__{max_version = {1, 1}, copy = true}
    assert.are.same({kDLCPU, 0}, c.device)
    assert.is_true(c.is_copied)
    assert.is_true(H:memory_stats().bytes_in_use > before)
    assert.are.same(VALUES6, dl.from_dlpack(c):tolist())
  end)

  it("copy=true on a pinned_host sim array stays on (kDLPinned, 0)", function()
    -- dl_device absent means the array's own DLPack device; the copy must not
    -- move the data into sim device memory.
    local x = arange6(pinned(D[0]))
    local c = x:__dlpack__{max_version = {1, 1}, copy = true}
    assert.is_true(c.is_copied)
    assert.are.same({kDLPinned, 0}, c.device)
  end)

  it("dl_device={kDLDevice, 3} on a device-0 array copies to device 3", function()
    local x = arange6(D[0])
    local c = x:__dlpack__{max_version = {1, 1}, dl_device = {kDLDevice, 3}}
    assert.are.same({kDLDevice, 3}, c.device)
    assert.is_true(c.is_copied)
    local y = dl.from_dlpack(c)
    assert.are.equal(D[3], y:devices()[1])
    assert.are.same(VALUES6, y:tolist())
  end)

  it("dl_device={kDLDevice, 0} on a device-0 array does not copy", function()
    local c = arange6(D[0]):__dlpack__{max_version = {1, 1}, dl_device = {kDLDevice, 0}}
    assert.are.same({kDLDevice, 0}, c.device)
    assert.is_false(c.is_copied)
  end)

  it("dl_device={kDLDevice, 5} on a cpu array copies to device 5", function()
    local c = arange6(H):__dlpack__{max_version = {1, 1}, dl_device = {kDLDevice, 5}}
    assert.are.same({kDLDevice, 5}, c.device)
    assert.is_true(c.is_copied)
    local y = dl.from_dlpack(c)
    assert.are.equal(D[5], y:devices()[1])
    assert.are.same(VALUES6, y:tolist())
  end)
end)

--------------------------------------------------------------------------
describe("stream", function()
  it("cpu arrays accept stream=nil", function()
    local c = arange6(H):__dlpack__{stream = nil}
    assert.are.equal("dltensor", c.name)
  end)

  for _, s in ipairs({-1, 1, 0, 2}) do
    it("cpu arrays refuse stream=" .. s .. " with a BufferError naming nil", function()
      local x = arange6(H)
      expect_error("BufferError", "stream must be nil for arrays on CpuDevice(id=0), got " .. s,
                   x.__dlpack__, x, {stream = s})
    end)
  end

  it("sim arrays accept stream=nil and stream=-1", function()
    local x = arange6(D[2])
    assert.are.same(VALUES6, dl.from_dlpack(x:__dlpack__{stream = nil}):tolist())
    x:block_until_ready()
    local c = x:__dlpack__{stream = -1, max_version = {1, 1}}
    assert.are.equal("dltensor_versioned", c.name)
    assert.are.same(VALUES6, dl.from_dlpack(c):tolist())
  end)

  -- cuda takes 1 and 2 (its default streams) and refuses 0 in words of its
  -- own (spec/devices/cuda_spec.lua)
  for _, s in ipairs(helpers.platform == "cuda" and {7} or {0, 1, 2, 7}) do
    it("device arrays refuse stream=" .. s .. " with a BufferError naming what they take", function()
      local x = arange6(D[2])
      expect_error("BufferError",
                   "stream must be " .. helpers.streams() .. " for arrays on "
                   .. helpers.dev(2) .. ", got " .. s,
                   x.__dlpack__, x, {stream = s})
    end)
  end

  it("a non-integer stream is a BufferError", function()
    local x = arange6(D[2])
    expect_error("BufferError", "__dlpack__: stream must be nil or an integer, got string",
                 x.__dlpack__, x, {stream = "default"})
    expect_error("BufferError", "to_dlpack: stream must be nil or an integer, got 1.5",
                 dl.to_dlpack, x, {stream = 1.5})
  end)

  -- Integral floats are integers here as everywhere else in the API (they
  -- were refused with "got number").
  it("integral floats are integers: stream = -1.0, max_version = {1.0, 0}", function()
    local x = arange6(D[2]):block_until_ready()
    local a = x:__dlpack__{stream = -1.0}
    assert.are.same(VALUES6, dl.from_dlpack(a):tolist())
    expect_error("BufferError", "stream must be " .. helpers.streams() .. " for arrays on "
                 .. helpers.dev(2) .. ", got 7", x.__dlpack__, x, {stream = 7.0})
    x = arange6(H)
    local b
    a, b = x:__dlpack__{max_version = {1.0, 0.0}}, x:__dlpack__{max_version = {1, 0}}
    assert.are.equal("dltensor_versioned", a.name)
    assert.are.equal(b.name, a.name)
    local c = x:__dlpack__{dl_device = {1.0, 0.0}}
    assert.are.same(VALUES6, dl.from_dlpack(c):tolist())
  end)

  -- stream=-1 does not wait for the array's data; dlrun importing its own export must
  -- still read the data only once written. A fill of 16 MiB runs on the device's stream
  -- for milliseconds, so without that ordering the imports read the memory before the
  -- fill (each round fills a new value, so old contents never pass).
  local function check_self_import(what, import)
    it("dl.from_dlpack of a stream=-1 export " .. what .. " reads the data once written", function()
      local n = 4 * 1024 * 1024
      local wrong = {}
      for round = 1, 6 do
        local v = 1000 * round + 7
        local x = dl.full({n}, v, "int32", D[1])
        local y = import(x:__dlpack__{stream = -1, max_version = round % 2 == 0 and {1, 1} or nil})
        local got = {y:_elements(1, 1)[1], y:_elements(n // 2, 1)[1], y:_elements(n, 1)[1]}
        if got[1] ~= v or got[2] ~= v or got[3] ~= v then
          wrong[#wrong + 1] = ("round %d: %d, %d, %d instead of %d"):format(round, got[1], got[2],
                                                                           got[3], v)
        end
        x, y = nil, nil
        gc()
      end
      assert.are.same({}, wrong)
    end)
  end
  check_self_import("onto its own device (shared)", function(c) return dl.from_dlpack(c) end)
  check_self_import("onto another device (copied)", function(c) return dl.from_dlpack(c, {device = D[2]}) end)
  check_self_import("onto the host (copied)", function(c) return dl.from_dlpack(c, {device = H}) end)
  check_self_import("with copy=true", function(c) return dl.from_dlpack(c, {copy = true}) end)

  it("a refused stream makes no export", function()
    local x = arange6(H)
    gc()
    local before = dl.live_exports()
    pcall(x.__dlpack__, x, {stream = 1})
    gc()
    assert.are.equal(before, dl.live_exports())
  end)
end)

--------------------------------------------------------------------------
describe("export lifetime", function()
  it("export does not consume the array: two exports both import", function()
    local x = arange6(D[3])
    local c1 = x:__dlpack__()
    local c2 = x:__dlpack__{max_version = {1, 1}}
    assert.is_false(x:is_deleted())
    assert.are.same(VALUES6, dl.from_dlpack(c1):tolist())
    assert.are.same(VALUES6, dl.from_dlpack(c2):tolist())
    assert.are.same(VALUES6, x:tolist())
  end)

  for _, case in ipairs({{helpers.platform, D[4]}, {"cpu", H}, {"pinned_host", pinned(D[6])}}) do
    for _, opts in ipairs({{}, {max_version = {1, 1}}, {copy = true}}) do
      local label = opts.max_version and "versioned" or opts.copy and "copied" or "legacy"
      it("the " .. label .. " export of a " .. case[1] .. " array outlives its deleted, collected array", function()
        local x = dl.arange(5, "int32", case[2])
        local c = x:__dlpack__(opts)
        x:delete()
        assert.is_true(x:is_deleted())
        x = nil
        gc()
        local y = dl.from_dlpack(c)
        assert.are.same({0, 1, 2, 3, 4}, y:tolist())
      end)
    end
  end

  -- A Capsule holds its tensor inside it until a consumer takes it, which
  -- moves it out: the consumer's deleter call may come after the capsule
  -- is collected and its memory reused by newer capsules.
  for _, opts in ipairs({{legacy_sharing = "share"}, {max_version = {1, 1}}}) do
    local label = opts.max_version and "versioned" or "legacy"
    it("a taken " .. label .. " tensor outlives its collected capsule", function()
      local x = arange6(H)
      gc()
      local base = dl.live_exports()
      local ys = {}
      for i = 1, 20 do
        local c = x:__dlpack__(opts)
        ys[i] = dl.from_dlpack(c)
        assert.are.equal("wrapped", c.imported)
      end
      gc()
      for _ = 1, 200 do local c = x:__dlpack__(opts) end
      gc()
      assert.are.equal(base + 20, dl.live_exports())
      for i = 1, 20 do assert.are.same(VALUES6, ys[i]:tolist()) end
      ys = nil
      gc()
      assert.are.equal(base, dl.live_exports())
    end)
  end

  it("exporting a deleted array raises JAX's RuntimeError", function()
    local x = arange6(D[0])
    x:delete()
    expect_error("RuntimeError", "Array has been deleted with shape=float32[6].", x.__dlpack__, x)
    expect_error("RuntimeError", "Array has been deleted with shape=float32[6].", x.__dlpack_device__, x)
  end)

  it("live_exports counts exports and returns to its value when capsules are collected", function()
    local x = arange6(D[0])
    gc()
    local base = dl.live_exports()
    local c1 = x:__dlpack__()
    local c2 = x:__dlpack__{max_version = {1, 1}}
    local c3 = x:__dlpack__{dl_device = {kDLCPU, 0}}
    assert.are.equal(base + 3, dl.live_exports())
    c1 = nil
    gc()
    assert.are.equal(base + 2, dl.live_exports())
    c2, c3 = nil, nil
    gc()
    assert.are.equal(base, dl.live_exports())
  end)

  it("an import without a copy keeps the export alive until the array is collected", function()
    local x = arange6(H)
    gc()
    local base = dl.live_exports()
    local c = x:__dlpack__()
    local y = dl.from_dlpack(c)
    c = nil
    gc()
    assert.are.equal(base + 1, dl.live_exports())
    assert.are.same(VALUES6, y:tolist())
    y = nil
    gc()
    assert.are.equal(base, dl.live_exports())
  end)

  it("the export stays alive past both the array and the import, then is released once", function()
    local x = arange6(D[7])
    gc()
    local base = dl.live_exports()
    local y = dl.from_dlpack(x:__dlpack__{max_version = {1, 1}})
    x:delete()
    x = nil
    gc()
    assert.are.equal(base + 1, dl.live_exports())
    assert.are.same(VALUES6, y:tolist())
    y = nil
    gc()
    assert.are.equal(base, dl.live_exports())
    gc()
    assert.are.equal(base, dl.live_exports())
  end)

  it("the deleter of a host copy frees the copy", function()
    local x = arange6(D[2])
    gc()
    local before = H:memory_stats().bytes_in_use
    local c = x:__dlpack__{dl_device = {kDLCPU, 0}}
    assert.is_true(H:memory_stats().bytes_in_use > before)
    c = nil
    gc()
    assert.are.equal(before, H:memory_stats().bytes_in_use)
  end)

  it("the deleter of a sim copy frees the copy", function()
    local x = arange6(D[0])
    gc()
    local before = D[3]:memory_stats().bytes_in_use
    local c = x:__dlpack__{max_version = {1, 1}, dl_device = {kDLDevice, 3}}
    assert.is_true(D[3]:memory_stats().bytes_in_use > before)
    c = nil
    gc()
    assert.are.equal(before, D[3]:memory_stats().bytes_in_use)
  end)

  it("the exported memory is released only after the array and the capsule are both gone", function()
    gc()
    local before = D[5]:memory_stats().bytes_in_use
    local x = arange6(D[5])
    local c = x:__dlpack__{legacy_sharing = "share"}
    local held = D[5]:memory_stats().bytes_in_use
    assert.is_true(held > before)
    x:delete()
    x = nil
    gc()
    assert.are.equal(held, D[5]:memory_stats().bytes_in_use)
    c = nil
    gc()
    assert.are.equal(before, D[5]:memory_stats().bytes_in_use)
  end)
end)

--------------------------------------------------------------------------
describe("Capsules", function()
  it("a legacy capsule has every field", function()
    local x = dl.frombytes(dl.arange(12, "int16"):tobytes(), {3, 4}, "int16", D[6])
    local c = x:__dlpack__()
    assert.are.equal("dltensor", c.name)
    assert.is_nil(c.version)
    assert.are.equal(0, c.flags)
    assert.is_false(c.read_only)
    assert.is_true(c.is_copied)
    assert.is_nil(c.imported)
    assert.are.same({kDLDevice, 6}, c.device)
    assert.are.same({3, 4}, c.shape)
    assert.are.same({4, 1}, c.strides)
    assert.are.equal("int16", c.dtype)
    assert.are.equal("Capsule(dltensor)", tostring(c))
    helpers.expect_error("AttributeError", "'Capsule' object has no attribute 'no_such_field'",
                         function() return c.no_such_field end)
  end)

  it("a versioned capsule has every field", function()
    local x = dl.zeros({2, 3, 4}, "complex64", H)
    local c = x:__dlpack__{max_version = {1, 0}}
    assert.are.equal("dltensor_versioned", c.name)
    assert.are.same({1, 1}, c.version)
    assert.are.equal(READ_ONLY, c.flags)
    assert.is_true(c.read_only)
    assert.is_false(c.is_copied)
    assert.are.same({kDLCPU, 0}, c.device)
    assert.are.same({2, 3, 4}, c.shape)
    assert.are.same({12, 4, 1}, c.strides)
    assert.are.equal("complex64", c.dtype)
    assert.are.equal("Capsule(dltensor_versioned)", tostring(c))
  end)

  it("a scalar capsule has empty shape and strides", function()
    local c = dl.full({}, 7, "int64", D[0]):__dlpack__()
    assert.are.same({}, c.shape)
    assert.are.same({}, c.strides)
    assert.are.equal("int64", c.dtype)
    assert.are.same({7}, {dl.from_dlpack(c):item()})
  end)

  for _, kind in ipairs({"dltensor", "dltensor_versioned"}) do
    local opts = kind == "dltensor" and {} or {max_version = {1, 1}}

    it("collecting an unconsumed " .. kind .. " capsule runs the deleter", function()
      local x = arange6(D[1])
      gc()
      local base = dl.live_exports()
      local c = x:__dlpack__(opts)
      assert.are.equal(base + 1, dl.live_exports())
      c = nil
      gc()
      assert.are.equal(base, dl.live_exports())
    end)

    it("a consumed " .. kind .. " capsule is renamed used_" .. kind, function()
      local c = arange6(D[1]):__dlpack__(opts)
      local y = dl.from_dlpack(c)
      assert.are.equal("used_" .. kind, c.name)
      assert.are.equal("Capsule(used_" .. kind .. ")", tostring(c))
      assert.are.same(VALUES6, y:tolist())
    end)

    it("collecting a consumed " .. kind .. " capsule does nothing", function()
      local x = arange6(H)
      gc()
      local base = dl.live_exports()
      local c = x:__dlpack__(opts)
      local y = dl.from_dlpack(c) -- no copy: y now owns the export
      assert.are.equal(base + 1, dl.live_exports())
      c = nil
      gc()
      assert.are.equal(base + 1, dl.live_exports())
      assert.are.same(VALUES6, y:tolist())
      y = nil
      gc()
      assert.are.equal(base, dl.live_exports())
    end)

    it("importing a consumed " .. kind .. " capsule again raises a BufferError", function()
      local c = arange6(D[2]):__dlpack__(opts)
      dl.from_dlpack(c)
      expect_error("BufferError",
                   "from_dlpack: the capsule has already been consumed (its name is used_" .. kind .. ")",
                   dl.from_dlpack, c)
      expect_error("BufferError",
                   "from_dlpack: the capsule has already been consumed (its name is used_" .. kind .. ")",
                   dl.from_dlpack, c, {device = D[3]})
    end)

    it("reading a consumed " .. kind .. " capsule's fields raises a BufferError", function()
      local c = arange6(D[2]):__dlpack__(opts)
      dl.from_dlpack(c)
      for _, field in ipairs({"version", "flags", "read_only", "is_copied", "device", "shape", "dtype", "strides"}) do
        expect_error("BufferError",
                     ("the capsule has been consumed (used_%s): %s is gone"):format(kind, field),
                     function() return c[field] end)
      end
    end)

    it("a " .. kind .. " capsule returned by a producer is consumed by the import", function()
      local c = arange6(D[2]):__dlpack__(opts)
      local producer = {
        __dlpack__ = function() return c end,
        __dlpack_device__ = function() return kDLDevice, 2 end,
      }
      assert.are.same(VALUES6, dl.from_dlpack(producer):tolist())
      assert.are.equal("used_" .. kind, c.name)
    end)
  end
end)

--------------------------------------------------------------------------
describe("from_dlpack producers", function()
  -- A table producer wrapping a dlrun array; `behave(opts, n)` may raise, or
  -- return a value to hand back instead of the array's capsule.
  local function producer(x, behave)
    local p = {calls = {}, selves = {}}
    p.__dlpack__ = function(self, opts)
      p.calls[#p.calls + 1] = opts == nil and "nil" or opts
      p.selves[#p.selves + 1] = self
      if behave then
        local r = behave(opts, #p.calls)
        if r ~= nil then return r end
      end
      return x:__dlpack__(opts)
    end
    p.__dlpack_device__ = function(self) return x:__dlpack_device__() end
    return p
  end

  local function max_version_of(opts)
    return type(opts) == "table" and opts.max_version or nil
  end

  it("a producer that takes max_version is asked once, for {1, 1}, and gives a versioned capsule", function()
    local x = arange6(D[3])
    local got
    local p = producer(x, function(opts)
      got = x:__dlpack__(opts)
      return got
    end)
    local y = dl.from_dlpack(p)
    assert.are.equal(1, #p.calls)
    assert.are.equal(p, p.selves[1])
    assert.are.same({1, 1}, p.calls[1].max_version)
    assert.are.equal("used_dltensor_versioned", got.name)
    assert.are.equal(D[3], y:devices()[1])
    assert.are.same(VALUES6, y:tolist())
  end)

  it("the first call passes no stream, dl_device or copy", function()
    local p = producer(arange6(H))
    dl.from_dlpack(p)
    assert.is_nil(p.calls[1].stream)
    assert.is_nil(p.calls[1].dl_device)
    assert.is_nil(p.calls[1].copy)
  end)

  it("a producer refusing max_version with a TypeError is asked again without it", function()
    local x = arange6(D[1])
    local p = producer(x, function(opts)
      if max_version_of(opts) then
        error(dl.TypeError("__dlpack__() got an unexpected keyword argument 'max_version'"))
      end
    end)
    local y = dl.from_dlpack(p)
    assert.are.equal(2, #p.calls)
    assert.are.same({1, 1}, max_version_of(p.calls[1]))
    assert.is_nil(max_version_of(p.calls[2]))
    assert.are.equal(p, p.selves[2])
    assert.are.equal(D[1], y:devices()[1])
    assert.are.same(VALUES6, y:tolist())
  end)

  it("a producer raising a TypeError twice propagates the second error", function()
    local p = producer(arange6(H), function(_, n)
      error(dl.TypeError("refused call " .. n))
    end)
    expect_error("TypeError", "refused call 2", dl.from_dlpack, p)
    assert.are.equal(2, #p.calls)
  end)

  it("a producer raising a ValueError propagates it without a retry", function()
    local p = producer(arange6(H), function() error(dl.ValueError("producer says no")) end)
    expect_error("ValueError", "producer says no", dl.from_dlpack, p)
    assert.are.equal(1, #p.calls)
  end)

  it("a producer raising a BufferError propagates it without a retry", function()
    local p = producer(arange6(H), function() error(dl.BufferError("not exportable")) end)
    expect_error("BufferError", "not exportable", dl.from_dlpack, p)
    assert.are.equal(1, #p.calls)
  end)

  it("a producer raising a plain Lua error propagates the same value without a retry", function()
    local sentinel = {"not a dlrun error"}
    local p = producer(arange6(H), function() error(sentinel) end)
    local ok, err = pcall(dl.from_dlpack, p)
    assert.is_false(ok)
    assert.are.equal(sentinel, err)
    assert.are.equal(1, #p.calls)
    local q = producer(arange6(H), function() error("boom", 0) end)
    ok, err = pcall(dl.from_dlpack, q)
    assert.is_false(ok)
    assert.are.equal("boom", err)
    assert.are.equal(1, #q.calls)
  end)

  it("a producer's real dlrun TypeError (not about max_version) is retried then propagated", function()
    -- the wrapped array refuses an unknown option with a TypeError both times
    local x = arange6(H)
    local p = producer(x, function(opts)
      local o = {bogus = true}
      for k, v in pairs(opts or {}) do o[k] = v end
      return x:__dlpack__(o)
    end)
    expect_error("TypeError", {contains = "unexpected option 'bogus'"}, dl.from_dlpack, p)
    assert.are.equal(2, #p.calls)
  end)

  for _, case in ipairs({{"a table", {}}, {"nil", false}, {"a number", 42}, {"a string", "dltensor"}}) do
    it("a producer returning " .. case[1] .. " raises a TypeError", function()
      local value = case[2]
      local p = {
        __dlpack__ = function() if value == false then return nil end return value end,
        __dlpack_device__ = function() return kDLCPU, 0 end,
      }
      expect_error("TypeError", {contains = "not a Capsule"}, dl.from_dlpack, p)
    end)
  end

  it("a producer returning a dlrun array (not its capsule) raises a TypeError", function()
    local x = arange6(H)
    local p = {__dlpack__ = function() return x end, __dlpack_device__ = function() return kDLCPU, 0 end}
    expect_error("TypeError", {contains = "not a Capsule"}, dl.from_dlpack, p)
  end)

  it("a dlrun array is itself a producer", function()
    local x = arange6(D[5])
    local y = dl.from_dlpack(x)
    assert.are.equal(D[5], y:devices()[1])
    assert.are.same(VALUES6, y:tolist())
    assert.is_false(x:is_deleted())
  end)

  it("a producer whose methods come from a metatable works", function()
    local x = arange6(H)
    local Class = {}
    Class.__index = Class
    function Class:__dlpack__(opts) return self.inner:__dlpack__(opts) end
    function Class:__dlpack_device__() return self.inner:__dlpack_device__() end
    local obj = setmetatable({inner = x}, Class)
    assert.are.same(VALUES6, dl.from_dlpack(obj):tolist())
  end)

  local f = function() end
  local without = {
    {"an empty table", {}},
    {"a table with only __dlpack__", {__dlpack__ = f}},
    {"a table with only __dlpack_device__", {__dlpack_device__ = f}},
    {"a number", 3},
    {"a string", "dltensor"},
    {"a boolean", true},
    {"a function", f},
    {"nil", nil},
  }
  for _, case in ipairs(without) do
    it(case[1] .. " raises JAX's TypeError", function()
      expect_error("TypeError", NO_METHODS, dl.from_dlpack, case[2])
    end)
  end

  it("a value without both methods is refused without calling __dlpack__", function()
    local called = 0
    local obj = {__dlpack__ = function() called = called + 1 end}
    expect_error("TypeError", NO_METHODS, dl.from_dlpack, obj)
    assert.are.equal(0, called)
  end)
end)

--------------------------------------------------------------------------
describe("from_dlpack device and copy", function()
  local M8 = mesh({D[0], D[1], D[2], D[3], D[4], D[5], D[6], D[7]})

  it("device= a sharding over 8 devices raises JAX's ValueError", function()
    local c = arange6(D[0]):__dlpack__()
    expect_error("ValueError", import_sharding_text(8), dl.from_dlpack, c, {device = dl.NamedSharding(M8, dl.P())})
    expect_error("ValueError", import_sharding_text(8), dl.from_dlpack, c, {device = dl.NamedSharding(M8, dl.P("x"))})
  end)

  it("device= a sharding over 2 devices names 2", function()
    local c = arange6(H):__dlpack__{max_version = {1, 1}}
    expect_error("ValueError", import_sharding_text(2), dl.from_dlpack, c,
                 {device = dl.NamedSharding(mesh({D[1], D[2]}), dl.P())})
  end)

  it("device= a multi-device sharding through a producer raises the same ValueError", function()
    local x = arange6(D[0])
    expect_error("ValueError", import_sharding_text(8), dl.from_dlpack, x, {device = dl.NamedSharding(M8, dl.P())})
  end)

  it("a refused import leaves the capsule unconsumed and its export alive", function()
    local x = arange6(D[0])
    gc()
    local base = dl.live_exports()
    local c = x:__dlpack__()
    pcall(dl.from_dlpack, c, {device = dl.NamedSharding(M8, dl.P())})
    assert.are.equal("dltensor", c.name)
    assert.are.equal(base + 1, dl.live_exports())
    pcall(dl.from_dlpack, c, {device = D[3], copy = false})
    assert.are.equal("dltensor", c.name)
    assert.are.equal(base + 1, dl.live_exports())
    assert.are.same(VALUES6, dl.from_dlpack(c):tolist())
  end)

  for _, id in ipairs({0, 3, 7}) do
    it("device=" .. helpers.dev(id) .. " imports a device-0 capsule there", function()
      local y = dl.from_dlpack(arange6(D[0]):__dlpack__(), {device = D[id]})
      assert.are.equal(D[id], y:devices()[1])
      assert.are.same(VALUES6, y:tolist())
    end)
    it("device=SingleDeviceSharding(" .. helpers.dev(id) .. ") imports a cpu capsule there", function()
      local y = dl.from_dlpack(arange6(H):__dlpack__{max_version = {1, 1}},
                               {device = dl.SingleDeviceSharding(D[id])})
      assert.are.equal(D[id], y:devices()[1])
      assert.are.equal("device", y.sharding.memory_kind)
      assert.are.same({kDLDevice, id}, {y:__dlpack_device__()})
      assert.are.same(VALUES6, y:tolist())
    end)
  end

  it("device=the host device imports a sim capsule onto the host", function()
    local y = dl.from_dlpack(arange6(D[4]):__dlpack__(), {device = H})
    assert.are.equal(H, y:devices()[1])
    assert.are.same({kDLCPU, 0}, {y:__dlpack_device__()})
    assert.are.same(VALUES6, y:tolist())
  end)

  it("a copying import releases the producer at once", function()
    local x = arange6(D[0])
    gc()
    local base = dl.live_exports()
    local y = dl.from_dlpack(x:__dlpack__(), {device = D[6]})
    gc()
    assert.are.equal(base, dl.live_exports())
    assert.are.same(VALUES6, y:tolist())
  end)

  it("an import onto the same device does not copy", function()
    local x = arange6(D[2])
    gc()
    local base = dl.live_exports()
    local before = D[2]:memory_stats().bytes_in_use
    local y = dl.from_dlpack(x:__dlpack__{legacy_sharing = "share"}, {device = D[2], copy = false})
    gc()
    assert.are.equal("wrapped", y.imported)
    assert.are.equal(D[2], y:devices()[1])
    assert.are.equal(base + 1, dl.live_exports())
    assert.are.equal(before, D[2]:memory_stats().bytes_in_use)
    assert.are.same(VALUES6, y:tolist())
  end)

  it("copy=true on the same device copies", function()
    local x = arange6(D[2])
    gc()
    local base = dl.live_exports()
    local y = dl.from_dlpack(x:__dlpack__(), {device = D[2], copy = true})
    gc()
    assert.are.equal(base, dl.live_exports())
    assert.are.same(VALUES6, y:tolist())
  end)

  it("copy=false when a copy to another sim device is needed raises JAX's ValueError", function()
    local c = arange6(D[0]):__dlpack__()
    expect_error("ValueError", copy_false_text(D[3], D[0]), dl.from_dlpack, c, {device = D[3], copy = false})
    expect_error("ValueError", copy_false_text(D[3], D[0]), dl.from_dlpack, c,
                 {device = dl.SingleDeviceSharding(D[3]), copy = false})
  end)

  it("copy=false when a host capsule must go to a sim device raises JAX's ValueError", function()
    local c = arange6(H):__dlpack__{max_version = {1, 1}}
    expect_error("ValueError", copy_false_text(D[2], H), dl.from_dlpack, c, {device = D[2], copy = false})
  end)

  it("copy=false when a sim capsule must go to its device's pinned_host memory names both kinds", function()
    local c = arange6(D[4]):__dlpack__()
    expect_error("ValueError", "Specified device=" .. helpers.dev(4) .. " (memory_kind=pinned_host) which "
                 .. "requires a copy since the source device is " .. helpers.dev(4) .. " "
                 .. "(memory_kind=device), however copy=False. Set copy=True or copy=None to "
                 .. "perform the requested operation.",
                 dl.from_dlpack, c, {device = pinned(D[4]), copy = false})
    local y = dl.from_dlpack(c, {device = pinned(D[4])})
    assert.are.equal("pinned_host", y.sharding.memory_kind)
    assert.are.same(VALUES6, y:tolist())
  end)

  it("copy=false when a sim capsule must go to the host raises JAX's ValueError", function()
    local c = arange6(D[5]):__dlpack__()
    expect_error("ValueError", copy_false_text(H, D[5]), dl.from_dlpack, c, {device = H, copy = false})
  end)

  it("a pinned_host export imports back into its own memory without a copy", function()
    local x = arange6(pinned(D[3]))
    gc()
    local base = dl.live_exports()
    local y = dl.from_dlpack(x:__dlpack__{max_version = {1, 1}}, {copy = false})
    gc()
    assert.are.same({kDLPinned, 0}, {y:__dlpack_device__()})
    -- (kDLCPU, 0) names all host memory: dlrun's own export says whose it is.
    assert.are.equal("SingleDeviceSharding(device=" .. helpers.dev(3)
                     .. ", memory_kind=pinned_host)", tostring(y.sharding))
    assert.are.equal("wrapped", y.imported)
    assert.are.equal(base + 1, dl.live_exports())
    assert.are.same(VALUES6, y:tolist())
  end)

  it("a sim device-memory capsule imported into pinned_host memory is copied there", function()
    -- device memory is not host memory: the import must copy into the
    -- pinned_host pool and release the producer.
    local x = arange6(D[0])
    gc()
    local base = dl.live_exports()
    local pinned_before = D[0]:memory_stats("pinned_host").bytes_in_use
    local y = dl.from_dlpack(x:__dlpack__(), {device = pinned(D[0])})
    gc()
    assert.are.equal("pinned_host", y.sharding.memory_kind)
    assert.are.same(VALUES6, y:tolist())
    assert.is_true(D[0]:memory_stats("pinned_host").bytes_in_use > pinned_before)
    assert.are.equal(base, dl.live_exports())
  end)

  it("device= something else raises a TypeError", function()
    local c = arange6(H):__dlpack__()
    expect_error("TypeError", {contains = "device must be a Device or a Sharding"},
                 dl.from_dlpack, c, {device = "cpu"})
    assert.are.equal("dltensor", c.name)
  end)
end)

--------------------------------------------------------------------------
describe("option checking", function()
  it("__dlpack__ refuses an unknown option with a TypeError", function()
    local x = arange6(H)
    expect_error("TypeError",
                 "__dlpack__: unexpected option 'device' (expected stream, max_version, dl_device, "
                 .. "copy, legacy_sharing, legacy_knows_1_1)",
                 x.__dlpack__, x, {device = H})
    expect_error("TypeError",
                 "to_dlpack: unexpected option 'device' (expected stream, max_version, dl_device, "
                 .. "copy, legacy_sharing, legacy_knows_1_1)",
                 dl.to_dlpack, x, {device = H})
  end)

  it("max_version and dl_device must be pairs of integers", function()
    local x = arange6(H)
    expect_error("TypeError", "__dlpack__: max_version must be a pair of integers {a, b}, got 1",
                 x.__dlpack__, x, {max_version = 1})
    expect_error("TypeError", "__dlpack__: max_version must be a pair of integers {a, b}, got "
                 .. "{1, nil}", x.__dlpack__, x, {max_version = {1}})
    expect_error("TypeError", "__dlpack__: max_version must be a pair of integers {a, b}, got "
                 .. "{1.5, 0}", x.__dlpack__, x, {max_version = {1.5, 0}})
    expect_error("TypeError", "__dlpack__: dl_device must be a pair of integers {a, b}, got "
                 .. "{string, 0}", x.__dlpack__, x, {dl_device = {"cpu", 0}})
  end)

  it("a negative max_version is a BufferError", function()
    local x = arange6(H)
    expect_error("BufferError", "__dlpack__: max_version (-1, 0) is not a version",
                 x.__dlpack__, x, {max_version = {-1, 0}})
  end)

  it("copy must be a boolean or nil, on export and import", function()
    local x = arange6(H)
    expect_error("TypeError", "__dlpack__: copy must be a boolean or nil, got string",
                 x.__dlpack__, x, {copy = "yes"})
    local c = x:__dlpack__()
    expect_error("TypeError", "from_dlpack: copy must be a boolean or nil, got number",
                 dl.from_dlpack, c, {copy = 1})
    assert.are.equal("dltensor", c.name)
  end)

  it("dl_device={1, 0} with copy=false on a cpu array exports without a copy", function()
    local c = arange6(H):__dlpack__{max_version = {1, 1}, dl_device = {kDLCPU, 0}, copy = false}
    assert.are.same({kDLCPU, 0}, c.device)
    assert.is_false(c.is_copied)
  end)

  it("a producer handing back a used capsule raises the consumed-capsule BufferError", function()
    local c = arange6(H):__dlpack__()
    dl.from_dlpack(c)
    local p = {__dlpack__ = function() return c end, __dlpack_device__ = function() return kDLCPU, 0 end}
    expect_error("BufferError",
                 "from_dlpack: the capsule has already been consumed (its name is used_dltensor)",
                 dl.from_dlpack, p)
  end)
end)

--------------------------------------------------------------------------
describe("round trips through capsules", function()
  local dtypes = {"bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
                  "uint64", "float16", "bfloat16", "float32", "float64", "complex64",
                  "complex128"}
  local itemsize = {bool = 1, int8 = 1, int16 = 2, int32 = 4, int64 = 8, uint8 = 1,
                    uint16 = 2, uint32 = 4, uint64 = 8, float16 = 2, bfloat16 = 2,
                    float32 = 4, float64 = 8, complex64 = 8, complex128 = 16}
  local shapes = {{}, {4}, {3, 4}, {2, 3, 4}, {3, 1}, {1, 4}, {2, 1, 4}, {0}, {0, 4}, {3, 0}}

  local function count(shape)
    local n = 1
    for _, d in ipairs(shape) do n = n * d end
    return n
  end

  local function row_major(shape)
    local s, acc = {}, 1
    for i = #shape, 1, -1 do
      s[i] = acc
      acc = acc * shape[i]
    end
    return s
  end

  -- Deterministic bytes for n elements: 0/1 for bool, a varied pattern
  -- otherwise (every bit pattern of the element is a valid value to copy).
  local function pattern(dtype, n)
    local size = itemsize[dtype]
    local out = {}
    for i = 0, n * size - 1 do
      if dtype == "bool" then
        out[#out + 1] = string.char((i * 7 // 3) % 2)
      else
        out[#out + 1] = string.char((i * 131 + 17 + (i // 7)) % 251)
      end
    end
    return table.concat(out)
  end

  local function shape_text(shape) return "(" .. table.concat(shape, ",") .. (#shape == 1 and ",)" or ")") end

  local sources = {{"cpu", H, {kDLCPU, 0}}, {helpers.platform, D[3], {kDLDevice, 3}}}
  local formats = {{"legacy", {}, "dltensor"}, {"versioned", {max_version = {1, 1}}, "dltensor_versioned"}}
  for _, src in ipairs(sources) do
    for _, fmt in ipairs(formats) do
      for _, dtype in ipairs(dtypes) do
        for _, shape in ipairs(shapes) do
          it(("%s %s %s%s"):format(src[1], fmt[1], dtype, shape_text(shape)), function()
            local n = count(shape)
            local bytes = pattern(dtype, n)
            local x = dl.frombytes(bytes, shape, dtype, src[2])
            assert.are.equal(bytes, x:tobytes())
            local c = x:__dlpack__(fmt[2])
            assert.are.equal(fmt[3], c.name)
            assert.are.same(shape, c.shape)
            assert.are.equal(dtype, c.dtype)
            assert.are.same(src[3], c.device)
            if n > 0 then assert.are.same(row_major(shape), c.strides) end
            local y = dl.from_dlpack(c)
            assert.are.equal("used_" .. fmt[3], c.name)
            assert.are.same(shape, y.shape)
            assert.are.equal(dtype, y.dtype)
            assert.are.equal(src[2], y:devices()[1])
            assert.are.equal(bytes, y:tobytes())
          end)
        end
      end
    end
  end

  -- Through copies: a sim array to the host and a host array to a sim device.
  for _, dtype in ipairs(dtypes) do
    it("sim->host copy keeps the bytes of " .. dtype .. "(2,3,4)", function()
      local bytes = pattern(dtype, 24)
      local x = dl.frombytes(bytes, {2, 3, 4}, dtype, D[1])
      local c = x:__dlpack__{max_version = {1, 1}, dl_device = {kDLCPU, 0}}
      local y = dl.from_dlpack(c)
      assert.are.equal(H, y:devices()[1])
      assert.are.equal(bytes, y:tobytes())
    end)
    it("host->sim import copy keeps the bytes of " .. dtype .. "(3,4)", function()
      local bytes = pattern(dtype, 12)
      local x = dl.frombytes(bytes, {3, 4}, dtype, H)
      local y = dl.from_dlpack(x:__dlpack__(), {device = D[6]})
      assert.are.equal(D[6], y:devices()[1])
      assert.are.equal(bytes, y:tobytes())
    end)
  end
end)

--------------------------------------------------------------------------
describe("legacy tensors and provenance (docs/dlpack.md)", function()
  it("a legacy export is a copy unless legacy_sharing = 'share'", function()
    local x = arange6(D[1])
    local c = x:__dlpack__()
    assert.is_true(c.is_copied)
    local y = dl.from_dlpack(c)
    assert.are.equal("wrapped", y.imported) -- dlrun wraps the copy it was handed
    assert.are.same(VALUES6, y:tolist())
    local s = x:__dlpack__{legacy_sharing = "share"}
    assert.is_false(s.is_copied)
    local v = x:__dlpack__{max_version = {1, 0}, legacy_sharing = "protect"}
    assert.is_false(v.is_copied) -- versioned tensors say READ_ONLY instead
    assert.is_true(v.read_only)
    assert.is_nil(x.imported)
  end)

  it("copy=false refuses a legacy export that would need the copy", function()
    local x = arange6(H)
    expect_error("ValueError", "a legacy DLPack tensor cannot be marked read-only, so exporting "
                 .. "the array on CpuDevice(id=0) as one needs a copy (a consumer could write "
                 .. "into memory dlrun's arrays share), but copy=False. Ask for max_version (1, "
                 .. "0) or later (READ_ONLY), or for legacy_sharing=share if the consumer never "
                 .. "writes.", x.__dlpack__, x, {copy = false})
    assert.is_false(x:__dlpack__{copy = false, legacy_sharing = "share"}.is_copied)
  end)

  it("legacy_sharing takes 'protect' or 'share' only", function()
    local x = arange6(H)
    expect_error("ValueError", '__dlpack__: legacy_sharing must be "protect" or "share", got yes',
                 x.__dlpack__, x, {legacy_sharing = "yes"})
    expect_error("ValueError", '__dlpack__: legacy_sharing must be "protect" or "share", got true',
                 x.__dlpack__, x, {legacy_sharing = true})
  end)

  it("an import says whether it wrapped or copied, on the Capsule and the Array", function()
    local x = arange6(D[1])
    local c = x:__dlpack__{max_version = {1, 0}}
    assert.is_nil(c.imported)
    local y = dl.from_dlpack(c, {device = D[2]})
    assert.are.equal("copied", c.imported)
    assert.are.equal("copied", y.imported)
    assert.are.equal("used_dltensor_versioned", c.name)
    local c2 = x:__dlpack__{max_version = {1, 0}}
    local z = dl.from_dlpack(c2)
    assert.are.equal("wrapped", c2.imported)
    assert.are.equal("wrapped", z.imported)
    assert.is_nil(dl.device_put(z, D[3]).imported) -- a new array is dlrun's own
    -- a refused import leaves the capsule unconsumed, with nothing imported
    local c3 = x:__dlpack__{max_version = {1, 0}}
    assert.has_error(function() dl.from_dlpack(c3, {device = D[2], copy = false}) end)
    assert.are.equal("dltensor_versioned", c3.name)
    assert.is_nil(c3.imported)
  end)
end)
