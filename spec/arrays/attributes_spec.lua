-- runs: every-platform
-- ipc-off: no
-- devices: 8
-- needs: none

-- Reading a field that a dlrun object lacks (docs/lua-api.md, "Errors") raises an
-- AttributeError worded as Python's, suggesting the closest known name by
-- CPython's rule; fields, methods and dlrun's own probing keep working.
-- Run from the repository root: busted spec/arrays/attributes_spec.lua

local helpers = require "helpers"
local dl = require "dlrun"
local suggest = require "dlrun.suggest"

local expect_error = helpers.expect_error

local D = dl.devices()
local mesh = dl.make_mesh({2, 2}, {"x", "y"})
local named = dl.NamedSharding(mesh, dl.P("x"))
local single = dl.SingleDeviceSharding(D[1])
local x = dl.zeros({4, 2}, "float32", named)

local function read(obj, key) return function() return obj[key] end end

describe("an unknown field", function()
  local cases = {
    {"Array", x, "shpae", "shape"},
    {"Array", x, "tolsit", "tolist"},
    {"Array", x, "addressable_shard", "addressable_shards"},
    {"Device", D[1], "ID", "id"},
    {"Device", D[1], "platfrom", "platform"},
    {"Mesh", mesh, "axis_name", "axis_names"},
    {"Mesh", mesh, "devics", "devices"},
    {"NamedSharding", named, "spc", "spec"},
    {"NamedSharding", named, "devices_indice_map", "devices_indices_map"},
    {"SingleDeviceSharding", single, "memory_knd", "memory_kind"},
    {"Shard", x.addressable_shards[1], "replica", "replica_id"},
    {"PartitionSpec", dl.P("x", "y"), "nn", "n"},
  }
  for _, c in ipairs(cases) do
    local what, obj, key, near = c[1], c[2], c[3], c[4]
    it(("of a %s raises AttributeError suggesting '%s' for '%s'"):format(what, near, key), function()
      local err = expect_error("AttributeError",
                               ("'%s' object has no attribute '%s'. Did you mean: '%s'?"):format(what, key, near),
                               read(obj, key))
      assert.is_true(dl.AttributeError:is_instance(err))
      assert.is_true(dl.Error:is_instance(err))
      assert.is_false(dl.ValueError:is_instance(err))
      assert.are.equal(("AttributeError: '%s' object has no attribute '%s'. Did you mean: '%s'?")
                         :format(what, key, near), tostring(err))
    end)
  end

  it("without a close name suggests nothing", function()
    expect_error("AttributeError", "'Array' object has no attribute 'foo'", read(x, "foo"))
    expect_error("AttributeError", "'Device' object has no attribute 'nonexistent'", read(D[1], "nonexistent"))
    expect_error("AttributeError", "'Mesh' object has no attribute 'zzz'", read(mesh, "zzz"))
    expect_error("AttributeError", "'NamedSharding' object has no attribute 'banana'", read(named, "banana"))
    expect_error("AttributeError", "'Shard' object has no attribute 'q'", read(x.addressable_shards[1], "q"))
    expect_error("AttributeError", "'PartitionSpec' object has no attribute 'entries'", read(dl.P(), "entries"))
    local c = dl.zeros({2}, "float32", D[1]):__dlpack__()
    expect_error("AttributeError", "'Capsule' object has no attribute 'shap'. Did you mean: 'shape'?", read(c, "shap"))
  end)

  it("of a deleted array or a consumed capsule is still an AttributeError", function()
    local y = dl.zeros({2})
    y:delete()
    expect_error("AttributeError", "'Array' object has no attribute 'shpe'. Did you mean: 'shape'?", read(y, "shpe"))
    local c = dl.zeros({2}, "float32", D[1]):__dlpack__()
    dl.from_dlpack(c)
    expect_error("AttributeError", "'Capsule' object has no attribute 'nam'. Did you mean: 'name'?", read(c, "nam"))
  end)

  it("is raised where it is read, through error()", function()
    local ok, err = pcall(function() return x.shpae end)
    assert.is_false(ok)
    assert.are.equal("AttributeError", err.name)
  end)
end)

