-- runs: every-platform
-- ipc-off: no
-- devices: 8
-- needs: none

-- Devices, device specs, configuration and memory statistics (README.md,
-- "Devices and memory"; docs/lua-api.md, "Runtime and devices").
--
-- The busted process itself runs on the default runtime ("auto": 8 sim
-- devices and the host cpu device; DLRUN_DEVICES unset). Everything that needs
-- another device configuration, a known memory capacity, or a runtime that
-- has not been used yet (configure) runs in a fresh `dlrun` process.

local helpers = require "helpers"
local dl = require "dlrun"

local run_code = helpers.run_code

local expect_error = require("helpers").expect_error

-- ---------------------------------------------------------------------------
-- Child processes
-- ---------------------------------------------------------------------------

-- Put in front of every child chunk: `dl`, `emit(value)` (writes the value as
-- a Lua constructor, read back by `child`) and `catch(f, ...)` (a pcall whose
-- result is a plain table that emit can carry).
local PRELUDE = [[
local dl = require "dlrun"
local function ser(v)
  local t = type(v)
  if t == "table" then
    local parts = {}
    for k, x in pairs(v) do parts[#parts + 1] = "[" .. ser(k) .. "]=" .. ser(x) end
    return "{" .. table.concat(parts, ",") .. "}"
  elseif t == "number" then
    if math.type(v) == "integer" then return string.format("%d", v) end
    return string.format("%.17g", v)
  elseif t == "string" then
    return string.format("%q", v)
  elseif t == "boolean" or t == "nil" then
    return tostring(v)
  end
  return string.format("%q", tostring(v))
end
function emit(v) io.write(ser(v)) end
function catch(f, ...)
  local ok, e = pcall(f, ...)
  if ok then return {ok = true} end
  if type(e) == "table" then
    return {ok = false, name = e.name, message = e.message, str = tostring(e)}
  end
  return {ok = false, raw = tostring(e)}
end
function stats(d, kind) return d:memory_stats(kind) end
]]

-- Children start from a clean environment: an empty DLRUN_DEVICES or
-- DLRUN_DEVICE_MEMORY counts as unset, so whatever the caller exported is
-- neutralised unless a test sets it.
local function child_env(extra)
  local env = {DLRUN_DEVICES = "", DLRUN_DEVICE_MEMORY = ""}
  for k, v in pairs(extra or {}) do env[k] = v end
  return env
end

-- Run `body` (after PRELUDE) in a fresh dlrun with command-line `options` and
-- environment `env`; it must succeed. Returns the value it emit()ted.
local function child(body, options, env)
  local out, err, status = run_code(PRELUDE .. body, options, child_env(env))
  assert(status == 0, ("child exited with %s:\n%s"):format(tostring(status), err))
  local f = assert(load("return " .. out, "=child output", "t", {}))
  return f()
end

-- Run `body` (after PRELUDE) and return stdout, stderr, status whatever happens.
local function child_raw(body, options, env)
  return run_code(PRELUDE .. body, options, child_env(env))
end

-- Run `code` under the system lua5.4 with this process's module paths and
-- environment `env` (as child_env makes it); a module built with sanitizers
-- gets their runtimes preloaded. Returns stdout, stderr, status.
local function plain_lua(code, env)
  local saved = helpers.exe
  helpers.exe = "lua5.4"
  local full = child_env(env)
  full.LUA_PATH, full.LUA_CPATH = package.path, package.cpath
  full.LUA_INIT, full.LUA_INIT_5_4 = "", ""
  local module = assert(package.searchpath("dlrun.core", package.cpath), "dlrun.core not built")
  for k, v in pairs(helpers.sanitizer_env(module)) do full[k] = v end
  local out, err, status = helpers.run({"-e", code}, nil, full)
  helpers.exe = saved
  return out, err, status
end

-- A `catch` result from a child must be the dlrun error `name` with exactly
-- `message`.
local function assert_caught(r, name, message)
  assert.is_table(r)
  assert.is_false(r.ok, "expected " .. name .. " but the call succeeded")
  assert.are.equal(name, r.name)
  assert.are.equal(message, r.message)
  assert.are.equal(name .. ": " .. message, r.str)
end

-- The first line of `text`.
local function first_line(text) return (text:match("^[^\n]*")) end

local MiB = 1024 * 1024
local KiB = 1024

local STATS_KEYS = {
  "bytes_in_use", "peak_bytes_in_use", "bytes_limit", "num_allocs",
  "largest_free_block_bytes", "bytes_reserved", "largest_alloc_size", "fragmentation",
}

local SORTED_STATS_KEYS = {table.unpack(STATS_KEYS)}
table.sort(SORTED_STATS_KEYS)

local function sorted_keys(t)
  local ks = {}
  for k in pairs(t) do ks[#ks + 1] = k end
  table.sort(ks)
  return ks
end

local function round_up_256(n) return (n + 255) // 256 * 256 end

-- ---------------------------------------------------------------------------
-- The device list of the suite's own (default) runtime
-- ---------------------------------------------------------------------------

describe("dl.devices", function()
  it("lists the 8 devices of the default platform, ordered by id", function()
    local ds = dl.devices()
    assert.are.equal(8, #ds)
    for i, d in ipairs(ds) do
      assert.are.equal(i - 1, d.id)
      assert.are.equal(helpers.platform, d.platform)
      assert.are.equal(0, d.process_index)
    end
  end)

  it("dl.devices(platform) is the default list and dl.devices(nil) is too", function()
    local a, b, c = dl.devices(), dl.devices(helpers.platform), dl.devices(nil)
    assert.are.equal(8, #b)
    assert.are.equal(8, #c)
    for i = 1, 8 do
      assert.is_true(rawequal(a[i], b[i]))
      assert.is_true(rawequal(a[i], c[i]))
    end
  end)

  it("dl.devices('cpu') has exactly the host cpu device", function()
    local cpus = dl.devices("cpu")
    assert.are.equal(1, #cpus)
    assert.are.equal(0, cpus[1].id)
    assert.are.equal("cpu", cpus[1].platform)
    assert.are.equal(0, cpus[1].process_index)
  end)

  it("returns a fresh list each call (changing it does not change the runtime)", function()
    local ds = dl.devices()
    ds[1], ds[9] = nil, "junk"
    local again = dl.devices()
    assert.are.equal(8, #again)
    assert.are.equal(0, again[1].id)
    assert.is_nil(again[9])
  end)

  it("devices are userdata named Device", function()
    local d = dl.devices()[1]
    assert.are.equal("userdata", type(d))
    assert.are.equal("Device", getmetatable(d).__name)
  end)

  it("an unknown field of a device is an AttributeError; a key that is no name is nil", function()
    local d = dl.devices()[1]
    helpers.expect_error("AttributeError", "'Device' object has no attribute 'nonexistent'",
                         function() return d.nonexistent end)
    assert.is_nil(d[1])
  end)

  it("tostring gives ClassDevice(id=N) (SimDevice, OpenclDevice) and CpuDevice(id=N)", function()
    local ds = dl.devices()
    assert.are.equal(helpers.class .. "(id=0)", tostring(ds[1]))
    assert.are.equal(helpers.class .. "(id=3)", tostring(ds[4]))
    assert.are.equal(helpers.class .. "(id=7)", tostring(ds[8]))
    assert.are.equal("CpuDevice(id=0)", tostring(dl.devices("cpu")[1]))
  end)

  describe("interning", function()
    it("the same device is the same Lua value on every call", function()
      local a, b = dl.devices(), dl.devices()
      for i = 1, #a do
        assert.is_true(rawequal(a[i], b[i]))
        assert.is_true(a[i] == b[i])
      end
      assert.is_false(rawequal(a[1], a[2]))
      assert.is_true(a[1] ~= a[2])
      assert.is_true(rawequal(dl.devices("cpu")[1], dl.devices("cpu")[1]))
    end)

    it("devices work as table keys", function()
      local t = {}
      for i, d in ipairs(dl.devices()) do t[d] = i end
      t[dl.devices("cpu")[1]] = "host"
      for i, d in ipairs(dl.devices()) do assert.are.equal(i, t[d]) end
      assert.are.equal("host", t[dl.devices("cpu")[1]])
      local n = 0
      for _ in pairs(t) do n = n + 1 end
      assert.are.equal(9, n)
    end)

    it("a device stays the same value across garbage collections", function()
      local weak = setmetatable({}, {__mode = "k"})
      weak[dl.devices()[5]] = true
      collectgarbage("collect")
      collectgarbage("collect")
      assert.is_true(weak[dl.devices()[5]])
    end)

    it("the device of an array is the interned device", function()
      local d = dl.devices()[3]
      local x = dl.zeros({2}, "float32", d)
      assert.is_true(rawequal(d, x:devices()[1]))
      x:delete()
    end)
  end)

  describe("errors", function()
    it("an unknown backend is JAX's RuntimeError listing the platforms present", function()
      expect_error("RuntimeError",
        "Unknown backend: 'gpu' requested, but no platforms that are instances of gpu are "
          .. "present. Platforms present are: " .. helpers.platform .. ",cpu",
        dl.devices, "gpu")
      expect_error("RuntimeError",
        "Unknown backend: '' requested, but no platforms that are instances of  are "
          .. "present. Platforms present are: " .. helpers.platform .. ",cpu",
        dl.devices, "")
    end)

    it("a non-string backend is a TypeError naming the function and the argument", function()
      expect_error("TypeError",
        'devices: argument 1 (backend) must be a platform name such as "sim" or "cpu", got number',
        dl.devices, 5)
      expect_error("TypeError",
        'devices: argument 1 (backend) must be a platform name such as "sim" or "cpu", got table',
        dl.devices, {"sim"})
      expect_error("TypeError",
        'devices: argument 1 (backend) must be a platform name such as "sim" or "cpu", got Device',
        dl.devices, dl.devices()[1])
    end)
  end)
end)

describe("dl.device_count", function()
  it("counts the default backend's devices and each platform's", function()
    assert.are.equal(8, dl.device_count())
    assert.are.equal(8, dl.device_count(helpers.platform))
    assert.are.equal(1, dl.device_count("cpu"))
    assert.are.equal(#dl.devices(), dl.device_count())
  end)

  it("an unknown backend is JAX's RuntimeError", function()
    expect_error("RuntimeError",
      "Unknown backend: 'tpu' requested, but no platforms that are instances of tpu are "
        .. "present. Platforms present are: " .. helpers.platform .. ",cpu",
      dl.device_count, "tpu")
  end)

  it("a non-string backend is a TypeError", function()
    expect_error("TypeError",
      'device_count: argument 1 (backend) must be a platform name such as "sim" or "cpu", got table',
      dl.device_count, {})
    expect_error("TypeError",
      'device_count: argument 1 (backend) must be a platform name such as "sim" or "cpu", got boolean',
      dl.device_count, true)
  end)
end)

describe("dl.default_backend", function()
  it("is the platform of the default devices", function()
    assert.are.equal(dl.devices()[1].platform, dl.default_backend())
  end)

  helpers.it_on("sim", "auto is sim:8 where no accelerator is found", "is sim on the default runtime",
                function() assert.are.equal("sim", dl.default_backend()) end)

  it("is cpu when there are only cpu devices (cpu:4)", function()
    local r = child([[
      local ds = dl.devices()
      local ids = {}
      for i, d in ipairs(ds) do ids[i] = d.id end
      emit{backend = dl.default_backend(), n = #ds, ncpu = dl.device_count("cpu"),
           platform = ds[1].platform, last = tostring(ds[4]), ids = ids,
           host_is_first = rawequal(ds[1], dl.devices("cpu")[1]),
           sim = catch(dl.devices, "sim")}
    ]], {"--devices", "cpu:4"})
    assert.are.equal("cpu", r.backend)
    assert.are.equal(4, r.n)
    assert.are.equal(4, r.ncpu)
    assert.are.equal("cpu", r.platform)
    assert.are.equal("CpuDevice(id=3)", r.last)
    assert.are.same({0, 1, 2, 3}, r.ids)
    assert.is_true(r.host_is_first)
    assert_caught(r.sim, "RuntimeError",
      "Unknown backend: 'sim' requested, but no platforms that are instances of sim are "
        .. "present. Platforms present are: cpu")
  end)

  -- JAX's default_backend() is the platform of jax.devices()[0]; the docs
  -- used to say "sim" whenever there were sim devices, which cuda:2,sim:2
  -- (default backend cuda) contradicted.
  local BUILD = helpers.exe:match("^(.*)/[^/]*$") or "build"
  local DOUBLE = BUILD .. "/tests/cuda-double/libcuda.so.1"
  local MIXES_ENV = {DLRUN_CUDA_LIBRARY = DOUBLE, CUDA_DOUBLE_DEVICES = "2",
                     POCL_DEVICES = "pthread pthread"}
  local function listed(platform)
    local out = helpers.run({"--list-devices"}, nil, child_env(MIXES_ENV))
    return (("\n" .. out):match("\n" .. platform .. " +([^\n]*)") or ""):match("^available") ~= nil
  end
  for _, case in ipairs {
    {"sim:2", "sim"}, {"cpu:2", "cpu"}, {"cpu:1,sim:2", "sim"}, {"cuda:2,sim:2", "cuda"},
    {"sim:2,cuda:2", "sim"}, {"cuda:2,cpu:1", "cuda"}, {"opencl:2,sim:2", "opencl"},
    {"sim:2,opencl:2", "sim"}, {"opencl:2,cuda:2", "opencl"}, {"cuda:2,opencl:2", "cuda"},
  } do
    it(("is the platform of dl.devices()[1] for %s: %s"):format(case[1], case[2]), function()
      for p in case[1]:gmatch("(%a+):") do
        if p ~= "sim" and p ~= "cpu" and not listed(p) then
          return pending(p .. " is not available here")
        end
      end
      local r = child("emit{dl.default_backend(), dl.devices()[1].platform}", {"--devices", case[1]},
                      MIXES_ENV)
      assert.are.same({case[2], case[2]}, r)
    end)
  end

  it("prefers the accelerators whatever their place in the spec (cpu:1,sim:2)", function()
    local r = child([[
      emit{backend = dl.default_backend(), n = #dl.devices(), first = tostring(dl.devices()[1]),
           ncpu = dl.device_count("cpu")}
    ]], {"--devices", "cpu:1,sim:2"})
    assert.are.same({backend = "sim", n = 2, first = "SimDevice(id=0)", ncpu = 1}, r)
  end)
end)

-- ---------------------------------------------------------------------------
-- Device specs: dl.configure{devices=}, DLRUN_DEVICES, dlrun --devices
-- ---------------------------------------------------------------------------

-- What a child reports about its devices.
local DESCRIBE_DEVICES = [[
  local function list(p)
    local out = {}
    for i, d in ipairs(dl.devices(p)) do out[i] = tostring(d) end
    return out
  end
  emit{sim = pcall(dl.devices, "sim") and list("sim") or {}, cpu = list("cpu"),
       backend = dl.default_backend(), n = dl.device_count()}
]]

local function names(prefix, n)
  local out = {}
  for i = 1, n do out[i] = ("%s(id=%d)"):format(prefix, i - 1) end
  return out
end

-- Good specs and the devices they give.
local GOOD_SPECS = {
  {"sim:8", {sim = names("SimDevice", 8), cpu = names("CpuDevice", 1), backend = "sim", n = 8}},
  {"cpu:4", {sim = {}, cpu = names("CpuDevice", 4), backend = "cpu", n = 4}},
  {"sim:8,cpu:2", {sim = names("SimDevice", 8), cpu = names("CpuDevice", 2), backend = "sim", n = 8}},
  -- what auto takes in this pass (helpers.auto: sim:8, or every CUDA device)
  {"auto", {sim = helpers.auto().platform == "sim" and names("SimDevice", 8) or {},
            cpu = names("CpuDevice", 1), backend = helpers.auto().platform, n = helpers.auto().n}},
  {" sim:2 , cpu:1 ", {sim = names("SimDevice", 2), cpu = names("CpuDevice", 1), backend = "sim", n = 2}},
  {"sim:2", {sim = names("SimDevice", 2), cpu = names("CpuDevice", 1), backend = "sim", n = 2}},
  {"cpu:3,sim:1", {sim = names("SimDevice", 1), cpu = names("CpuDevice", 3), backend = "sim", n = 1}},
}

local COUNT_HINT = "(expected an integer from 1 to 65536)"

-- Bad specs and their exact ValueError messages (src/device/spec.c).
local BAD_SPECS = {
  {"", 'empty device spec "" (expected e.g. "sim:8", "cpu:4", "sim:8,cpu:2" or "auto")'},
  {"sim:0", 'invalid device count "0" for sim in device spec "sim:0" ' .. COUNT_HINT},
  {"sim:-1", 'invalid device count "-1" for sim in device spec "sim:-1" ' .. COUNT_HINT},
  {"sim:x", 'invalid device count "x" for sim in device spec "sim:x" ' .. COUNT_HINT},
  {"sim:99999999", 'invalid device count "99999999" for sim in device spec "sim:99999999" '
                     .. COUNT_HINT},
  {"sim:", 'invalid device count "" for sim in device spec "sim:" ' .. COUNT_HINT},
  {"cpu:0", 'invalid device count "0" for cpu in device spec "cpu:0" ' .. COUNT_HINT},
  {"gpu:2", 'unknown platform "gpu" in device spec "gpu:2" (expected '
             .. helpers.known_platforms() .. ', or auto)'},
  {"sim:2,sim:3", 'platform sim appears twice in device spec "sim:2,sim:3"'},
  {"sim:8,,cpu:1", 'invalid device spec "sim:8,,cpu:1": empty entry'},
  {"sim:2,", 'invalid device spec "sim:2,": empty entry'},
  {"auto,sim:2", 'invalid device spec "auto,sim:2": "auto" must stand alone'},
  {"sim:65536,cpu:1", 'device spec "sim:65536,cpu:1" asks for 65537 devices (at most 65536)'},
}

describe("device specs", function()
  describe("through dl.configure{devices=}", function()
    for _, case in ipairs(GOOD_SPECS) do
      it(("%q gives the expected devices"):format(case[1]), function()
        local r = child(("dl.configure{devices = %q}\n"):format(case[1]) .. DESCRIBE_DEVICES)
        assert.are.same(case[2], r)
      end)
    end

    for _, case in ipairs(BAD_SPECS) do
      it(("%q is a ValueError and leaves the default configuration"):format(case[1]), function()
        local r = child(([[
          local err = catch(dl.configure, {devices = %q})
          emit{err = err, n = #dl.devices()}
        ]]):format(case[1]))
        assert_caught(r.err, "ValueError", case[2])
        assert.are.equal(8, r.n)
      end)
    end
  end)

  describe("through DLRUN_DEVICES", function()
    for _, case in ipairs(GOOD_SPECS) do
      it(("%q gives the expected devices"):format(case[1]), function()
        local r = child(DESCRIBE_DEVICES, nil, {DLRUN_DEVICES = case[1]})
        assert.are.same(case[2], r)
      end)
    end

    it("empty counts as unset: the default auto devices", function()
      local r = child(DESCRIBE_DEVICES, nil, {DLRUN_DEVICES = ""})
      assert.are.same(GOOD_SPECS[4][2], r)
    end)

    -- Checked when dlrun starts, as --devices is: the
    -- script never runs.
    for _, case in ipairs(BAD_SPECS) do
      if case[1] ~= "" then
        it(("%q is refused before the script runs, naming the variable"):format(case[1]), function()
          local out, err, status = child_raw('print("ran")', nil, {DLRUN_DEVICES = case[1]})
          assert.are.equal("", out)
          assert.are.equal("dlrun: ValueError: DLRUN_DEVICES: " .. case[2] .. "\n", err)
          assert.are.equal(1, status)
        end)
      end
    end

    it("is refused before the script runs even when the script never uses a device", function()
      local out, err, status = helpers.run({"-e", "print(1)"}, nil,
                                           {DLRUN_DEVICES = "bogus", DLRUN_DEVICE_MEMORY = ""})
      assert.are.equal("", out)
      assert.are.equal('dlrun: ValueError: DLRUN_DEVICES: unknown platform "bogus" in device '
                         .. 'spec "bogus" (expected ' .. helpers.known_platforms()
                         .. ', or auto)\n', err)
      assert.are.equal(1, status)
    end)

    it("under plain lua5.4, a bad spec fails at the module's first use", function()
      local out, err, status = plain_lua('local dl = require "dlrun"; print("loaded"); '
                                           .. 'local ok, e = pcall(dl.devices); print(ok, e)',
                                         {DLRUN_DEVICES = "sim:0"})
      assert.are.equal("", err)
      assert.are.equal(0, status)
      assert.are.equal("loaded\nfalse\tValueError: DLRUN_DEVICES: " .. BAD_SPECS[2][2] .. "\n",
                       out)
    end)
  end)

  describe("through dlrun --devices", function()
    for _, case in ipairs(GOOD_SPECS) do
      it(("%q gives the expected devices"):format(case[1]), function()
        local r = child(DESCRIBE_DEVICES, {"--devices", case[1]})
        assert.are.same(case[2], r)
      end)
    end

    it("accepts the --devices=SPEC form", function()
      local r = child(DESCRIBE_DEVICES, {"--devices=sim:3"})
      assert.are.equal(3, r.n)
    end)

    for _, case in ipairs(BAD_SPECS) do
      it(("%q is refused before the script runs"):format(case[1]), function()
        local out, err, status = child_raw('print("ran")', {"--devices", case[1]})
        assert.are.equal("", out)
        assert.are.equal("dlrun: ValueError: " .. case[2] .. "\n", err)
        assert.are.equal(1, status)
      end)
    end
  end)

  describe("precedence", function()
    it("--devices wins over DLRUN_DEVICES", function()
      local r = child(DESCRIBE_DEVICES, {"--devices", "sim:2"}, {DLRUN_DEVICES = "sim:3"})
      assert.are.equal(2, r.n)
    end)

    it("a bad DLRUN_DEVICES does not matter when --devices is given", function()
      local r = child(DESCRIBE_DEVICES, {"--devices", "sim:2"}, {DLRUN_DEVICES = "bogus"})
      assert.are.equal(2, r.n)
    end)

    it("dl.configure before first use wins over DLRUN_DEVICES", function()
      local r = child('dl.configure{devices = "sim:2"}\n' .. DESCRIBE_DEVICES, nil,
                      {DLRUN_DEVICES = "sim:3"})
      assert.are.equal(2, r.n)
    end)
  end)

  describe("the host cpu device", function()
    it("is always there: sim:2 has one cpu device, CpuDevice(id=0)", function()
      local r = child([[
        local cpus = dl.devices("cpu")
        emit{n = #cpus, name = tostring(cpus[1]), id = cpus[1].id,
             host = rawequal(dl.host_device(), cpus[1])}
      ]], {"--devices", "sim:2"})
      assert.are.same({n = 1, name = "CpuDevice(id=0)", id = 0, host = true}, r)
    end)

    it("is the first cpu device when several are asked for", function()
      local r = child([[
        emit{n = dl.device_count("cpu"), host = rawequal(dl.host_device(), dl.devices("cpu")[1])}
      ]], {"--devices", "sim:8,cpu:2"})
      assert.are.same({n = 2, host = true}, r)
    end)
  end)

  describe("thousands of sim devices", function()
    it("sim:4096 starts, lists 4096 devices in id order and uses the last, quickly", function()
      local t0 = os.time()
      local r = child([[
        local ds = dl.devices()
        local ordered = true
        for i, d in ipairs(ds) do
          if d.id ~= i - 1 or d.platform ~= "sim" then ordered = false end
        end
        local x = dl.ones({4}, "float32", ds[4096])
        local threads
        local f = io.open("/proc/self/status")
        if f then
          for line in f:lines() do threads = threads or tonumber(line:match("^Threads:%s+(%d+)")) end
          f:close()
        end
        emit{n = #ds, count = dl.device_count(), ordered = ordered, last = tostring(ds[4096]),
             values = x:tolist(), on = tostring(x:devices()[1]), ncpu = dl.device_count("cpu"),
             threads = threads}
      ]], {"--devices", "sim:4096"})
      local elapsed = os.time() - t0
      assert.are.equal(4096, r.n)
      assert.are.equal(4096, r.count)
      assert.is_true(r.ordered)
      assert.are.equal("SimDevice(id=4095)", r.last)
      assert.are.same({1, 1, 1, 1}, r.values)
      assert.are.equal("SimDevice(id=4095)", r.on)
      assert.are.equal(1, r.ncpu)
      assert(elapsed <= 5, ("sim:4096 took %d s"):format(elapsed))
      -- No thread per idle device (docs/architecture.md, "Streams, events and workers"): far fewer
      -- threads than devices.
      if r.threads then assert(r.threads < 100, ("%d threads"):format(r.threads)) end
    end)
  end)
end)

-- ---------------------------------------------------------------------------
-- dl.configure
-- ---------------------------------------------------------------------------

local RUNNING_DEFAULT =
  "configure must be called before the runtime is first used (it is already running with "
  .. "devices " .. helpers.spec .. ")"

local CONFIGURE_KEYS = "devices, device_memory, device_memory_fraction, device_preallocate, "
  .. "pinned_host_memory, pinned_host_memory_fraction, pinned_host_preallocate, host_memory, "
  .. "host_memory_fraction"

describe("dl.configure", function()
  describe("after first use", function()
    it("a different device spec is a RuntimeError naming the running spec", function()
      expect_error("RuntimeError", RUNNING_DEFAULT, dl.configure, {devices = "sim:2"})
      expect_error("RuntimeError", RUNNING_DEFAULT, dl.configure, {devices = "cpu:4"})
      assert.are.equal(8, #dl.devices())
    end)

    it("a different device memory is a RuntimeError", function()
      local r = child([[
        dl.configure{devices = "sim:2", device_memory = "1MiB"}
        local n = #dl.devices()
        emit{n = n, err = catch(dl.configure, {device_memory = "2MiB"}),
             limit = stats(dl.devices()[1]).bytes_limit}
      ]])
      assert.are.equal(2, r.n)
      assert_caught(r.err, "RuntimeError",
        "configure must be called before the runtime is first used (it is already running "
          .. "with devices sim:2,cpu:1): device_memory cannot change once it runs (it is "
          .. "1.00MiB per sim device)")
      assert.are.equal(MiB, r.limit)
    end)

    it("the same configuration again is accepted", function()
      local r = child([[
        dl.configure{devices = "sim:2", device_memory = "64MiB"}
        local n = #dl.devices()
        emit{n = n,
             same = catch(dl.configure, {devices = "sim:2", device_memory = "64MiB"}),
             devices_only = catch(dl.configure, {devices = "sim:2"}),
             memory_as_number = catch(dl.configure, {device_memory = 64 * 1024 * 1024}),
             empty = catch(dl.configure, {}),
             after = #dl.devices()}
      ]])
      assert.are.equal(2, r.n)
      assert.is_true(r.same.ok)
      assert.is_true(r.devices_only.ok)
      assert.is_true(r.memory_as_number.ok)
      assert.is_true(r.empty.ok)
      assert.are.equal(2, r.after)
    end)

    it("configure{} changes nothing and is accepted in the running suite", function()
      dl.configure{}
      assert.are.equal(8, #dl.devices())
    end)

    -- The same configuration spelt differently, or coming from DLRUN_DEVICES /
    -- --devices / the default, is still the same configuration: the runtime is
    -- running with exactly the devices asked for.
    it("the running spec in its canonical form is accepted (sim:2 then sim:2,cpu:1)", function()
      local r = child([[
        dl.configure{devices = "sim:2"}
        local n = #dl.devices()
        emit{n = n, again = catch(dl.configure, {devices = "sim:2,cpu:1"})}
      ]])
      assert.are.equal(2, r.n)
      assert.is_true(r.again.ok, r.again.str)
    end)

    it("the spec the runtime got from DLRUN_DEVICES is accepted", function()
      local r = child([[
        local n = #dl.devices()
        emit{n = n, again = catch(dl.configure, {devices = "sim:2"})}
      ]], nil, {DLRUN_DEVICES = "sim:2"})
      assert.are.equal(2, r.n)
      assert.is_true(r.again.ok, r.again.str)
    end)

    it("the spec the runtime got from --devices is accepted", function()
      local r = child([[
        local n = #dl.devices()
        emit{n = n, again = catch(dl.configure, {devices = "sim:2"})}
      ]], {"--devices", "sim:2"})
      assert.are.equal(2, r.n)
      assert.is_true(r.again.ok, r.again.str)
    end)

    it("auto is accepted by a runtime running the default auto devices", function()
      local r = child(([[
        local n = #dl.devices()
        emit{n = n, auto = catch(dl.configure, {devices = "auto"}),
             same = catch(dl.configure, {devices = %q})}
      ]]):format(helpers.auto().platform .. ":" .. helpers.auto().n))
      assert.are.equal(helpers.auto().n, r.n)
      assert.is_true(r.auto.ok, r.auto.str)
      assert.is_true(r.same.ok, r.same.str)
    end)
  end)

  describe("before first use", function()
    it("can be called more than once; the last call wins", function()
      local r = child([[
        dl.configure{devices = "sim:2"}
        dl.configure{devices = "sim:3"}
        emit{n = #dl.devices()}
      ]])
      assert.are.equal(3, r.n)
    end)

    it("a failed configure applies nothing (bad device_memory with good devices)", function()
      local r = child([[
        local err = catch(dl.configure, {devices = "sim:2", device_memory = "lots"})
        emit{err = err, n = #dl.devices()}
      ]])
      assert.are.equal("ValueError", r.err.name)
      assert.are.equal(8, r.n)
    end)
  end)

  describe("argument checking", function()
    it("an unknown option key is a ValueError", function()
      expect_error("ValueError", "configure: unknown option 'foo' (expected " .. CONFIGURE_KEYS .. ")",
                   dl.configure, {foo = 1})
      expect_error("ValueError", "configure: unknown option 'device' (expected " .. CONFIGURE_KEYS .. ")",
                   dl.configure, {device = "sim:2"})
      expect_error("ValueError", "configure: unknown option '1' (expected " .. CONFIGURE_KEYS .. ")",
                   dl.configure, {"sim:2"})
    end)

    it("options that are not a table are a TypeError", function()
      expect_error("TypeError",
        "configure: argument 1 (options) must be a table {devices=, device_memory=, ...}, got string",
        dl.configure, "sim:2")
      expect_error("TypeError",
        "configure: argument 1 (options) must be a table {devices=, device_memory=, ...}, got no value",
        dl.configure)
    end)

    it("devices that is not a string is a TypeError", function()
      expect_error("TypeError",
        'configure: option devices must be a device spec string such as "sim:8", got number',
        dl.configure, {devices = 8})
      expect_error("TypeError",
        'configure: option devices must be a device spec string such as "sim:8", got table',
        dl.configure, {devices = {"sim:8"}})
    end)

    it("device_memory that is neither a number nor a string is a TypeError", function()
      expect_error("TypeError",
        'configure: option device_memory must be a number of bytes, a size string such as '
          .. '"2GiB" or a share of host RAM such as "25%", got boolean',
        dl.configure, {device_memory = true})
    end)

    it("device_memory numbers must be whole and positive", function()
      expect_error("ValueError", "configure: device_memory must be a whole number of bytes, got 1.5",
                   dl.configure, {device_memory = 1.5})
      -- A float in the fewest digits that read back as it (errors.describe).
      expect_error("ValueError", "configure: device_memory must be a whole number of bytes, got "
                   .. "1.8446744073709552e+19", dl.configure, {device_memory = 2^64})
      expect_error("ValueError", "configure: device_memory must be positive, got -1",
                   dl.configure, {device_memory = -1})
      expect_error("ValueError", "configure: device_memory must be positive, got 0",
                   dl.configure, {device_memory = 0})
    end)
  end)
end)

-- ---------------------------------------------------------------------------
-- Device memory capacity: configure{device_memory=}, DLRUN_DEVICE_MEMORY,
-- dlrun --device-memory
-- ---------------------------------------------------------------------------

local SIZE_HINT = ' (expected a positive number with an optional unit: B, KiB, MiB, GiB, TiB, '
  .. 'kB, MB, GB, TB; e.g. "2GiB")'

-- Good sizes and the bytes_limit they give (capacity rounded down to 256).
local GOOD_SIZES = {
  {"64MiB", 64 * MiB},
  {"1MiB", MiB},
  {"1.5MiB", 1536 * KiB},
  {"2GB", 2000000000},
  {" 64 MiB ", 64 * MiB},
  {"4096B", 4096},
  {"4KiB", 4096},
  {"5000", 4864},
  {"4.9e3", 4864},
}

-- Sizes below the 4 KiB minimum, and the byte counts they name: refused on
-- every way in rather than silently rounded (README.md, "Devices and memory").
local TOO_SMALL = {
  {"1e3", 1000},
  {"1KB", 1000},
  {"1KiB", 1024},
  {"4095B", 4095},
  {"256", 256},
}
local function too_small(bytes)
  return ("device memory of %d bytes is too small (at least 4096 bytes)"):format(bytes)
end

-- Bad size strings and their exact messages (src/device/spec.c).
local BAD_SIZES = {
  {"abc", 'invalid memory size "abc"' .. SIZE_HINT},
  {"", 'invalid memory size ""' .. SIZE_HINT},
  {"0", 'invalid memory size "0"' .. SIZE_HINT},
  {"-5", 'invalid memory size "-5"' .. SIZE_HINT},
  {"0.1", 'invalid memory size "0.1"' .. SIZE_HINT},
  {"10XB", 'invalid memory size "10XB"' .. SIZE_HINT},
  {"0x100", 'invalid memory size "0x100"' .. SIZE_HINT},
  {"2 GiB extra", 'invalid memory size "2 GiB extra"' .. SIZE_HINT},
  {"nan", 'invalid memory size "nan"' .. SIZE_HINT},
  {"99999999TiB", 'memory size "99999999TiB" is too large'},
}

local SIM_LIMITS = [[
  local limits = {}
  for i, d in ipairs(dl.devices("sim")) do limits[i] = stats(d).bytes_limit end
  emit(limits)
]]

describe("device memory capacity", function()
  describe("through dl.configure{device_memory=}", function()
    for _, case in ipairs(GOOD_SIZES) do
      it(("%q gives every sim device a bytes_limit of %d"):format(case[1], case[2]), function()
        local r = child(("dl.configure{devices = 'sim:3', device_memory = %q}\n"):format(case[1])
                        .. SIM_LIMITS)
        assert.are.same({case[2], case[2], case[2]}, r)
      end)
    end

    it("a number of bytes works (67108864) and is rounded down to 256 (5000 -> 4864)", function()
      local r = child("dl.configure{devices = 'sim:2', device_memory = 64 * 1024 * 1024}\n"
                      .. SIM_LIMITS)
      assert.are.same({64 * MiB, 64 * MiB}, r)
      r = child("dl.configure{devices = 'sim:2', device_memory = 5000}\n" .. SIM_LIMITS)
      assert.are.same({4864, 4864}, r)
      r = child("dl.configure{devices = 'sim:1', device_memory = 1048576.0}\n" .. SIM_LIMITS)
      assert.are.same({MiB}, r)
    end)

    it("leaves the pinned_host memory and cpu devices alone", function()
      local r = child([[
        dl.configure{device_memory = "1MiB"}
        emit{pinned = stats(dl.devices()[1], "pinned_host").bytes_limit,
             cpu = stats(dl.host_device()).bytes_limit}
      ]])
      assert(r.pinned > MiB, r.pinned)
      assert(r.cpu > MiB, r.cpu)
    end)

    for _, case in ipairs(BAD_SIZES) do
      it(("%q is a ValueError"):format(case[1]), function()
        local r = child(("emit(catch(dl.configure, {device_memory = %q}))"):format(case[1]))
        assert_caught(r, "ValueError", case[2])
      end)
    end

    for _, case in ipairs(TOO_SMALL) do
      it(("%q (%d bytes) is a ValueError from configure itself"):format(case[1], case[2]), function()
        local r = child(([[
          local as_string = catch(dl.configure, {device_memory = %q})
          local as_number = catch(dl.configure, {device_memory = %d})
          emit{as_number = as_number, as_string = as_string, use = catch(dl.devices),
               limit = stats(dl.devices()[1]).bytes_limit}
        ]]):format(case[1], case[2]))
        assert_caught(r.as_string, "ValueError", too_small(case[2]))
        assert_caught(r.as_number, "ValueError", too_small(case[2]))
        -- and the refused value was not kept: the runtime starts with the default.
        assert.is_true(r.use.ok, r.use.str)
        assert(r.limit > 64 * MiB, r.limit)
      end)
    end
  end)

  describe("through DLRUN_DEVICE_MEMORY", function()
    for _, case in ipairs(GOOD_SIZES) do
      it(("%q gives a bytes_limit of %d"):format(case[1], case[2]), function()
        local r = child(SIM_LIMITS, nil, {DLRUN_DEVICES = "sim:2", DLRUN_DEVICE_MEMORY = case[1]})
        assert.are.same({case[2], case[2]}, r)
      end)
    end

    for _, case in ipairs(BAD_SIZES) do
      if case[1] ~= "" then
        it(("%q is refused before the script runs, naming the variable"):format(case[1]), function()
          local out, err, status = child_raw('print("ran")', nil, {DLRUN_DEVICE_MEMORY = case[1]})
          assert.are.equal("", out)
          assert.are.equal("dlrun: ValueError: DLRUN_DEVICE_MEMORY: " .. case[2] .. "\n", err)
          assert.are.equal(1, status)
        end)
      end
    end

    it("under plain lua5.4, a bad size fails at the module's first use", function()
      local out, err, status = plain_lua('local ok, e = pcall(require("dlrun").devices); print(e)',
                                         {DLRUN_DEVICE_MEMORY = "1KB"})
      assert.are.equal("", err)
      assert.are.equal(0, status)
      assert.are.equal("ValueError: DLRUN_DEVICE_MEMORY: " .. too_small(1000) .. "\n", out)
    end)

    it("empty counts as unset", function()
      local r = child("emit(stats(dl.devices()[1]).bytes_limit)", nil,
                      {DLRUN_DEVICE_MEMORY = ""})
      local default = child("emit(stats(dl.devices()[1]).bytes_limit)")
      assert.are.equal(default, r)
    end)

    for _, case in ipairs(TOO_SMALL) do
      it(("%q is refused before the script runs, naming the variable"):format(case[1]), function()
        local out, err, status = child_raw('print("ran")', nil, {DLRUN_DEVICE_MEMORY = case[1]})
        assert.are.equal("", out)
        assert.are.equal("dlrun: ValueError: DLRUN_DEVICE_MEMORY: " .. too_small(case[2]) .. "\n",
                         err)
        assert.are.equal(1, status)
      end)
    end

    it("dl.configure{device_memory=} wins over it", function()
      local r = child("dl.configure{devices = 'sim:1', device_memory = 1048576}\n" .. SIM_LIMITS,
                      nil, {DLRUN_DEVICE_MEMORY = "2MiB"})
      assert.are.same({MiB}, r)
    end)
  end)

  describe("through dlrun --device-memory", function()
    for _, case in ipairs(GOOD_SIZES) do
      it(("%q gives a bytes_limit of %d"):format(case[1], case[2]), function()
        local r = child(SIM_LIMITS, {"--devices", "sim:2", "--device-memory", case[1]})
        assert.are.same({case[2], case[2]}, r)
      end)
    end

    it("accepts the --device-memory=SIZE form", function()
      local r = child(SIM_LIMITS, {"--devices=sim:1", "--device-memory=1MiB"})
      assert.are.same({MiB}, r)
    end)

    for _, case in ipairs(BAD_SIZES) do
      it(("%q is refused before the script runs"):format(case[1]), function()
        local out, err, status = child_raw('print("ran")', {"--device-memory", case[1]})
        assert.are.equal("", out)
        assert.are.equal("dlrun: ValueError: " .. case[2] .. "\n", err)
        assert.are.equal(1, status)
      end)
    end

    for _, case in ipairs(TOO_SMALL) do
      it(("%q is refused before the script runs"):format(case[1]), function()
        local out, err, status = child_raw('print("ran")', {"--device-memory", case[1]})
        assert.are.equal("", out)
        assert.are.equal("dlrun: ValueError: " .. too_small(case[2]) .. "\n", err)
        assert.are.equal(1, status)
      end)
    end

    it("wins over DLRUN_DEVICE_MEMORY", function()
      local r = child(SIM_LIMITS, {"--devices", "sim:1", "--device-memory", "1MiB"},
                      {DLRUN_DEVICE_MEMORY = "2MiB"})
      assert.are.same({MiB}, r)
    end)
  end)
end)

-- ---------------------------------------------------------------------------
-- Default capacities and over-commit (README.md, "Devices and memory"): by default the
-- memories of all devices together fit in host RAM; an explicit device memory
-- that over-commits is said once on stderr.
-- ---------------------------------------------------------------------------

-- Host RAM as the rule counts it: physical memory (MemTotal).
local function host_ram()
  local f = assert(io.open("/proc/meminfo"))
  local kib = tonumber(f:read("a"):match("MemTotal:%s*(%d+) kB"))
  f:close()
  return kib * 1024
end

local function round_4k(n) return n // 4096 * 4096 end

-- Every memory of every device: {platform, kind, bytes_limit} in device order.
local ALL_LIMITS = [[
  local out = {}
  for _, p in ipairs{"sim", "cpu"} do
    local ok, ds = pcall(dl.devices, p)
    for _, d in ipairs(ok and ds or {}) do
      for _, k in ipairs{"device", "pinned_host"} do
        out[#out + 1] = {p, k, stats(d, k).bytes_limit}
      end
    end
  end
  emit(out)
]]

-- The rule's capacity of each memory for `nsim` sim and `ncpu` cpu devices:
-- the sim devices' device memories share half of RAM (16 GiB at most each),
-- the pinned_host memories a quarter of the rest, and the cpu devices' device
-- memories (the host memory) what is left.
local function expected_limits(nsim, ncpu, sim_each)
  local ram, half = host_ram(), host_ram() // 2
  local other = round_4k((nsim > 0 and ram - half or ram) // 4 // (nsim + ncpu))
  local sim = sim_each or nsim > 0 and math.min(round_4k(half // nsim), 16 * 1024 * MiB) or nil
  local promised = nsim * ((sim or 0) + other) + ncpu * other
  local host = ram > promised and (ram - promised) // ncpu >= other
               and round_4k((ram - promised) // ncpu) or other
  local out = {}
  for _ = 1, nsim do
    out[#out + 1] = {"sim", "device", sim}
    out[#out + 1] = {"sim", "pinned_host", other}
  end
  for _ = 1, ncpu do
    out[#out + 1] = {"cpu", "device", host}
    out[#out + 1] = {"cpu", "pinned_host", other}
  end
  return out
end

local function total(limits)
  local sum = 0
  for _, l in ipairs(limits) do sum = sum + l[3] end
  return sum
end

-- dlrun_format_bytes: "1.00TiB".
local function human(bytes)
  local units, v, u = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}, bytes, 0
  if bytes < 1024 then return bytes .. "B" end
  while v >= 1024 and u < 6 do v, u = v / 1024, u + 1 end
  return ("%.2f%s"):format(v, units[u])
end

describe("default capacities", function()
  for _, case in ipairs{{"sim:8", 8, 1}, {"sim:4096", 4096, 1}, {"sim:8,cpu:2", 8, 2},
                        {"cpu:4", 0, 4}} do
    it(("of %s add up to at most host RAM, by the documented rule"):format(case[1]), function()
      local r = child(ALL_LIMITS, {"--devices", case[1]})
      assert(total(r) <= host_ram(), ("%d > %d"):format(total(r), host_ram()))
      assert.are.same(expected_limits(case[2], case[3]), r)
    end)
  end

  it("are the same from DLRUN_DEVICES (auto is sim:8)", function()
    if helpers.auto().platform ~= "sim" then
      return pending("auto is " .. helpers.auto().spec .. " here; its sim:8 capacities are "
                     .. "checked where auto is sim:8")
    end
    local r = child(ALL_LIMITS, nil, {DLRUN_DEVICES = "auto"})
    assert.are.same(expected_limits(8, 1), r)
  end)

  it("with an explicit device memory, the sim devices' device memory changes and the host "
     .. "memory takes what they no longer hold", function()
    local r = child(ALL_LIMITS, {"--devices", "sim:2", "--device-memory", "64MiB"})
    assert.are.same(expected_limits(2, 1, 64 * MiB), r)
    assert.is_true(r[5][3] > expected_limits(2, 1)[5][3])
  end)
end)

-- The host memory (each cpu device's device memory, where device_get lands)
-- used to get the same small share as every pinned_host memory (1.18 GiB of
-- a 24 GiB machine beside sim:8), so a device_get of a 2 GiB array failed
-- with most of RAM free; it now holds what no other memory is promised, and
-- host_memory sets it on every way in.
describe("the host memory", function()
  local HOST = "emit{stats(dl.host_device()).bytes_limit, #dl.devices('cpu')}"

  it("holds by default the RAM no other memory is promised (sim:8: over a third of RAM)",
     function()
    local r = child(HOST, {"--devices", "sim:8"})
    local want = expected_limits(8, 1)
    assert.are.same({want[17][3], 1}, r)
    assert.is_true(r[1] > host_ram() // 3, r[1])
    assert.is_true(total(want) <= host_ram())
  end)

  for _, case in ipairs {
    {"--host-memory", {"--devices", "sim:2,cpu:2", "--host-memory", "64MiB"}, nil, ""},
    {"DLRUN_HOST_MEMORY", {"--devices", "sim:2,cpu:2"}, {DLRUN_HOST_MEMORY = "64MiB"}, ""},
    {"dl.configure{host_memory=}", nil, nil,
     "dl.configure{devices = 'sim:2,cpu:2', host_memory = '64MiB'}\n"},
    {"dl.configure{host_memory=} in bytes", nil, nil,
     "dl.configure{devices = 'sim:2,cpu:2', host_memory = 67108864}\n"},
  } do
    it("is set by " .. case[1] .. " on each cpu device, the others keep theirs", function()
      local r = child(case[4] .. ALL_LIMITS, case[2], case[3])
      local want = expected_limits(2, 2)
      want[5][3], want[7][3] = 64 * MiB, 64 * MiB
      assert.are.same(want, r)
    end)
  end

  it("may be a share of host RAM the cpu devices split", function()
    local want = round_4k(host_ram() // 4 // 2)
    for _, case in ipairs {{{"--devices", "cpu:2", "--host-memory", "25%"}},
                           {{"--devices", "cpu:2"}, {DLRUN_HOST_MEMORY = "25%"}},
                           {nil, nil, "dl.configure{devices = 'cpu:2', host_memory_fraction = 0.25}\n"},
                           {nil, nil, "dl.configure{devices = 'cpu:2', host_memory = '25%'}\n"}} do
      assert.are.same({want, 2}, child((case[3] or "") .. HOST, case[1], case[2]))
    end
  end)

  it("refuses bad values as the other capacities do", function()
    assert_caught(child("emit(catch(dl.configure, {host_memory = '1KB'}))"), "ValueError",
                  "host memory of 1000 bytes is too small (at least 4096 bytes)")
    assert_caught(child("emit(catch(dl.configure, {host_memory = 1 << 20, "
                        .. "host_memory_fraction = 0.5}))"), "ValueError",
                  "configure: host_memory and host_memory_fraction are both set (expected one "
                  .. "of them)")
    local out, err, status = child_raw("emit(1)", nil, {DLRUN_HOST_MEMORY = "lots"})
    assert.are.equal(1, status)
    assert.are.equal("", out)
    assert.truthy(err:find("DLRUN_HOST_MEMORY: ", 1, true), err)
  end)

  it("cannot change once the runtime runs; the same value is accepted", function()
    local r = child([[
      dl.configure{devices = "sim:2", host_memory = "64MiB"}
      local _ = dl.devices()
      emit{catch(dl.configure, {host_memory = "64MiB"}), catch(dl.configure, {host_memory = "32MiB"})}
    ]])
    assert.is_true(r[1].ok)
    assert_caught(r[2], "RuntimeError",
                  "configure must be called before the runtime is first used (it is already "
                  .. "running with devices sim:2,cpu:1): host_memory cannot change once it runs "
                  .. "(it is 64.00MiB per cpu device)")
  end)

  it("running out names host_memory and the size that would fit", function()
    local r = child([[
      dl.configure{devices = "sim:2", host_memory = "1MiB"}
      local m = dl.make_mesh({2}, {"x"})
      local x = dl.zeros({512 * 1024}, "float32", dl.NamedSharding(m, dl.P("x")))
      emit(catch(dl.device_get, x))
    ]])
    assert_caught(r, "ResourceExhaustedError",
                  "Out of memory on CpuDevice(id=0) while allocating 2097152 bytes (2.00MiB): 0 "
                  .. "bytes in use of a 1048576 byte limit (0B of 1.00MiB); the largest free "
                  .. "block is 1048576 bytes (1.00MiB) and 0 bytes (0B) are reserved but "
                  .. "unallocated; raise host_memory (dl.configure, --host-memory, "
                  .. "DLRUN_HOST_MEMORY) to at least 2097152 bytes (2.00MiB).")
  end)

  it("an explicit host memory that over-commits host RAM is said once on stderr", function()
    local out, err, status = child_raw("emit(stats(dl.host_device()).bytes_limit)",
                                       {"--devices", "sim:2", "--host-memory", "1TiB"})
    assert.are.equal(0, status, err)
    assert.are.equal(tostring(1024 * 1024 * MiB), out)
    local sum = 1024 * 1024 * MiB
    for _, l in ipairs(expected_limits(2, 1)) do
      if not (l[1] == "cpu" and l[2] == "device") then sum = sum + l[3] end
    end
    assert.are.equal(("dlrun: warning: host memory of 1.00TiB on each of 1 cpu devices "
                      .. "over-commits host RAM: the memories of all devices add up to %s, more "
                      .. "than the %s of RAM, so filling them may get the process killed instead "
                      .. "of raising ResourceExhaustedError\n"):format(human(sum),
                                                                        human(host_ram())), err)
  end)
end)

describe("an explicit device memory that over-commits host RAM", function()
  -- 8 sim devices of 1 TiB each, with the defaults of the other memories.
  local function note()
    local others = expected_limits(8, 1, 1024 * 1024 * MiB)
    local sum = 8 * 1024 * 1024 * MiB
    for _, l in ipairs(others) do
      if not (l[1] == "sim" and l[2] == "device") then sum = sum + l[3] end
    end
    return ("dlrun: warning: device memory of 1.00TiB on each of 8 sim devices over-commits "
            .. "host RAM: the memories of all devices add up to %s, more than the %s of RAM, so "
            .. "filling them may get the process killed instead of raising "
            .. "ResourceExhaustedError\n"):format(human(sum), human(host_ram()))
  end

  -- Uses the runtime several ways; the note must still come once.
  local USE = [[
    local a = #dl.devices()
    local b = dl.device_count()
    local x = dl.zeros({4}, "float32"); x:block_until_ready()
    emit{a, b, stats(dl.devices()[1]).bytes_limit}
  ]]
  local ONE_TIB = 1024 * 1024 * MiB

  it("is said once on stderr when it comes from --device-memory", function()
    local out, err, status = child_raw(USE, {"--devices", "sim:8", "--device-memory", "1TiB"})
    assert.are.equal(0, status, err)
    assert.are.equal(("{[1]=8,[2]=8,[3]=%d}"):format(ONE_TIB), out)
    assert.are.equal(note(), err)
  end)

  it("is said once on stderr when it comes from DLRUN_DEVICE_MEMORY", function()
    local out, err, status = child_raw(USE, nil, {DLRUN_DEVICES = "sim:8",
                                                  DLRUN_DEVICE_MEMORY = "1TiB"})
    assert.are.equal(0, status, err)
    assert.are.equal(("{[1]=8,[2]=8,[3]=%d}"):format(ONE_TIB), out)
    assert.are.equal(note(), err)
  end)

  it("is said once on stderr when it comes from dl.configure{device_memory=}", function()
    local out, err, status = child_raw('dl.configure{devices = "sim:8", device_memory = "1TiB"}\n'
                                       .. USE)
    assert.are.equal(0, status, err)
    assert.are.equal(("{[1]=8,[2]=8,[3]=%d}"):format(ONE_TIB), out)
    assert.are.equal(note(), err)
  end)

  it("is said when the capacities add up past 2^64: the total saturates, never wraps", function()
    -- 4 x 2^62 bytes wrapped to the other memories' few GiB, and the note was skipped.
    -- (Nothing is allocated: 4 EiB of address space cannot be reserved.)
    local out, err, status = child_raw("emit{#dl.devices(), stats(dl.devices()[1]).bytes_limit}",
                                       {"--devices", "sim:4", "--device-memory", "4194304TiB"})
    assert.are.equal(0, status, err)
    assert.are.equal(("{[1]=4,[2]=%d}"):format(1 << 62), out)
    assert.are.equal(("dlrun: warning: device memory of 4.00EiB on each of 4 sim devices "
                      .. "over-commits host RAM: the memories of all devices add up to at least "
                      .. "16.00EiB, more than the %s of RAM, so filling them may get the process "
                      .. "killed instead of raising ResourceExhaustedError\n")
                     :format(human(host_ram())), err)
  end)

  it("is not said when the explicit size fits, nor for the defaults", function()
    local _, err, status = child_raw(USE, {"--devices", "sim:8", "--device-memory", "64MiB"})
    assert.are.equal(0, status, err)
    assert.are.equal("", err)
    _, err, status = child_raw(USE, {"--devices", "sim:8"})
    assert.are.equal(0, status, err)
    assert.are.equal("", err)
  end)
end)

-- ---------------------------------------------------------------------------
-- memory_stats
-- ---------------------------------------------------------------------------

-- Options of the children below: 1 MiB sim devices.
local ONE_MIB = {"--device-memory", "1MiB"}

describe("Device:memory_stats", function()
  it("has exactly the documented keys, as integers (fragmentation a number)", function()
    for _, d in ipairs{dl.devices()[1], dl.devices()[8], dl.devices("cpu")[1]} do
      local s = d:memory_stats()
      assert.are.same(SORTED_STATS_KEYS, sorted_keys(s))
      for _, k in ipairs(STATS_KEYS) do
        if k == "fragmentation" then
          assert.are.equal("number", type(s[k]))
        else
          assert.are.equal("integer", math.type(s[k]), k)
          assert(s[k] >= 0, k)
        end
      end
      assert.are.equal(0, s.bytes_limit % 256)
    end
  end)

  it("a fresh 1 MiB device: exact values, nothing reserved", function()
    local r = child("emit(stats(dl.devices()[1]))", ONE_MIB)
    assert.are.same({
      bytes_in_use = 0, peak_bytes_in_use = 0, bytes_limit = MiB, num_allocs = 0,
      largest_free_block_bytes = MiB, bytes_reserved = 0, largest_alloc_size = 0,
      fragmentation = 0,
    }, r)
  end)

  it("an allocation of N bytes adds N rounded up to 256 and one allocation", function()
    local sizes = {1, 255, 256, 257, 1000, 4000, 65536, 100001}
    local r = child(([[
      local d = dl.devices()[1]
      local out = {}
      for i, n in ipairs{%s} do
        local before = stats(d)
        local x = dl.zeros({n}, "uint8")
        x:block_until_ready()
        local during = stats(d)
        x:delete()
        local after = stats(d)
        out[i] = {during.bytes_in_use - before.bytes_in_use,
                  during.num_allocs - before.num_allocs,
                  after.bytes_in_use - before.bytes_in_use,
                  after.num_allocs - before.num_allocs}
      end
      emit(out)
    ]]):format(table.concat(sizes, ",")), ONE_MIB)
    for i, n in ipairs(sizes) do
      assert.are.same({round_up_256(n), 1, 0, 1}, r[i], "size " .. n)
    end
  end)

  it("counts nbytes, not elements (float32[1000] is 4000 -> 4096 bytes)", function()
    local r = child([[
      local d = dl.devices()[1]
      local x = dl.ones({10, 100}, "float32")
      x:block_until_ready()
      emit{nbytes = x.nbytes, in_use = stats(d).bytes_in_use}
    ]], ONE_MIB)
    assert.are.same({nbytes = 4000, in_use = 4096}, r)
  end)

  it("a zero-size array allocates nothing", function()
    local r = child([[
      local d = dl.devices()[1]
      local x = dl.zeros({0, 4}, "float32")
      emit(stats(d))
    ]], ONE_MIB)
    assert.are.equal(0, r.bytes_in_use)
    assert.are.equal(0, r.num_allocs)
    assert.are.equal(0, r.bytes_reserved)
  end)

  it("tracks peak, largest allocation and reservation high-water mark", function()
    local r = child([[
      local d = dl.devices()[1]
      local a = dl.zeros({1000}, "uint8")   -- 1024
      local b = dl.zeros({5000}, "uint8")   -- 5120
      a:block_until_ready(); b:block_until_ready()
      local both = stats(d)
      a:delete(); b:delete()
      local none = stats(d)
      local c = dl.zeros({256}, "uint8")
      c:block_until_ready()
      local small = stats(d)
      emit{both = both, none = none, small = small}
    ]], ONE_MIB)
    local reserved = helpers.reserved(6144, MiB) -- on cuda: the pool in a granule
    assert.are.same({
      bytes_in_use = 6144, peak_bytes_in_use = 6144, bytes_limit = MiB, num_allocs = 2,
      largest_free_block_bytes = MiB - 6144, bytes_reserved = reserved, largest_alloc_size = 5120,
      fragmentation = 0,
    }, r.both)
    assert.are.same({
      bytes_in_use = 0, peak_bytes_in_use = 6144, bytes_limit = MiB, num_allocs = 2,
      largest_free_block_bytes = MiB, bytes_reserved = reserved, largest_alloc_size = 5120,
      fragmentation = 0,
    }, r.none)
    assert.are.equal(256, r.small.bytes_in_use)
    assert.are.equal(6144, r.small.peak_bytes_in_use)
    assert.are.equal(3, r.small.num_allocs)
    assert.are.equal(5120, r.small.largest_alloc_size)
    assert.are.equal(reserved, r.small.bytes_reserved)
  end)

  it("each device has its own pool", function()
    local r = child([[
      local ds = dl.devices()
      local x = dl.zeros({1000}, "uint8", ds[3])
      x:block_until_ready()
      emit{d0 = stats(ds[1]), d2 = stats(ds[3]), d7 = stats(ds[8])}
    ]], ONE_MIB)
    assert.are.equal(0, r.d0.bytes_in_use)
    assert.are.equal(0, r.d0.num_allocs)
    assert.are.equal(1024, r.d2.bytes_in_use)
    assert.are.equal(1, r.d2.num_allocs)
    assert.are.equal(0, r.d7.bytes_in_use)
  end)

  it("reports fragmentation as 1 - largest free block / free bytes", function()
    local r = child([[
      local d = dl.devices()[1]
      local q = 256 * 1024
      local xs = {}
      for i = 1, 4 do xs[i] = dl.zeros({q}, "uint8"); xs[i]:block_until_ready() end
      local full = stats(d)
      xs[2]:delete(); xs[4]:delete()
      local holes = stats(d)
      emit{full = full, holes = holes}
    ]], ONE_MIB)
    assert.are.equal(MiB, r.full.bytes_in_use)
    assert.are.equal(0, r.full.largest_free_block_bytes)
    assert.are.equal(0, r.full.fragmentation)
    assert.are.equal(MiB // 2, r.holes.bytes_in_use)
    assert.are.equal(MiB // 4, r.holes.largest_free_block_bytes)
    assert.is_true(math.abs(r.holes.fragmentation - 0.5) < 1e-12, tostring(r.holes.fragmentation))
  end)

  describe("memory kinds", function()
    it("memory_stats('device') is the default kind", function()
      local r = child([[
        local d = dl.devices()[1]
        local x = dl.zeros({1000}, "uint8"); x:block_until_ready()
        emit{default = stats(d), device = stats(d, "device")}
      ]], ONE_MIB)
      assert.are.same(r.default, r.device)
      assert.are.equal(1024, r.device.bytes_in_use)
    end)

    it("memory_stats('pinned_host') is a separate pool with the same keys", function()
      local r = child([[
        local d = dl.devices()[1]
        local x = dl.zeros({1000}, "uint8"); x:block_until_ready()
        emit(stats(d, "pinned_host"))
      ]], ONE_MIB)
      assert.are.same(SORTED_STATS_KEYS, sorted_keys(r))
      assert.are.equal(0, r.bytes_in_use)
      assert.are.equal(0, r.num_allocs)
      assert.are.equal(0, r.bytes_reserved)
      assert(r.bytes_limit > MiB, r.bytes_limit)
      assert.are.equal(r.bytes_limit, r.largest_free_block_bytes)
    end)

    it("an unknown memory kind is a ValueError", function()
      local d = dl.devices()[1]
      expect_error("ValueError",
        [[memory_stats: unknown memory kind 'host' (expected "device" or "pinned_host")]],
        d.memory_stats, d, "host")
    end)

    it("a non-string memory kind is a TypeError", function()
      local d = dl.devices()[1]
      expect_error("TypeError",
        [[memory_stats: argument 2 (memory_kind) must be "device" or "pinned_host", got number]],
        d.memory_stats, d, 1)
    end)

    it("calling it on something that is not a Device is a TypeError", function()
      local d = dl.devices()[1]
      expect_error("TypeError", "memory_stats: argument 1 (self) must be a Device, got number",
                   d.memory_stats, 3)
      expect_error("TypeError", "memory_stats: argument 1 (self) must be a Device, got table",
                   d.memory_stats, {})
    end)
  end)

  describe("lazy reservation", function()
    it("no sim device reserves memory until it is used, even with 1 TiB each", function()
      local r = child([[
        local out = {}
        for i, d in ipairs(dl.devices()) do
          local s = stats(d)
          out[i] = {s.bytes_reserved, s.bytes_limit, s.largest_free_block_bytes}
        end
        emit(out)
      ]], {"--device-memory", "1TiB"})
      assert.are.equal(8, #r)
      for i = 1, 8 do
        assert.are.same({0, 1024 * 1024 * MiB, 1024 * 1024 * MiB}, r[i])
      end
    end)

    it("using one device reserves on that device only", function()
      local r = child([[
        local ds = dl.devices()
        local x = dl.zeros({1000}, "uint8", ds[2]); x:block_until_ready()
        local out = {}
        for i, d in ipairs(ds) do out[i] = stats(d).bytes_reserved end
        emit(out)
      ]], ONE_MIB)
      assert.are.same({0, helpers.reserved(1024, MiB), 0, 0, 0, 0, 0, 0}, r)
    end)
  end)
end)

-- ---------------------------------------------------------------------------
-- Out of memory
-- ---------------------------------------------------------------------------

local HINT = " (dl.configure, --device-memory, DLRUN_DEVICE_MEMORY)"

describe("out of device memory", function()
  it("a request larger than the device is a ResourceExhaustedError with the pool's state", function()
    local r = child([[
      local d = dl.devices()[1]
      local err = catch(dl.zeros, {1048577}, "uint8")
      emit{err = err, after = stats(d)}
    ]], ONE_MIB)
    assert_caught(r.err, "ResourceExhaustedError",
      "Out of memory on " .. helpers.auto_dev(0) .. " while allocating 1048577 bytes (1.00MiB): 0 bytes in use "
        .. "of a 1048576 byte limit (0B of 1.00MiB); the largest free block is 1048576 bytes "
        .. "(1.00MiB) and 0 bytes (0B) are reserved but unallocated; raise device_memory"
        .. "" .. HINT .. " to at least 2097152 bytes (2.00MiB).")
    assert.are.equal(0, r.after.bytes_in_use)
    assert.are.equal(0, r.after.num_allocs)
  end)

  it("names the request, bytes in use, the limit and the largest free block", function()
    local r = child([[
      local d = dl.devices()[1]
      local a = dl.zeros({600000}, "uint8"); a:block_until_ready()
      local before = stats(d)
      local err = catch(dl.zeros, {600000}, "uint8")
      emit{err = err, before = before, after = stats(d)}
    ]], ONE_MIB)
    assert_caught(r.err, "ResourceExhaustedError",
      "Out of memory on " .. helpers.auto_dev(0) .. " while allocating 600000 bytes (585.94KiB): 600064 bytes "
        .. "in use of a 1048576 byte limit (586.00KiB of 1.00MiB); the largest free block is "
        .. "448512 bytes (438.00KiB) and 0 bytes (0B) are reserved but unallocated; raise "
        .. "device_memory" .. HINT .. " to at least 2097152 bytes (2.00MiB).")
    -- the failed allocation changed nothing
    assert.are.same(r.before, r.after)
    assert.are.equal(600064, r.after.bytes_in_use)
    assert.are.equal(1, r.after.num_allocs)
  end)

  it("names the device it happened on", function()
    local r = child([[
      local ds = dl.devices()
      emit(catch(dl.zeros, {2 * 1024 * 1024}, "uint8", ds[3]))
    ]], ONE_MIB)
    assert_caught(r, "ResourceExhaustedError",
      "Out of memory on " .. helpers.auto_dev(2) .. " while allocating 2097152 bytes (2.00MiB): 0 bytes in use "
        .. "of a 1048576 byte limit (0B of 1.00MiB); the largest free block is 1048576 bytes "
        .. "(1.00MiB) and 0 bytes (0B) are reserved but unallocated; raise device_memory"
        .. "" .. HINT .. " to at least 2097152 bytes (2.00MiB).")
  end)

  it("freed neighbours coalesce, so a large allocation fits again", function()
    local r = child([[
      local d = dl.devices()[1]
      local q = 256 * 1024
      local xs = {}
      for i = 1, 4 do xs[i] = dl.zeros({q}, "uint8"); xs[i]:block_until_ready() end
      xs[2]:delete(); xs[4]:delete()
      local holes = stats(d)
      local refused = catch(dl.zeros, {2 * q}, "uint8")
      xs[3]:delete()
      local merged = stats(d)
      local half = catch(function()
        local y = dl.zeros({2 * q}, "uint8"); y:block_until_ready(); y:delete()
      end)
      xs[1]:delete()
      local empty = stats(d)
      local whole = catch(function()
        local y = dl.zeros({4 * q}, "uint8"); y:block_until_ready()
        local s = stats(d)
        y:delete()
        assert(s.bytes_in_use == 4 * q and s.largest_free_block_bytes == 0)
      end)
      emit{holes = holes, refused = refused, merged = merged, half = half, empty = empty,
           whole = whole, final = stats(d)}
    ]], ONE_MIB)
    assert.are.equal(MiB // 4, r.holes.largest_free_block_bytes)
    assert_caught(r.refused, "ResourceExhaustedError",
      "Out of memory on " .. helpers.auto_dev(0) .. " while allocating 524288 bytes (512.00KiB): 524288 bytes "
        .. "in use of a 1048576 byte limit (512.00KiB of 1.00MiB); the largest free block is "
        .. "262144 bytes (256.00KiB) and 524288 bytes (512.00KiB) are reserved but unallocated; "
        .. "the free memory is fragmented: free arrays no longer needed, or raise device_memory"
        .. "" .. HINT .. " to at least 2097152 bytes (2.00MiB).")
    assert.are.equal(MiB // 4, r.merged.bytes_in_use)
    assert.are.equal(3 * MiB // 4, r.merged.largest_free_block_bytes)
    assert.are.equal(0, r.merged.fragmentation)
    assert.is_true(r.half.ok, r.half.str or r.half.raw)
    assert.are.equal(0, r.empty.bytes_in_use)
    assert.are.equal(MiB, r.empty.largest_free_block_bytes)
    assert.is_true(r.whole.ok, r.whole.str or r.whole.raw)
    assert.are.equal(0, r.final.bytes_in_use)
    assert.are.equal(MiB, r.final.peak_bytes_in_use)
    assert.are.equal(MiB, r.final.largest_alloc_size)
  end)

  it("an uncaught out-of-memory error ends dlrun with status 1 and the message", function()
    local out, err, status = child_raw('dl.zeros({2 * 1024 * 1024}, "uint8")', ONE_MIB)
    assert.are.equal("", out)
    assert.are.equal(1, status)
    assert.are.equal(
      "dlrun: ResourceExhaustedError: Out of memory on " .. helpers.auto_dev(0) .. " while allocating 2097152 "
        .. "bytes (2.00MiB): 0 bytes in use of a 1048576 byte limit (0B of 1.00MiB); the largest "
        .. "free block is 1048576 bytes (1.00MiB) and 0 bytes (0B) are reserved but unallocated; "
        .. "raise device_memory" .. HINT .. " to at least 2097152 bytes (2.00MiB).",
      first_line(err))
  end)

  it("on the suite's own devices a request over the limit names device 0", function()
    local d = dl.devices()[1]
    local before = d:memory_stats()
    local n = before.bytes_limit + 1
    expect_error("ResourceExhaustedError",
      {contains = ("Out of memory on %s while allocating %d bytes ("):format(helpers.dev(0), n)},
      dl.zeros, {n}, "uint8")
    local after = d:memory_stats()
    assert.are.equal(before.num_allocs, after.num_allocs)
    assert.are.equal(before.bytes_limit, after.bytes_limit)
  end)
end)
