-- runs: every-platform
-- ipc-off: no
-- devices: any
-- needs: none

-- The CUDA platform from Lua (docs/cuda.md), in fresh dlrun processes on the
-- driver double of the tests (tests/cuda-double/libcuda.so.1, DLRUN_CUDA_LIBRARY;
-- configured by CUDA_DOUBLE_* variables). The whole suite also runs on
-- cuda:8 (scripts/run-tests.sh); these are the checks that only mean
-- something here: why the platform is absent, DLPack's kDLCUDA with the
-- stream protocol, __cuda_array_interface__, the VMM and cuMemAlloc pools,
-- peer and staged copies, driver failures.
local helpers = require "helpers"

local BUILD = helpers.exe:match("^(.*)/[^/]*$") or "build"
local DOUBLE = BUILD .. "/tests/cuda-double/libcuda.so.1"
local NO_FILE = ": cannot open shared object file: No such file or directory"

local function exists(path)
  local f = io.open(path)
  if f then f:close() end
  return f ~= nil
end
local here = exists(DOUBLE)

-- The environment of a child on the double, with `extra` variables.
local function env_of(extra)
  local env = {DLRUN_CUDA_LIBRARY = DOUBLE, CUDA_DOUBLE_DEVICES = "4"}
  for k, v in pairs(extra or {}) do env[k] = v end
  return env
end

-- Run `code` on cuda:2 (d: its devices); its output, asserting it succeeded.
local function run(code, extra, devices)
  local out, err, status = helpers.run_code(
    'local dl = require "dlrun"\nlocal d = dl.devices("cuda")\n' .. code,
    {"--devices", devices or "cuda:2"}, env_of(extra))
  assert.are.equal("", err)
  assert.is_true(status == 0 or status == true, out)
  return out
end

-- The one line `dlrun --devices cuda:1` prints when CUDA is absent.
local function absent(extra)
  local out, err, status = helpers.run({"--devices", "cuda:1", "-e", "print(1)"}, nil, extra)
  assert.are.equal("", out)
  assert.is_false(status == 0 or status == true)
  return err
end

local PREFIX = 'dlrun: ValueError: platform cuda in device spec "cuda:1" is not available on '
               .. "this machine: "

