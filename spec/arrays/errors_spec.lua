-- runs: every-platform
-- ipc-off: no
-- devices: 8
-- needs: none

-- Error values (docs/lua-api.md, "Errors"; README.md, "The dlrun command"):
-- the classes, their hierarchy, the values dlrun raises, and how the dlrun
-- command reports an uncaught one.

local helpers = require "helpers"
local dl = require "dlrun"

local run, run_code = helpers.run, helpers.run_code

-- The names of all error classes, and each one's parent (nil for the root).
local PARENT = {
  Error = nil,
  BufferError = "Error",
  ValueError = "Error",
  IndivisibleError = "ValueError",
  DuplicateSpecError = "ValueError",
  TypeError = "Error",
  RuntimeError = "Error",
  ResourceExhaustedError = "Error",
  AssertionError = "Error",
  AttributeError = "Error",
}
local CLASSES = {
  "Error", "BufferError", "ValueError", "IndivisibleError", "DuplicateSpecError",
  "TypeError", "RuntimeError", "ResourceExhaustedError", "AssertionError", "AttributeError",
}

-- Whether class `a` is `b` or one of b's ancestors.
local function is_ancestor(a, b)
  while b do
    if a == b then return true end
    b = PARENT[b]
  end
  return false
end

-- pcall(fn, ...) must fail; returns the raised value.
local function raised(fn, ...)
  local ok, err = pcall(fn, ...)
  assert(not ok, "expected the call to fail")
  return err
end

-- Children see neither DLRUN_DEVICES nor DLRUN_DEVICE_MEMORY from the caller
-- (empty counts as unset).
local CLEAN_ENV = {DLRUN_DEVICES = "", DLRUN_DEVICE_MEMORY = ""}