describe("known fields and methods", function()
  it("still read, including the ones that may be nil", function()
    assert.are.same({4, 2}, x.shape)
    assert.are.equal("float32", x.dtype)
    assert.is_nil(x.imported)
    assert.is_nil(x[1])
    assert.is_nil(single.mesh)
    assert.is_nil(single.spec)
    assert.are.equal("NamedSharding", named.kind)
    assert.are.same({2, 1}, named:shard_shape({4, 1}))
    assert.are.equal(0, D[1].id)
    assert.are.equal(4, mesh.size)
    assert.is_nil(dl.P("x")[2])
    assert.are.equal(1, dl.P("x").n)
    assert.are.same({{0, 0}, {0, 0}, {0, 0}, {0, 0}}, x:tolist())
    local y = dl.zeros({2}, "float32", D[1])
    assert.is_nil(y.addressable_shards[1].data and nil)
    local c = y:__dlpack__()
    assert.is_nil(c.version)
    assert.is_nil(c.imported)
  end)
end)

describe("dlrun's own probing", function()
  it("from_dlpack of a dlrun object without __dlpack__ is its TypeError", function()
    for _, obj in ipairs({D[1], mesh, named, dl.P("x"), x.addressable_shards[1]}) do
      expect_error("TypeError",
                   "The array passed to from_dlpack must have __dlpack__ and __dlpack_device__ methods.",
                   dl.from_dlpack, obj)
    end
  end)

  it("from_dlpack of an Array and of a table producer still work", function()
    local y = dl.arange(3, "int32", D[1])
    assert.are.same({0, 1, 2}, dl.from_dlpack(y):tolist())
    local producer = {
      __dlpack__ = function(_, opts) return y:__dlpack__(opts) end,
      __dlpack_device__ = function() return y:__dlpack_device__() end,
    }
    assert.are.same({0, 1, 2}, dl.from_dlpack(producer):tolist())
  end)

  it("visualize_sharding of a dlrun object that is no array is its TypeError", function()
    expect_error("TypeError", "visualize_sharding: argument 1 (x) must be an Array, got Shard",
                 dl.visualize_sharding, x.addressable_shards[1])
    expect_error("TypeError", "visualize_sharding: argument 1 (x) must be an Array, got Device",
                 dl.visualize_sharding, D[1])
  end)

  it("dl.array of a Shard or a PartitionSpec is no complex value", function()
    local ok, err = pcall(dl.array, x.addressable_shards[1])
    assert.is_false(ok)
    assert.are_not.equal("AttributeError", err.name)
  end)

  it("is_dlpack_exportable and try_export of other objects say no without raising", function()
    assert.is_false(dl.is_dlpack_exportable(mesh))
    assert.is_false(dl.is_dlpack_exportable(D[1]))
  end)
end)

describe("the suggestion rule (CPython's)", function()
  it("suggests within a third of the characters", function()
    assert.are.equal("shape", suggest("shpae", {"shape", "size"}))
    assert.are.equal("id", suggest("ID", {"id", "platform"})) -- a case flip costs half
    assert.are.equal("ndim", suggest("ndims", {"ndim", "nbytes"}))
    assert.is_nil(suggest("foo", {"shape", "size", "dtype"}))
    assert.is_nil(suggest("ab", {"xy"}))
  end)

  it("takes the first nearest name in sorted order, and never the name itself", function()
    assert.are.equal("bar", suggest("baz", {"bat", "bar"}))
    assert.is_nil(suggest("shape", {"shape"}))
  end)

  it("gives up on long names and long candidate lists", function()
    -- what differs after the common prefix and suffix counts, up to 40 bytes
    local middle = ("a"):rep(41)
    assert.is_nil(suggest("q" .. middle .. "q", {"r" .. middle .. "r"}))
    local fits = ("a"):rep(38) -- 40 bytes with the two that differ
    assert.are.equal("r" .. fits .. "r", suggest("q" .. fits .. "q", {"r" .. fits .. "r"}))
    assert.are.equal(middle .. "Y" .. middle, suggest(middle .. "X" .. middle, {middle .. "Y" .. middle}))
    local many = {}
    for i = 1, 750 do many[i] = "name" .. i end
    assert.is_nil(suggest("name1x", many))
    many[750] = nil
    assert.are.equal("name1", suggest("name1x", many))
  end)
end)
