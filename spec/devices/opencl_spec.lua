-- runs: every-platform
-- ipc-off: no
-- devices: any
-- needs: opencl, pocl

-- The OpenCL platform from Lua (docs/opencl.md), in fresh dlrun
-- processes on pocl (POCL_DEVICES); pending when OpenCL is not here. The
-- whole suite also runs on OpenCL (scripts/run-tests.sh); these are the
-- checks that only mean something there: DLPack's kDLOpenCL with the cl_mem
-- as data and the offset inside it, imports of dlrun's own buffers, copies
-- to the host, capacities from the driver, the listing.
local helpers = require "helpers"

local ENV = {POCL_DEVICES = "pthread pthread"}

local function opencl_line()
  local out = helpers.run({"--list-devices"}, nil, ENV)
  return out:match("opencl +([^\n]*)")
end

local function run(code)
  local out, err, status = helpers.run_code('local dl = require "dlrun"\n' .. code,
                                            {"--devices", "opencl:2"}, ENV)
  assert.are.equal("", err)
  assert.is_true(status == 0 or status == true, out)
  return out
end

describe("the OpenCL platform", function()
  local line = opencl_line()
  local here = line and line:match("^available")

  it("is listed with its devices, or why it is absent", function()
    assert.truthy(line, "no opencl line in --list-devices")
    if not here then return pending("OpenCL not here: " .. line) end
    assert.are.equal("available: 2 devices", line)
  end)

  it("exports device memory as (kDLOpenCL, index), the cl_mem with the offset inside it", function()
    if not here then return pending("OpenCL not here: " .. tostring(line)) end
    local out = run([[
local d = dl.devices("opencl")
local a = dl.arange(8, "float32", d[2])
local b = dl.arange(8, "float32", d[2])
local ca, cb = a:__dlpack__{max_version = {1, 0}}, b:__dlpack__{max_version = {1, 0}}
print(ca.device[1], ca.device[2], ca.read_only, ca.byte_offset % 256, cb.byte_offset % 256,
      ca.byte_offset ~= cb.byte_offset)
print(tostring(d[1]), d[1].platform, select("#", a:__dlpack_device__()), a:__dlpack_device__())
]])
    assert.are.equal("4\t1\ttrue\t0\t0\ttrue\nOpenclDevice(id=0)\topencl\t2\t4\t1\n", out)
  end)

  it("imports its own export without a copy, and copies to the host when asked", function()
    if not here then return pending("OpenCL not here: " .. tostring(line)) end
    local out = run([[
local d = dl.devices("opencl")
local a = dl.arange(6, "int32", d[1])
local c = a:__dlpack__{max_version = {1, 0}}
local w = dl.from_dlpack(c)
print(c.imported, tostring(w.sharding.device_set[1]), table.concat(w:tolist(), ","))
local h = a:__dlpack__{max_version = {1, 0}, dl_device = {1, 0}}
print(h.device[1], h.device[2], h.is_copied, table.concat(dl.from_dlpack(h):tolist(), ","))
]])
    assert.are.equal("wrapped\tOpenclDevice(id=0)\t0,1,2,3,4,5\n1\t0\ttrue\t0,1,2,3,4,5\n", out)
  end)

  it("moves arrays between its devices, the host and sim devices, values intact", function()
    if not here then return pending("OpenCL not here: " .. tostring(line)) end
    local out, err, status = helpers.run_code([[
local dl = require "dlrun"
local o, s = dl.devices("opencl"), dl.devices("sim")
local a = dl.array({{1, 2, 3}, {4, 5, 6}}, "float32", o[1])
local b = dl.device_put(a, o[2])
local c = dl.device_put(b, s[1])        -- opencl to sim: staged through the host
local e = dl.device_put(c, o[1])        -- and back
local m = dl.make_mesh({2}, {"x"}, o)
local f = dl.device_put(e, dl.NamedSharding(m, dl.P("x", nil)))
print(table.concat(f:tolist()[2], ","), tostring(c.sharding.device_set[1]))
]], {"--devices", "opencl:2,sim:2"}, ENV)
    assert.are.equal("", err)
    assert.is_true(status == 0 or status == true, out)
    assert.are.equal("4.0,5.0,6.0\tSimDevice(id=0)\n", out)
  end)

  it("takes its capacity from the driver and says so in memory_stats", function()
    if not here then return pending("OpenCL not here: " .. tostring(line)) end
    local out = run([[
local d = dl.devices("opencl")[1]
local s = d:memory_stats()
print(s.bytes_limit > 0, s.bytes_limit % 4096, s.bytes_in_use)
]])
    assert.are.equal("true\t0\t0\n", out)
  end)
end)
