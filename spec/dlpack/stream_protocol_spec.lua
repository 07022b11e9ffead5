-- runs: every-platform
-- ipc-off: no
-- devices: any
-- needs: opencl, pocl

-- The DLPack stream protocol through the platforms (docs/opencl.md, "DLPack and host
-- applications"): dl.from_dlpack
-- asks the producer's __dlpack_device__() and, where dlrun's platform for
-- that device has queues (OpenCL), passes that device's queue as `stream`;
-- sim and cpu pass none, as before. A dlrun producer on OpenCL makes the
-- consumer's queue wait for the data. Runs in fresh dlrun processes on
-- opencl:2,sim:2 (pocl: POCL_DEVICES); pending when OpenCL is not here.
local helpers = require "helpers"

local ENV = {POCL_DEVICES = "pthread pthread"}

local function opencl_here()
  local out = helpers.run({"--list-devices"}, nil, ENV)
  return out:match("\nopencl  available") or out:match("^opencl  available")
end

-- A producer that records the options its __dlpack__ gets, then hands over
-- a dlrun array's capsule (so that the import has something to read).
local PRODUCER = [[
local dl = require "dlrun"
local function producer(dev_type, dev_id, inner)
  local seen = {}
  return setmetatable({}, {__index = {
    __dlpack_device__ = function() return dev_type, dev_id end,
    __dlpack__ = function(_, opts)
      seen[#seen + 1] = opts.stream == nil and "none" or math.type(opts.stream)
      seen.value = opts.stream
      return inner:__dlpack__({max_version = opts.max_version, stream = -1})
    end,
  }}), seen
end
]]

describe("dl.from_dlpack and the stream protocol", function()
  local here = opencl_here()

  it("passes an OpenCL device's queue as the stream, and none for sim devices", function()
    if not here then return pending("no OpenCL platform here (dlrun --list-devices)") end
    local out, err, status = helpers.run_code(PRODUCER .. [[
local ocl, sim = dl.devices("opencl"), dl.devices("sim")
local x = dl.arange(6, "float32", ocl[2])
local p, seen = producer(4, 1, x)
local y = dl.from_dlpack(p)
print("opencl", seen[1], seen.value ~= 0, table.concat(y:tolist(), ","), tostring(y.sharding.device_set[1]))
local s = dl.arange(3, "int32", sim[1])
local q, seen2 = producer(12, 0, s)
local z = dl.from_dlpack(q)
print("sim", seen2[1], table.concat(z:tolist(), ","))
]], {"--devices", "opencl:2,sim:2"}, ENV)
    assert.are.equal("", err)
    assert.is_true(status == 0 or status == true)
    assert.are.equal("opencl\tinteger\ttrue\t0.0,1.0,2.0,3.0,4.0,5.0\tOpenclDevice(id=1)\n"
                     .. "sim\tnone\t0,1,2\n", out)
  end)

  it("a dlrun export on OpenCL takes a consumer's queue and refuses a foreign handle", function()
    if not here then return pending("no OpenCL platform here (dlrun --list-devices)") end
    local out, err, status = helpers.run_code(PRODUCER .. [[
local ocl = dl.devices("opencl")
local x = dl.arange(4, "int32", ocl[1])
-- The consumer's queue: the one dlrun passes to producers for OpenCL device 1.
local p, seen = producer(4, 1, x)
dl.from_dlpack(p)
local c = x:__dlpack__({max_version = {1, 0}, stream = seen.value})
print("queue", c ~= nil, table.concat(dl.from_dlpack(c):tolist(), ","))
local ok, e = pcall(x.__dlpack__, x, {max_version = {1, 0}, stream = 12345})
print("foreign", ok, e.name)
]], {"--devices", "opencl:2"}, ENV)
    assert.are.equal("", err)
    assert.is_true(status == 0 or status == true)
    assert.are.equal("queue\ttrue\t0,1,2,3\nforeign\tfalse\tBufferError\n", out)
  end)
end)
