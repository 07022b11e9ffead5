-- runs: every-platform
-- ipc-off: no
-- devices: 8
-- needs: mpi

-- The printed forms of dlrun's table results (docs/lua-api.md, "Printed forms"): shapes,
-- device lists and sets, Shards, indices and index maps, mesh fields and
-- stats print as JAX and Python print the same values, and stay the same
-- tables to code that indexes, counts, iterates or unpacks them.
-- Run from the repository root: busted spec/arrays/printing_spec.lua

local helpers = require "helpers"
local dl = require "dlrun"

local dev = helpers.dev -- "SimDevice(id=3)" on the default platform

local D = dl.devices()

-- The keys pairs() sees, sorted by their text.
local function keys(t)
  local out = {}
  for k in pairs(t) do out[#out + 1] = tostring(k) end
  table.sort(out)
  return table.concat(out, " ")
end

local function joined(ids, fmt)
  local parts = {}
  for i, id in ipairs(ids) do parts[i] = (fmt or "%s"):format(dev(id)) end
  return table.concat(parts, ", ")
end

describe("shapes", function()
  it("print as Python tuples: (16, 4), (8,) and ()", function()
    assert.are.equal("(16, 4)", tostring(dl.zeros({16, 4}).shape))
    assert.are.equal("(8,)", tostring(dl.zeros({8}).shape))
    assert.are.equal("()", tostring(dl.zeros({}).shape))
    assert.are.equal("(2, 0, 3)", tostring(dl.zeros({2, 0, 3}).shape))
  end)

  it("index, count, iterate, unpack and concatenate as plain lists", function()
    local s = dl.zeros({16, 4}).shape
    assert.are.equal("table", type(s))
    assert.are.equal(16, s[1])
    assert.are.equal(4, s[2])
    assert.is_nil(s[3])
    assert.are.equal(2, #s)
    assert.are.same({16, 4}, {table.unpack(s)})
    local seen = {}
    for i, v in ipairs(s) do seen[i] = v end
    assert.are.same({16, 4}, seen)
    assert.are.equal("1 2", keys(s))
    assert.are.equal("16x4", table.concat(s, "x"))
    assert.are.same({16, 4}, s)
  end)

  it("are new tables: changing one changes neither the array nor the next", function()
    local x = dl.zeros({16, 4})
    local s = x.shape
    s[1], s[3] = 99, 7
    assert.are.equal("(99, 4, 7)", tostring(s))
    assert.are.equal("(16, 4)", tostring(x.shape))
    assert.are.same({16, 4}, x.shape)
  end)

  it("are still shapes and data to dlrun", function()
    local x = dl.zeros({2, 3})
    assert.are.same({2, 3}, dl.zeros(x.shape).shape)
    assert.are.same({2, 3}, dl.array(x.shape):tolist())
    local put = dl.device_put({s = x.shape})
    assert.are.same({2, 3}, put.s:tolist())
  end)

  it("messages still call them tables", function()
    helpers.expect_error("TypeError", "SingleDeviceSharding: argument 1 (device) must be a Device, got table",
                         dl.SingleDeviceSharding, dl.zeros({2}).shape)
  end)

  it("of shard_shape and of a Capsule print as tuples", function()
    local mesh = dl.make_mesh({4}, {"x"})
    local s = dl.NamedSharding(mesh, dl.P("x"))
    assert.are.equal("(2, 3)", tostring(s:shard_shape({8, 3})))
    local c = dl.zeros({2, 3}, "float32", D[1]):__dlpack__{max_version = {1, 1}}
    assert.are.equal("(2, 3)", tostring(c.shape))
    assert.are.equal("(3, 1)", tostring(c.strides))
    assert.are.equal("(1, 1)", tostring(c.version))
  end)
end)

describe("device lists and sets", function()
  it("dl.devices() and dl.local_devices() print as lists", function()
    local ids = {}
    for i = 1, #D do ids[i] = i - 1 end
    assert.are.equal("[" .. joined(ids) .. "]", tostring(dl.devices()))
    assert.are.equal("[" .. joined(ids) .. "]", tostring(dl.local_devices()))
    assert.are.equal("[CpuDevice(id=0)]", tostring(dl.devices("cpu")))
  end)

  it("stay lists of the interned Devices", function()
    local ds = dl.devices()
    assert.are.equal(8, #ds)
    assert.are.equal(D[3], ds[3])
    local n = 0
    for _, d in ipairs(ds) do n = n + d.id end
    assert.are.equal(28, n)
    assert.are.equal(dl.devices()[1], ds[1])
  end)

  it("device_set, addressable_devices and x:devices() print as sets", function()
    local mesh = dl.Mesh({D[3], D[1]}, "x")
    local s = dl.NamedSharding(mesh, dl.P("x"))
    local want = "{" .. joined({0, 2}) .. "}"
    assert.are.equal(want, tostring(s.device_set))
    assert.are.equal(want, tostring(s.addressable_devices))
    assert.are.equal(want, tostring(dl.zeros({4}, "float32", s):devices()))
    assert.are.equal(D[1], s.device_set[1])
    assert.are.equal(2, #s.device_set)
  end)
end)

describe("Shards", function()
  local mesh = dl.make_mesh({2, 2}, {"x", "y"})
  local x = dl.device_put(dl.arange(8, "float32"):tolist(), dl.NamedSharding(mesh, dl.P("x")))

  it("print as JAX's Shard, data as str() shows an array", function()
    assert.are.equal(("Shard(device=%s, index=(slice(0, 4, None),), replica_id=0, data=[0. 1. 2. 3.])")
                       :format(dev(0)), tostring(x.addressable_shards[1]))
    assert.are.equal(("Shard(device=%s, index=(slice(4, 8, None),), replica_id=1, data=[4. 5. 6. 7.])")
                       :format(dev(3)), tostring(x.global_shards[4]))
  end)

  it("a list of them prints as a list", function()
    local y = dl.arange(4, "int32", dl.NamedSharding(dl.make_mesh({2}, {"x"}), dl.P("x")))
    assert.are.equal(("[Shard(device=%s, index=(slice(0, 2, None),), replica_id=0, data=[0 1]), "
                      .. "Shard(device=%s, index=(slice(2, 4, None),), replica_id=0, data=[2 3])]")
                       :format(dev(0), dev(1)), tostring(y.addressable_shards))
  end)

  it("an index covering a dimension whole shows slice(None, None, None); a 0-d one ()", function()
    local y = dl.zeros({4, 6}, "int32", dl.NamedSharding(mesh, dl.P(nil, "y")))
    assert.are.equal("(slice(None, None, None), slice(0, 3, None))",
                     tostring(y.addressable_shards[1].index))
    assert.are.equal("slice(None, None, None)", tostring(y.addressable_shards[1].index[1]))
    assert.are.equal("slice(3, 6, None)", tostring(y.addressable_shards[2].index[2]))
    local z = dl.full({}, 5, "int32", D[1])
    assert.are.equal(("Shard(device=%s, index=(), replica_id=0, data=5)"):format(dev(0)),
                     tostring(z.addressable_shards[1]))
  end)

  it("2-d data prints on lines as NumPy's str", function()
    local y = dl.array({{1.5, 2}, {3, 4}}, "float32", D[2])
    assert.are.equal(("Shard(device=%s, index=(slice(None, None, None), slice(None, None, None)), "
                      .. "replica_id=0, data=[[1.5 2. ]\n [3.  4. ]])"):format(dev(1)),
                     tostring(y.addressable_shards[1]))
  end)

  it("keep their fields, keys and 1-based {first, last} indices", function()
    local s = x.addressable_shards[3]
    assert.are.equal(D[3], s.device)
    assert.are.same({{5, 8}}, s.index)
    assert.are.equal(1, #s.index)
    assert.are.equal(5, s.index[1][1])
    assert.are.equal(0, s.replica_id)
    assert.are.same({4, 5, 6, 7}, s.data:tolist())
    assert.are.equal("data device index replica_id", keys(s))
    assert.are.equal("1 2", keys(s.index[1]))
    assert.are.equal(4, #x.addressable_shards)
  end)

  it("changing one changes nothing else", function()
    local s = x.addressable_shards[1]
    s.replica_id = 9
    s.index[1][2] = 2
    assert.are.equal(0, x.addressable_shards[1].replica_id)
    assert.are.same({{1, 4}}, x.addressable_shards[1].index)
  end)

  it("the callback of make_array_from_callback gets a printed index", function()
    local seen = {}
    dl.make_array_from_callback({4}, dl.NamedSharding(dl.make_mesh({2}, {"x"}), dl.P("x")),
                                function(index)
                                  seen[#seen + 1] = tostring(index)
                                  return dl.zeros({2})
                                end)
    assert.are.same({"(slice(0, 2, None),)", "(slice(2, 4, None),)"}, seen)
  end)
end)

describe("index maps", function()
  it("print as a dict in device order", function()
    local mesh = dl.Mesh({{D[3], D[1]}, {D[2], D[4]}}, {"x", "y"})
    local s = dl.NamedSharding(mesh, dl.P("x"))
    local text = ("{%s: (slice(0, 2, None), slice(None, None, None)), "
                  .. "%s: (slice(2, 4, None), slice(None, None, None)), "
                  .. "%s: (slice(0, 2, None), slice(None, None, None)), "
                  .. "%s: (slice(2, 4, None), slice(None, None, None))}"):format(dev(0), dev(1), dev(2), dev(3))
    assert.are.equal(text, tostring(s:devices_indices_map({4, 2})))
    assert.are.equal(text, tostring(s:addressable_devices_indices_map({4, 2})))
  end)

  it("stay keyed by Device with {first, last} pairs", function()
    local s = dl.NamedSharding(dl.make_mesh({2}, {"x"}), dl.P("x"))
    local map = s:devices_indices_map({4})
    assert.are.same({{3, 4}}, map[D[2]])
    local n = 0
    for d, index in pairs(map) do
      n = n + 1
      assert.are.equal("userdata", type(d))
      assert.are.equal(1, #index)
    end
    assert.are.equal(2, n)
    -- split over an axis of size 1 is not split, as JAX shows it
    assert.are.equal(("{%s: (slice(None, None, None),)}"):format(dev(0)),
                     tostring(dl.NamedSharding(dl.make_mesh({1}, {"x"}), dl.P("x")):devices_indices_map({3})))
  end)
end)

describe("meshes", function()
  it("mesh.devices prints as NumPy's object array", function()
    local mesh = dl.make_mesh({2, 2}, {"x", "y"})
    assert.are.equal(("array([[%s, %s],\n       [%s, %s]], dtype=object)"):format(dev(0), dev(1), dev(2), dev(3)),
                     tostring(mesh.devices))
    assert.are.equal(("array([%s, %s], dtype=object)"):format(dev(2), dev(3)), tostring(mesh.devices[2]))
    assert.are.equal(D[4], mesh.devices[2][2])
    assert.are.equal(2, #mesh.devices)
  end)

  it("a long row wraps at 75 columns and dtype=object moves to a line of its own", function()
    local mesh = dl.make_mesh({8}, {"x"})
    local c = helpers.platform == "sim" and "SimDevice" or nil
    if not c then return end
    assert.are.equal("array([SimDevice(id=0), SimDevice(id=1), SimDevice(id=2), SimDevice(id=3),\n"
                     .. "       SimDevice(id=4), SimDevice(id=5), SimDevice(id=6), SimDevice(id=7)],\n"
                     .. "      dtype=object)", tostring(mesh.devices))
  end)

  it("axis_names and axis_sizes print as tuples, shape as an OrderedDict in axis order", function()
    local mesh = dl.make_mesh({4, 2}, {"y", "x"})
    assert.are.equal("('y', 'x')", tostring(mesh.axis_names))
    assert.are.equal("(4, 2)", tostring(mesh.axis_sizes))
    assert.are.equal("OrderedDict({'y': 4, 'x': 2})", tostring(mesh.shape))
    assert.are.equal(4, mesh.shape.y)
    assert.are.equal("x y", keys(mesh.shape))
    assert.are.equal("('x',)", tostring(dl.make_mesh({8}, {"x"}).axis_names))
  end)

  it("axis_names still make a PartitionSpec entry", function()
    local mesh = dl.make_mesh({4, 2}, {"x", "y"})
    assert.are.equal(dl.P({"x", "y"}), dl.P(mesh.axis_names))
    local p = dl.P("x")
    p[1] = mesh.axis_names
    assert.are.equal("NamedSharding(mesh=Mesh('x': 4, 'y': 2), spec=PartitionSpec(('x', 'y'),), memory_kind=device)",
                     tostring(dl.NamedSharding(mesh, p)))
  end)
end)

describe("stats", function()
  it("transfer_stats prints as a table constructor, keys sorted", function()
    dl.reset_transfer_stats()
    assert.are.equal("{bytes_moved=0, bytes_received=0, bytes_sent=0, copies=0, ipc_bytes=0, local_bytes=0, shares=0}",
                     tostring(dl.transfer_stats()))
    assert.are.equal(0, dl.transfer_stats().copies)
  end)

  it("memory_stats and platforms() likewise", function()
    local text = tostring(D[8]:memory_stats())
    assert.truthy(text:match("^{bytes_in_use=%d+, bytes_limit=%d+, bytes_reserved=%d+, fragmentation=[%d.e+-]+, "
                             .. "largest_alloc_size=%d+, largest_free_block_bytes=%d+, num_allocs=%d+, "
                             .. "peak_bytes_in_use=%d+}$"), text)
    local cpu
    for _, p in ipairs(dl.platforms()) do if p.name == "cpu" then cpu = p end end
    assert.are.equal('{accelerator=false, available=true, class_name="CpuDevice", devices=0, name="cpu"}',
                     tostring(cpu))
    assert.truthy(tostring(dl.platforms()):find('^%[{accelerator='))
  end)
end)

describe("PartitionSpec entries", function()
  it("a list of axis names prints as a tuple and stays a list", function()
    local p = dl.P("x", {"x", "y"})
    assert.are.equal("('x', 'y')", tostring(p[2]))
    assert.are.same({"x", "y"}, p[2])
    assert.are.equal(2, #p[2])
    assert.are.equal("PartitionSpec('x', ('x', 'y'))", tostring(p))
    assert.are.equal(dl.P("x", {"x", "y"}), p)
  end)
end)

describe("in a job", function()
  for _, n in ipairs {2, 3, 4} do
    it("on " .. n .. " processes: another process's Shard prints data=None, device lists every device", function()
      local out, err, status = helpers.mpirun(n, [[
local p, n = dl.process_index(), dl.process_count()
local x = dl.arange(2 * n, "int32", dl.NamedSharding(dl.make_mesh({n}, {"x"}), dl.P("x")))
local parts = {}
for i, s in ipairs(x.global_shards) do
  parts[i] = tostring(s)
  assert((s.data ~= nil) == (i == p + 1)) -- another process's data reads as nil
end
print(p, table.concat(parts, " | "))
print(p, tostring(dl.local_devices()), #dl.devices())]], {args = "--devices sim:1"})
      assert.are.equal("", err)
      assert.are.equal(0, status)
      local want = {}
      for p = 0, n - 1 do
        local parts = {}
        for i = 0, n - 1 do
          parts[#parts + 1] = ("Shard(device=SimDevice(id=%d), index=(slice(%d, %d, None),), replica_id=0, data=%s)")
            :format(i, 2 * i, 2 * i + 2, i == p and ("[%d %d]"):format(2 * i, 2 * i + 1) or "None")
        end
        want[#want + 1] = p .. "\t" .. table.concat(parts, " | ")
        want[#want + 1] = ("%d\t[SimDevice(id=%d)]\t%d"):format(p, p, n)
      end
      table.sort(want)
      assert.are.same(want, helpers.sorted_lines(out))
    end)
  end
end)
