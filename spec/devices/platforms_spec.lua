-- runs: every-platform
-- ipc-off: no
-- devices: any
-- needs: ocl-icd

-- dl.platforms() and `dlrun --list-devices`: every platform dlrun knows,
-- in the order "auto" prefers them (modules' platforms, then sim and cpu),
-- then the modules that did not load, each with why.
local helpers = require "helpers"
local dl = require "dlrun"

local BUILD = helpers.exe:match("^(.*)/[^/]*$") or "build"
local NO_FILE = ": cannot open shared object file: No such file or directory"
-- The CUDA module is built everywhere; without a driver it is listed (first:
-- "auto" prefers it) with the loader's reason. The specs name a driver that
-- is not there, so that a machine with a GPU lists the same.
local NO_DRIVER = "/nonexistent/libcuda.so.1"
local MISSING_OPENCL = {DLRUN_OPENCL_MODULE = "/nonexistent/libdlrun_opencl.so",
                        DLRUN_CUDA_LIBRARY = NO_DRIVER}
local CUDA_LINE = "cuda    not available: " .. NO_DRIVER .. NO_FILE .. "\n"
local CUDA_ROW = "cuda\tCudaDevice\ttrue\tfalse\t0\t" .. NO_DRIVER .. NO_FILE .. "\n"

local function by_name(list)
  local t = {}
  for _, p in ipairs(list) do t[p.name] = p end
  return t
end

local function exists(path)
  local f = io.open(path)
  if f then f:close() end
  return f ~= nil
end

-- The test platform module of the C tests (spec/c/modules/), as "opencl".
local function test_module(env)
  env.DLRUN_OPENCL_MODULE = BUILD .. "/tests/libdlrun_test_platform.so"
  env.DLRUN_CUDA_LIBRARY = NO_DRIVER
  return env
end

-- dl.platforms() of a fresh dlrun (which finds modules beside itself), as
-- "name available devices reason" lines. It runs on the default devices
-- ("auto"), not the suite's: `env` may take the suite's platform away.
local function platforms_of(env)
  env.DLRUN_DEVICES = ""
  local out, err, status = helpers.run_code([[
    local dl = require "dlrun"
    for _, p in ipairs(dl.platforms()) do
      print(p.name, p.class_name, p.accelerator, p.available, p.devices, p.reason)
    end]], nil, env)
  assert.are.equal("", err)
  assert.is_true(status == 0 or status == true)
  return out
end

describe("dl.platforms()", function()
  it("lists sim and cpu, available with any number of devices", function()
    local p = by_name(dl.platforms())
    assert.are.same({name = "sim", class_name = "SimDevice", accelerator = true, available = true,
                     devices = 0}, p.sim)
    assert.are.same({name = "cpu", class_name = "CpuDevice", accelerator = false, available = true,
                     devices = 0}, p.cpu)
  end)

  it("lists a module that is not there, not available, with the loader's reason", function()
    assert.are.equal(
      CUDA_ROW
      .. "sim\tSimDevice\ttrue\ttrue\t0\tnil\n"
      .. "cpu\tCpuDevice\tfalse\ttrue\t0\tnil\n"
      .. "opencl\tOpenclDevice\ttrue\tfalse\t0\tDLRUN_OPENCL_MODULE: /nonexistent/libdlrun_opencl.so"
      .. NO_FILE .. "\n",
      platforms_of(MISSING_OPENCL))
  end)

  it("lists a module's platform first, with its devices", function()
    assert.are.equal(
      CUDA_ROW
      .. "opencl\tTestDevice\ttrue\ttrue\t4\tnil\n"
      .. "sim\tSimDevice\ttrue\ttrue\t0\tnil\n"
      .. "cpu\tCpuDevice\tfalse\ttrue\t0\tnil\n",
      platforms_of(test_module({DLRUN_TEST_PLATFORM_DEVICES = "4"})))
  end)

  it("says why a module's hardware is not there", function()
    assert.truthy(platforms_of(test_module({DLRUN_TEST_PLATFORM_DEVICES = "none"}))
                  :find("opencl\tTestDevice\ttrue\tfalse\t0\tno devices here (test)\n", 1, true))
    assert.truthy(platforms_of(test_module({DLRUN_TEST_PLATFORM_FAIL = "no ICD: -1001"}))
                  :find("opencl\tOpenclDevice\ttrue\tfalse\t0\tno ICD: -1001\n", 1, true))
  end)

  it("lists opencl whatever is installed: available with devices, or with a reason", function()
    local p = by_name(dl.platforms()).opencl
    assert.are.equal("opencl", p.name)
    assert.is_true(p.accelerator)
    if p.available then
      assert.is_true(p.devices > 0)
      assert.is_nil(p.reason)
    else
      assert.are.equal(0, p.devices)
      assert.are.equal("string", type(p.reason))
      assert.is_true(#p.reason > 0)
    end
  end)

  it("with no OpenCL driver (OCL_ICD_VENDORS=/nonexistent), opencl's reason names -1001", function()
    if not exists(BUILD .. "/libdlrun_opencl.so") then
      pending("the OpenCL module is not built (no OpenCL headers and ICD loader)")
      return
    end
    local out = platforms_of({OCL_ICD_VENDORS = "/nonexistent"})
    local line = out:match("opencl\t[^\n]*")
    assert.truthy(line and line:find("\tfalse\t0\t", 1, true), out)
    assert.truthy(line:find("-1001", 1, true), line)
  end)

  it("takes no arguments", function()
    helpers.expect_error("TypeError", "platforms: expected at most 0 arguments, got 1",
                         dl.platforms, "sim")
  end)
end)

describe("dlrun --list-devices", function()
  it("prints one line per platform and exits 0", function()
    local out, err, status = helpers.run({"--list-devices"}, nil, MISSING_OPENCL)
    assert.are.equal("", err)
    assert.is_true(status == 0 or status == true)
    assert.are.equal(
      CUDA_LINE
      .. "sim     available: any number of devices\n"
      .. "cpu     available: any number of devices\n"
      .. "opencl  not available: DLRUN_OPENCL_MODULE: /nonexistent/libdlrun_opencl.so" .. NO_FILE
      .. "\n", out)
  end)

  it("counts a module's devices", function()
    local out = helpers.run({"--list-devices"}, nil, test_module({DLRUN_TEST_PLATFORM_DEVICES = "4"}))
    assert.are.equal(CUDA_LINE .. "opencl  available: 4 devices\n"
                     .. "sim     available: any number of devices\n"
                     .. "cpu     available: any number of devices\n", out)
    out = helpers.run({"--list-devices"}, nil, test_module({DLRUN_TEST_PLATFORM_DEVICES = "1"}))
    assert.truthy(out:find("\nopencl  available: 1 device\n"), out)
    out = helpers.run({"--list-devices"}, nil, test_module({DLRUN_TEST_PLATFORM_DEVICES = "none"}))
    assert.truthy(out:find("\nopencl  not available: no devices here %(test%)\n"), out)
  end)

  it("is in --help", function()
    local out = helpers.run({"--help"})
    assert.truthy(out:find("\n  --list-devices        list the platforms dlrun knows", 1, true), out)
  end)
end)
