-- Many processes: dlrun under mpirun joins the job before the script runs,
-- knows its place in it, checks that collectives agree, bounds every wait,
-- and ends the whole job when one process fails. Runs the same scripts on
-- 1, 2 and 4 processes (shared memory, and once over TCP loopback).
local H = require "helpers"
local q = H.shell_quote

local MCA_SHM = "--mca btl self,vader"
local MCA_TCP = "--mca btl self,tcp --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo "
                .. "--mca pml ob1"

-- Run `code` (with dl = require "dlrun") under mpirun -n n. Returns stdout,
-- stderr, exit status and the seconds it took.
local function mpirun(n, code, opts)
  opts = opts or {}
  local out, err = os.tmpname(), os.tmpname()
  local env = {}
  for k, v in pairs(H.mpi_env()) do env[#env + 1] = k .. "=" .. q(v) end
  for k, v in pairs(opts.env or {}) do env[#env + 1] = k .. "=" .. q(v) end
  local line = table.concat(env, " ") .. " mpirun -n " .. n
               .. " --oversubscribe --mca mpi_yield_when_idle 1 " .. (opts.mca or MCA_SHM) .. " "
               .. q(H.exe) .. " " .. (opts.args or "") .. " -e "
               .. q('local dl = require "dlrun"\n' .. code) .. " >" .. out .. " 2>" .. err
  local t0 = os.time()
  local _, _, status = os.execute(line)
  local function slurp(p)
    local f = assert(io.open(p)); local s = f:read("a"); f:close(); os.remove(p); return s
  end
  return slurp(out), slurp(err), status, os.time() - t0
end

-- The lines of s, sorted (processes print in any order).
local function sorted_lines(s)
  local t = {}
  for line in s:gmatch("[^\n]+") do t[#t + 1] = line end
  table.sort(t)
  return t
end

describe("joining a job", function()
  for _, n in ipairs {1, 2, 4} do
    it("on " .. n .. " process(es): each knows its index and the count", function()
      local out, err, status = mpirun(n, 'print(dl.process_index(), dl.process_count())')
      assert.are.equal("", err)
      assert.are.equal(0, status)
      local want = {}
      for p = 0, n - 1 do want[#want + 1] = p .. "\t" .. n end
      assert.are.same(want, sorted_lines(out))
    end)
  end

  it("over TCP loopback too", function()
    local out, err, status = mpirun(2, 'dl.sync_global_devices("tcp")\n'
                                       .. 'print(dl.process_index(), dl.process_count())',
                                    {mca = MCA_TCP})
    assert.are.equal("", err)
    assert.are.equal(0, status)
    assert.are.same({"0\t2", "1\t2"}, sorted_lines(out))
  end)

  it("--distributed off runs each process alone, even under mpirun", function()
    local out, _, status = mpirun(2, 'print(dl.process_index(), dl.process_count())',
                                  {args = "--distributed off"})
    assert.are.equal(0, status)
    assert.are.same({"0\t1", "0\t1"}, sorted_lines(out))
  end)

  it("DLRUN_DISTRIBUTED=mpi without mpirun is a job of one", function()
    local env = H.mpi_env()
    env.DLRUN_DISTRIBUTED = "mpi"
    local out, err, status = H.run_code('local dl = require "dlrun"\n'
                                        .. 'print(dl.process_index(), dl.process_count())', nil,
                                        env)
    assert.are.equal("", err)
    assert.are.equal(0, status)
    assert.are.equal("0\t1\n", out)
  end)

  it("alone by default: index 0 of 1, and a barrier returns", function()
    local out, err, status = H.run_code('local dl = require "dlrun"\n'
                                        .. 'dl.sync_global_devices("alone")\n'
                                        .. 'print(dl.process_index(), dl.process_count())')
    assert.are.equal("", err)
    assert.are.equal(0, status)
    assert.are.equal("0\t1\n", out)
  end)

  it("refuses a --distributed or DLRUN_DISTRIBUTED that is not off, mpi or auto", function()
    local _, err, status = H.run({"--distributed", "yes", "-e", "print(1)"})
    assert.are.equal(1, status)
    assert.are.equal("dlrun: invalid value 'yes' for --distributed (expected off, mpi or auto)\n"
                     .. "Try 'dlrun --help' for more information.\n", err)
    local out, err2, status2 = H.run({"-e", "print(1)"}, nil, {DLRUN_DISTRIBUTED = "on"})
    assert.are.equal(1, status2)
    assert.are.equal("", out)
    assert.are.equal('dlrun: ValueError: DLRUN_DISTRIBUTED="on" is not off, mpi or auto\n', err2)
  end)

  it("a missing transport module is a clear error before the script runs", function()
    local out, err, status = H.run({"-e", "print(1)"}, nil,
                                   {DLRUN_DISTRIBUTED = "mpi", DLRUN_MPI_MODULE = "/nonexistent.so"})
    assert.are.equal(1, status)
    assert.are.equal("", out)
    assert.are.equal("dlrun: RuntimeError: cannot join the job: the MPI transport module could "
                     .. "not be loaded (DLRUN_MPI_MODULE: /nonexistent.so: cannot open shared "
                     .. "object file: No such file or directory). Build it with MPI installed "
                     .. "(libopenmpi-dev) or run with --distributed off\n", err)
  end)

  it("refuses a DLRUN_DISTRIBUTED_TIMEOUT that is not a positive number", function()
    local _, err, status = H.run({"-e", "print(1)"}, nil,
                                 {DLRUN_DISTRIBUTED = "mpi", DLRUN_DISTRIBUTED_TIMEOUT = "-3"})
    assert.are.equal(1, status)
    assert.are.equal('dlrun: ValueError: DLRUN_DISTRIBUTED_TIMEOUT="-3" is not a positive '
                     .. 'number of seconds\n', err)
  end)
end)

describe("devices of a job", function()
  it("are numbered across processes in process order; each process holds its own", function()
    local out, err, status = mpirun(2, [[
local p = dl.process_index()
local all, here = {}, {}
for _, d in ipairs(dl.devices()) do all[#all + 1] = tostring(d) .. "@" .. d.process_index end
for _, d in ipairs(dl.local_devices()) do here[#here + 1] = d.id end
print(p, dl.device_count(), dl.local_device_count(), table.concat(all, " "),
      table.concat(here, ","), tostring(dl.host_device()), dl.device_count("cpu"),
      dl.local_device_count("cpu"))]], {args = "--devices sim:2"})
    assert.are.equal("", err)
    assert.are.equal(0, status)
    local all = "SimDevice(id=0)@0 SimDevice(id=1)@0 SimDevice(id=2)@1 SimDevice(id=3)@1"
    assert.are.same({"0\t4\t2\t" .. all .. "\t0,1\tCpuDevice(id=0)\t2\t1",
                     "1\t4\t2\t" .. all .. "\t2,3\tCpuDevice(id=1)\t2\t1"}, sorted_lines(out))
  end)

  it("hold arrays on local devices; another process's device memory is not addressable", function()
    local out, err, status = mpirun(2, [[
local p = dl.process_index()
local x = dl.arange(0, 4, 1, "float32", dl.local_devices()[2])
local t, id = x:__dlpack_device__()
print(p, table.concat(x:tolist(), ","), t, id)
local other = dl.devices()[p == 0 and 3 or 1]
local ok, e = pcall(other.memory_stats, other)
print(p, ok, e.name, e.message)]], {args = "--devices sim:2"})
    assert.are.equal("", err)
    assert.are.equal(0, status)
    assert.are.same({
      -- DLPack device ids are process-local ordinals, as CUDA's.
      "0\t0.0,1.0,2.0,3.0\t12\t1",
      "0\tfalse\tRuntimeError\tSimDevice(id=2) belongs to process 1: its memory is not "
        .. "addressable from process 0",
      "1\t0.0,1.0,2.0,3.0\t12\t1",
      "1\tfalse\tRuntimeError\tSimDevice(id=0) belongs to process 0: its memory is not "
        .. "addressable from process 1",
    }, sorted_lines(out))
  end)

  it("must be the same on every process: a different spec is a ValueError on each", function()
    local out, err, status = mpirun(2, [[
local p = dl.process_index()
dl.configure{devices = p == 0 and "sim:2" or "sim:3"}
local ok, e = pcall(dl.devices)
print(p, ok, e.name, e.message)]])
    assert.are.equal("", err)
    assert.are.equal(0, status)
    assert.are.same({
      "0\tfalse\tValueError\tdevice spec mismatch: process 0 has 'sim:2,cpu:1', process 1 "
        .. "'sim:3,cpu:1'",
      "1\tfalse\tValueError\tdevice spec mismatch: process 1 has 'sim:3,cpu:1', process 0 "
        .. "'sim:2,cpu:1'",
    }, sorted_lines(out))
  end)
end)

describe("global arrays", function()
  it("a sharding over every process's devices: addressable devices and indices", function()
    local out, err, status = mpirun(2, [[
local p = dl.process_index()
local s = dl.NamedSharding(dl.make_mesh({4}, {"x"}), dl.P("x"))
local ids, map = {}, {}
for _, d in ipairs(s.addressable_devices) do ids[#ids + 1] = d.id end
for d, index in pairs(s:addressable_devices_indices_map({8})) do
  map[#map + 1] = d.id .. "=" .. index[1][1] .. ":" .. index[1][2]
end
table.sort(map)
local local_only = dl.NamedSharding(dl.make_mesh({2}, {"x"}, dl.local_devices()), dl.P("x"))
print(p, s.is_fully_addressable, #s.device_set, table.concat(ids, ","), table.concat(map, " "),
      local_only.is_fully_addressable)]], {args = "--devices sim:2"})
    assert.are.equal("", err)
    assert.are.equal(0, status)
    assert.are.same({"0\tfalse\t4\t0,1\t0=1:2 1=3:4\ttrue",
                     "1\tfalse\t4\t2,3\t2=5:6 3=7:8\ttrue"}, sorted_lines(out))
  end)

  it("hold only their local shards; creation fills those; fetching the value raises", function()
    local out, err, status = mpirun(2, [[
local p = dl.process_index()
local s = dl.NamedSharding(dl.make_mesh({4}, {"x"}), dl.P("x"))
for _, x in ipairs {dl.arange(0, 8, 1, "float32", s), dl.full({8}, p + 1, "int32", s),
                    dl.array({0, 1, 2, 3, 4, 5, 6, 7}, "int8", s)} do
  local got = {}
  for _, shard in ipairs(x.addressable_shards) do
    got[#got + 1] = shard.device.id .. "=" .. table.concat(shard.data:tolist(), ",")
  end
  local remote = 0
  for _, shard in ipairs(x.global_shards) do remote = remote + (shard.data == nil and 1 or 0) end
  print(p, x.is_fully_addressable, #x.global_shards, remote, table.concat(got, " "))
end
local x = dl.zeros({8}, "float32", s)
local one = dl.ones({}, "float32", dl.NamedSharding(s.mesh, dl.P()))
for _, read in ipairs {{x, "tolist"}, {x, "tobytes"}, {one, "item"}} do
  local obj, method = read[1], read[2]
  local ok, e = pcall(obj[method], obj)
  print(p, method, ok, e.name, e.message)
end
local ok, e = pcall(dl.device_put, x, dl.local_devices()[1])
print(p, ok, e.message)]], {args = "--devices sim:2"})
    assert.are.equal("", err)
    assert.are.equal(0, status)
    local fetch = "Fetching value for an Array that spans non-addressable (non process local) "
                  .. "devices is not possible. You can use `dl.process_allgather` to print the "
                  .. "global array or use `.addressable_shards` of the Array to inspect the "
                  .. "addressable (process local) shards."
    local want = {
      "0\tfalse\t4\t2\t0=0.0,1.0 1=2.0,3.0",
      "0\tfalse\t4\t2\t0=1,1 1=1,1",
      "0\tfalse\t4\t2\t0=0,1 1=2,3",
      "1\tfalse\t4\t2\t2=4.0,5.0 3=6.0,7.0",
      "1\tfalse\t4\t2\t2=2,2 3=2,2",
      "1\tfalse\t4\t2\t2=4,5 3=6,7",
    }
    for p = 0, 1 do
      for _, read in ipairs {"tolist", "tobytes", "item"} do
        want[#want + 1] = p .. "\t" .. read .. "\tfalse\tRuntimeError\t" .. fetch
      end
      want[#want + 1] = p .. "\tfalse\tdevice_put between processes is not supported yet: the "
                        .. "source sharding has devices of other processes"
    end
    table.sort(want)
    assert.are.same(want, sorted_lines(out))
  end)
end)

describe("collectives that disagree, and waits that end", function()
  it("sync_global_devices with different names raises on every process, which stay usable",
     function()
    local out, err, status = mpirun(2, [[
local ok, e = pcall(dl.sync_global_devices, "step" .. dl.process_index())
print(dl.process_index(), ok, e.name, e.message)
dl.sync_global_devices("after")
print(dl.process_index(), "after")]])
    assert.are.equal("", err)
    assert.are.equal(0, status)
    assert.are.same({
      "0\tafter",
      "0\tfalse\tRuntimeError\tsync_global_devices name mismatch: process 0 has 'step0', "
        .. "process 1 'step1'",
      "1\tafter",
      "1\tfalse\tRuntimeError\tsync_global_devices name mismatch: process 1 has 'step1', "
        .. "process 0 'step0'",
    }, sorted_lines(out))
  end)

  it("a wait that passes DLRUN_DISTRIBUTED_TIMEOUT raises, naming who did not arrive", function()
    local out, _, status = mpirun(3, [[
if dl.process_index() > 0 then os.execute("sleep 2") end
local ok, e = pcall(dl.sync_global_devices, "late")
if dl.process_index() == 0 then print(ok, e.name, e.message) end]],
                                  {env = {DLRUN_DISTRIBUTED_TIMEOUT = "0.5"}})
    assert.are.equal(0, status)
    assert.are.equal("false\tRuntimeError\tsync_global_devices('late'): processes 1 and 2 did "
                     .. "not arrive within 0.5 s\n", out)
  end)

  it("sync_global_devices takes one string", function()
    local out = mpirun(1, [[
local ok, e = pcall(dl.sync_global_devices, 3)
print(e.name, e.message)]])
    assert.are.equal("TypeError\tsync_global_devices: argument 1 (name) must be a string, got "
                     .. "number\n", out)
  end)
end)

describe("a process that fails", function()
  it("ends the whole job at once, its error named with its index", function()
    local out, err, status, seconds = mpirun(4, [[
if dl.process_index() == 2 then error(dl.ValueError("bad input on this process")) end
dl.sync_global_devices("never reached by 2")
print("the others went on")]])
    assert.are_not.equal(0, status)
    assert.is_true(seconds < 20, "took " .. seconds .. " s")
    assert.are.equal("", out)
    assert.truthy(err:find("dlrun[2]: ValueError: bad input on this process\n", 1, true), err)
  end)

  it("that dies (killed) takes the job down promptly; the others do not wait", function()
    local out, _, status, seconds = mpirun(3, [[
if dl.process_index() == 1 then
  local pid = io.open("/proc/self/stat"):read("n")
  os.execute("kill -9 " .. pid)
end
dl.sync_global_devices("never complete")
print("the others went on")]])
    assert.are_not.equal(0, status)
    assert.is_true(seconds < 20, "took " .. seconds .. " s")
    assert.are.equal("", out)
  end)
end)
