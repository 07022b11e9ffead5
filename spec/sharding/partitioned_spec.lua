-- runs: every-platform
-- ipc-off: no
-- devices: 8
-- needs: mpi

-- The __partitioned__ description (docs/partitioned.md): x:__partitioned__([opts]) and
-- dl.from_partitioned(desc [, sharding]). Starts and grid positions are 0-based.
-- The busted process runs on 8 sim devices (ids 0..7) and the host cpu device.
-- The 2-process runs go through helpers.mpirun with 2 sim devices per process.
local H = require "helpers"
local dl = require "dlrun"
local expect_error = H.expect_error

-- A float32 [8, 4] array 0, 1, ... laid out by `spec` over a {4, 2} mesh.
local function array(spec)
  local rows = {}
  for i = 1, 8 do
    rows[i] = {}
    for j = 1, 4 do rows[i][j] = (i - 1) * 4 + j - 1 end
  end
  local mesh = dl.make_mesh({4, 2}, {"x", "y"})
  return dl.device_put(dl.array(rows, "float32"), dl.NamedSharding(mesh, spec))
end

local function ids(location)
  local out = {}
  for i, l in ipairs(location) do out[i] = {l.process, l.device.id, l.replica_id} end
  return out
end

-- A description of an [8] float32 array as 2 blocks, edited by `edit`.
local function desc(edit)
  local x = dl.arange(0, 8, 1, "float32", dl.NamedSharding(dl.make_mesh({2}, {"x"}), dl.P("x")))
  local d = x:__partitioned__()
  if edit then edit(d) end
  return d
end

