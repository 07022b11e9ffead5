-- runs: every-platform
-- ipc-off: yes
-- devices: any
-- needs: mpi

-- Many processes: dlrun under mpirun joins the job before the script runs,
-- knows its place in it, checks that collectives agree, bounds every wait,
-- and ends the whole job when one process fails. Runs the same scripts on
-- 1, 2 and 4 processes (shared memory, and once over TCP loopback).
local H = require "helpers"

local MCA_SHM, MCA_TCP, mpirun, sorted_lines = H.MCA_SHM, H.MCA_TCP, H.mpirun, H.sorted_lines

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
local one = dl.ones({}, "float32", dl.devices()[p == 0 and 3 or 1]) -- another process's
for _, read in ipairs {{x, "tolist"}, {x, "tobytes"}, {one, "item"}} do
  local obj, method = read[1], read[2]
  local ok, e = pcall(obj[method], obj)
  print(p, method, ok, e.name, e.message)
end
local ok, e = pcall(dl.device_put, x, dl.local_devices()[1])
print(p, ok, e.name, e.message:match("^[^:]*: [^:]*:"))]], {args = "--devices sim:2"})
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
      -- Each process names its own device: the target shardings differ.
      want[#want + 1] = p .. "\tfalse\tRuntimeError\tdevice_put mismatch: the target sharding "
                        .. "differs:"
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
    local out, err, status = mpirun(3, [[
if dl.process_index() > 0 then os.execute("sleep 2") end
local ok, e = pcall(dl.sync_global_devices, "late")
if dl.process_index() == 0 then print(ok, e.name, e.message) end]],
                                  {env = {DLRUN_DISTRIBUTED_TIMEOUT = "0.5"}})
    assert.are.equal("false\tRuntimeError\tsync_global_devices('late'): processes 1 and 2 did "
                     .. "not arrive within 0.5 s\n", out)
    -- The end of the script is a wait too: process 0 ends the job.
    assert.are_not.equal(0, status)
    assert.matches("dlrun%[0%]: RuntimeError: the end of the script: processes 1 and 2 did not "
                   .. "arrive within 0.5 s", err)
  end)

  it("a process still in a collective when another ends its script raises, naming both; the "
     .. "job ends at once", function()
    local out, err, status, secs = mpirun(2, [[
if dl.process_index() == 0 then
  local ok, e = pcall(dl.sync_global_devices, "only 0")
  print(ok, e.message)
end]])
    assert.are.equal("false\tsync_global_devices mismatch: process 0 called "
                     .. "'sync_global_devices', process 1 'the end of the script' "
                     .. "(every process must make the same collective calls in the same order)\n",
                     out)
    assert.matches("dlrun%[1%]: RuntimeError: the end of the script mismatch: process 1 called "
                   .. "'the end of the script', process 0 'sync_global_devices'", err)
    assert.are_not.equal(0, status)
    assert.is_true(secs < 60)
  end)

  -- os.exit is the end of the script too (with or without closing the state): the peers
  -- in a collective raise at once, not after DLRUN_DISTRIBUTED_TIMEOUT (set long here).
  local SAME = "(every process must make the same collective calls in the same order)"
  for _, case in ipairs {
    {exit = "os.exit(0)", call = "device_put", status = 1},
    {exit = "os.exit(3)", call = "sync_global_devices", status = 3},
    {exit = "os.exit(true, true)", call = "device_put", status = 1},
  } do
    for _, n in ipairs {2, 3, 4} do
      it(("on %d processes, %s on process 1 while the others are in %s: they raise at once; "
          .. "the job ends with status %d"):format(n, case.exit, case.call, case.status),
         function()
        local out, err, status, secs = mpirun(n, ([[
local p = dl.process_index()
local s = dl.NamedSharding(dl.make_mesh({dl.device_count()}, {"x"}), dl.P("x"))
local x = dl.arange(0, dl.device_count(), 1, "float32", s)
if p == 1 then %s end
local ok, e
if "%s" == "device_put" then
  ok, e = pcall(dl.device_put, x, dl.NamedSharding(s.mesh, dl.P()))
else
  ok, e = pcall(dl.sync_global_devices, "step")
end
print(p, ok, e.name, e.message)]]):format(case.exit, case.call),
                                              {args = "--devices sim:2",
                                               env = {DLRUN_DISTRIBUTED_TIMEOUT = "120"}})
        local want = {}
        for p = 0, n - 1 do
          if p ~= 1 then
            want[#want + 1] = ("%d\tfalse\tRuntimeError\t%s mismatch: process %d called '%s', "
                               .. "process 1 'the end of the script' %s")
                              :format(p, case.call, p, case.call, SAME)
          end
        end
        assert.are.same(want, sorted_lines(out))
        assert.truthy(err:find("dlrun[1]: RuntimeError: the end of the script mismatch: process 1 "
                               .. "called 'the end of the script', process 0 '" .. case.call
                               .. "' " .. SAME .. "\n", 1, true), err)
        assert.are.equal(case.status, status)
        assert.is_true(secs < 20, secs .. " s")
      end)
    end
  end

  for _, n in ipairs {2, 3, 4} do
    it("on " .. n .. " processes, os.exit on one process meets the others at their end: every "
       .. "process finishes, with the status asked for", function()
      local out, err, status, secs = mpirun(n, [[
local p = dl.process_index()
dl.sync_global_devices("before")
if p == 1 then print(p, "exits") os.exit(3) end
print(p, "ends")]], {env = {DLRUN_DISTRIBUTED_TIMEOUT = "120"}})
      local want = {}
      for p = 0, n - 1 do want[#want + 1] = p .. (p == 1 and "\texits" or "\tends") end
      assert.are.same(want, sorted_lines(out))
      assert.falsy(err:find("dlrun[", 1, true), err)
      assert.are.equal(3, status)
      assert.is_true(secs < 20, secs .. " s")
    end)
  end

  it("sync_global_devices takes one string", function()
    local out = mpirun(1, [[
local ok, e = pcall(dl.sync_global_devices, 3)
print(e.name, e.message)]])
    assert.are.equal("TypeError\tsync_global_devices: argument 1 (name) must be a string, got "
                     .. "number\n", out)
  end)
end)

