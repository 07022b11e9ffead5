-- runs: every-platform
-- ipc-off: no
-- devices: 8
-- needs: none

-- Pools a user can steer and see (docs/architecture.md, "Pools a user steers
-- and sees"): memory settings per kind, on every way in and refused once the
-- runtime runs; memory snapshots that match the live arrays; peak reset;
-- giving unused memory back; the out-of-memory advice. Settings need a fresh
-- runtime, so most cases run in a child dlrun.
local helpers = require "helpers"
local dl = require "dlrun"
local expect_error = helpers.expect_error

local MiB = 1024 * 1024
local CLEAN = {DLRUN_DEVICES = "", DLRUN_DEVICE_MEMORY = "", DLRUN_PINNED_HOST_MEMORY = "",
               DLRUN_DEVICE_PREALLOCATE = "", DLRUN_PINNED_HOST_PREALLOCATE = ""}

-- Run `code` (dl is there) in a fresh dlrun; returns stdout, stderr, status.
local function child(code, options, env)
  local full = {}
  for k, v in pairs(CLEAN) do full[k] = v end
  for k, v in pairs(env or {}) do full[k] = v end
  return helpers.run_code('local dl = require "dlrun"\n' .. code, options, full)
end

-- The same, which must succeed; returns stdout.
local function child_ok(code, options, env)
  local out, err, status = child(code, options, env)
  assert.are.equal("", err)
  assert.are.equal(0, status, out)
  return out
end

local LIMITS = [[
local d = dl.devices()[1]
local s, p = d:memory_stats(), d:memory_stats("pinned_host")
print(s.bytes_limit, s.bytes_reserved, p.bytes_limit, p.bytes_reserved)
]]

describe("memory settings", function()
  it("pinned_host_memory and preallocation through dl.configure", function()
    local out = child_ok('dl.configure{devices = "sim:2", device_memory = "2MiB", '
                         .. 'pinned_host_memory = "1MiB", device_preallocate = true}\n' .. LIMITS)
    assert.are.equal(("%d\t%d\t%d\t0\n"):format(2 * MiB, 2 * MiB, MiB), out)
  end)

  it("the same through options and through the environment", function()
    local out = child_ok(LIMITS, {"--devices", "sim:2", "--device-memory", "2MiB",
                                  "--pinned-host-memory", "1MiB", "--pinned-host-preallocate",
                                  "true"})
    assert.are.equal(("%d\t0\t%d\t%d\n"):format(2 * MiB, MiB, MiB), out)
    out = child_ok(LIMITS, nil, {DLRUN_DEVICES = "sim:2", DLRUN_DEVICE_MEMORY = "2MiB",
                                 DLRUN_PINNED_HOST_MEMORY = "1MiB",
                                 DLRUN_DEVICE_PREALLOCATE = "yes"})
    assert.are.equal(("%d\t%d\t%d\t0\n"):format(2 * MiB, 2 * MiB, MiB), out)
  end)

  it("a share of host RAM, split among the sim devices", function()
    local a = child_ok(LIMITS, {"--devices", "sim:4", "--device-memory", "1%"})
    local b = child_ok('dl.configure{devices = "sim:4", device_memory_fraction = 0.01}\n' .. LIMITS)
    local c = child_ok('dl.configure{devices = "sim:2", device_memory = "1%"}\n' .. LIMITS)
    local la, lb = tonumber(a:match("^%d+")), tonumber(b:match("^%d+"))
    local lc = tonumber(c:match("^%d+"))
    assert.are.equal(la, lb)
    assert.is_true(la > 0 and la % 4096 == 0)
    assert.is_true(math.abs(lc - 2 * la) <= 8192, a .. c) -- half the devices, twice the share
  end)

  it("bad values name what was wrong and what was expected", function()
    local _, err, status = child("print(1)", {"--device-preallocate", "maybe"})
    assert.are.equal(1, status)
    assert.truthy(err:find('dlrun: ValueError: invalid preallocation "maybe" (expected true or '
                           .. 'false)', 1, true), err)
    _, err, status = child("print(1)", nil, {DLRUN_PINNED_HOST_MEMORY = "0%"})
    assert.are.equal(1, status)
    assert.truthy(err:find('DLRUN_PINNED_HOST_MEMORY: invalid memory share "0%" (expected a '
                           .. 'percentage of host RAM above 0 and at most 100, e.g. "25%")', 1,
                           true), err)
    local out = child_ok([[
      for _, o in ipairs{{device_memory = "1MiB", device_memory_fraction = 0.5},
                         {pinned_host_memory_fraction = 2}, {device_preallocate = "yes"},
                         {pinned_host_memory = "25%", pinned_host_memory_fraction = 0.25}} do
        local ok, e = pcall(dl.configure, o)
        print(e.name .. ": " .. e.message)
      end
    ]])
    assert.are.equal(
      "ValueError: configure: device_memory and device_memory_fraction are both set (expected "
        .. "one of them)\n"
        .. "ValueError: configure: pinned_host_memory_fraction must be above 0 and at most 1, "
        .. "got 2\n"
        .. "TypeError: configure: option device_preallocate must be true or false, got string\n"
        .. "ValueError: configure: pinned_host_memory and pinned_host_memory_fraction are both "
        .. "set (expected one of them)\n", out)
  end)

  it("a setting given once the runtime runs is refused, naming it", function()
    local out = child_ok([[
      dl.configure{devices = "sim:2", device_memory = "1MiB"}
      local n = #dl.devices()
      for _, o in ipairs{{pinned_host_memory = "2MiB"}, {device_preallocate = true},
                         {device_memory_fraction = 0.1}, {device_memory = "1MiB"},
                         {device_preallocate = false}} do
        local ok, e = pcall(dl.configure, o)
        print(ok and "accepted" or e.message)
      end
    ]])
    local R = "configure must be called before the runtime is first used (it is already "
              .. "running with devices sim:2,cpu:1): "
    local lines = {}
    for l in out:gmatch("[^\n]+") do lines[#lines + 1] = l end
    assert.are.equal(5, #lines)
    assert.truthy(lines[1]:find(R .. "pinned_host_memory cannot change once it runs (it is ", 1,
                                true), lines[1])
    assert.are.equal(R .. "device_preallocate cannot change once it runs (it is false)", lines[2])
    assert.are.equal(R .. "device_memory_fraction cannot change once it runs (it is 1.00MiB per "
                     .. "sim device)", lines[3])
    assert.are.equal("accepted", lines[4]) -- what it already is
    assert.are.equal("accepted", lines[5])
  end)
end)

describe("memory snapshots", function()
  it("list every block with the live array holding it, and match the arrays", function()
    local d0, d1 = dl.devices()[1], dl.devices()[2]
    -- Arrays earlier specs left for the collector hold blocks with the same
    -- shardings: those allocated now are counted, not those held before.
    collectgarbage(); collectgarbage()
    local held = {}
    for _, b in ipairs(d1:memory_snapshot().segments[1].blocks) do
      if b.state == "allocated" then held[b.offset] = true end
    end
    local before0 = #d0:memory_snapshot().segments[1].blocks
    local mesh = dl.make_mesh({2}, {"x"}, {d0, d1})
    local x = dl.zeros({16, 8}, "float32", dl.NamedSharding(mesh, dl.P("x")))
    local y = dl.ones({3, 5}, "int16", d1)
    x:block_until_ready(); y:block_until_ready()
    local mine = {}
    for _, b in ipairs(d1:memory_snapshot().segments[1].blocks) do
      if b.state == "allocated" and not held[b.offset] and (b.sharding == tostring(x.sharding)
                                     or b.sharding == tostring(y.sharding)) then
        mine[#mine + 1] = b
      end
    end
    table.sort(mine, function(a, b) return a.dtype < b.dtype end)
    assert.are.equal(2, #mine)
    local function row(b) return {b.dtype, b.shape, b.size, b.requested_size, b.owner} end
    assert.are.same({"float32", {16, 8}, 256, 256, "array"}, row(mine[1]))
    assert.are.same({"int16", {3, 5}, 256, 30, "array"}, row(mine[2]))
    -- blocks tile the segment in address order
    local snap = d1:memory_snapshot()
    local at = 0
    for _, b in ipairs(snap.segments[1].blocks) do
      assert.are.equal(at, b.offset)
      at = at + b.size
    end
    assert.are.equal(snap.bytes_limit, at)
    assert.are.equal(snap.segments[1].size, at)
    x:delete(); y:delete()
    assert.are.equal(before0, #d0:memory_snapshot().segments[1].blocks)
  end)

  it("show an export as the owner once its array is gone", function()
    local out = child_ok([[
      local d = dl.devices()[1]
      local x = dl.arange(64, "float32", d)
      local cap = x:__dlpack__{max_version = {1, 0}} -- shares (a legacy capsule copies)
      x:delete()
      local b = d:memory_snapshot().segments[1].blocks[1]
      print(b.state, b.owner, b.dtype, b.size, b.requested_size)
      print(#dl.host_device():memory_snapshot("pinned_host").segments[1].blocks)
    ]], {"--devices", "sim:1"})
    assert.are.equal("allocated\texport\tfloat32\t256\t256\n1\n", out)
  end)

  it("check their arguments", function()
    local d = dl.devices()[1]
    expect_error("TypeError", {contains = "empty_cache"}, dl.empty_cache, 1)
    expect_error("TypeError", {contains = "release_unused"}, d.release_unused, d, "device")
    expect_error("ValueError", "reset_peak_memory_stats: unknown memory kind 'x' (expected "
                 .. "\"device\" or \"pinned_host\")", d.reset_peak_memory_stats, d, "x")
    expect_error("ValueError", "memory_snapshot: unknown memory kind 'host' (expected \"device\" "
                 .. "or \"pinned_host\")", d.memory_snapshot, d, "host")
    expect_error("TypeError", {contains = "memory_snapshot: argument 1 (self) must be a Device"},
                 d.memory_snapshot, 5)
  end)
end)

describe("peak reset and giving memory back", function()
  it("reset_peak_memory_stats, release_unused and empty_cache", function()
    local out = child_ok(([[
      local d = dl.devices()[1]
      local x = dl.zeros({MiB}, "uint8", d); x:block_until_ready()
      local y = dl.zeros({1024}, "uint8", d); y:block_until_ready()
      x:delete()
      local s = d:memory_stats()
      print(s.peak_bytes_in_use, s.bytes_reserved, s.largest_alloc_size)
      d:reset_peak_memory_stats()
      s = d:memory_stats()
      print(s.peak_bytes_in_use, s.largest_alloc_size)
      print(d:release_unused(), d:release_unused())
      print(d:memory_stats().bytes_reserved)
      y:delete()
      print(dl.empty_cache(), dl.empty_cache())
    ]]):gsub("MiB", tostring(MiB)), {"--devices", "sim:1", "--device-memory", "4MiB"})
    assert.are.equal(("%d\t%d\t%d\n1024\t1024\n%d\t0\n%d\n4096\t0\n")
                     :format(MiB + 1024, MiB + 1024, MiB, MiB, MiB + 1024), out)
  end)
end)

describe("out-of-memory advice", function()
  it("names the setting of pinned_host memory and the capacity that would fit", function()
    local out = child_ok([[
      local s = dl.SingleDeviceSharding(dl.devices()[1], {memory_kind = "pinned_host"})
      local ok, e = pcall(dl.zeros, {200000}, "uint8", s)
      print(e.message)
    ]], {"--devices", "sim:1", "--pinned-host-memory", "64KiB"})
    assert.are.equal("Out of memory on SimDevice(id=0) pinned_host memory while allocating "
                     .. "200000 bytes (195.31KiB): 0 bytes in use of a 65536 byte limit (0B of "
                     .. "64.00KiB); the largest free block is 65536 bytes (64.00KiB) and 0 bytes "
                     .. "(0B) are reserved but unallocated; raise pinned_host_memory "
                     .. "(dl.configure, --pinned-host-memory, DLRUN_PINNED_HOST_MEMORY) to at "
                     .. "least 200704 bytes (196.00KiB).\n", out)
  end)
end)