describe("the CUDA platform", function()
  it("without a driver library says why in one line", function()
    assert.are.equal(PREFIX .. "/nonexistent/libcuda.so.1" .. NO_FILE .. "\n",
                     absent({DLRUN_CUDA_LIBRARY = "/nonexistent/libcuda.so.1"}))
  end)

  it("with the toolkit's stub library (every call 34) says no driver is installed", function()
    if not here then return pending("the CUDA driver double is not built") end
    assert.are.equal(PREFIX .. "the CUDA driver is a stub library (CUDA_ERROR_STUB_LIBRARY, 34): "
                     .. "no NVIDIA driver is installed\n", absent(env_of({CUDA_DOUBLE_STUB = "1"})))
  end)

  it("with a driver but no device says so (CUDA_ERROR_NO_DEVICE, 100)", function()
    if not here then return pending("the CUDA driver double is not built") end
    assert.are.equal(PREFIX .. "no CUDA device (CUDA_ERROR_NO_DEVICE, 100)\n",
                     absent(env_of({CUDA_DOUBLE_DEVICES = "0"})))
  end)

  it("is listed first with its device count, and taken by auto", function()
    if not here then return pending("the CUDA driver double is not built") end
    local out = helpers.run({"--list-devices"}, nil, env_of({CUDA_DOUBLE_DEVICES = "3"}))
    assert.truthy(out:find("^cuda    available: 3 devices\n"), out)
    assert.are.equal("CudaDevice(id=0)\t3\n", run([[print(tostring(dl.devices()[1]), #dl.devices())]],
                                                  {CUDA_DOUBLE_DEVICES = "3"}, "auto"))
  end)

  it("exports device memory as (kDLCUDA, ordinal) and pinned_host memory as kDLCUDAHost", function()
    if not here then return pending("the CUDA driver double is not built") end
    local out = run([[
local a = dl.array({{1, 2, 3}, {4, 5, 6}}, "float32", d[2])
local c = a:__dlpack__{max_version = {1, 0}}
print(c.device[1], c.device[2], c.read_only, a:__dlpack_device__())
local p = dl.device_put(a, dl.SingleDeviceSharding(d[1], "pinned_host"))
print(p:__dlpack_device__())
print(table.concat(dl.from_dlpack(c):tolist()[2], ","))
]])
    assert.are.equal("2\t1\ttrue\t2\t1\n3\t0\n4.0,5.0,6.0\n", out)
  end)

  it("takes the stream protocol: -1, 1, 2 and a consumer's stream; refuses 0", function()
    if not here then return pending("the CUDA driver double is not built") end
    local out = run([[
local a = dl.arange(6, "int32", d[1])
for _, s in ipairs({-1, 1, 2}) do print(s, a:__dlpack__{stream = s}.device[1]) end
local w = dl.from_dlpack(a)   -- dlrun as the consumer passes its own stream
print(w.imported, table.concat(w:tolist(), ","))
local ok, e = pcall(a.__dlpack__, a, {stream = 0})
print(ok, e.name, e.message)
ok, e = pcall(a.__dlpack__, a, {stream = 7})
print(ok, e.name, e.message)
ok, e = pcall(a.__dlpack__, a, {stream = 4095})
print(ok, e.message:match("got %-?%d+$"))
]])
    assert.are.equal("-1\t2\n1\t2\n2\t2\nwrapped\t0,1,2,3,4,5\nfalse\tBufferError\t"
                     .. "stream=0 is ambiguous for arrays on CudaDevice(id=0) (the __dlpack__ "
                     .. "protocol disallows it): pass 1 (the legacy default stream), 2 (the "
                     .. "per-thread default stream), a CUstream, -1 (do not wait) or nil (wait "
                     .. "for the array)\n"
                     .. "false\tBufferError\tstream must be nil (wait for the array), -1 (do not "
                     .. "wait), 1 (the legacy default stream), 2 (the per-thread default stream) "
                     .. "or a CUstream (a pointer, 4096 or more: 3 to 4095 cannot be one) for "
                     .. "arrays on CudaDevice(id=0), got 7\nfalse\tgot 4095\n", out)
  end)

  it("gives __cuda_array_interface__ version 3 for single-device arrays, JAX's error for sharded ones",
     function()
    if not here then return pending("the CUDA driver double is not built") end
    local out = run([[
local a = dl.array({{1, 2, 3}, {4, 5, 6}}, "float32", d[2])
local i = a:__cuda_array_interface__()
print(i.typestr, i.version, i.shape[1], i.shape[2], #i.shape, i.data[2], i.strides, i.stream,
      math.type(i.data[1]), i.data[1] > 0, i.data[1] == a:__cuda_array_interface__().data[1])
for _, t in ipairs({"bool", "int8", "uint16", "int64", "float16", "bfloat16", "complex128",
                    "float8_e4m3fn", "float8_e8m0fnu"}) do
  io.write(dl.zeros({1}, t, d[1]):__cuda_array_interface__().typestr, " ")
end
print()
local m = dl.make_mesh({2}, {"x"}, d)
local s = dl.device_put(dl.arange(4, "float32"), dl.NamedSharding(m, dl.P("x")))
local ok, e = pcall(s.__cuda_array_interface__, s)
print(ok, e.name, e.message)
]])
    assert.are.equal("<f4\t3\t2\t3\t2\tfalse\tnil\tnil\tinteger\ttrue\ttrue\n"
                     .. "|b1 |i1 <u2 <i8 <f2 <V2 <c16 <V1 <V1 \n"
                     .. "false\tAttributeError\t__cuda_array_interface__() is supported only for "
                     .. "unsharded arrays.\n", out)
  end)

  it("refuses __cuda_array_interface__ on a CUDA device's pinned_host memory, naming the kind",
     function()
    if not here then return pending("the CUDA driver double is not built") end
    assert.are.equal("false\tValueError\t__cuda_array_interface__() is supported only for "
                     .. "arrays in CUDA device memory; this array is in pinned_host memory of "
                     .. "CudaDevice(id=1) (host memory, kDLCUDAHost)\n", run([[
local a = dl.zeros({2}, "float32", dl.SingleDeviceSharding(d[2], "pinned_host"))
local ok, e = pcall(a.__cuda_array_interface__, a)
print(ok, e.name, e.message)
]]))
  end)

  it("refuses __cuda_array_interface__ on another platform, naming it", function()
    local out, err = helpers.run_code([[
local dl = require "dlrun"
local a = dl.arange(3, "float32", dl.devices("sim")[1])
local ok, e = pcall(a.__cuda_array_interface__, a)
print(ok, e.name, e.message)]], {"--devices", "sim:1"})
    assert.are.equal("", err)
    assert.are.equal("false\tValueError\t__cuda_array_interface__() is supported only for arrays "
                     .. "on CUDA devices; this array is on SimDevice(id=0) (platform sim)\n", out)
  end)

  -- Values through every kind of fill and copy, on a pool over VMM
  -- (cuMemCreate) or over cuMemAlloc segments (CUDA_DOUBLE_NO_VMM), between
  -- peers or staged through pinned memory (CUDA_DOUBLE_NO_PEER).
  local VALUES = [[
local a = dl.arange(12, "float64", d[1])
local b = dl.device_put(a, d[2])
local c = dl.full({3}, 7, "int64", d[2])
local e = dl.full({2}, 1.5, "complex128", d[1])
local f = dl.arange(5, "bfloat16", d[2])
local h = dl.device_put(dl.arange(4, "uint8", d[2]), d[1])
print(table.concat(b:tolist(), ","), table.concat(c:tolist(), ","), table.concat(e:tolist()[2], ","),
      table.concat(f:tolist(), ","), table.concat(h:tolist(), ","))
]]
  local WANT = "0.0,1.0,2.0,3.0,4.0,5.0,6.0,7.0,8.0,9.0,10.0,11.0\t7,7,7\t1.5,0.0\t"
               .. "0.0,1.0,2.0,3.0,4.0\t0,1,2,3\n"
  for _, case in ipairs({
      {"VMM pools, peer copies", {}},
      {"cuMemAlloc pools (no VMM)", {CUDA_DOUBLE_NO_VMM = "1"}},
      {"copies staged through pinned memory (no peer access)", {CUDA_DOUBLE_NO_PEER = "all"}}}) do
    it("writes and moves the right values: " .. case[1], function()
      if not here then return pending("the CUDA driver double is not built") end
      assert.are.equal(WANT, run(VALUES, case[2]))
    end)
  end

  it("backs a VMM pool with cuMemCreate and a plain one with cuMemAlloc (their failures say)",
     function()
    if not here then return pending("the CUDA driver double is not built") end
    local code = [[
local ok, e = pcall(dl.zeros, {4}, "float32", d[1])
print(ok, e.name, e.message)
]]
    local function failed(call, bytes, purpose, err, extra)
      local env = {CUDA_DOUBLE_FAIL = call .. ":1" .. (err == 2 and ":2" or "")}
      for k, v in pairs(extra or {}) do env[k] = v end
      local name = err == 2 and "ResourceExhaustedError" or "RuntimeError"
      local code_name = err == 2 and "CUDA_ERROR_OUT_OF_MEMORY (2)" or "CUDA_ERROR_UNKNOWN (999)"
      assert.are.equal("false\t" .. name .. "\tCudaDevice(id=0): " .. call .. " of " .. bytes
                       .. " bytes (" .. purpose .. ", for a request of 16 bytes) failed: "
                       .. code_name .. "\n", run(code, env))
    end
    -- each call of the backing is named with the bytes it asked for: the
    -- pool's first chunk, 32 MiB
    failed("cuMemCreate", 33554432, "a chunk of the pool", 2)
    failed("cuMemMap", 33554432, "a chunk of the pool", 999)
    failed("cuMemSetAccess", 33554432, "a chunk of the pool", 999)
    failed("cuMemsetD8Async", 33554432, "zeroing a fresh chunk", 999)
    -- the pool's one segment: 3/4 of the double's 256 MiB
    failed("cuMemAlloc", 201326592, "a segment of the pool", 2, {CUDA_DOUBLE_NO_VMM = "1"})
    failed("cuMemsetD8Async", 201326592, "zeroing a fresh segment", 999, {CUDA_DOUBLE_NO_VMM = "1"})
  end)

  it("names the device once in a failure of its setup or of its pool's range", function()
    if not here then return pending("the CUDA driver double is not built") end
    for _, call in ipairs({"cuDevicePrimaryCtxRetain", "cuDeviceGetAttribute", "cuStreamCreate"}) do
      local _, err = helpers.run_code('require "dlrun".devices("cuda")', {"--devices", "cuda:2"},
                                      env_of({CUDA_DOUBLE_FAIL = call .. ":1"}))
      assert.are.equal("dlrun: RuntimeError: CudaDevice(id=0): " .. call .. " failed: "
                       .. "CUDA_ERROR_UNKNOWN (999)", err:match("^[^\n]*"))
    end
    assert.are.equal("false\tRuntimeError\tCudaDevice(id=0): cuMemAddressReserve of 201326592 "
                     .. "bytes failed: CUDA_ERROR_UNKNOWN (999)\n",
                     run([[
local ok, e = pcall(dl.zeros, {4}, "float32", d[1])
print(ok, e.name, e.message)
]], {CUDA_DOUBLE_FAIL = "cuMemAddressReserve:1"}))
  end)

  it("fails the work a driver failure hits, with the driver's error, and injected failures", function()
    if not here then return pending("the CUDA driver double is not built") end
    local out = run([[
local x = dl.zeros({4}, "int32", d[1])
local ok, e = pcall(x.block_until_ready, x)
print(ok, e.name, e.message)
dl._debug.inject_failure(d[2], "fill", 1)
local y = dl.zeros({4}, "float32", d[2])
ok, e = pcall(y.block_until_ready, y)
print(ok, e.name, e.message)
print(table.concat(dl.zeros({2}, "float32", d[2]):tolist(), ","))
]], {CUDA_DOUBLE_FAIL = "cuMemsetD8Async:2:700:async"})
    assert.are.equal("false\tRuntimeError\tCudaDevice(id=0): fill failed: "
                     .. "CUDA_ERROR_ILLEGAL_ADDRESS (700)\n"
                     .. "false\tRuntimeError\tCudaDevice(id=1): fill failed: injected device failure\n"
                     .. "0.0,0.0\n", out)
  end)

  -- After one failure from a stream (an injected :async one), the device's
  -- later fills, copies and device_puts run, before and after synchronize().
  local AFTER = [[
local function try(f)
  local ok, v = pcall(function() return table.concat(f():tolist(), ",") end)
  print(ok and v or v.message)
end
try(function() return dl.full({2}, 1.5, "float64", d[1]) end)
try(function() return dl.zeros({2}, "float32", d[1]) end)
try(function() return dl.device_put(dl.arange(3, "int32", d[2]), d[1]) end)
try(function() return dl.device_put(dl.arange(3, "int32", d[1]), d[2]) end)
d[1]:synchronize()
try(function() return dl.full({2}, 2.5, "float64", d[1]) end)
try(function() return dl.arange(3, "int32", d[2]) end)
]]
  it("keeps a device usable after a failure from its stream (a kernel, a staged 3-D copy)",
     function()
    if not here then return pending("the CUDA driver double is not built") end
    local rest = "0.0,0.0\n0,1,2\n0,1,2\n2.5,2.5\n0,1,2\n"
    assert.are.equal("CudaDevice(id=0): fill failed: CUDA_ERROR_UNKNOWN (999)\n" .. rest,
                     run(AFTER, {CUDA_DOUBLE_FAIL = "cuLaunchKernel:1::async"}))
    -- the first 3-D copy is the staged put's first half, on device 1's stream
    assert.are.equal("1.5,1.5\n0.0,0.0\nCudaDevice(id=0): copy failed: CUDA_ERROR_UNKNOWN (999)\n"
                     .. "0,1,2\n2.5,2.5\n0,1,2\n",
                     run(AFTER, {CUDA_DOUBLE_FAIL = "cuMemcpy3DAsync:1::async",
                                 CUDA_DOUBLE_NO_PEER = "all"}))
  end)

  it("says a device is unusable after an error sticky for its context, and why", function()
    if not here then return pending("the CUDA driver double is not built") end
    local function unusable(what)
      return "CudaDevice(id=0) is unusable after CUDA_ERROR_ILLEGAL_ADDRESS (700): the " .. what
             .. " is refused; the error is sticky for the device's CUDA context, and only a new "
             .. "process can use the device again\n"
    end
    assert.are.equal("CudaDevice(id=0): fill failed: CUDA_ERROR_ILLEGAL_ADDRESS (700)\n"
                     .. unusable("fill") .. unusable("copy") .. "arange: " .. unusable("fill")
                     .. unusable("fill") .. "0,1,2\n",
                     run(AFTER, {CUDA_DOUBLE_FAIL = "cuLaunchKernel:1:700:sticky"}))
  end)
end)