local SHOW = H.SHOW_SHARDS

describe("device_put between processes", function()
  it("reshards rows to columns and back; each process sends and receives what changes hands",
     function()
    local out, err, status = mpirun(2, SHOW .. [[
local p = dl.process_index()
local rows = dl.NamedSharding(dl.make_mesh({4}, {"x"}), dl.P("x"))
local cols = dl.NamedSharding(dl.make_mesh({2, 2}, {"a", "b"}), dl.P(nil, {"a", "b"}))
local t = {}
for i = 1, 8 do t[i] = {} for j = 1, 4 do t[i][j] = (i - 1) * 4 + j - 1 end end
local x = dl.array(t, "int32", rows)
dl.transfer_stats{reset = true}
local y = dl.device_put(x, cols)
local s = dl.transfer_stats()
print(p, shards(y), s.bytes_sent, s.bytes_received)
print(p, shards(dl.device_put(y, rows)))]], {args = "--devices sim:2"})
    assert.are.equal("", err)
    assert.are.equal(0, status)
    -- Half of each column lives on the other process: 4 int32 per column, 2 columns each.
    assert.are.same({
      "0\t0=0,1,2,3;4,5,6,7 1=8,9,10,11;12,13,14,15",
      "0\t0=0;4;8;12;16;20;24;28 1=1;5;9;13;17;21;25;29\t32\t32",
      "1\t2=16,17,18,19;20,21,22,23 3=24,25,26,27;28,29,30,31",
      "1\t2=2;6;10;14;18;22;26;30 3=3;7;11;15;19;23;27;31\t32\t32",
    }, sorted_lines(out))
  end)

  for _, n in ipairs {2, 4} do
    it("on " .. n .. " processes, replicates a sharded array: each process receives only what it "
       .. "lacks, once", function()
      local out, err, status = mpirun(n, [[
local p, n = dl.process_index(), dl.process_count()
local mesh = dl.make_mesh({dl.device_count()}, {"x"})
local x = dl.arange(0, 1000 * dl.device_count(), 1, "float32", dl.NamedSharding(mesh, dl.P("x")))
dl.transfer_stats{reset = true}
local y = dl.device_put(x, dl.NamedSharding(mesh, dl.P()))
local s = dl.transfer_stats()
local good = #y.addressable_shards == 2
for _, shard in ipairs(y.addressable_shards) do
  for i, v in ipairs(shard.data:tolist()) do good = good and v == i - 1 end
end
print(p, good, s.bytes_sent, s.bytes_received)]], {args = "--devices sim:2"})
      assert.are.equal("", err)
      assert.are.equal(0, status)
      local want = {}
      local lacks = 2 * 1000 * 4 * (n - 1) -- the other processes' two shards
      for p = 0, n - 1 do want[#want + 1] = p .. "\ttrue\t" .. lacks .. "\t" .. lacks end
      assert.are.same(want, sorted_lines(out))
    end)
  end

  for _, case in ipairs {{"shared memory", MCA_SHM}, {"TCP loopback", MCA_TCP}} do
    it("moves strided 2-d pieces in messages of at most DLRUN_DISTRIBUTED_MESSAGE_BYTES, over "
       .. case[1], function()
      local out, err, status = mpirun(4, [[
local p = dl.process_index()
local R, C = 64, 600
local t = {}
for i = 1, R do t[i] = {} for j = 1, C do t[i][j] = (i - 1) * C + j - 1 end end
local m = dl.make_mesh({2, 4}, {"a", "b"})
local a = dl.array(t, "int32", dl.NamedSharding(m, dl.P({"a", "b"})))
local b = dl.device_put(a, dl.NamedSharding(m, dl.P(nil, {"b", "a"})))
local c = dl.device_put(b, dl.NamedSharding(m, dl.P("b", "a")), {may_alias = false})
local good, count = true, 0
for _, x in ipairs {b, c} do
  for _, shard in ipairs(x.addressable_shards) do
    local index = shard.index
    for i, row in ipairs(shard.data:tolist()) do
      for j, v in ipairs(row) do
        count = count + 1
        good = good and v == (index[1][1] + i - 2) * C + index[2][1] + j - 2
      end
    end
  end
end
print(p, good, count)]], {args = "--devices sim:2", mca = case[2],
                          env = {DLRUN_DISTRIBUTED_MESSAGE_BYTES = "4096"}})
      assert.are.equal("", err)
      assert.are.equal(0, status)
      local want = {}
      for p = 0, 3 do want[#want + 1] = p .. "\ttrue\t" .. 2 * 64 * 600 // 4 end
      assert.are.same(want, sorted_lines(out))
    end)
  end

  it("is refused on every process when the processes pass different arguments; they go on",
     function()
    local out, err, status = mpirun(2, [[
local p = dl.process_index()
local s = dl.NamedSharding(dl.make_mesh({4}, {"x"}), dl.P("x"))
local x = dl.arange(0, 8, 1, "int32", s)
local ok, e = pcall(dl.device_put, x, p == 0 and dl.NamedSharding(s.mesh, dl.P()) or s)
print(p, ok, e.name, e.message)
local y = p == 0 and x or dl.arange(0, 8, 1, "int32", s)
if p == 1 then y:delete() end
ok, e = pcall(dl.device_put, y, dl.NamedSharding(s.mesh, dl.P()))
print(p, ok, e.name, e.message)
local z = dl.device_put(x, dl.NamedSharding(s.mesh, dl.P()))
print(p, #z.addressable_shards)]], {args = "--devices sim:2"})
    assert.are.equal("", err)
    assert.are.equal(0, status)
    local rows = "NamedSharding(mesh=Mesh('x': 4), spec=PartitionSpec('x',), memory_kind=device)"
    local rep = "NamedSharding(mesh=Mesh('x': 4), spec=PartitionSpec(), memory_kind=device)"
    assert.are.same({
      "0\t2",
      "0\tfalse\tRuntimeError\tdevice_put failed on process 1: RuntimeError: Array has been "
        .. "deleted with shape=int32[8].",
      "0\tfalse\tRuntimeError\tdevice_put mismatch: the target sharding differs: process 0 has '"
        .. rep .. "', process 1 '" .. rows .. "'",
      "1\t2",
      "1\tfalse\tRuntimeError\tArray has been deleted with shape=int32[8].",
      "1\tfalse\tRuntimeError\tdevice_put mismatch: the target sharding differs: process 1 has '"
        .. rows .. "', process 0 '" .. rep .. "'",
    }, sorted_lines(out))
  end)

  it("between two devices of one process: the others take no part and hold no shard", function()
    local out, err, status = mpirun(2, [[
local p = dl.process_index()
local d = dl.devices()
local x = dl.arange(0, 4, 1, "int32", d[1])
dl.transfer_stats{reset = true}
local y = dl.device_put(x, d[2])
print(p, #y.addressable_shards, y.is_fully_addressable, dl.transfer_stats().bytes_moved)
if p == 0 then print(p, table.concat(y:tolist(), ",")) end]], {args = "--devices sim:2"})
    assert.are.equal("", err)
    assert.are.equal(0, status)
    assert.are.same({"0\t0,1,2,3", "0\t1\ttrue\t16", "1\t0\tfalse\t0"}, sorted_lines(out))
  end)

  it("refuses a DLRUN_DISTRIBUTED_MESSAGE_BYTES out of 4096 to 1 GiB", function()
    local _, err, status = H.run({"-e", "print(1)"}, nil,
                                 {DLRUN_DISTRIBUTED = "mpi", DLRUN_DISTRIBUTED_MESSAGE_BYTES = "100"})
    assert.are.equal(1, status)
    assert.are.equal('dlrun: ValueError: DLRUN_DISTRIBUTED_MESSAGE_BYTES="100" is not a number '
                     .. 'of bytes from 4096 to 1073741824\n', err)
  end)
end)

describe("collectives of multihost_utils", function()
  it("process_allgather: a global array tiled, process-local data stacked or tiled", function()
    local out, err, status = mpirun(2, SHOW .. [[
local p = dl.process_index()
local s = dl.NamedSharding(dl.make_mesh({4}, {"x"}), dl.P("x"))
local g = dl.arange(0, 8, 1, "int32", s)
local function line(what, x) print(p, what, table.concat(x.shape, "x"), show(x), tostring(x.sharding.device_set[1])) end
line("global", dl.process_allgather(g, true))
line("stacked", dl.process_allgather({p, 10 * p}))
line("tiled", dl.process_allgather(dl.array({p, 10 * p}, "int32", dl.local_devices()[2]), true))
line("scalar", dl.process_allgather(p, true))
local ok, e = pcall(dl.process_allgather, g)
print(p, ok, e.name, e.message)]], {args = "--devices sim:2"})
    assert.are.equal("", err)
    assert.are.equal(0, status)
    local want = {}
    for p = 0, 1 do
      local host = "CpuDevice(id=" .. p .. ")"
      for _, l in ipairs {"global\t8\t0,1,2,3,4,5,6,7\t", "stacked\t2x2\t0,0;1,10\t",
                          "tiled\t4\t0,0,1,10\t", "scalar\t2\t0,1\t"} do
        want[#want + 1] = p .. "\t" .. l .. host
      end
      want[#want + 1] = p .. "\tfalse\tValueError\tGathering global non-fully-addressable arrays "
                        .. "only supports tiled=True"
    end
    table.sort(want)
    assert.are.same(want, sorted_lines(out))
  end)

  it("broadcast_one_to_all: process 0's value, or the one source's; two sources raise", function()
    local out, err, status = mpirun(3, SHOW .. [[
local p = dl.process_index()
print(p, show(dl.broadcast_one_to_all({p + 1, p + 2})))
print(p, show(dl.broadcast_one_to_all({p + 1, p + 2}, p == 2)))
local ok, e = pcall(dl.broadcast_one_to_all, {1}, p ~= 1)
print(p, ok, e.name, e.message)]])
    assert.are.equal("", err)
    assert.are.equal(0, status)
    local want = {}
    for p = 0, 2 do
      want[#want + 1] = p .. "\t1,2"
      want[#want + 1] = p .. "\t3,4"
      want[#want + 1] = p .. "\tfalse\tRuntimeError\tbroadcast_one_to_all: processes 0 and 2 "
                        .. "passed is_source=true; exactly one must"
    end
    table.sort(want)
    assert.are.same(want, sorted_lines(out))
  end)

  it("assert_equal: silent when equal, AssertionError on every process naming who differs",
     function()
    local out, err, status = mpirun(4, [[
local p = dl.process_index()
dl.assert_equal({1.5, 2, 3})
local ok, e = pcall(dl.assert_equal, {1, (p == 1 or p == 3) and p or 0, 3}, "weights drifted.")
print(p, ok, e.name, e.message)
ok, e = pcall(dl.assert_equal, p == 0 and {1, 2} or {1, 2, 3})
print(p, ok, e.name, e.message)]])
    assert.are.equal("", err)
    assert.are.equal(0, status)
    local want = {}
    for p = 0, 3 do
      want[#want + 1] = p .. "\tfalse\tAssertionError\tweights drifted. Processes 1 and 3 hold "
                        .. "values different from process 0's (the first difference is at flat "
                        .. "element 1)."
      local other = p == 0 and 1 or 0
      want[#want + 1] = p .. "\tfalse\tRuntimeError\tassert_equal mismatch: the array differs: "
                        .. "process " .. p .. " has '" .. (p == 0 and "int32[2]" or "int32[3]")
                        .. "', process " .. other .. " '" .. (p == 0 and "int32[3]" or "int32[2]")
                        .. "'"
    end
    table.sort(want)
    assert.are.same(want, sorted_lines(out))
  end)

  it("work alone, as a job of one", function()
    local out, err, status = H.run_code(SHOW:gsub("^", 'local dl = require "dlrun"\n') .. [[
print(table.concat(dl.process_allgather({1, 2}).shape, "x"), show(dl.process_allgather({1, 2}, true)))
print(show(dl.broadcast_one_to_all(7)), pcall(dl.assert_equal, {1}))
local ok, e = pcall(dl.broadcast_one_to_all, 7, false)
print(e.name, e.message)
ok, e = pcall(dl.process_allgather, "x")
print(e.name, e.message)]])
    assert.are.equal("", err)
    assert.are.equal(0, status)
    assert.are.equal("1x2\t1,2\n7\ttrue\nRuntimeError\tbroadcast_one_to_all: no process passed "
                     .. "is_source=true; exactly one must\nTypeError\tprocess_allgather: argument "
                     .. "1 (x) must be an Array or data dl.array takes, got string\n", out)
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