describe("x:__partitioned__", function()
  -- Capsules and arrays left for the collector would be freed in later specs.
  after_each(function() collectgarbage(); collectgarbage() end)

  it("describes a 2-d sharded, replicated array: grid, 0-based starts, every replica", function()
    local x = array(dl.P("x"))
    dl.reset_transfer_stats()
    local d = x:__partitioned__()
    assert.are.same({8, 4}, d.shape)
    assert.are.same({4, 1}, d.partition_tiling)
    assert.are.equal(4, #d.partitions)
    assert.are.same({{0, 0}, {1, 0}, {2, 0}, {3, 0}}, d.locals)
    for k, p in ipairs(d.partitions) do
      assert.are.same({k - 1, 0}, p.position)
      assert.are.same({2 * (k - 1), 0}, p.start)
      assert.are.same({2, 4}, p.shape)
      assert.are.same({{0, 2 * k - 2, 0}, {0, 2 * k - 1, 1}}, ids(p.location))
      assert.are.equal("dltensor_versioned", p.data.name)
      assert.is_true(p.data.read_only)
      assert.is_false(p.data.is_copied)
    end
    assert.are.equal(0, dl.transfer_stats().bytes_moved)
    assert.are.same({{16, 17, 18, 19}, {20, 21, 22, 23}},
                    dl.from_dlpack(d.partitions[3].data):tolist())
  end)

  it("a 2-d grid lists positions in row-major order", function()
    local d = array(dl.P("x", "y")):__partitioned__()
    assert.are.same({4, 2}, d.partition_tiling)
    assert.are.same({1, 1}, d.partitions[4].position)
    assert.are.same({2, 2}, d.partitions[4].start)
    assert.are.same({{0, 3, 0}}, ids(d.partitions[4].location))
  end)

  it("a fully replicated array is one partition held 8 times; a one-device array one", function()
    local d = array(dl.P()):__partitioned__()
    assert.are.same({1, 1}, d.partition_tiling)
    assert.are.equal(1, #d.partitions)
    assert.are.equal(8, #d.partitions[1].location)
    assert.are.same({0, 7, 7}, ids(d.partitions[1].location)[8])
    local one = dl.array({1, 2, 3}):__partitioned__()
    assert.are.same({1}, one.partition_tiling)
    assert.are.same({0}, one.partitions[1].start)
    assert.are.same({3}, one.partitions[1].shape)
  end)

  it("passes max_version, dl_device and copy to every capsule", function()
    local x = array(dl.P("x", "y"))
    local legacy = x:__partitioned__{max_version = {0, 8}}
    assert.are.equal("dltensor", legacy.partitions[1].data.name)
    assert.is_true(legacy.partitions[1].data.is_copied)
    dl.reset_transfer_stats()
    local host = x:__partitioned__{dl_device = {1, 0}}
    assert.are.equal(1, host.partitions[2].data.device[1])
    assert.are.equal(128, dl.transfer_stats().bytes_moved)
    local copied = x:__partitioned__{copy = true}
    assert.is_true(copied.partitions[1].data.is_copied)
    expect_error("ValueError", {contains = "copy=False"}, x.__partitioned__, x,
                 {copy = false, dl_device = {1, 0}})
    expect_error("TypeError", "__partitioned__: unexpected option 'stream' (expected "
                 .. "max_version, dl_device, copy)", x.__partitioned__, x, {stream = 1})
    expect_error("TypeError", "__partitioned__: argument 2 (options) must be a table "
                 .. "{max_version=, dl_device=, copy=}, got number", x.__partitioned__, x, 3)
    legacy, host, copied = nil, nil, nil
    x:delete()
    expect_error("RuntimeError", "Array has been deleted with shape=float32[8,4].",
                 x.__partitioned__, x)
    assert.are.equal(0, (function() collectgarbage(); collectgarbage()
      return dl.live_exports() end)())
  end)
end)

describe("dl.from_partitioned", function()
  -- Capsules and arrays left for the collector would be freed in later specs.
  after_each(function() collectgarbage(); collectgarbage() end)

  it("round trips a sharded array moving no bytes", function()
    for _, spec in ipairs {dl.P("x"), dl.P("x", "y"), dl.P(nil, "y")} do
      local x = array(spec)
      dl.reset_transfer_stats()
      local y = dl.from_partitioned(x:__partitioned__())
      local s = dl.transfer_stats()
      assert.are.equal(0, s.bytes_moved)
      assert.are.equal(0, s.local_bytes)
      assert.are.same(x:tolist(), y:tolist())
      assert.are.same(x.shape, y.shape)
    end
    local y = dl.from_partitioned(array(dl.P("x", "y")):__partitioned__())
    assert.are.equal("NamedSharding(mesh=Mesh('p0': 4, 'p1': 2), spec=PartitionSpec('p0', "
                     .. "'p1'), memory_kind=device)", tostring(y.sharding))
  end)

  it("rebuilds replicas only when a sharding asks for them, copying just those", function()
    local x = array(dl.P("x"))
    dl.reset_transfer_stats()
    local y = dl.from_partitioned(x:__partitioned__())
    assert.are.equal(4, #y.addressable_shards)
    assert.are.equal(0, dl.transfer_stats().bytes_moved)
    local z = dl.from_partitioned(x:__partitioned__(), x.sharding)
    assert.is_true(z.sharding == x.sharding)
    assert.are.equal(4 * 32, dl.transfer_stats().bytes_moved)
    assert.are.same(x:tolist(), z:tolist())
  end)

  it("takes foreign partitions: objects with __dlpack__, no locations", function()
    local a = dl.array({1, 2}, "int32", dl.devices()[3])
    local b = dl.array({3, 4}, "int32", dl.devices()[6])
    local function wrap(arr)
      return {__dlpack__ = function(_, o) return arr:__dlpack__(o) end,
              __dlpack_device__ = function() return arr:__dlpack_device__() end}
    end
    dl.reset_transfer_stats()
    local y = dl.from_partitioned{shape = {4}, partition_tiling = {2}, partitions = {
      {position = {1}, start = {2}, shape = {2}, data = wrap(b)},
      {position = {0}, start = {0}, shape = {2}, data = a:__dlpack__{max_version = {1, 0}}}}}
    assert.are.same({1, 2, 3, 4}, y:tolist())
    assert.are.equal(0, dl.transfer_stats().bytes_moved)
    assert.are.same({2, 5}, {y.addressable_shards[1].device.id, y.addressable_shards[2].device.id})
  end)

  it("raises a ValueError naming each bad description", function()
    local V = "ValueError"
    local function bad(msg, edit)
      expect_error(V, "from_partitioned: " .. msg, dl.from_partitioned, desc(edit))
    end
    bad("the grid partition_tiling (2,) has 2 positions, but no partition has position (1,)",
        function(d) d.partitions[2] = nil end)
    bad("partitions[1] and partitions[2] both have position (0,)",
        function(d) d.partitions[2].position = {0} end)
    bad("partitions[2] has position (2,), outside the grid partition_tiling (2,)",
        function(d) d.partitions[2].position = {2} end)
    bad("the partitions at positions (0,) and (1,) overlap (start (0,), shape (5,) and start "
        .. "(3,), shape (5,))", function(d)
          d.partitions[1].shape = {5}; d.partitions[2].start = {3}; d.partitions[2].shape = {5}
        end)
    bad("the partition at position (0,) has start (0,) and shape (3,), but a regular grid (2,) "
        .. "over shape (8,) puts it at start (0,) with shape (4,)", function(d)
          d.partitions[1].shape = {3}; d.partitions[2].start = {3}; d.partitions[2].shape = {5}
        end)
    bad("dimension 0 (size 7) does not split into 2 equal partitions: dlrun needs a regular "
        .. "grid of equal blocks", function(d)
          d.shape = {7}; d.partitions[1].shape = {3}; d.partitions[2].start = {3}
          d.partitions[2].shape = {4}
        end)
    bad("the partition at position (1,) (start (6,), shape (4,)) extends past the global shape "
        .. "(8,)", function(d) d.partitions[2].start = {6} end)
    bad("partition_tiling (2, 1) has 2 entries, but shape (8,) has 1 dimensions",
        function(d) d.partition_tiling = {2, 1} end)
    bad("partitions[2].start[1] must be an integer >= 0, got -1",
        function(d) d.partitions[2].start = {-1} end)
    bad("the partition at position (1,) has shape (4,), but its data has shape (2,)", function(d)
      local short = dl.array({1, 2}, "float32", dl.devices()[2])
      d.partitions[2].data = short:__dlpack__{max_version = {1, 0}}
    end)
    bad("the partition at position (1,) has dtype int32, but the one at position (0,) has "
        .. "float32: every partition must have one dtype", function(d)
          d.partitions[2].data = dl.array({1, 2, 3, 4}, "int32", dl.devices()[2])
        end)
    bad("the partition at position (1,) is on " .. H.dev(1) .. ", a device of this process, but "
        .. "has no data", function(d) d.partitions[2].data = nil end)
    bad("the partitions at positions (0,) and (1,) are both on " .. H.dev(0) .. ": an inferred "
        .. "sharding needs one device per partition", function(d)
          d.partitions[2].location[1].device = dl.devices()[1]
        end)
  end)

  it("walks user tables defensively: types, keys, sizes, cycles", function()
    local T = "TypeError"
    local function bad(class, msg, d)
      expect_error(class, "from_partitioned: " .. msg, dl.from_partitioned, d)
    end
    bad(T, "argument 1 (desc) must be a table {shape=, partition_tiling=, partitions=}, "
        .. "got nil", nil)
    bad(T, "shape must be a list of integers, got string", {shape = "8"})
    bad(T, "shape must be a list of integers (keys 1 to n only)", {shape = {8, x = 1}})
    local cyc = desc(); cyc.partitions[1].location = cyc.partitions
    bad(T, "partitions[1].location[1].device must be a Device, got nil", cyc)
    local loop = desc(); loop.partitions[2] = loop
    bad(T, "partitions[2].position must be a list of integers, got nil", loop)
    bad(T, "partitions[1] must be a table {position=, start=, shape=, location=, data=}, "
        .. "got number",
        {shape = {8}, partition_tiling = {1}, partitions = {3}})
    local big = {}
    for i = 1, 33 do big[i] = 1 end
    bad("ValueError", "shape has 33 entries (at most 32)", {shape = big})
    bad("ValueError", "partitions has 3 entries (at most 2)",
        desc(function(d) d.partitions[3] = {} end))
    expect_error(T, "from_partitioned: argument 2 (sharding) must be a Sharding, got Device",
                 dl.from_partitioned, desc(), dl.devices()[1])
  end)
end)

describe("dl.from_partitioned round trips of every platform and memory kind", function()
  -- In fresh processes with two devices of each platform: sim and cpu, and opencl on pocl
  -- when it is here. A round trip keeps the memory kind and moves no byte; given the
  -- array's own sharding, only replicas (the description holds one copy) are rebuilt.
  local CHUNK = [[
local dl = require "dlrun"
for _, platform in ipairs {"sim", "opencl", "cpu"} do
  local ok, devs = pcall(dl.devices, platform)
  for _, kind in ipairs(ok and {"device", "pinned_host"} or {}) do
    local mesh = dl.make_mesh({2}, {"x"}, devs)
    local layouts = {one = dl.SingleDeviceSharding(devs[2], kind),
                     split = dl.NamedSharding(mesh, dl.P("x"), kind),
                     replicated = dl.NamedSharding(mesh, dl.P(), kind)}
    for _, name in ipairs {"one", "split", "replicated"} do
      local x = dl.arange(0, 8, 1, "float32", layouts[name])
      dl.reset_transfer_stats()
      local y = dl.from_partitioned(x:__partitioned__())
      local moved = dl.transfer_stats().bytes_moved
      dl.reset_transfer_stats()
      local z = dl.from_partitioned(x:__partitioned__(), x.sharding)
      print(platform, kind, name, moved, y.sharding.memory_kind, y.addressable_shards[1].device.id,
            dl.transfer_stats().bytes_moved, z.sharding == x.sharding, z:tolist()[8])
    end
  end
end]]

  local function expect(platforms)
    local want = {}
    for _, platform in ipairs(platforms) do
      for _, kind in ipairs {"device", "pinned_host"} do
        want[#want + 1] = table.concat({platform, kind, "one", 0, kind, 1, 0, "true", "7.0"}, "\t")
        want[#want + 1] = table.concat({platform, kind, "split", 0, kind, 0, 0, "true", "7.0"}, "\t")
        -- The second replica is not in the description: 32 bytes rebuild it.
        want[#want + 1] = table.concat({platform, kind, "replicated", 0, kind, 0, 32, "true",
                                        "7.0"}, "\t")
      end
    end
    return table.concat(want, "\n") .. "\n"
  end

  it("on sim and cpu devices", function()
    local out, err, status = H.run_code(CHUNK, {"--devices", "sim:2,cpu:2"})
    assert.are.equal("", err)
    assert.is_true(status == 0 or status == true)
    assert.are.equal(expect {"sim", "cpu"}, out)
  end)

  it("on OpenCL devices", function()
    local env = {POCL_DEVICES = "pthread pthread"}
    local list = H.run({"--list-devices"}, nil, env)
    local line = list:match("opencl +([^\n]*)")
    if not (line and line:match("^available")) then
      return pending("OpenCL not here: " .. tostring(line))
    end
    local out, err, status = H.run_code(CHUNK, {"--devices", "opencl:2,cpu:2"}, env)
    assert.are.equal("", err)
    assert.is_true(status == 0 or status == true)
    assert.are.equal(expect {"opencl", "cpu"}, out)
  end)
end)

describe("dl.from_partitioned reads descriptions raw and checks their arithmetic", function()
  after_each(function() collectgarbage(); collectgarbage() end)

  local function bad(class, msg, d)
    expect_error(class, "from_partitioned: " .. msg, dl.from_partitioned, d)
  end
  local function raising() error("a metamethod ran") end

  it("runs no metamethod: an erroring __index is not called, one that supplies a field is "
     .. "not seen", function()
    bad("TypeError", "shape must be a list of integers, got nil",
        setmetatable({}, {__index = raising}))
    local d = desc()
    bad("TypeError", "shape must be a list of integers, got nil",
        setmetatable({partition_tiling = d.partition_tiling, partitions = d.partitions},
                     {__index = {shape = {8}}}))
    bad("TypeError", "partitions[2].position must be a list of integers, got nil",
        desc(function(e)
          local p = e.partitions[2]
          e.partitions[2] = setmetatable({start = p.start, shape = p.shape, data = p.data},
                                         {__index = function(_, k)
                                           if k == "position" then return {1} end
                                           return raising()
                                         end})
        end))
    bad("TypeError", "partitions[2].location[1].device must be a Device, got nil",
        desc(function(e)
          local l = e.partitions[2].location
          l[1] = setmetatable({}, {__index = {device = dl.devices()[2]}})
        end))
    -- A location entry's metatable raising on any access is never touched.
    bad("TypeError", "partitions[2].location[1].device must be a Device, got nil",
        desc(function(e) e.partitions[2].location[1] = setmetatable({}, {__index = raising}) end))
  end)

  it("raises a ValueError naming partition_tiling or shape when a product overflows", function()
    bad("ValueError", "partition_tiling (4294967296, 4294967296) has too many positions "
        .. "(overflows int64)", {shape = {0, 0}, partition_tiling = {2^32, 2^32}, partitions = {}})
    bad("ValueError", "partition_tiling (9223372036854775807, 9223372036854775807) has too many "
        .. "positions (overflows int64)",
        {shape = {0, 0}, partition_tiling = {math.maxinteger, math.maxinteger}, partitions = {}})
    bad("ValueError", "partition_tiling (65537, 1) has 65537 positions (at most 65536)",
        {shape = {0, 0}, partition_tiling = {65537, 1}, partitions = {}})
    bad("ValueError", "shape (4294967296, 4294967296) has too many elements (overflows int64)",
        {shape = {2^32, 2^32}, partition_tiling = {1, 1}, partitions = {}})
    -- A zero dimension makes the product 0, as dlrun_shape_size.
    bad("ValueError", "the grid partition_tiling (1, 1, 1) has 1 positions, but no partition "
        .. "has position (0, 0, 0)", {shape = {0, math.maxinteger, math.maxinteger},
                                      partition_tiling = {1, 1, 1}, partitions = {}})
  end)

  it("does not let start + shape wrap past the global shape", function()
    bad("ValueError", "the partition at position (1,) (start (9223372036854775807,), shape "
        .. "(4,)) extends past the global shape (8,)",
        desc(function(d) d.partitions[2].start = {math.maxinteger} end))
  end)

  it("names the type of a value that is not an integer: string \"0\"", function()
    local V = "ValueError"
    bad(V, 'partitions[1].position[1] must be an integer >= 0, got string "0"',
        desc(function(d) d.partitions[1].position = {"0"} end))
    bad(V, 'shape[1] must be an integer >= 0, got string "8\\n\\"\\\\\\001"',
        {shape = {'8\n"\\\1'}})
    bad(V, 'shape[1] must be an integer >= 0, got string "' .. ("x"):rep(40) .. '"...',
        {shape = {("x"):rep(41)}})
    bad(V, "partition_tiling[1] must be an integer >= 1, got boolean true",
        {shape = {8}, partition_tiling = {true}})
    bad(V, "partitions[2].start[1] must be an integer >= 0, got 1.5",
        desc(function(d) d.partitions[2].start = {1.5} end))
    -- Floats in the fewest digits that read back (tostring would say 1.844674407371e+19).
    bad(V, "shape[1] must be an integer >= 0, got 1.8446744073709552e+19", {shape = {2^64}})
    bad(V, "partitions[2].shape[1] must be an integer >= 0, got table",
        desc(function(d) d.partitions[2].shape = {{4}} end))
    bad(V, "partitions[2].shape[1] must be an integer >= 0, got Device",
        desc(function(d) d.partitions[2].shape = {dl.devices()[1]} end))
    -- The C side shows values the same way.
    local p = dl.P("x")
    p.n = "1"
    expect_error("TypeError", 'NamedSharding: the PartitionSpec\'s n must be a count of entries, '
                 .. 'got string "1"', dl.NamedSharding, dl.make_mesh({2}, {"x"}), p)
  end)
end)

describe("__partitioned__ on 2 processes", function()
  it("lists this process's positions in locals, remote partitions without data, and round "
     .. "trips moving no bytes", function()
    local out, err, status = H.mpirun(2, [[
local p = dl.process_index()
local mesh = dl.make_mesh({2, 2}, {"x", "y"})
local function global(spec)
  local s = dl.NamedSharding(mesh, spec)
  return dl.make_array_from_callback({4, 2}, s, function(index)
    local rows = {}
    for i = index[1][1], index[1][2] do
      rows[#rows + 1] = {}
      for j = index[2][1], index[2][2] do rows[#rows][#rows[#rows] + 1] = i * 10 + j end
    end
    return dl.array(rows, "int32")
  end)
end
local function where(d)
  local s = {}
  for k, part in ipairs(d.partitions) do
    local l = {}
    for i, loc in ipairs(part.location) do l[i] = loc.process .. ":" .. loc.device.id end
    s[k] = table.concat(part.position, ",") .. "@" .. table.concat(l, "+") .. "="
           .. (part.data and "data" or "nil")
  end
  local locals = {}
  for i, pos in ipairs(d.locals) do locals[i] = table.concat(pos, ",") end
  return table.concat(s, " ") .. " locals " .. table.concat(locals, ";")
end
local x = global(dl.P("x"))
dl.reset_transfer_stats()
local d = x:__partitioned__()
print(p, "rows", table.concat(d.partition_tiling, ","), where(d))
local y = dl.from_partitioned(d)
print(p, "trip", dl.transfer_stats().bytes_moved, y.is_fully_addressable,
      y.addressable_shards[1].device.id,
      table.concat(y.addressable_shards[1].data:tolist()[2], ","))
print(p, "cols", where(global(dl.P("y")):__partitioned__()))
-- Both blocks' first holders are process 0's: process 1 gets an array holding no shard,
-- until a sharding asks for its replicas.
local c = global(dl.P("y"))
local yc = dl.from_partitioned(c:__partitioned__())
local zc = dl.from_partitioned(c:__partitioned__(), c.sharding)
print(p, "cols trip", #yc.addressable_shards, yc.dtype, #zc.addressable_shards,
      zc.sharding == c.sharding, table.concat(dl.process_allgather(zc, true):tolist()[4], ","))]], {args = "--devices sim:2"})
    assert.are.equal("", err)
    assert.are.equal(0, status)
    local want = {
      "0\trows\t2,1\t0,0@0:0+0:1=data 1,0@1:2+1:3=nil locals 0,0",
      "1\trows\t2,1\t0,0@0:0+0:1=nil 1,0@1:2+1:3=data locals 1,0",
      "0\ttrip\t0\tfalse\t0\t21,22",
      "1\ttrip\t0\tfalse\t2\t41,42",
      "0\tcols\t0,0@0:0+1:2=data 1,0@0:1+1:3=data locals 0,0;1,0",
      "1\tcols\t0,0@0:0+1:2=data 1,0@0:1+1:3=data locals 0,0;1,0",
      "0\tcols trip\t2\tint32\t2\ttrue\t41,42",
      "1\tcols trip\t0\tint32\t2\ttrue\t41,42",
    }
    table.sort(want)
    assert.are.same(want, H.sorted_lines(out))
  end)
end)
