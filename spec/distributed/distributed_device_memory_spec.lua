-- runs: once
-- ipc-off: yes
-- devices: any
-- needs: mpi, opencl, pocl

-- Device memory between processes (docs/cuda.md, "Many processes"): device_put between
-- processes reaches a memory through its platform's transport view where
-- the MPI can use it (sim's view; CUDA memory with a CUDA-aware MPI), else
-- stages it through host memory on the device's queue, in blocks of at
-- most DLRUN_DISTRIBUTED_MESSAGE_BYTES. The same jobs run on sim, on
-- OpenCL (pocl, pending when absent) and on the CUDA driver double
-- (pending when not built); their values and byte counts must be sim's.
local H = require "helpers"
local mpirun, sorted_lines = H.mpirun, H.sorted_lines

local BUILD = H.exe:match("^(.*)/[^/]*$") or "build"
local DOUBLE = BUILD .. "/tests/cuda-double/libcuda.so.1"

local function exists(path)
  local f = io.open(path)
  if f then f:close() end
  return f ~= nil
end

local function opencl_here()
  local out = H.run({"--list-devices"}, nil, {POCL_DEVICES = "pthread pthread"})
  return (out:match("opencl +([^\n]*)") or ""):match("^available") ~= nil
end

-- Each platform: its --devices, its environment, and why it is not here.
local PLATFORMS = {
  {name = "sim", devices = "sim:2", env = {}},
  {name = "opencl", devices = "opencl:2", env = {POCL_DEVICES = "pthread pthread"},
   absent = function() return not opencl_here() and "OpenCL is not here" end},
  {name = "cuda", devices = "cuda:2",
   env = {DLRUN_CUDA_LIBRARY = DOUBLE, CUDA_DOUBLE_DEVICES = "2"},
   absent = function() return not exists(DOUBLE) and "the CUDA driver double is not built" end},
}

local function env_with(base, extra)
  local env = {DLRUN_DISTRIBUTED_MESSAGE_BYTES = "4096", DLRUN_DISTRIBUTED_TIMEOUT = "60"}
  for k, v in pairs(base) do env[k] = v end
  for k, v in pairs(extra or {}) do env[k] = v end
  return env
end

-- R rows of 2 float32 per device (R * 8 = 8 KiB: two messages of 4 KiB per
-- block, so staging goes in rounds); x holds row r = {r, -r}.
local R = 1024
local SETUP = ([[
local R = %d
local p, n = dl.process_index(), dl.process_count()
local d = dl.devices()
local rows = dl.NamedSharding(dl.make_mesh({2 * n}, {"x"}), dl.P("x"))
local here = {}
for i = 1, 2 * R do
  local r = p * 2 * R + i - 1
  here[i] = {r, -r}
end
local x = dl.make_array_from_process_local_data(rows, dl.array(here, "float32"))
-- Every block to the devices of the next process.
local moved = {}
for k = 1, 2 * n do moved[k] = d[(k + 1) %% (2 * n) + 1] end
local rotated = dl.NamedSharding(dl.Mesh(moved, {"x"}), dl.P("x"))
-- A checksum that sees order: sum of (flat index + 1) * value.
local function sum(a)
  local s = 0
  for i, row in ipairs(a:tolist()) do s = s + i * row[1] + 7 * i * row[2] end
  return ("%%.0f"):format(s)
end
-- "id=checksum" of each shard here, in order.
local function shards(a)
  local t = {}
  for k, s in ipairs(a.addressable_shards) do
    t[k] = ("%%d=%%s"):format(s.device.id, sum(s.data))
  end
  return table.concat(t, " ")
end
local function stats()
  local s = dl.transfer_stats()
  dl.transfer_stats{reset = true}
  return s.bytes_sent .. " " .. s.bytes_received
end
]]):format(R)

local JOB = SETUP .. [[
dl.transfer_stats{reset = true}
local y = dl.device_put(x, rotated)
print(p, "reshard", shards(y), stats())
local g = dl.process_allgather(y, true)
print(p, "allgather", table.concat(g.shape, "x"), sum(g), stats())
local b = dl.device_put(x, dl.NamedSharding(rows.mesh, dl.P()))
print(p, "broadcast", shards(b), stats())
local mine = dl.device_put(dl.array({p + 1, 2 * p}, "float32"), d[2 * p + 1])
local one = dl.broadcast_one_to_all(mine)
print(p, "broadcast_one_to_all", table.concat(one:tolist(), ","), stats())]]

-- The lines every process prints, as sim computes them: block k of rows
-- [k R, (k + 1) R) lands on device (k + 2) mod 2n.
local function expected(n)
  local function block_sum(lo, count)
    local s = 0
    for i = 1, count do
      local r = lo + i - 1
      s = s + i * r - 7 * i * r
    end
    return s
  end
  local B = R * 2 * 4 -- bytes of a block
  local want = {}
  for p = 0, n - 1 do
    local mine, all = {}, {}
    for j = 0, 1 do
      local dev = 2 * p + j
      local k = (dev - 2) % (2 * n)
      mine[#mine + 1] = ("%d=%s"):format(dev, block_sum(k * R, R))
      all[#all + 1] = ("%d=%s"):format(dev, block_sum(0, 2 * n * R))
    end
    local others = (n - 1) * 2 * B
    want[#want + 1] = ("%d\treshard\t%s\t%d %d"):format(p, table.concat(mine, " "), 2 * B, 2 * B)
    want[#want + 1] = ("%d\tallgather\t%dx2\t%s\t%d %d"):format(p, 2 * n * R,
                                                                block_sum(0, 2 * n * R), others,
                                                                others)
    want[#want + 1] = ("%d\tbroadcast\t%s\t%d %d"):format(p, table.concat(all, " "), others,
                                                          others)
    want[#want + 1] = ("%d\tbroadcast_one_to_all\t1.0,0.0\t0 0"):format(p)
  end
  table.sort(want)
  return want
end

-- Staging is what the staged runs test: processes on one host would copy
-- sim memory straight between them instead (distributed_ipc_spec.lua).
local function run(n, platform, code, extra)
  local env = env_with(platform.env, extra)
  if env.DLRUN_DISTRIBUTED_DEVICE_MEMORY == "staged" then env.DLRUN_DISTRIBUTED_IPC = "off" end
  return mpirun(n, code, {args = "--devices " .. platform.devices, env = env, limit = 180})
end

describe("device memory between processes", function()
  for _, n in ipairs {2, 3, 4} do
    for _, platform in ipairs(PLATFORMS) do
      for _, mode in ipairs(platform.name == "sim" and {"auto", "staged"} or {"auto"}) do
        it(("on %d processes on %s (%s): a reshard, an allgather and broadcasts move the values "
            .. "sim's job moves, with the same byte counts"):format(n, platform.devices, mode),
           function()
          local why = platform.absent and platform.absent()
          if why then return pending(why) end
          local out, err, status = run(n, platform, JOB,
                                       {DLRUN_DISTRIBUTED_DEVICE_MEMORY = mode})
          assert.are.equal("", err)
          assert.are.equal(0, status)
          assert.are.same(expected(n), sorted_lines(out))
        end)
      end
    end
  end

  for _, n in ipairs {2, 3, 4} do
    for _, platform in ipairs(PLATFORMS) do
      local mode = platform.name == "sim" and "staged" or "auto"
      it(("on %d processes on %s (%s): a copy that fails while staging on process 1 is an "
          .. "error on every process, none hangs"):format(n, platform.devices, mode), function()
        local why = platform.absent and platform.absent()
        if why then return pending(why) end
        local out, err, status = run(n, platform, SETUP .. [[
if p == 1 then
  for _, dev in ipairs(dl.local_devices()) do
    if dev.platform ~= "cpu" then dl._debug.inject_failure(dev, "copy", 1) end
  end
end
local ok, e = pcall(dl.device_put, x, rotated)
local others = "^device_put %(staged%) failed on process 1: "
print(p, ok, e.name, p == 1 and "own" or e.message:match(others))
-- Both devices were armed; one copy failed, the other's is still to come.
for _, dev in ipairs(dl.local_devices()) do
  if dev.platform ~= "cpu" then dl._debug.inject_failure(dev, "copy", 0) end
end
local ok2, y = pcall(dl.device_put, x, rotated)
print(p, "again", ok2, ok2 and shards(y) or y.message)]], {DLRUN_DISTRIBUTED_DEVICE_MEMORY = mode})
        assert.are.equal("", err)
        assert.are.equal(0, status)
        local want = {}
        for p = 0, n - 1 do
          local k = {}
          for j = 0, 1 do
            local dev = 2 * p + j
            local lo = ((dev - 2) % (2 * n)) * R
            local s = 0
            for i = 1, R do s = s + i * (lo + i - 1) - 7 * i * (lo + i - 1) end
            k[#k + 1] = dev .. "=" .. s
          end
          want[#want + 1] = ("%d\tfalse\tRuntimeError\t%s"):format(p, p == 1 and "own"
                              or "device_put (staged) failed on process 1: ")
          want[#want + 1] = ("%d\tagain\ttrue\t%s"):format(p, table.concat(k, " "))
        end
        table.sort(want)
        assert.are.same(want, sorted_lines(out))
      end)
    end
  end

  it("DLRUN_DISTRIBUTED_DEVICE_MEMORY=direct refuses OpenCL memory (no transport view) and "
     .. "CUDA memory under an MPI that is not CUDA-aware, on every process", function()
    for _, platform in ipairs {PLATFORMS[2], PLATFORMS[3]} do
      local why = platform.absent and platform.absent()
      if not why then
        local out, err, status = run(2, platform, SETUP .. [[
local ok, e = pcall(dl.device_put, x, rotated)
print(p, ok, e.name, e.message)]], {DLRUN_DISTRIBUTED_DEVICE_MEMORY = "direct"})
        assert.are.equal("", err)
        assert.are.equal(0, status)
        local class = platform.name == "cuda" and "CudaDevice" or "OpenclDevice"
        local msg = platform.name == "cuda"
          and "device_put between processes: DLRUN_DISTRIBUTED_DEVICE_MEMORY=direct, but the "
              .. "MPI says it cannot reach device memory (it is not CUDA-aware); the device "
              .. "memory of %s(id=%d) needs auto or staged"
          or "device_put between processes: the device memory of %s(id=%d) cannot be reached "
             .. "by the transport between processes"
        assert.are.same({"0\tfalse\tRuntimeError\t" .. msg:format(class, 0),
                         "1\tfalse\tRuntimeError\t" .. msg:format(class, 2)}, sorted_lines(out))
      end
    end
  end)

  it("DLRUN_DISTRIBUTED_DEVICE_MEMORY must be auto, direct or staged", function()
    local out, err, status = mpirun(2, "print(1)", {args = "--devices sim:2",
                                    env = {DLRUN_DISTRIBUTED_DEVICE_MEMORY = "never"}})
    assert.matches('DLRUN_DISTRIBUTED_DEVICE_MEMORY="never" is not one of auto, direct, staged',
                   out .. err, 1, true)
    assert.are_not.equal(0, status)
  end)
end)
