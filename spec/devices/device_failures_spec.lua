-- runs: every-platform
-- ipc-off: no
-- devices: 8
-- needs: none

-- Work that fails on a device (docs/opencl.md, "Work and failures"): a copy
-- or a fill that fails fails its event, and everything that waits for it
-- (block_until_ready, reads, export, device_put; copies still queued behind
-- it fail with it) raises a RuntimeError naming the device, the operation and
-- the driver's error. Failures are injected through the platform's own slot
-- (dl._debug.inject_failure), so they travel the path a real driver's would.
-- The busted process runs on 8 sim devices plus the host cpu device.
local helpers = require "helpers"
local dl = require "dlrun"

local expect_error = helpers.expect_error

local COPY = helpers.dev(1) .. ": copy failed: injected device failure"
local FILL = helpers.dev(0) .. ": fill failed: injected device failure"

local function devices() return dl.devices() end

describe("a copy that fails on the device", function()
  local d, x, y
  before_each(function()
    d = devices()
    x = dl.arange(8, "float32", d[1])
    dl._debug.inject_failure(d[2], "copy", 1)
    y = dl.device_put(x, d[2])
  end)
  after_each(function() dl._debug.inject_failure(d[2], "copy", 0) end)

  it("raises from block_until_ready, every read and device_get", function()
    expect_error("RuntimeError", COPY, function() return y:block_until_ready() end)
    expect_error("RuntimeError", COPY, function() return y:tolist() end)
    expect_error("RuntimeError", COPY, function() return y:tobytes() end)
    expect_error("RuntimeError", COPY, function() return dl.device_get(y) end)
  end)

  it("raises from __dlpack__ with or without stream -1, and exports nothing", function()
    local before = dl.live_exports()
    expect_error("RuntimeError", COPY, function() return y:__dlpack__() end)
    expect_error("RuntimeError", COPY, function() return y:__dlpack__ {stream = -1} end)
    expect_error("RuntimeError", COPY, function() return dl.to_dlpack(y) end)
    assert.are.equal(before, dl.live_exports())
  end)

  it("makes device_put of the failed array raise, to any device", function()
    pcall(y.block_until_ready, y) -- the failure is known from here on
    expect_error("RuntimeError", COPY, function() return dl.device_put(y, d[3]) end)
    expect_error("RuntimeError", COPY, function() return dl.device_put(y, dl.host_device()) end)
    local mesh = dl.make_mesh({8}, {"x"})
    expect_error("RuntimeError", COPY,
                 function() return dl.device_put(y, dl.NamedSharding(mesh, dl.P())) end)
  end)

  it("leaves the source and the device usable: the next copy succeeds", function()
    assert.are.same({0, 1, 2, 3, 4, 5, 6, 7}, x:tolist())
    local again = dl.device_put(x, d[2])
    assert.are.same({0, 1, 2, 3, 4, 5, 6, 7}, again:tolist())
    -- The failed array's memory goes back to its pool like any other's.
    local used = d[2]:memory_stats().bytes_in_use
    y:delete()
    assert.are.equal(used - 256, d[2]:memory_stats().bytes_in_use)
  end)
end)

describe("a fill that fails on the device", function()
  local d
  before_each(function() d = devices() end)
  after_each(function() dl._debug.inject_failure(d[1], "fill", 0) end)

  it("raises from the array it makes, and only from that one", function()
    dl._debug.inject_failure(d[1], "fill", 1)
    local z = dl.zeros({4}, "int32", d[1])
    local ok = dl.ones({4}, "int32", d[1])
    expect_error("RuntimeError", FILL, function() return z:tolist() end)
    expect_error("RuntimeError", FILL, function() return z:block_until_ready() end)
    assert.are.same({1, 1, 1, 1}, ok:tolist())
    assert.are.same({0, 0, 0, 0}, dl.zeros({4}, "int32", d[1]):tolist())
  end)

  it("counts: the next n operations of that kind fail, then they succeed again", function()
    dl._debug.inject_failure(d[1], "fill", 2)
    local a = dl.arange(3, "int64", d[1])
    local b = dl.full({2}, 7, "int16", d[1])
    local c = dl.arange(3, "int64", d[1])
    expect_error("RuntimeError", FILL, function() return a:tolist() end)
    expect_error("RuntimeError", FILL, function() return b:tolist() end)
    assert.are.same({0, 1, 2}, c:tolist())
  end)

  it("a sharded array with one failed shard raises, its other shards are intact", function()
    local mesh = dl.make_mesh({8}, {"x"})
    dl._debug.inject_failure(d[1], "fill", 1)
    local g = dl.arange(16, "int32", dl.NamedSharding(mesh, dl.P("x")))
    expect_error("RuntimeError", FILL, function() return g:tolist() end)
    assert.are.same({2, 3}, g.addressable_shards[2].data:tolist())
  end)
end)

describe("dl._debug.inject_failure", function()
  it("checks its arguments", function()
    local d = devices()
    expect_error("ValueError", 'inject_failure: what must be "copy" or "fill", got "read"',
                 dl._debug.inject_failure, d[1], "read", 1)
    expect_error("TypeError", nil, dl._debug.inject_failure, "not a device", "copy", 1)
    expect_error("TypeError", nil, dl._debug.inject_failure, d[1], "copy", -1)
  end)
end)
