-- runs: every-platform
-- ipc-off: yes
-- devices: any
-- needs: mpi

-- Global arrays across processes: built from each process's own data, and exported through
-- dl.export's strategies, the ways out of the fetch error. Each script runs under mpirun
-- (helpers.mpirun) with 2 sim devices per process.
local H = require "helpers"
local mpirun, sorted_lines, SHOW = H.mpirun, H.sorted_lines, H.SHOW_SHARDS
local SIM2 = {args = "--devices sim:2"}

local function lines_of(out, want)
  table.sort(want)
  assert.are.same(want, sorted_lines(out))
end

describe("make_array_from_process_local_data", function()
  for _, n in ipairs {2, 4} do
    it("on " .. n .. " processes: each process's rows make one global array; the shape is "
       .. "inferred or given", function()
      local out, err, status = mpirun(n, SHOW .. [[
local p, n = dl.process_index(), dl.process_count()
local rows = dl.NamedSharding(dl.make_mesh({n, 2}, {"x", "y"}), dl.P("x", "y"))
local here = {}
for r = 1, 2 do here[r] = {p * 20 + r * 2 - 2, p * 20 + r * 2 - 1} end
local x = dl.make_array_from_process_local_data(rows, dl.array(here, "int32"))
local y = dl.make_array_from_process_local_data(rows, here, {2 * n, 2})
print(p, table.concat(x.shape, "x"), x.is_fully_addressable, shards(x), x.dtype, y.dtype)
assert(dl.process_allgather(x, true):tolist()[2 * n][2] == (n - 1) * 20 + 3)
dl.assert_equal(dl.process_allgather(y, true), "the given shape")
local same = dl.make_array_from_process_local_data(dl.NamedSharding(rows.mesh, dl.P()), {5, 6})
print(p, "replicated", table.concat(same.shape, "x"), same.is_fully_replicated, shards(same))]],
                                      SIM2)
      assert.are.equal("", err)
      assert.are.equal(0, status)
      local want = {}
      for p = 0, n - 1 do
        local a, b = 2 * p, 2 * p + 1
        want[#want + 1] = ("%d\t%dx2\tfalse\t%d=%d;%d %d=%d;%d\tint32\tint32")
                          :format(p, 2 * n, a, p * 20, p * 20 + 2, b, p * 20 + 1, p * 20 + 3)
        want[#want + 1] = ("%d\treplicated\t2\ttrue\t%d=5,6 %d=5,6"):format(p, a, b)
      end
      lines_of(out, want)
    end)
  end

  it("refuses data of the wrong shape, shards that are not one slab, and a shape it cannot "
     .. "infer; a process holding no shard needs global_shape", function()
    local out, err, status = mpirun(2, [[
local p = dl.process_index()
local d = dl.devices()
local rows = dl.NamedSharding(dl.make_mesh({4}, {"x"}), dl.P("x"))
local function try(...)
  local ok, e = pcall(dl.make_array_from_process_local_data, ...)
  print(p, ok, e.name, (e.message:gsub("NamedSharding%b()", "S")))
end
try(rows, {1, 2, 3}, {8})
try(rows, {1, 2, 3})
try(rows, {{1, 2}}, {8})
try(dl.NamedSharding(dl.Mesh({d[1], d[3], d[2], d[4]}, {"x"}), dl.P("x")), {1, 2})
try(rows, "rows")
local first = dl.NamedSharding(dl.Mesh({d[1], d[2]}, {"x"}), dl.P("x"))
if p == 1 then
  try(first, {1, 2})
  local x = dl.make_array_from_process_local_data(first, {1, 2}, {4})
  print(p, #x.addressable_shards, #x.global_shards, table.concat(x.shape, "x"))
end]], SIM2)
    assert.are.equal("", err)
    assert.are.equal(0, status)
    local F = "make_array_from_process_local_data: "
    local want = {
      "1\tfalse\tValueError\t" .. F .. "this process holds no shard of the sharding, so the "
        .. "global shape cannot be inferred from local_data; pass global_shape",
      "1\t0\t2\t4",
    }
    for p = 0, 1 do
      for _, line in ipairs {
        "false\tValueError\t" .. F .. "local_data has shape (3,), but this process's shards of "
          .. "the global shape (8,) under S cover a slab of shape (4,) at (" .. 4 * p .. ",)",
        "false\tValueError\t" .. F .. "cannot infer the global shape: dimension 0 of local_data "
          .. "(shape (3,)) does not divide among the 2 shards this process holds along it; pass "
          .. "global_shape",
        "false\tValueError\t" .. F .. "global_shape (8,) has 1 dimensions, but local_data has 2 "
          .. "(shape (1, 2))",
        "false\tValueError\t" .. F .. "this process's shards of the sharding do not form one box "
          .. "of the global array (2 distinct blocks in a span of 3); each process must hold one "
          .. "slab, such as a run of rows",
        "false\tTypeError\t" .. F .. "argument 2 (local_data) must be an Array or data dl.array "
          .. "takes, got string",
      } do
        want[#want + 1] = p .. "\t" .. line
      end
    end
    lines_of(out, want)
  end)
end)

describe("assembling global arrays from this process's pieces", function()
  it("make_array_from_single_device_arrays takes one array per local device of the sharding",
     function()
    local out, err, status = mpirun(2, [[
local p = dl.process_index()
local s = dl.NamedSharding(dl.make_mesh({4}, {"x"}), dl.P("x"))
local mine = {}
for k, d in ipairs(dl.local_devices()) do mine[k] = dl.array({p, k}, "int32", d) end
local x = dl.make_array_from_single_device_arrays({8}, s, mine)
print(p, #x.addressable_shards, table.concat(dl.process_allgather(x, true):tolist(), ","))
local ok, e = pcall(dl.make_array_from_single_device_arrays, {8}, s, {mine[1]})
print(p, e.name, e.message)]], SIM2)
    assert.are.equal("", err)
    assert.are.equal(0, status)
    local few = "ValueError\tExpected 2 per-device arrays (this is how many devices are "
                .. "addressable by the sharding), but got 1"
    lines_of(out, {"0\t2\t0,1,0,2,1,1,1,2", "1\t2\t0,1,0,2,1,1,1,2", "0\t" .. few, "1\t" .. few})
  end)

  it("make_array_from_callback calls back for this process's devices only", function()
    local out, err, status = mpirun(2, [[
local p = dl.process_index()
local d = dl.devices()
local calls = {}
local s = dl.NamedSharding(dl.make_mesh({4}, {"x"}), dl.P("x"))
local x = dl.make_array_from_callback({8}, s, function(index)
  calls[#calls + 1] = index[1][1] .. "-" .. index[1][2]
  return {index[1][1] * 10, index[1][2] * 10}
end)
print(p, table.concat(calls, " "), table.concat(dl.process_allgather(x, true):tolist(), ","))
local first = dl.NamedSharding(dl.Mesh({d[1], d[2]}, {"x"}), dl.P("x"))
local y = dl.make_array_from_callback({4}, first, function() return {7, 7} end, "int8")
local ok, e = pcall(dl.make_array_from_callback, {4}, first, function() return {7, 7} end)
print(p, #y.addressable_shards, y.dtype, ok, ok or e.message)]], SIM2)
    assert.are.equal("", err)
    assert.are.equal(0, status)
    local all = "10,20,30,40,50,60,70,80"
    lines_of(out, {"0\t1-2 3-4\t" .. all, "1\t5-6 7-8\t" .. all, "0\t2\tint8\ttrue\ttrue",
                   "1\t0\tint8\tfalse\tmake_array_from_callback: this process holds none of the "
                     .. "sharding's devices, so no data gives the dtype; pass dtype"})
  end)

  it("Lua data goes to this process's first device by default", function()
    local out, err, status = mpirun(2, [[
print(dl.process_index(), tostring(dl.array({1}).sharding.device_set[1]),
      tostring(dl.device_put({1}).sharding.device_set[1]))]], SIM2)
    assert.are.equal("", err)
    assert.are.equal(0, status)
    lines_of(out, {"0\tSimDevice(id=0)\tSimDevice(id=0)", "1\tSimDevice(id=2)\tSimDevice(id=2)"})
  end)
end)

-- x: arange(16) int32 over both processes' 4 devices; each result printed as
-- strategy, bytes_moved, process_index, device, the exported values (or nil).
local EXPORT = [[
local p = dl.process_index()
local mesh = dl.make_mesh({4}, {"x"})
local x = dl.arange(16, "int32", dl.NamedSharding(mesh, dl.P("x")))
local function show(r)
  local v = r.capsule and table.concat(dl.from_dlpack(r.capsule):tolist(), ",") or "nil"
  local line = {p, r.strategy, r.bytes_moved, r.process_index, tostring(r.device), v, r.reason}
  print(table.concat(line, "\t"))
end
]]
local ALL = "0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15"

describe("dl.export of an array spanning processes", function()
  it("__dlpack__ raises BufferError; is_dlpack_exportable is false; try_export falls back",
     function()
    local out, err, status = mpirun(2, EXPORT .. [[
local ok, e = pcall(x.__dlpack__, x)
print(p, dl.is_dlpack_exportable(x), e.name)
local r = dl.try_export(x)
print(p, r.buffer_error.name)
show(r)]], SIM2)
    assert.are.equal("", err)
    assert.are.equal(0, status)
    local why = "spans processes: gathered whole onto a device of every process, each of which "
                .. "has room"
    lines_of(out, {"0\tfalse\tBufferError", "1\tfalse\tBufferError", "0\tBufferError",
                   "1\tBufferError", "0\tallgather\t64\t0\tSimDevice(id=0)\t" .. ALL .. "\t" .. why,
                   "1\tallgather\t64\t1\tSimDevice(id=2)\t" .. ALL .. "\t" .. why})
  end)

  it("gather: onto process 0's first device, or a given one; the others get no capsule",
     function()
    local out, err, status = mpirun(2, EXPORT .. [[
show(dl.export(x, {strategy = "gather"}))
show(dl.export(x, {strategy = "gather", device = dl.devices()[4]}))]], SIM2)
    assert.are.equal("", err)
    assert.are.equal(0, status)
    -- bytes_moved: what each process wrote (the whole array on the owner).
    lines_of(out, {"0\tgather\t64\t0\tSimDevice(id=0)\t" .. ALL, "1\tgather\t0\t0\tSimDevice(id=0)\tnil",
                   "0\tgather\t0\t1\tSimDevice(id=3)\tnil", "1\tgather\t64\t1\tSimDevice(id=3)\t" .. ALL})
  end)

  it("allgather, host and shards: every process gets the whole array, or its own blocks",
     function()
    local out, err, status = mpirun(2, EXPORT .. [[
show(dl.export(x, {strategy = "allgather", device = dl.local_devices()[2]}))
show(dl.export(x, {strategy = "host"}))
local r = dl.export(x, {strategy = "shards"})
local t = {}
for _, s in ipairs(r.shards) do
  t[#t + 1] = s.index[1][1] .. ":" .. table.concat(dl.from_dlpack(s.capsule):tolist(), ",")
end
print(p, r.strategy, r.bytes_moved, r.process_index, table.concat(t, " "))
local ok, e = pcall(dl.export, x, {strategy = "allgather", device = dl.devices()[p == 0 and 3 or 1]})
print(p, e.name, e.message)]], SIM2)
    assert.are.equal("", err)
    assert.are.equal(0, status)
    lines_of(out, {
      "0\tallgather\t64\t0\tSimDevice(id=1)\t" .. ALL, "1\tallgather\t64\t1\tSimDevice(id=3)\t" .. ALL,
      "0\thost\t64\t0\tCpuDevice(id=0)\t" .. ALL, "1\thost\t64\t1\tCpuDevice(id=1)\t" .. ALL,
      "0\tshards\t32\t0\t1:0,1,2,3 5:4,5,6,7", "1\tshards\t32\t1\t9:8,9,10,11 13:12,13,14,15",
      "0\tValueError\texport: strategy \"allgather\" needs a device of this process (process 0), "
        .. "but SimDevice(id=2) is process 1's",
      "1\tValueError\texport: strategy \"allgather\" needs a device of this process (process 1), "
        .. "but SimDevice(id=0) is process 0's",
    })
  end)

  it("replica and auto: a replica on every process exports with no gather; short memory "
     .. "anywhere sends every process to host memory", function()
    local out, err, status = mpirun(2, EXPORT .. [[
local rep = dl.device_put(x, dl.NamedSharding(mesh, dl.P()))
show(dl.export(rep, {strategy = "replica", max_version = {1, 0}}))
show(dl.export(rep))
local ok, e = pcall(dl.export, x, {strategy = "replica"})
print(p, e.name)
-- On process 1, leave its first device too little room for the whole array.
local big = dl.arange(0, 64 * 1024, 1, "int32", dl.NamedSharding(mesh, dl.P("x")))
local free = dl.local_devices()[1]:memory_stats().largest_free_block_bytes
local filler = p == 1 and dl.zeros({free // 4 - 1024}, "int32", dl.local_devices()[1])
local r = dl.export(big)
print(p, r.strategy, r.bytes_moved, tostring(r.device), r.reason)]],
                                    {args = "--devices sim:2 --device-memory 1MiB"})
    assert.are.equal("", err)
    assert.are.equal(0, status)
    local why = "fully replicated, with a replica on every process: exported this process's "
                .. "replica, gathering nothing"
    local short = "spans processes, and process 1's device cannot hold 256.00KiB: gathered into "
                  .. "every process's host memory"
    lines_of(out, {
      "0\treplica\t0\t0\tSimDevice(id=0)\t" .. ALL, "1\treplica\t0\t1\tSimDevice(id=2)\t" .. ALL,
      -- A legacy capsule (the default) is a copy; a versioned one shares, read-only.
      "0\treplica\t64\t0\tSimDevice(id=0)\t" .. ALL .. "\t" .. why,
      "1\treplica\t64\t1\tSimDevice(id=2)\t" .. ALL .. "\t" .. why,
      "0\tValueError", "1\tValueError",
      "0\thost\t262144\tCpuDevice(id=0)\t" .. short, "1\thost\t262144\tCpuDevice(id=1)\t" .. short,
    })
  end)

  it("an array wholly on another process's devices is that process's to export", function()
    local out, err, status = mpirun(2, [[
local p = dl.process_index()
local theirs = dl.device_put(dl.arange(4, "int32", dl.devices()[3]), dl.devices()[4])
local ok, e = pcall(dl.export, theirs)
print(p, ok, ok and dl.from_dlpack(e.capsule):tolist()[4] or e.message)]], SIM2)
    assert.are.equal("", err)
    assert.are.equal(0, status)
    lines_of(out, {"0\tfalse\texport: the array lies wholly on process 1's devices, so only "
                     .. "process 1 can export it (this is process 0)", "1\ttrue\t3"})
  end)
end)

describe("reading an array that spans processes", function()
  local FETCH = "Fetching value for an Array that spans non-addressable (non process local) "
                .. "devices is not possible. You can use `dl.process_allgather` to print the "
                .. "global array or use `.addressable_shards` of the Array to inspect the "
                .. "addressable (process local) shards."
  for _, n in ipairs {2, 3, 4} do
    it("on " .. n .. " processes: print shows no values unless this process holds them whole; "
       .. "a replica here is read without a collective; device_get raises the fetch error "
       .. "otherwise", function()
      local out, err, status = mpirun(n, [[
local p, n = dl.process_index(), dl.process_count()
local d = dl.devices()
local mesh = dl.make_mesh({2 * n}, {"x"})
local split = dl.arange(0, 2 * n, 1, "int32", dl.NamedSharding(mesh, dl.P("x")))
local repl = dl.arange(0, 4, 1, "float32", dl.NamedSharding(mesh, dl.P()))
-- each process holds both blocks: block 0 on its first device, block 1 on its second
local covered = dl.arange(0, 4, 1, "int32",
                          dl.NamedSharding(dl.make_mesh({n, 2}, {"p", "l"}), dl.P("l")))
-- replicated over process 0's devices only
local on0 = dl.full({2}, 9, "int8", dl.NamedSharding(dl.Mesh({d[1], d[2]}, {"x"}), dl.P()))
print(p, "split", split)
print(p, "repl", repl)
print(p, "covered", covered, table.concat(covered:tolist(), ","))
print(p, "on0", on0)
if p == n - 1 then -- reads take no collective: only one process reads here
  print(p, "tolist", table.concat(repl:tolist(), ","))
  print(p, "tobytes", repl:tobytes() == dl.array({0, 1, 2, 3}, "float32"):tobytes())
  print(p, "item", dl.full({}, 7, "int32", dl.NamedSharding(mesh, dl.P())):item())
  local got = dl.device_get({a = repl, b = 5})
  print(p, "device_get", got.a, tostring(got.a:devices()[1]), got.a.is_fully_addressable, got.b)
end
for _, x in ipairs(p == 0 and {split} or {split, on0}) do
  local ok, e = pcall(dl.device_get, x)
  print(p, "device_get", ok, e.name, e.message)
  ok, e = pcall(x.tolist, x)
  print(p, "tolist", ok, e.name, e.message)
end
dl.sync_global_devices("after the reads")
print(p, "in step")]], SIM2)
      assert.are.equal("", err)
      assert.are.equal(0, status)
      local want = {}
      local mesh = ("Mesh('x': %d)"):format(2 * n)
      for p = 0, n - 1 do
        local function add(fmt, ...) want[#want + 1] = p .. "\t" .. fmt:format(...) end
        add("split\tArray(shape=(%d,), dtype=int32, sharding=NamedSharding(mesh=%s, "
            .. "spec=PartitionSpec('x',), memory_kind=device))", 2 * n, mesh)
        add("repl\tArray([0., 1., 2., 3.], dtype=float32)")
        add("covered\tArray([0, 1, 2, 3], dtype=int32)\t0,1,2,3")
        if p == 0 then
          add("on0\tArray([9, 9], dtype=int8)")
        else
          add("on0\tArray(shape=(2,), dtype=int8, sharding=NamedSharding(mesh=Mesh('x': 2), "
              .. "spec=PartitionSpec(), memory_kind=device))")
          add("device_get\tfalse\tRuntimeError\t%s", FETCH)
          add("tolist\tfalse\tRuntimeError\t%s", FETCH)
        end
        add("device_get\tfalse\tRuntimeError\t%s", FETCH)
        add("tolist\tfalse\tRuntimeError\t%s", FETCH)
        add("in step")
      end
      local last = n - 1
      want[#want + 1] = last .. "\ttolist\t0.0,1.0,2.0,3.0"
      want[#want + 1] = last .. "\ttobytes\ttrue"
      want[#want + 1] = last .. "\titem\t7"
      want[#want + 1] = ("%d\tdevice_get\tArray([0., 1., 2., 3.], dtype=float32)\t"
                         .. "CpuDevice(id=%d)\ttrue\t5"):format(last, last)
      lines_of(out, want)
    end)
  end
end)