local function lines(text)
  local out = {}
  for line in text:gmatch("[^\n]*") do out[#out + 1] = line end
  -- gmatch yields an empty match after the last newline; drop trailing empties
  while out[#out] == "" do out[#out] = nil end
  return out
end

describe("error classes", function()
  it("all exist on dl, with their names", function()
    for _, name in ipairs(CLASSES) do
      local c = dl[name]
      assert.is_table(c, name)
      assert.are.equal(name, c.name)
    end
  end)

  it("are the same classes as in dlrun.errors", function()
    local errors = require "dlrun.errors"
    for _, name in ipairs(CLASSES) do
      assert.is_true(rawequal(errors[name], dl[name]), name)
    end
  end)

  it("are distinct from each other", function()
    for i, a in ipairs(CLASSES) do
      for j, b in ipairs(CLASSES) do
        assert.are.equal(i == j, rawequal(dl[a], dl[b]), a .. " vs " .. b)
      end
    end
  end)
end)

describe("error values", function()
  it("Class(message) makes a table with name and message", function()
    for _, name in ipairs(CLASSES) do
      local e = dl[name]("something went wrong")
      assert.is_table(e)
      assert.are.equal(name, e.name)
      assert.are.equal("something went wrong", e.message)
    end
  end)

  it("tostring(err) is name .. ': ' .. message", function()
    for _, name in ipairs(CLASSES) do
      local e = dl[name]("bad thing: 42")
      assert.are.equal(name .. ": bad thing: 42", tostring(e))
    end
    assert.are.equal("ValueError: ", tostring(dl.ValueError("")))
  end)

  it("the message is always a string", function()
    local e = dl.ValueError(42)
    assert.are.equal("string", type(e.message))
    assert.are.equal("42", e.message)
    assert.are.equal("ValueError: 42", tostring(e))
  end)

  it("a constructed value can be raised and caught as it is", function()
    local e = dl.TypeError("custom failure")
    local got = raised(error, e)
    assert.is_true(rawequal(e, got))
    assert.are.equal("TypeError", got.name)
    assert.are.equal("custom failure", got.message)
    -- error() adds no position to a table value
    assert.are.equal("TypeError: custom failure", tostring(got))
  end)

  it("each call makes a new value", function()
    local a, b = dl.ValueError("x"), dl.ValueError("x")
    assert.is_false(rawequal(a, b))
  end)
end)

describe("Class:is_instance", function()
  for _, cname in ipairs(CLASSES) do
    it(("%s:is_instance follows the hierarchy"):format(cname), function()
      for _, vname in ipairs(CLASSES) do
        local v = dl[vname]("m")
        assert.are.equal(is_ancestor(cname, vname), dl[cname]:is_instance(v),
                         ("%s:is_instance(%s value)"):format(cname, vname))
      end
    end)
  end

  it("IndivisibleError is a ValueError and an Error, not a TypeError", function()
    local e = dl.IndivisibleError("does not divide")
    assert.is_true(dl.IndivisibleError:is_instance(e))
    assert.is_true(dl.ValueError:is_instance(e))
    assert.is_true(dl.Error:is_instance(e))
    assert.is_false(dl.TypeError:is_instance(e))
    assert.is_false(dl.DuplicateSpecError:is_instance(e))
  end)

  it("a parent's value is not an instance of the child class", function()
    assert.is_false(dl.IndivisibleError:is_instance(dl.ValueError("m")))
    assert.is_false(dl.ValueError:is_instance(dl.Error("m")))
  end)

  it("is false for values that are not dlrun errors", function()
    local values = {
      nil, false, true, 0, 42, "ValueError: looks like one", {},
      {name = "ValueError", message = "a look-alike table"},
      setmetatable({name = "ValueError", message = "m"}, {__tostring = function() return "x" end}),
      function() end, dl.devices()[1], io.stdout,
    }
    for _, cname in ipairs(CLASSES) do
      for i = 1, 12 do
        assert.is_false(dl[cname]:is_instance(values[i]),
                        ("%s:is_instance(%s)"):format(cname, tostring(values[i])))
      end
      -- classes themselves are not instances
      for _, other in ipairs(CLASSES) do
        assert.is_false(dl[cname]:is_instance(dl[other]), cname .. " of class " .. other)
      end
    end
  end)
end)

describe("errors raised by dlrun functions", function()
  it("a TypeError from a wrong argument type", function()
    local err = raised(dl.devices, 42)
    assert.is_true(dl.TypeError:is_instance(err))
    assert.is_true(dl.Error:is_instance(err))
    assert.is_false(dl.ValueError:is_instance(err))
    assert.are.equal("TypeError", err.name)
    assert.are.equal(
      'devices: argument 1 (backend) must be a platform name such as "sim" or "cpu", got number',
      err.message)
    assert.are.equal("TypeError: " .. err.message, tostring(err))
  end)

  it("a RuntimeError for an unknown backend", function()
    local err = raised(dl.device_count, "gpu")
    assert.is_true(dl.RuntimeError:is_instance(err))
    assert.is_true(dl.Error:is_instance(err))
    assert.are.equal("RuntimeError", err.name)
    assert.are.equal("RuntimeError: Unknown backend: 'gpu' requested, but no platforms that are "
                       .. "instances of gpu are present. Platforms present are: "
                       .. helpers.platform .. ",cpu",
                     tostring(err))
  end)

  it("a ValueError for a bad value", function()
    local err = raised(dl.zeros, {-1}, "float32")
    assert.is_true(dl.ValueError:is_instance(err))
    assert.is_false(dl.IndivisibleError:is_instance(err))
    assert.are.equal("ValueError: zeros: shape entry 1 is negative (-1)", tostring(err))
  end)

  it("a ValueError from configure with a bad option", function()
    local err = raised(dl.configure, {bogus = true})
    assert.is_true(dl.ValueError:is_instance(err))
    assert.are.equal("configure: unknown option 'bogus' (expected devices, device_memory, device_memory_fraction, "
      .. "device_preallocate, pinned_host_memory, pinned_host_memory_fraction, pinned_host_preallocate, "
      .. "host_memory, host_memory_fraction)",
                     err.message)
  end)

  it("a RuntimeError with JAX's text for a deleted array", function()
    local x = dl.zeros({3}, "float32")
    x:delete()
    local err = raised(x.tolist, x)
    assert.is_true(dl.RuntimeError:is_instance(err))
    assert.are.equal("Array has been deleted with shape=float32[3].", err.message)
  end)

  it("a ResourceExhaustedError when a device is out of memory", function()
    local d = dl.devices()[1]
    local n = d:memory_stats().bytes_limit + 1
    local err = raised(dl.zeros, {n}, "uint8")
    assert.is_true(dl.ResourceExhaustedError:is_instance(err))
    assert.is_true(dl.Error:is_instance(err))
    assert.is_false(dl.RuntimeError:is_instance(err))
    assert(err.message:find(("Out of memory on " .. helpers.dev(0) .. " while allocating %d bytes"):format(n),
                            1, true), err.message)
  end)

  it("values raised by dlrun and by Class() share one metatable", function()
    local err = raised(dl.devices, 42)
    assert.are.equal(getmetatable(dl.TypeError("x")), getmetatable(err))
  end)
end)

describe("the dlrun command and uncaught errors", function()
  it("prints 'dlrun: ValueError: <message>' and a traceback on stderr, exit status 1", function()
    local out, err, status = run_code(
      'local dl = require "dlrun"\nprint("before")\ndl.zeros({2}, "float64x")\nprint("after")',
      nil, CLEAN_ENV)
    assert.are.equal("before\n", out)
    assert.are.equal(1, status)
    local l = lines(err)
    assert.are.equal('dlrun: ValueError: zeros: unknown dtype "float64x" (expected one of: bool, '
                       .. "int8, int16, int32, int64, uint8, uint16, uint32, uint64, float16, "
                       .. "bfloat16, float32, float64, complex64, complex128, "
                       .. "float8_e3m4, float8_e4m3, float8_e4m3b11fnuz, float8_e4m3fn, "
                       .. "float8_e4m3fnuz, float8_e5m2, float8_e5m2fnuz, float8_e8m0fnu, "
                       .. "int4, uint4, int2, uint2, float4_e2m1fn, float6_e2m3fn, float6_e3m2fn)", l[1])
    assert.are.equal("  at (command line):3", l[2]) -- the script line that raised
    assert.are.equal("stack traceback:", l[3])
    assert(err:find("(command line):3: in main chunk", 1, true), err)
  end)

  it("prints other classes by their own name (TypeError, RuntimeError)", function()
    local _, err, status = run_code('require("dlrun").devices(42)', nil, CLEAN_ENV)
    assert.are.equal(1, status)
    assert.are.equal('dlrun: TypeError: devices: argument 1 (backend) must be a platform name '
                       .. 'such as "sim" or "cpu", got number', lines(err)[1])
    _, err, status = run_code('require("dlrun").devices("gpu")', nil, CLEAN_ENV)
    assert.are.equal(1, status)
    assert.are.equal("dlrun: RuntimeError: Unknown backend: 'gpu' requested, but no platforms "
                       .. "that are instances of gpu are present. Platforms present are: "
                       .. helpers.auto().platform .. ",cpu",
                     lines(err)[1])
  end)

  it("prints an error value raised by the script itself the same way", function()
    local out, err, status = run_code(
      'local dl = require "dlrun"\nerror(dl.IndivisibleError("7 does not divide 2"))', nil,
      CLEAN_ENV)
    assert.are.equal("", out)
    assert.are.equal(1, status)
    assert.are.equal("dlrun: IndivisibleError: 7 does not divide 2", lines(err)[1])
    assert.are.equal("  at (command line):2", lines(err)[2])
    assert.are.equal("stack traceback:", lines(err)[3])
  end)

  it("the traceback shows where the failing call was made (script from stdin)", function()
    local script = table.concat({
      'local dl = require "dlrun"',
      "local function place()",
      "  return dl.zeros({2}, 'nope')",
      "end",
      "place()",
    }, "\n") .. "\n"
    local out, err, status = run({"-"}, script, CLEAN_ENV)
    assert.are.equal("", out)
    assert.are.equal(1, status)
    local l = lines(err)
    assert.are.equal("dlrun: ValueError: zeros: unknown dtype \"nope\" (expected one of: bool, "
                       .. "int8, int16, int32, int64, uint8, uint16, uint32, uint64, float16, "
                       .. "bfloat16, float32, float64, complex64, complex128, "
                       .. "float8_e3m4, float8_e4m3, float8_e4m3b11fnuz, float8_e4m3fn, "
                       .. "float8_e4m3fnuz, float8_e5m2, float8_e5m2fnuz, float8_e8m0fnu, "
                       .. "int4, uint4, int2, uint2, float4_e2m1fn, float6_e2m3fn, float6_e3m2fn)", l[1])
    assert.are.equal("  at stdin:3", l[2]) -- inside place(), not the binding
    assert.are.equal("stack traceback:", l[3])
    assert(err:find("stdin:3:", 1, true), err)
    assert(err:find("stdin:5: in main chunk", 1, true), err)
  end)

  it("an error caught by pcall is not reported and the command succeeds", function()
    local out, err, status = run_code([[
      local dl = require "dlrun"
      local ok, e = pcall(dl.devices, 42)
      print(ok, dl.TypeError:is_instance(e), e.name)
    ]], nil, CLEAN_ENV)
    assert.are.equal("false\ttrue\tTypeError\n", out)
    assert.are.equal("", err)
    assert.are.equal(0, status)
  end)

  it("success exits 0 with nothing on stderr", function()
    local out, err, status = run_code('print(#require("dlrun").devices())', nil, CLEAN_ENV)
    assert.are.equal("8\n", out)
    assert.are.equal("", err)
    assert.are.equal(0, status)
  end)
end)

-- A string that reaches C as a path or a name would be cut at its first NUL
-- (dl.trace_start("a\0b.json") used to write "a"): a ValueError, as Python's
-- open says "embedded null byte"; an attribute name with a NUL is no field.
describe("strings with an embedded NUL", function()
  local mesh = dl.make_mesh({2}, {"x"}, dl.devices())
  local cases = {
    {"array dtype", function() return dl.array({1}, "float32\0x") end,
     'array: embedded null byte in dtype ("float32\\0x")'},
    {"zeros dtype", function() return dl.zeros({2}, "int8\0") end,
     'zeros: embedded null byte in dtype ("int8\\0")'},
    {"devices backend", function() return dl.devices("sim\0") end,
     'devices: embedded null byte in backend ("sim\\0")'},
    {"Mesh axis name", function() return dl.Mesh(dl.devices(), "x\0y") end,
     'Mesh: embedded null byte in axis name ("x\\0y")'},
    {"P entry", function() return dl.NamedSharding(mesh, dl.P("x\0")) end,
     'NamedSharding: embedded null byte in axis name ("x\\0")'},
    {"memory kind", function() return dl.NamedSharding(mesh, dl.P(), "device\0") end,
     'NamedSharding: embedded null byte in memory_kind ("device\\0")'},
    {"configure devices", function() return dl.configure{devices = "sim:2\0cpu:1"} end,
     'configure: embedded null byte in devices ("sim:2\\0cpu:1")'},
    {"configure device_memory", function() return dl.configure{device_memory = "1GiB\0"} end,
     'configure: embedded null byte in device_memory ("1GiB\\0")'},
    {"trace_start path", function() return dl.trace_start("a\0b.json") end,
     'trace_start: embedded null byte in path ("a\\0b.json")'},
  }
  for _, case in ipairs(cases) do
    it("are a ValueError: " .. case[1], function()
      local e = raised(case[2])
      assert.are.equal("ValueError", e.name)
      assert.are.equal(case[3], e.message)
    end)
  end

  it("make no file of the path's first part", function()
    local dir = os.tmpname()
    os.remove(dir)
    assert(os.execute("mkdir " .. helpers.shell_quote(dir)))
    local e = raised(dl.trace_start, dir .. "/a\0b.json")
    assert.are.equal("ValueError", e.name)
    assert.is_nil(io.open(dir .. "/a"))
    assert.is_false(pcall(dl.trace_stop)) -- nothing started
    os.remove(dir)
  end)

  it("name no attribute (x['shape\\0'] is not x.shape)", function()
    local x = dl.array({1, 2})
    for _, obj in ipairs {x, dl.devices()[1], x.sharding} do
      local e = raised(function() return obj["shape\0"] end)
      assert.are.equal("AttributeError", e.name)
      assert.truthy(e.message:find("has no attribute 'shape\\0'", 1, true), e.message)
    end
    local e = raised(function() return mesh["size\0"] end)
    assert.are.equal("AttributeError", e.name)
  end)
end)
