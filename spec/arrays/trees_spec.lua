-- runs: every-platform
-- ipc-off: no
-- devices: 8
-- needs: none

-- Trees of tables given to device_put and device_get: cycles, shared
-- subtrees and any depth (mapped faithfully, never a crash), trees of
-- targets (a prefix of x's tree, as JAX), and deep or cyclic data elsewhere.
local helpers = require "spec.helpers"
local dl = require "dlrun"

local expect_error = helpers.expect_error
local D = dl.devices()

-- A chain of n tables, the innermost holding `leaf` at key x.
local function chain(n, leaf)
  local t = {x = leaf}
  for _ = 1, n do t = {t} end
  return t
end

local function bottom(t, n)
  for _ = 1, n do t = t[1] end
  return t
end

describe("device_get on cyclic and shared trees", function()
  it("keeps a back-reference: the result is cyclic the same way", function()
    local model = {w = dl.arange(4, "float32", D[2]), name = "m"}
    model.self = model
    local g = dl.device_get(model)
    assert.is_false(rawequal(g, model))
    assert.is_true(rawequal(g, g.self))
    assert.are.equal("m", g.name)
    assert.are.equal("cpu", g.w:devices()[1].platform)
    assert.are.same({0, 1, 2, 3}, g.w:tolist())
    -- the input is untouched
    assert.is_true(rawequal(model, model.self))
    assert.are.equal(helpers.platform, model.w:devices()[1].platform)
  end)

  it("keeps parent links in every layer", function()
    local model = {layers = {}}
    for i = 1, 5 do
      model.layers[i] = {parent = model, w = dl.full({2}, i, "int32")}
    end
    local g = dl.device_get(model)
    for i = 1, 5 do
      assert.is_true(rawequal(g, g.layers[i].parent))
      assert.are.same({i, i}, g.layers[i].w:tolist())
    end
  end)

  it("maps a shared subtree and a shared array once", function()
    local a = dl.ones({3}, "float32")
    local shared = {a = a}
    local g = dl.device_get({left = shared, right = shared, again = a, [1] = a})
    assert.is_true(rawequal(g.left, g.right))
    assert.is_true(rawequal(g.left.a, g.again))
    assert.is_true(rawequal(g[1], g.again))
  end)

  it("passes a cyclic table without arrays through unchanged", function()
    local cfg = {lr = 0.1}
    cfg.self = cfg
    assert.is_true(rawequal(cfg, dl.device_get(cfg)))
    local tree = {cfg = cfg, w = dl.zeros({1})}
    local g = dl.device_get(tree)
    assert.is_true(rawequal(cfg, g.cfg)) -- no Array below it: not copied
  end)

  it("a mutual cycle of two tables stays a cycle of two", function()
    local a, b = {}, {}
    a.next, b.next = b, a
    a.w, b.w = dl.zeros({1}), dl.ones({1})
    local g = dl.device_get(a)
    assert.is_true(rawequal(g, g.next.next))
    assert.is_false(rawequal(g, g.next))
    assert.are.same({0}, g.w:tolist())
    assert.are.same({1}, g.next.w:tolist())
  end)
end)

describe("device_put on cyclic and shared trees", function()
  it("keeps a back-reference and puts every array", function()
    local model = {w = dl.arange(8, "int32")}
    model.self = model
    local s = dl.NamedSharding(dl.make_mesh({8}, {"x"}), dl.P("x"))
    local r = dl.device_put(model, s)
    assert.is_true(rawequal(r, r.self))
    assert.are.equal(8, #r.w.addressable_shards)
    assert.are.same({0, 1, 2, 3, 4, 5, 6, 7}, r.w:tolist())
  end)

  it("donates an array held twice once, not twice", function()
    local a = dl.arange(4, "float32")
    local r = dl.device_put({a, a, {a}}, D[3], {donate = true})
    assert.is_true(a:is_deleted())
    assert.is_true(rawequal(r[1], r[2]))
    assert.is_true(rawequal(r[1], r[3][1]))
    assert.are.same({0, 1, 2, 3}, r[1]:tolist())
  end)

  it("data leaves become arrays once, shared where the data table is shared", function()
    local data = {1, 2, 3}
    local r = dl.device_put({a = data, b = data, w = dl.zeros({1})}, D[1])
    assert.is_true(rawequal(r.a, r.b))
    assert.are.same({1, 2, 3}, r.a:tolist())
    assert.are.equal(D[1], r.a:devices()[1])
  end)
end)

describe("trees of any depth", function()
  for _, n in ipairs({32, 33, 200, 100000}) do
    it("device_get and device_put on a chain " .. n .. " deep", function()
      local t = chain(n, dl.arange(3, "int32"))
      local g = dl.device_get(t)
      assert.are.same({0, 1, 2}, bottom(g, n).x:tolist())
      assert.are.equal("cpu", bottom(g, n).x:devices()[1].platform)
      local p = dl.device_put(t, D[4])
      assert.are.equal(D[4], bottom(p, n).x:devices()[1])
      collectgarbage()
    end)
  end

  it("a deep chain without arrays passes through device_get unchanged", function()
    local t = chain(100000, 1)
    assert.is_true(rawequal(t, dl.device_get(t)))
  end)

  it("data nested deeper than 32 levels is a ValueError, and the state goes on", function()
    for _, n in ipairs({32, 33, 40, 1000}) do
      local t = {1}
      for _ = 1, n do t = {t} end
      expect_error("ValueError", "array: data is nested deeper than 32 levels", dl.array, t)
      expect_error("ValueError", "array: data is nested deeper than 32 levels", dl.device_put, t)
    end
    collectgarbage()
    assert.are.same({1, 2}, dl.array({1, 2}):tolist())
  end)

  it("cyclic data is a ValueError", function()
    local row = {1, 2}
    row[3] = row
    expect_error("ValueError",
                 "array: ragged nested data: element [3] is a table but the shape ends at this depth",
                 dl.array, row)
    local t = {}
    t[1] = t
    expect_error("ValueError", "array: data is nested deeper than 32 levels", dl.array, t)
  end)
end)

describe("device_put with a tree of targets (a prefix of x's tree, as JAX)", function()
  local mesh = dl.make_mesh({8}, {"x"})
  local rows = dl.NamedSharding(mesh, dl.P("x"))

  it("puts each subtree on its own target", function()
    local x = {w = dl.arange(16, "float32"), b = dl.zeros({8}), opt = {m = dl.ones({8}), v = {1, 2}}}
    local r = dl.device_put(x, {w = rows, b = D[5], opt = D[6]})
    assert.are.equal(8, #r.w.addressable_shards)
    assert.is_true(r.w.sharding == rows)
    assert.are.equal(D[5], r.b:devices()[1])
    assert.are.equal(D[6], r.opt.m:devices()[1])
    assert.are.equal(D[6], r.opt.v:devices()[1]) -- data under a target becomes an array there
    assert.are.same({1, 2}, r.opt.v:tolist())
  end)

  it("nested target tables and list positions", function()
    local x = {dl.zeros({2}), {dl.ones({2}), dl.full({2}, 3, "int32")}}
    local r = dl.device_put(x, {D[1], {D[2], D[3]}})
    assert.are.equal(D[1], r[1]:devices()[1])
    assert.are.equal(D[2], r[2][1]:devices()[1])
    assert.are.equal(D[3], r[2][2]:devices()[1])
    assert.are.same({3, 3}, r[2][2]:tolist())
  end)

  it("takes options after the tree of targets", function()
    local a = dl.arange(4, "int32")
    local r = dl.device_put({a = a}, {a = D[7]}, {donate = true})
    assert.is_true(a:is_deleted())
    assert.are.same({0, 1, 2, 3}, r.a:tolist())
  end)

  it("a table of booleans in place of the target is still the options", function()
    expect_error("ValueError", "device_put: unknown option 'donat' (expected donate, may_alias)",
                 dl.device_put, dl.zeros({1}), {donat = true})
  end)

  it("refuses trees that do not match, naming where", function()
    local x = {w = dl.zeros({2}), opt = {m = dl.zeros({2})}}
    expect_error("ValueError",
                 "device_put: the targets must be a tree prefix of x, but x has x.opt and the "
                 .. "targets have no target for it", dl.device_put, x, {w = D[1]})
    expect_error("ValueError",
                 "device_put: the targets must be a tree prefix of x, but the targets have x.bias "
                 .. "and x has no such key", dl.device_put, x, {w = D[1], opt = D[1], bias = D[2]})
    expect_error("ValueError",
                 "device_put: the targets must be a tree prefix of x, but at x.w the targets have "
                 .. "a table and x has an Array", dl.device_put, x, {w = {D[1]}, opt = D[1]})
    expect_error("ValueError",
                 "device_put: the targets must be a tree prefix of x, but the targets have "
                 .. "x.opt.v and x has no such key", dl.device_put, x, {w = D[1], opt = {v = D[1]}})
    expect_error("TypeError",
                 "device_put: the target for x.opt must be a Device, a Sharding or a table of "
                 .. "them, got string", dl.device_put, x, {w = D[1], opt = "sim:1"})
    expect_error("ValueError",
                 'device_put: the targets must be a tree prefix of x, but x has x["a b"] and the '
                 .. "targets have no target for it", dl.device_put,
                 {["a b"] = dl.zeros({1}), w = dl.zeros({1})}, {w = D[1]})
  end)

  it("refuses a cyclic or too deep tree of targets", function()
    local x = {w = dl.zeros({2})}
    x.self = x
    local t = {w = D[1]}
    t.self = t
    expect_error("ValueError",
                 "device_put: the tree of targets is cyclic at x.self; it must be a tree prefix of x",
                 dl.device_put, x, t)
    local deep_x, deep_t = chain(150, dl.zeros({1})), chain(150, D[1])
    local err = expect_error("ValueError", {contains = "device_put: the tree of targets is nested "
                             .. "deeper than 100 levels at x[1][1][1]"}, dl.device_put, deep_x, deep_t)
    assert.are.equal("[1]...", err.message:sub(-6))
  end)

  it("nothing is left half-made when a later subtree fails", function()
    local x = {a = dl.zeros({1024}), b = dl.zeros({4})}
    collectgarbage()
    collectgarbage()
    local before = D[2]:memory_stats().bytes_in_use
    local ok = pcall(dl.device_put, x, {a = D[2], b = "nope"})
    assert.is_false(ok)
    -- a is put before b fails (keys in order); its copy may still be in flight
    D[2]:synchronize()
    collectgarbage()
    collectgarbage()
    assert.are.equal(before, D[2]:memory_stats().bytes_in_use)
  end)
end)

describe("equal meshes and shardings are one value (usable as one table key)", function()
  it("meshes with the same devices and axis names", function()
    local a = dl.make_mesh({4, 2}, {"x", "y"})
    local b = dl.Mesh({{D[1], D[2]}, {D[3], D[4]}, {D[5], D[6]}, {D[7], D[8]}}, {"x", "y"})
    assert.is_true(rawequal(a, b))
    assert.is_true(a == b)
    local t = {[a] = "first"}
    assert.are.equal("first", t[b])
    assert.are_not.equal(a, dl.make_mesh({4, 2}, {"x", "z"}))
    assert.are_not.equal(a, dl.make_mesh({2, 4}, {"x", "y"}))
    assert.are_not.equal(a, dl.Mesh({{D[2], D[1]}, {D[3], D[4]}, {D[5], D[6]}, {D[7], D[8]}},
                                    {"x", "y"}))
  end)

  it("shardings over equal meshes with equal specs", function()
    local m = dl.make_mesh({8}, {"x"})
    local a = dl.NamedSharding(m, dl.P("x"))
    local b = dl.NamedSharding(dl.make_mesh({8}, {"x"}), dl.P({"x"}))
    assert.is_true(rawequal(a, b))
    local t = {[a] = 1}
    assert.are.equal(1, t[b])
    assert.is_true(rawequal(dl.SingleDeviceSharding(D[3]), dl.SingleDeviceSharding(D[3])))
    assert.is_false(rawequal(a, dl.NamedSharding(m, dl.P("x"), "pinned_host")))
    assert.is_true(rawequal(dl.NamedSharding(m, dl.P("x"), "pinned_host"),
                            a:with_memory_kind("pinned_host")))
    -- an array's sharding is the one it was made with
    local x = dl.zeros({8}, "float32", a)
    assert.is_true(rawequal(x.sharding, b))
    assert.is_true(rawequal(dl.device_put(x, D[2]).sharding, dl.SingleDeviceSharding(D[2])))
  end)

  it("an interned value survives collection of its first holder", function()
    local id
    do
      local s = dl.NamedSharding(dl.make_mesh({2}, {"k"}), dl.P())
      id = tostring(s)
    end
    collectgarbage()
    collectgarbage()
    local s2 = dl.NamedSharding(dl.make_mesh({2}, {"k"}), dl.P())
    assert.are.equal(id, tostring(s2))
    assert.are.same({0, 0}, dl.zeros({2}, "int32", s2):tolist())
  end)
end)

describe("make_array_from_callback with differing dtypes (JAX's check)", function()
  local s = dl.NamedSharding(dl.make_mesh({2}, {"x"}, {D[1], D[2]}), dl.P("x"))

  it("raises JAX's dtype mismatch instead of converting", function()
    expect_error("ValueError",
                 "Input buffers to `Array` must have matching dtypes. Got float32, expected int32 "
                 .. "for buffer: the array on " .. helpers.dev(1),
                 dl.make_array_from_callback, {4}, s, function(index)
                   if index[1][1] == 1 then return {1, 2} end
                   return {2.5, 3.5}
                 end)
    expect_error("ValueError",
                 "Input buffers to `Array` must have matching dtypes. Got int8, expected float32 "
                 .. "for buffer: the array on " .. helpers.dev(1),
                 dl.make_array_from_callback, {4}, s, function(index)
                   if index[1][1] == 1 then return dl.zeros({2}, "float32") end
                   return dl.zeros({2}, "int8")
                 end)
  end)

  it("with a dtype given, Lua data converts into it", function()
    local x = dl.make_array_from_callback({4}, s, function(index)
      if index[1][1] == 1 then return {1, 2} end
      return {2.5, 3.5}
    end, "float32")
    assert.are.equal("float32", x.dtype)
    assert.are.same({1, 2, 2.5, 3.5}, x:tolist())
  end)
end)

describe("tables keyed otherwise than 1..n are trees, as JAX maps a dict", function()
  it("device_put maps them key by key, never into an empty array", function()
    local r = dl.device_put({a = 1, b = 2})
    assert.are.equal("Array(1, dtype=int32)", tostring(r.a))
    assert.are.equal("Array(2, dtype=int32)", tostring(r.b))
    r = dl.device_put({a = {1, 2}, b = {c = 3.5, d = {re = 1, im = 2}}, {{1, 2}, {3, 4}}, n = {}},
                      D[2])
    assert.are.same({1, 2}, r.a:tolist())
    assert.are.equal("float32", r.b.c.dtype)
    assert.are.equal("complex64", r.b.d.dtype)
    assert.are.same({2, 2}, r[1].shape)
    assert.are.same({0}, r.n.shape)
    for _, x in ipairs {r.a, r.b.c, r.b.d, r[1], r.n} do assert.are.equal(D[2], x:devices()[1]) end
    r = dl.device_put({[1] = 1, [3] = 3}) -- keys other than 1..n, whatever #t says
    assert.are.same({"Array(1, dtype=int32)", "Array(3, dtype=int32)"},
                    {tostring(r[1]), tostring(r[3])})
    assert.is_nil(r[2])
    r = dl.device_put({1, 2, x = 3})
    assert.are.same({"Array(1, dtype=int32)", "Array(2, dtype=int32)", "Array(3, dtype=int32)"},
                    {tostring(r[1]), tostring(r[2]), tostring(r.x)})
  end)

  it("a list of arrays is a tree, a nested list of numbers is data, as before", function()
    local r = dl.device_put({dl.zeros({1}), {1, 2}})
    assert.are.same({0}, r[1]:tolist())
    assert.are.same({1, 2}, r[2]:tolist())
    assert.are.same({2, 2}, dl.device_put({{1, 2}, {3, 4}}).shape)
  end)

  it("device_get maps them too: arrays come to the host, a table with no array comes back "
     .. "as it is", function()
    local t = {a = 1, b = 2}
    assert.is_true(rawequal(t, dl.device_get(t)))
    local g = dl.device_get({a = dl.arange(2, "int32", D[3]), b = 2, c = {d = dl.ones({1})}})
    assert.are.equal("cpu", g.a:devices()[1].platform)
    assert.are.same({0, 1}, g.a:tolist())
    assert.are.equal(2, g.b)
    assert.are.equal("cpu", g.c.d:devices()[1].platform)
  end)
end)

describe("the order in which trees are walked (one order on every process)", function()
  -- A leaf that logs when device_put converts it (a table with a metatable is not a tree).
  local function logged(log, name)
    local seen = false
    return setmetatable({}, {__len = function()
      if not seen then seen = true; log[#log + 1] = name end
      return 0
    end})
  end

  it("numbers by value, then strings byte-wise, then false and true; then the tables reached, "
     .. "in the order reached", function()
    local log = {}
    local keys = {"b", "a", "B", "ab", "", 2, 1, -5, 1.5, 1e300, true, false}
    local tree = {sub = {z = logged(log, "sub.z"), [1] = logged(log, "sub[1]")},
                  Sub = {x = logged(log, "Sub.x")}}
    for _, k in ipairs(keys) do tree[k] = logged(log, tostring(k)) end
    dl.device_put(tree)
    assert.are.same({"-5", "1", "1.5", "2", "1e+300", "", "B", "a", "ab", "b", "false", "true",
                     "Sub.x", "sub[1]", "sub.z"}, log)
  end)

  it("Devices as keys come last, by id", function()
    local log = {}
    dl.device_put({[D[3]] = logged(log, "3"), [D[1]] = logged(log, "1"), x = logged(log, "x")})
    assert.are.same({"x", "1", "3"}, log)
  end)

  it("keys of other types are a TypeError naming the call", function()
    local MSG = "a tree's keys must be numbers, strings, booleans or Devices (every process "
                .. "walks a tree in one order), got a key of type "
    expect_error("TypeError", "device_put: " .. MSG .. "function", dl.device_put, {[print] = 1})
    -- several: the first by type name, the same everywhere
    expect_error("TypeError", "device_put: " .. MSG .. "function", dl.device_put,
                 {[{}] = 1, [coroutine.create(print)] = 2, [print] = 3, a = 4})
    expect_error("TypeError", "device_get: " .. MSG .. "table", dl.device_get,
                 {[{}] = dl.zeros({1})})
    expect_error("TypeError", "device_put: " .. MSG .. "Mesh", dl.device_put,
                 {[dl.make_mesh({8}, {"x"})] = dl.zeros({1})}, {donate = false})
  end)

  it("a tree of targets is walked in that order too", function()
    local log = {}
    local x = {b = logged(log, "b"), a = logged(log, "a"), [2] = logged(log, "2")}
    dl.device_put(x, {b = D[1], a = D[2], [2] = D[3]})
    assert.are.same({"2", "a", "b"}, log)
    expect_error("ValueError", "device_put: the targets must be a tree prefix of x, but the "
                 .. "targets have x.c and x has no such key", dl.device_put, {a = dl.zeros({1})},
                 {a = D[1], d = D[1], c = D[1]})
  end)
end)
