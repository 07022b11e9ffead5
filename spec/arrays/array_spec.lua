-- runs: every-platform
-- ipc-off: no
-- devices: 8
-- needs: none

-- Specs for arrays on one device: creation, properties, reading back,
-- deletion and release, and argument checking (docs/lua-api.md, "Arrays"
-- and "Errors").
-- Run from the repository root: busted spec/arrays/array_spec.lua

local dl = require "dlrun"

local helpers = require "helpers"
local expect_error = helpers.expect_error

local DTYPES = {
  "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
  "float16", "bfloat16", "float32", "float64", "complex64", "complex128",
}
-- The float8 family has specs of its own (float8_spec.lua).
local FLOAT8 = {
  "float8_e3m4", "float8_e4m3", "float8_e4m3b11fnuz", "float8_e4m3fn", "float8_e4m3fnuz",
  "float8_e5m2", "float8_e5m2fnuz", "float8_e8m0fnu",
}
-- So have the sub-byte types (subbyte_spec.lua).
local SUBBYTE = {
  "int4", "uint4", "int2", "uint2", "float4_e2m1fn", "float6_e2m3fn", "float6_e3m2fn",
}
local DTYPE_LIST = table.concat(DTYPES, ", ") .. ", " .. table.concat(FLOAT8, ", ") .. ", "
                   .. table.concat(SUBBYTE, ", ")

local ITEMSIZE = {
  bool = 1, int8 = 1, int16 = 2, int32 = 4, int64 = 8,
  uint8 = 1, uint16 = 2, uint32 = 4, uint64 = 8,
  float16 = 2, bfloat16 = 2, float32 = 4, float64 = 8, complex64 = 8, complex128 = 16,
}

local KIND = {
  bool = "bool",
  int8 = "int", int16 = "int", int32 = "int", int64 = "int",
  uint8 = "int", uint16 = "int", uint32 = "int", uint64 = "int",
  float16 = "float", bfloat16 = "float", float32 = "float", float64 = "float",
  complex64 = "complex", complex128 = "complex",
}

-- The Lua value tolist() gives for the number v (0, 1, 2, ...) in `dtype`.
local function value_of(dtype, v)
  local kind = KIND[dtype]
  if kind == "bool" then return v ~= 0 end
  if kind == "int" then return math.tointeger(v) end
  if kind == "float" then return v + 0.0 end
  return { v + 0.0, 0.0 }
end

-- Nested table of `shape` (a list) filled with `v` (a value or function of
-- the 0-based flat index).
local function nested(shape, v)
  local flat = 0
  local function build(d)
    if d > #shape then
      local r = type(v) == "function" and v(flat) or v
      flat = flat + 1
      return r
    end
    local t = {}
    for i = 1, shape[d] do t[i] = build(d + 1) end
    return t
  end
  if #shape == 0 then return type(v) == "function" and v(0) or v end
  return build(1)
end

local function in_use(dev) return dev:memory_stats().bytes_in_use end

local function round256(n) return (n + 255) // 256 * 256 end

-- Values compare equal and have the same Lua number subtype (integer vs
-- float), recursively.
local function same_typed(expected, actual, path)
  path = path or "value"
  if type(expected) == "table" then
    assert(type(actual) == "table", path .. ": expected a table, got " .. type(actual))
    assert.are.equal(#expected, #actual, path .. ": length")
    for i = 1, #expected do same_typed(expected[i], actual[i], path .. "[" .. i .. "]") end
    return
  end
  assert.are.equal(type(expected), type(actual), path .. ": type")
  if type(expected) == "number" then
    assert.are.equal(math.type(expected), math.type(actual), path .. ": number subtype")
    if expected ~= expected then
      assert(actual ~= actual, path .. ": expected nan")
    else
      assert.are.equal(expected, actual, path)
    end
  else
    assert.are.equal(expected, actual, path)
  end
end

local function f32(x) return (string.unpack("f", string.pack("f", x))) end

-- Devices used below. The suite runs on the default runtime (8 sim
-- devices and a host cpu).
local default_dev = dl.devices()[1]
local sim3 = dl.devices()[4]
local cpu = dl.devices("cpu")[1]
-- A device that only the memory tests below allocate on.
local quiet_dev = dl.devices()[#dl.devices()]

describe("dl.array", function()
  describe("dtype inference", function()
    it("makes int32 from integers", function()
      local x = dl.array({ 1, 2, 3 })
      assert.are.equal("int32", x.dtype)
      assert.are.same({ 3 }, x.shape)
      same_typed({ 1, 2, 3 }, x:tolist())
    end)

    it("makes float32 when any element is a float", function()
      local x = dl.array({ 1, 2.5, 3 })
      assert.are.equal("float32", x.dtype)
      same_typed({ 1.0, 2.5, 3.0 }, x:tolist())
    end)

    it("makes float32 from an integral float", function()
      local x = dl.array({ 1, 2.0 })
      assert.are.equal("float32", x.dtype)
      same_typed({ 1.0, 2.0 }, x:tolist())
    end)

    it("makes bool from booleans", function()
      local x = dl.array({ true, false, true })
      assert.are.equal("bool", x.dtype)
      same_typed({ true, false, true }, x:tolist())
    end)

    it("makes int32 from booleans mixed with integers", function()
      local x = dl.array({ true, 2, false })
      assert.are.equal("int32", x.dtype)
      same_typed({ 1, 2, 0 }, x:tolist())
    end)

    it("makes complex64 from {re=, im=} elements", function()
      local x = dl.array({ { re = 1, im = 2 }, 3, { re = -0.5, im = -1 } })
      assert.are.equal("complex64", x.dtype)
      assert.are.same({ 3 }, x.shape)
      same_typed({ { 1.0, 2.0 }, { 3.0, 0.0 }, { -0.5, -1.0 } }, x:tolist())
    end)

    it("makes a 0-d complex64 from one {re=, im=}", function()
      local x = dl.array({ re = 1.5, im = -2 })
      assert.are.equal("complex64", x.dtype)
      assert.are.same({}, x.shape)
      same_typed({ 1.5, -2.0 }, x:item())
    end)

    it("reads a pair of numbers as a list when no dtype is given", function()
      local x = dl.array({ 1, 2 })
      assert.are.equal("int32", x.dtype)
      assert.are.same({ 2 }, x.shape)
    end)

    it("makes a float32 array of shape {0} from {}", function()
      local x = dl.array({})
      assert.are.equal("float32", x.dtype)
      assert.are.same({ 0 }, x.shape)
      assert.are.equal(0, x.size)
      assert.are.same({}, x:tolist())
    end)

    it("makes shape {2, 0} from {{}, {}}", function()
      local x = dl.array({ {}, {} })
      assert.are.equal("float32", x.dtype)
      assert.are.same({ 2, 0 }, x.shape)
      assert.are.same({ {}, {} }, x:tolist())
    end)
  end)

  describe("data", function()
    it("makes 0-d arrays from a number or a boolean", function()
      local i, f, b = dl.array(7), dl.array(2.5), dl.array(true)
      assert.are.same({}, i.shape)
      assert.are.equal("int32", i.dtype)
      same_typed(7, i:tolist())
      assert.are.equal("float32", f.dtype)
      same_typed(2.5, f:tolist())
      assert.are.equal("bool", b.dtype)
      same_typed(true, b:tolist())
      assert.are.equal(0, b.ndim)
    end)

    it("makes n-d arrays from nested tables, row-major", function()
      local x = dl.array({ { { 1, 2 }, { 3, 4 }, { 5, 6 } }, { { 7, 8 }, { 9, 10 }, { 11, 12 } } })
      assert.are.same({ 2, 3, 2 }, x.shape)
      assert.are.equal(3, x.ndim)
      same_typed({ { { 1, 2 }, { 3, 4 }, { 5, 6 } }, { { 7, 8 }, { 9, 10 }, { 11, 12 } } },
                 x:tolist())
      assert.are.equal(string.pack("i4i4i4i4i4i4i4i4i4i4i4i4", 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12),
                       x:tobytes())
    end)

    it("takes an explicit dtype", function()
      local x = dl.array({ { 1, 2 }, { 3, 4 } }, "float64")
      assert.are.equal("float64", x.dtype)
      same_typed({ { 1.0, 2.0 }, { 3.0, 4.0 } }, x:tolist())
      local y = dl.array({ 1, 2, 3 }, "int8")
      assert.are.equal("int8", y.dtype)
      assert.are.equal("\1\2\3", y:tobytes())
    end)

    it("reads pairs of numbers as complex values for a complex dtype", function()
      local x = dl.array({ { 1, 2 }, { 3, 4 } }, "complex64")
      assert.are.same({ 2 }, x.shape)
      same_typed({ { 1.0, 2.0 }, { 3.0, 4.0 } }, x:tolist())
    end)

    it("puts the array on the default device, the default platform's device 0", function()
      local x = dl.array({ 1, 2 })
      assert.are.equal(default_dev, x:devices()[1])
      assert.are.equal(helpers.dev(0), tostring(x:devices()[1]))
    end)

    it("puts the array on a given device", function()
      local x = dl.array({ 1, 2 }, nil, sim3)
      assert.are.equal(sim3, x:devices()[1])
      assert.are.equal(helpers.dev(3), tostring(x:devices()[1]))
      same_typed({ 1, 2 }, x:tolist())
    end)

    it("puts the array on the cpu device", function()
      local x = dl.array({ 1.5, 2.5 }, "float64", cpu)
      assert.are.equal(cpu, x:devices()[1])
      assert.are.equal("cpu", x:devices()[1].platform)
      same_typed({ 1.5, 2.5 }, x:tolist())
    end)
  end)
end)

describe("dl.frombytes", function()
  local PACK = {
    bool = { "BBB", { 1, 0, 1 }, { true, false, true } },
    int8 = { "bbb", { -128, 0, 127 }, { -128, 0, 127 } },
    int16 = { "i2i2i2", { -32768, 1, 32767 }, { -32768, 1, 32767 } },
    int32 = { "i4i4i4", { -2147483648, 5, 2147483647 }, { -2147483648, 5, 2147483647 } },
    int64 = { "i8i8i8", { math.mininteger, -1, math.maxinteger },
              { math.mininteger, -1, math.maxinteger } },
    uint8 = { "BBB", { 0, 128, 255 }, { 0, 128, 255 } },
    uint16 = { "I2I2I2", { 0, 40000, 65535 }, { 0, 40000, 65535 } },
    uint32 = { "I4I4I4", { 0, 3000000000, 4294967295 }, { 0, 3000000000, 4294967295 } },
    uint64 = { "I8I8I8", { 0, 7, math.maxinteger }, { 0, 7, math.maxinteger } },
    float16 = { "I2I2I2", { 0x3C00, 0xC000, 0x3800 }, { 1.0, -2.0, 0.5 } },
    bfloat16 = { "I2I2I2", { 0x3F80, 0xC000, 0x3F00 }, { 1.0, -2.0, 0.5 } },
    float32 = { "fff", { 1.5, -2.25, 3.0 }, { 1.5, -2.25, 3.0 } },
    float64 = { "ddd", { 0.1, -2.5, 1e300 }, { 0.1, -2.5, 1e300 } },
    complex64 = { "ffffff", { 1, 2, -3, 0.5, 0, 0 }, { { 1.0, 2.0 }, { -3.0, 0.5 }, { 0.0, 0.0 } } },
    complex128 = { "dddddd", { 0.1, 2, -3, 0.5, 0, 0 },
                   { { 0.1, 2.0 }, { -3.0, 0.5 }, { 0.0, 0.0 } } },
  }
  for _, dtype in ipairs(DTYPES) do
    it("round-trips string.pack data for " .. dtype, function()
      local spec = PACK[dtype]
      local s = string.pack(spec[1], table.unpack(spec[2]))
      local x = dl.frombytes(s, { 3 }, dtype)
      assert.are.equal(dtype, x.dtype)
      assert.are.same({ 3 }, x.shape)
      same_typed(spec[3], x:tolist())
      assert.are.equal(s, x:tobytes())
    end)
  end

  it("takes a 0-d shape {} and an integer shape", function()
    local x = dl.frombytes(string.pack("d", 2.5), {}, "float64")
    assert.are.same({}, x.shape)
    same_typed(2.5, x:item())
    local y = dl.frombytes(string.pack("i2i2", 4, -4), 2, "int16")
    assert.are.same({ 2 }, y.shape)
    same_typed({ 4, -4 }, y:tolist())
  end)

  it("takes a 2-d shape, row-major", function()
    local x = dl.frombytes(string.pack("i4i4i4i4i4i4", 1, 2, 3, 4, 5, 6), { 2, 3 }, "int32")
    same_typed({ { 1, 2, 3 }, { 4, 5, 6 } }, x:tolist())
  end)

  it("takes empty data for a zero-size shape", function()
    local x = dl.frombytes("", { 0, 4 }, "float32")
    assert.are.same({ 0, 4 }, x.shape)
    assert.are.equal(0, x.nbytes)
    assert.are.equal("", x:tobytes())
  end)

  it("puts the array on a given device", function()
    local x = dl.frombytes("\1\2", { 2 }, "uint8", sim3)
    assert.are.equal(sim3, x:devices()[1])
    local y = dl.frombytes("\1\2", { 2 }, "uint8", cpu)
    assert.are.equal(cpu, y:devices()[1])
    same_typed({ 1, 2 }, y:tolist())
  end)

  it("rejects data of the wrong length", function()
    expect_error("ValueError", "frombytes: got 11 bytes but shape float32[3] needs 12",
                 dl.frombytes, string.rep("x", 11), { 3 }, "float32")
    expect_error("ValueError", "frombytes: got 13 bytes but shape float32[3] needs 12",
                 dl.frombytes, string.rep("x", 13), { 3 }, "float32")
    expect_error("ValueError", "frombytes: got 1 bytes but shape int32[2,0] needs 0",
                 dl.frombytes, "x", { 2, 0 }, "int32")
    expect_error("ValueError", "frombytes: got 0 bytes but shape complex128[] needs 16",
                 dl.frombytes, "", {}, "complex128")
  end)
end)

-- Expected tolist() of zeros/ones/full for every dtype.
describe("dl.zeros, dl.ones, dl.full", function()
  local SHAPES = {
    { name = "0-d {}", arg = {}, shape = {} },
    { name = "{0, 4}", arg = { 0, 4 }, shape = { 0, 4 } },
    { name = "{4, 0}", arg = { 4, 0 }, shape = { 4, 0 } },
    { name = "integer 5", arg = 5, shape = { 5 } },
    { name = "3-d {2, 3, 2}", arg = { 2, 3, 2 }, shape = { 2, 3, 2 } },
  }

  local function check(x, dtype, shape, v)
    assert.are.equal(dtype, x.dtype)
    assert.are.same(shape, x.shape)
    local size = 1
    for _, d in ipairs(shape) do size = size * d end
    assert.are.equal(size, x.size)
    assert.are.equal(#shape, x.ndim)
    assert.are.equal(ITEMSIZE[dtype], x.itemsize)
    assert.are.equal(size * ITEMSIZE[dtype], x.nbytes)
    assert.are.equal(size * ITEMSIZE[dtype], #x:tobytes())
    same_typed(nested(shape, value_of(dtype, v)), x:tolist())
  end

  for _, dtype in ipairs(DTYPES) do
    describe(dtype, function()
      for _, s in ipairs(SHAPES) do
        it("zeros with shape " .. s.name, function()
          check(dl.zeros(s.arg, dtype), dtype, s.shape, 0)
        end)
        it("ones with shape " .. s.name, function()
          check(dl.ones(s.arg, dtype), dtype, s.shape, 1)
        end)
      end
      it("full with a fill value", function()
        local v = dtype == "bool" and 1 or 5
        local fill = dtype == "bool" and true or 5
        check(dl.full({ 2, 3 }, fill, dtype), dtype, { 2, 3 }, v)
        check(dl.full({}, fill, dtype), dtype, {}, v)
        check(dl.full({ 0 }, fill, dtype), dtype, { 0 }, v)
      end)
      it("zeros has all-zero bytes and ones has the bytes of 1", function()
        local n = 3 * ITEMSIZE[dtype]
        assert.are.equal(string.rep("\0", n), dl.zeros({ 3 }, dtype):tobytes())
        local one = dl.array(dtype == "bool" and true or 1, dtype):tobytes()
        assert.are.equal(one:rep(3), dl.ones({ 3 }, dtype):tobytes())
      end)
    end)
  end

  it("zeros and ones default to float32", function()
    local z, o = dl.zeros({ 2 }), dl.ones(3)
    assert.are.equal("float32", z.dtype)
    assert.are.equal("float32", o.dtype)
    same_typed({ 0.0, 0.0 }, z:tolist())
    same_typed({ 1.0, 1.0, 1.0 }, o:tolist())
    local c = dl.zeros({ 2 }, nil, cpu)
    assert.are.equal("float32", c.dtype)
    assert.are.equal(cpu, c:devices()[1])
  end)

  it("full defaults to the fill value's dtype, as JAX", function()
    local i, f, b, c = dl.full({ 2 }, 3), dl.full({}, 2.5), dl.full({ 1 }, true), dl.full({ 2 }, { 1, 2 })
    assert.are.equal("int32", i.dtype)
    same_typed({ 3, 3 }, i:tolist())
    assert.are.equal("float32", f.dtype)
    same_typed(2.5, f:item())
    assert.are.equal("bool", b.dtype)
    same_typed({ true }, b:tolist())
    assert.are.equal("complex64", c.dtype)
    same_typed({ { 1.0, 2.0 }, { 1.0, 2.0 } }, c:tolist())
    local d = dl.full({ 2 }, 7, nil, sim3)
    assert.are.equal("int32", d.dtype)
    assert.are.equal(sim3, d:devices()[1])
  end)

  it("full fills with a float value", function()
    same_typed({ 2.5, 2.5 }, dl.full({ 2 }, 2.5, "float64"):tolist())
    same_typed({ { f32(0.1) }, { f32(0.1) } }, dl.full({ 2, 1 }, 0.1, "float32"):tolist())
  end)

  it("full fills with a complex value", function()
    same_typed({ { 1.0, -2.0 }, { 1.0, -2.0 } }, dl.full({ 2 }, { 1, -2 }, "complex128"):tolist())
    same_typed({ 3.0, 4.0 }, dl.full({}, { re = 3, im = 4 }, "complex64"):item())
  end)

  it("puts the array on the default device", function()
    assert.are.equal(default_dev, dl.zeros({ 2 }, "float32"):devices()[1])
    assert.are.equal(default_dev, dl.ones({ 2 }, "int8"):devices()[1])
    assert.are.equal(default_dev, dl.full({ 2 }, 3, "int8"):devices()[1])
  end)

  it("puts the array on a given sim device", function()
    local z = dl.zeros({ 2 }, "float32", sim3)
    local o = dl.ones({ 2 }, "int8", sim3)
    local f = dl.full({ 2 }, 3, "int8", sim3)
    assert.are.equal(sim3, z:devices()[1])
    assert.are.equal(sim3, o:devices()[1])
    assert.are.equal(sim3, f:devices()[1])
    same_typed({ 3, 3 }, f:tolist())
  end)

  it("puts the array on the cpu device", function()
    local z = dl.zeros({ 2, 2 }, "float64", cpu)
    local o = dl.ones({ 3 }, "uint16", cpu)
    local f = dl.full({}, -1, "int64", cpu)
    assert.are.equal(cpu, z:devices()[1])
    assert.are.equal(cpu, o:devices()[1])
    assert.are.equal(cpu, f:devices()[1])
    same_typed({ { 0.0, 0.0 }, { 0.0, 0.0 } }, z:tolist())
    same_typed({ 1, 1, 1 }, o:tolist())
    same_typed(-1, f:item())
  end)

  it("allocates the array's rounded size on its device", function()
    collectgarbage()
    local before = in_use(sim3)
    local x = dl.zeros({ 100 }, "float32", sim3)
    assert.are.equal(before + round256(400), in_use(sim3))
    x:delete()
  end)

  it("allocates no device memory for a zero-size array", function()
    collectgarbage()
    local before = in_use(sim3)
    local x = dl.zeros({ 0, 4 }, "float32", sim3)
    assert.are.equal(before, in_use(sim3))
    assert.are.equal(sim3, x:devices()[1])
  end)
end)

describe("dl.arange", function()
  it("arange(n)", function()
    local x = dl.arange(5)
    assert.are.equal("int32", x.dtype)
    assert.are.same({ 5 }, x.shape)
    same_typed({ 0, 1, 2, 3, 4 }, x:tolist())
  end)

  it("arange(start, stop)", function()
    local x = dl.arange(2, 5)
    assert.are.equal("int32", x.dtype)
    same_typed({ 2, 3, 4 }, x:tolist())
    same_typed({ -3, -2, -1, 0 }, dl.arange(-3, 1):tolist())
  end)

  it("arange(start, stop, step)", function()
    same_typed({ 1, 4, 7 }, dl.arange(1, 10, 3):tolist())
    same_typed({ 0, 3, 6, 9 }, dl.arange(0, 10, 3):tolist())
    same_typed({ 0, 2, 4 }, dl.arange(0, 6, 2):tolist())
  end)

  it("counts down with a negative step", function()
    same_typed({ 10, 7, 4, 1 }, dl.arange(10, 0, -3):tolist())
    same_typed({ 5, 4, 3, 2, 1 }, dl.arange(5, 0, -1):tolist())
    same_typed({ 1.0, 0.5, 0.0, -0.5 }, dl.arange(1, -1, -0.5):tolist())
  end)

  it("makes float32 with a float step", function()
    local x = dl.arange(0, 1, 0.25)
    assert.are.equal("float32", x.dtype)
    same_typed({ 0.0, 0.25, 0.5, 0.75 }, x:tolist())
  end)

  it("makes float32 with a float start, each value start + i*step rounded once", function()
    local x = dl.arange(0.5, 3)
    assert.are.equal("float32", x.dtype)
    same_typed({ 0.5, 1.5, 2.5 }, x:tolist())
    local y = dl.arange(1, 2, 0.3)
    same_typed({ f32(1.0), f32(1 + 1 * 0.3), f32(1 + 2 * 0.3), f32(1 + 3 * 0.3) }, y:tolist())
  end)

  it("gives empty ranges", function()
    for _, x in ipairs({ dl.arange(0), dl.arange(-3), dl.arange(5, 2), dl.arange(2, 5, -1),
                         dl.arange(3, 3) }) do
      assert.are.equal("int32", x.dtype)
      assert.are.same({ 0 }, x.shape)
      assert.are.same({}, x:tolist())
    end
    local f = dl.arange(1.0, 1.0)
    assert.are.equal("float32", f.dtype)
    assert.are.same({ 0 }, f.shape)
    local g = dl.arange(0, 1, -0.5)
    assert.are.same({ 0 }, g.shape)
  end)

  it("takes an explicit dtype", function()
    local x = dl.arange(4, "float64")
    assert.are.equal("float64", x.dtype)
    same_typed({ 0.0, 1.0, 2.0, 3.0 }, x:tolist())
    local y = dl.arange(2, 8, 2, "int64")
    assert.are.equal("int64", y.dtype)
    same_typed({ 2, 4, 6 }, y:tolist())
    local z = dl.arange(0, 1, 0.5, "float16")
    assert.are.equal("float16", z.dtype)
    same_typed({ 0.0, 0.5 }, z:tolist())
    local w = dl.arange(0.0, 3.0, 1.0, "int32")
    same_typed({ 0, 1, 2 }, w:tolist())
  end)

  for _, dtype in ipairs(DTYPES) do
    it("makes " .. dtype, function()
      local n = dtype == "bool" and 2 or 3
      local x = dl.arange(n, dtype)
      assert.are.equal(dtype, x.dtype)
      assert.are.same({ n }, x.shape)
      local want = {}
      for i = 1, n do want[i] = value_of(dtype, i - 1) end
      same_typed(want, x:tolist())
    end)
  end

  it("puts the array on a given device", function()
    local x = dl.arange(3, "int32", sim3)
    assert.are.equal(sim3, x:devices()[1])
    local y = dl.arange(0, 4, 2, "float32", cpu)
    assert.are.equal(cpu, y:devices()[1])
    same_typed({ 0.0, 2.0 }, y:tolist())
    local z = dl.arange(3, nil, cpu)
    assert.are.equal(cpu, z:devices()[1])
    assert.are.equal("int32", z.dtype)
    local w = dl.arange(1, 3, nil, sim3)
    assert.are.equal(sim3, w:devices()[1])
    same_typed({ 1, 2 }, w:tolist())
  end)

  it("rejects a zero step", function()
    expect_error("ValueError", "arange: step must not be zero", dl.arange, 0, 10, 0)
    expect_error("ValueError", "arange: step must not be zero", dl.arange, 0, 1, 0.0)
  end)

  it("rejects a fractional step or start for an integer dtype", function()
    expect_error("ValueError",
                 "arange: integer dtype int32 needs integral start and step, got start=0 step=0.5",
                 dl.arange, 0, 1, 0.5, "int32")
    expect_error("ValueError",
                 "arange: integer dtype uint8 needs integral start and step, got start=0.5 step=1",
                 dl.arange, 0.5, 3, 1, "uint8")
  end)

  it("rejects values outside the dtype's range", function()
    expect_error("ValueError", "arange: value 259 does not fit in uint8 (range 0 to 255)",
                 dl.arange, 250, 260, 1, "uint8")
    expect_error("ValueError", "arange: value -1 does not fit in uint8 (range 0 to 255)",
                 dl.arange, -1, 3, 1, "uint8")
    expect_error("ValueError", "arange: value 129 does not fit in int8 (range -128 to 127)",
                 dl.arange, 126, 130, 1, "int8")
    expect_error("ValueError",
                 "arange: value 2 does not fit in bool (expected true, false, 0 or 1)",
                 dl.arange, 3, "bool")
  end)

  it("rejects non-finite bounds", function()
    expect_error("ValueError", "arange: start, stop and step must be finite",
                 dl.arange, 0, math.huge)
    expect_error("ValueError", "arange: start, stop and step must be finite",
                 dl.arange, 0 / 0)
  end)

  it("rejects a range whose byte size overflows, without crashing", function()
    expect_error("ValueError", { contains = "shape (4611686018427387904,) of int64 is too large" },
                 dl.arange, 0, 1 << 62, 1, "int64")
  end)

  it("rejects bad argument types", function()
    expect_error("TypeError", "arange: argument 1 (stop) must be a number, got no value", dl.arange)
    expect_error("TypeError", "arange: argument 1 (stop) must be a number, got string",
                 dl.arange, "5")
    expect_error("TypeError",
                 'arange: argument 4 (dtype) must be a dtype name such as "float32", got number',
                 dl.arange, 1, 2, 3, 4)
    expect_error("TypeError",
                 'arange: argument 2 (dtype) must be a dtype name such as "float32", got table',
                 dl.arange, 5, {})
    expect_error("TypeError", { pattern = "^arange: argument 3 %(target%) must be a Device.*, got string$" },
                 dl.arange, 5, "int32", "sim:0")
    expect_error("ValueError",
                 'arange: unknown dtype "int33" (expected one of: ' .. DTYPE_LIST .. ")",
                 dl.arange, 5, "int33")
  end)

  it("rejects extra arguments", function()
    expect_error("TypeError", "arange: expected at most 5 arguments, got 6", dl.arange, 1, 2, 3, "int32", nil, 7)
    expect_error("TypeError", "arange: expected at most 3 arguments, got 4", dl.arange, 5, "int32", cpu, 9)
  end)
end)

describe("Array properties", function()
  it("shape, dtype, ndim, size, itemsize, nbytes for several dtypes and shapes", function()
    local cases = {
      { {}, "float32", 0, 1 },
      { { 3 }, "int8", 1, 3 },
      { { 4, 2 }, "int64", 2, 8 },
      { { 2, 3, 4 }, "complex128", 3, 24 },
      { { 0, 4 }, "float16", 2, 0 },
      { { 5, 1 }, "bool", 2, 5 },
      { { 7 }, "bfloat16", 1, 7 },
      { { 1, 1, 1, 1 }, "uint32", 4, 1 },
    }
    for _, c in ipairs(cases) do
      local x = dl.zeros(c[1], c[2])
      assert.are.same(c[1], x.shape)
      assert.are.equal(c[2], x.dtype)
      assert.are.equal(c[3], x.ndim)
      assert.are.equal(c[4], x.size)
      assert.are.equal(ITEMSIZE[c[2]], x.itemsize)
      assert.are.equal(c[4] * ITEMSIZE[c[2]], x.nbytes)
      assert.are.equal("integer", math.type(x.size))
      assert.are.equal("integer", math.type(x.nbytes))
    end
  end)

  it("itemsize of every dtype", function()
    local all = { table.unpack(DTYPES) }
    for _, dtype in ipairs(FLOAT8) do
      ITEMSIZE[dtype] = 1
      all[#all + 1] = dtype
    end
    assert.are.equal(23, #all)
    for _, dtype in ipairs(all) do
      local x = dl.zeros({ 3, 5 }, dtype)
      assert.are.equal(ITEMSIZE[dtype], x.itemsize, dtype)
      assert.are.equal(15 * ITEMSIZE[dtype], x.nbytes, dtype)
      assert.are.equal(15, x.size)
    end
  end)

  it("shape is a fresh table each time", function()
    local x = dl.zeros({ 2, 3 }, "float32")
    local s1, s2 = x.shape, x.shape
    assert.are_not.equal(s1, s2)
    s1[1] = 99
    s1[3] = 7
    assert.are.same({ 2, 3 }, x.shape)
    assert.are.equal(2, x.ndim)
  end)

  it("an unknown field is an AttributeError; a key that is no name is nil", function()
    local x = dl.zeros({ 2 }, "float32")
    expect_error("AttributeError", "'Array' object has no attribute 'foo'",
                 function() return x.foo end)
    assert.is_nil(x[1])
  end)

  it("devices() is a list holding the array's device", function()
    local x = dl.zeros({ 2 }, "float32", sim3)
    local d = x:devices()
    assert.are.equal(1, #d)
    assert.are.equal(sim3, d[1])
    assert.are.equal(3, d[1].id)
    assert.are_not.equal(d, x:devices())
  end)

  it("#x is the first dimension", function()
    assert.are.equal(3, #dl.zeros({ 3, 5 }, "float32"))
    assert.are.equal(0, #dl.zeros({ 0, 4 }, "float32"))
    assert.are.equal(4, #dl.zeros({ 4, 0 }, "float32"))
    assert.are.equal(5, #dl.arange(5))
  end)

  it("#x of a 0-d array is a TypeError", function()
    local x = dl.array(1.5)
    expect_error("TypeError", "len() of unsized object (a 0-d array)", function() return #x end)
  end)
end)

describe("reading arrays", function()
  describe("tolist", function()
    it("gives nested tables", function()
      same_typed({ { 1, 2, 3 }, { 4, 5, 6 } },
                 dl.frombytes(string.pack("i4i4i4i4i4i4", 1, 2, 3, 4, 5, 6), { 2, 3 }, "int32"):tolist())
      same_typed({ { { 0.0 }, { 0.0 } } }, dl.zeros({ 1, 2, 1 }, "float32"):tolist())
    end)

    it("gives a scalar for a 0-d array", function()
      same_typed(5, dl.array(5):tolist())
      same_typed(-2.5, dl.array(-2.5, "float64"):tolist())
      same_typed(false, dl.array(false):tolist())
    end)

    it("gives {re, im} pairs for complex", function()
      same_typed({ { 1.0, 2.0 }, { -3.0, 0.0 } },
                 dl.array({ { re = 1, im = 2 }, -3 }, "complex128"):tolist())
      same_typed({ 0.5, -0.25 }, dl.array({ re = 0.5, im = -0.25 }):tolist())
    end)

    it("gives booleans for bool", function()
      same_typed({ { true, false }, { false, true } },
                 dl.array({ { true, false }, { false, true } }):tolist())
    end)

    it("gives int64 extremes exactly", function()
      local x = dl.array({ math.mininteger, -1, 0, math.maxinteger }, "int64")
      same_typed({ math.mininteger, -1, 0, math.maxinteger }, x:tolist())
    end)

    it("gives uint64 values up to 2^63-1 as integers and larger ones as floats", function()
      local x = dl.frombytes(string.pack("I8I8I8", math.maxinteger, math.mininteger, -1), { 3 },
                             "uint64")
      local t = x:tolist()
      same_typed(math.maxinteger, t[1])
      same_typed(2.0 ^ 63, t[2])
      same_typed(2.0 ^ 64, t[3]) -- 2^64 - 1 as the nearest float
    end)
  end)

  describe("tobytes", function()
    it("equals string.pack of the data", function()
      assert.are.equal(string.pack("fff", 1, 2, 3), dl.array({ 1.0, 2, 3 }):tobytes())
      assert.are.equal(string.pack("i2i2i2i2", 1, -2, 3, -4),
                       dl.array({ { 1, -2 }, { 3, -4 } }, "int16"):tobytes())
      assert.are.equal(string.pack("dd", 0.1, -0.5), dl.array({ { 0.1, -0.5 } }, "complex128"):tobytes())
      assert.are.equal("\1\0\1", dl.array({ true, false, true }):tobytes())
      assert.are.equal(string.pack("i8", math.mininteger), dl.array(math.mininteger, "int64"):tobytes())
    end)

    it("gives the empty string for a zero-size array", function()
      assert.are.equal("", dl.zeros({ 4, 0 }, "float64"):tobytes())
    end)
  end)

  describe("item", function()
    it("gives the element of a size-1 array of any rank", function()
      same_typed(7, dl.array(7):item())
      same_typed(7, dl.array({ 7 }):item())
      same_typed(2.5, dl.array({ { { 2.5 } } }):item())
      same_typed(true, dl.array({ { true } }):item())
      same_typed({ 1.0, -1.0 }, dl.array({ { re = 1, im = -1 } }):item())
      same_typed(3, dl.full({ 1, 1, 1, 1 }, 3, "uint8"):item())
    end)

    it("rejects other sizes", function()
      expect_error("ValueError", "can only convert an array of size 1 to a Lua scalar (size is 3)",
                   function() return dl.array({ 1, 2, 3 }):item() end)
      expect_error("ValueError", "can only convert an array of size 1 to a Lua scalar (size is 0)",
                   function() return dl.zeros({ 0 }, "float32"):item() end)
      expect_error("ValueError", "can only convert an array of size 1 to a Lua scalar (size is 4)",
                   function() return dl.zeros({ 2, 2 }, "int8"):item() end)
    end)
  end)

  it("block_until_ready returns the same array", function()
    local x = dl.zeros({ 1000 }, "float32")
    local y = x:block_until_ready()
    assert.is_true(rawequal(x, y))
    local z = dl.array({ 1, 2 }, nil, cpu)
    assert.is_true(rawequal(z, z:block_until_ready()))
  end)

  describe("tostring", function()
    it("renders simple arrays", function()
      assert.are.equal("Array([1., 2., 3.], dtype=float32)", tostring(dl.array({ 1.0, 2.0, 3.0 })))
      assert.are.equal("Array([1, 2, 3], dtype=int32)", tostring(dl.array({ 1, 2, 3 })))
    end)
  end)
end)

describe("delete", function()
  it("is idempotent and reported by is_deleted", function()
    local x = dl.array({ 1.0, 2.0, 3.0 })
    assert.is_false(x:is_deleted())
    x:delete()
    assert.is_true(x:is_deleted())
    x:delete()
    assert.is_true(x:is_deleted())
  end)

  it("keeps the metadata readable", function()
    local x = dl.zeros({ 4, 2 }, "int32")
    x:delete()
    assert.are.same({ 4, 2 }, x.shape)
    assert.are.equal("int32", x.dtype)
    assert.are.equal(2, x.ndim)
    assert.are.equal(8, x.size)
    assert.are.equal(4, x.itemsize)
    assert.are.equal(32, x.nbytes)
  end)

  local USES = {
    tolist = function(x) return x:tolist() end,
    tobytes = function(x) return x:tobytes() end,
    item = function(x) return x:item() end,
    devices = function(x) return x:devices() end,
    block_until_ready = function(x) return x:block_until_ready() end,
  }
  for _, name in ipairs({ "tolist", "tobytes", "item", "devices", "block_until_ready" }) do
    it(name .. " on a deleted array raises JAX's RuntimeError", function()
      local a = dl.array({ 1.0, 2.0, 3.0 })
      a:delete()
      expect_error("RuntimeError", "Array has been deleted with shape=float32[3].", USES[name], a)
      local b = dl.zeros({ 4, 2 }, "int32")
      b:delete()
      expect_error("RuntimeError", "Array has been deleted with shape=int32[4,2].", USES[name], b)
      local c = dl.array(1.5)
      c:delete()
      expect_error("RuntimeError", "Array has been deleted with shape=float32[].", USES[name], c)
    end)
  end

  it("names every dtype in the deleted message", function()
    local x = dl.zeros({ 0, 3 }, "complex128")
    x:delete()
    expect_error("RuntimeError", "Array has been deleted with shape=complex128[0,3].",
                 function() return x:tolist() end)
  end)

  it("tostring of a deleted array says so", function()
    local x = dl.array({ 1.0, 2.0, 3.0 })
    x:delete()
    assert.are.equal("Array(<deleted>, shape=float32[3])", tostring(x))
  end)

  describe("memory", function()
    it("delete frees the device memory at once", function()
      collectgarbage()
      local before = in_use(quiet_dev)
      local x = dl.array({ 1.0, 2.0, 3.0 }, nil, quiet_dev)
      assert.are.equal(before + 256, in_use(quiet_dev))
      x:delete()
      assert.are.equal(before, in_use(quiet_dev))
    end)

    it("delete frees a filled array's memory at once once it is ready", function()
      collectgarbage()
      local before = in_use(quiet_dev)
      local x = dl.ones({ 1000 }, "float64", quiet_dev):block_until_ready()
      assert.are.equal(before + 8192, in_use(quiet_dev))
      x:delete()
      assert.are.equal(before, in_use(quiet_dev))
    end)

    it("delete on the cpu device frees memory too", function()
      collectgarbage()
      local before = in_use(cpu)
      local x = dl.zeros({ 300 }, "float32", cpu):block_until_ready()
      assert.are.equal(before + round256(1200), in_use(cpu))
      x:delete()
      assert.are.equal(before, in_use(cpu))
    end)

    it("<close> releases the memory at the end of the scope without collectgarbage", function()
      collectgarbage()
      collectgarbage("stop")
      local before = in_use(quiet_dev)
      local inside
      do
        local x <close> = dl.ones({ 1000 }, "float64", quiet_dev):block_until_ready()
        inside = in_use(quiet_dev)
      end
      local after = in_use(quiet_dev)
      collectgarbage("restart")
      assert.are.equal(before + 8192, inside)
      assert.are.equal(before, after)
    end)

    it("an array closed by <close> behaves as deleted", function()
      local kept
      do
        local x <close> = dl.array({ 1.0, 2.0, 3.0 })
        kept = x
      end
      assert.is_true(kept:is_deleted())
      assert.are.same({ 3 }, kept.shape)
      expect_error("RuntimeError", "Array has been deleted with shape=float32[3].",
                   function() return kept:tolist() end)
    end)

    it("<close> after delete() is harmless", function()
      collectgarbage()
      local before = in_use(quiet_dev)
      do
        local x <close> = dl.array({ 1, 2 }, nil, quiet_dev)
        x:delete()
        assert.are.equal(before, in_use(quiet_dev))
      end
      assert.are.equal(before, in_use(quiet_dev))
    end)

    it("garbage collection frees the memory", function()
      collectgarbage()
      local before = in_use(quiet_dev)
      local x = dl.ones({ 1000 }, "float64", quiet_dev):block_until_ready()
      assert.are.equal(before + 8192, in_use(quiet_dev))
      x = nil
      collectgarbage()
      collectgarbage()
      assert.is_nil(x)
      assert.are.equal(before, in_use(quiet_dev))
    end)

    it("a failed creation leaves no device memory allocated", function()
      collectgarbage()
      local before = in_use(quiet_dev)
      pcall(dl.array, { 1, 2, 300 }, "uint8", quiet_dev)
      pcall(dl.full, { 100 }, 1.5, "int32", quiet_dev)
      pcall(dl.arange, 250, 260, 1, "uint8", quiet_dev)
      pcall(dl.frombytes, "abc", { 4 }, "uint8", quiet_dev)
      assert.are.equal(before, in_use(quiet_dev))
    end)
  end)
end)

describe("bad arguments", function()
  local SHAPE_MSG = "%s: argument %d (shape) must be an integer or a list of integers, got %s"

  describe("shape", function()
    it("wrong types are TypeErrors naming the function and argument", function()
      expect_error("TypeError", SHAPE_MSG:format("zeros", 1, "string"), dl.zeros, "abc", "float32")
      expect_error("TypeError", SHAPE_MSG:format("ones", 1, "boolean"), dl.ones, true, "float32")
      expect_error("TypeError", SHAPE_MSG:format("full", 1, "nil"), dl.full, nil, 1, "float32")
      expect_error("TypeError", SHAPE_MSG:format("frombytes", 2, "string"),
                   dl.frombytes, "", "x", "float32")
      expect_error("TypeError", SHAPE_MSG:format("zeros", 1, "no value"), dl.zeros)
    end)

    it("non-number entries are TypeErrors naming the position", function()
      expect_error("TypeError", SHAPE_MSG:format("zeros", 1, "string at position 2"),
                   dl.zeros, { 1, "a" }, "float32")
      expect_error("TypeError", SHAPE_MSG:format("ones", 1, "table at position 1"),
                   dl.ones, { { 2 } }, "float32")
      expect_error("TypeError", SHAPE_MSG:format("frombytes", 2, "boolean at position 1"),
                   dl.frombytes, "", { true }, "float32")
    end)

    it("negative entries are ValueErrors", function()
      expect_error("ValueError", "zeros: shape entry 2 is negative (-1)", dl.zeros, { 2, -1 }, "float32")
      expect_error("ValueError", "ones: shape entry 1 is negative (-3)", dl.ones, -3, "int8")
      expect_error("ValueError", "full: shape entry 1 is negative (-1)", dl.full, { -1.0 }, 0, "int8")
      expect_error("ValueError", "frombytes: shape entry 1 is negative (-4)",
                   dl.frombytes, "", { -4 }, "int8")
    end)

    it("NaN, inf and 1.5 entries are ValueErrors", function()
      expect_error("ValueError", "zeros: shape entry 1 must be an integer, got 1.5",
                   dl.zeros, { 1.5 }, "float32")
      expect_error("ValueError", "zeros: shape entry 2 must be an integer, got inf",
                   dl.zeros, { 2, math.huge }, "float32")
      expect_error("ValueError", "ones: shape entry 1 must be an integer, got -inf",
                   dl.ones, -math.huge, "float32")
      expect_error("ValueError", { pattern = "^full: shape entry 1 must be an integer, got %-?nan$" },
                   dl.full, { 0 / 0 }, 1, "float32")
      expect_error("ValueError", { pattern = "^zeros: shape entry 1 " }, dl.zeros, { 2.0 ^ 63 }, "float32")
    end)

    it("accepts integral float entries", function()
      assert.are.same({ 2, 3 }, dl.zeros({ 2.0, 3.0 }, "float32").shape)
    end)

    it("at most 32 dimensions", function()
      local s32, s33 = {}, {}
      for i = 1, 32 do s32[i] = 1 end
      for i = 1, 33 do s33[i] = 1 end
      assert.are.equal(32, dl.zeros(s32, "int8").ndim)
      expect_error("ValueError", "zeros: shape has 33 dimensions (at most 32)", dl.zeros, s33, "int8")
      expect_error("ValueError", "frombytes: shape has 33 dimensions (at most 32)",
                   dl.frombytes, "\0", s33, "int8")
    end)

    it("a shape whose size or byte size overflows is a ValueError, not a crash", function()
      expect_error("ValueError",
                   "zeros: shape (4611686018427387904, 4) has too many elements (overflows int64)",
                   dl.zeros, { 2 ^ 62, 4 }, "float32")
      expect_error("ValueError",
                   "ones: shape (1152921504606846976, 2) of float32 is too large: its byte size overflows int64",
                   dl.ones, { 1 << 60, 2 }, "float32")
      expect_error("ValueError", { contains = "(4611686018427387904, 4) has too many elements" },
                   dl.frombytes, "", { 2 ^ 62, 4 }, "float32")
      expect_error("ValueError", { contains = "of complex128 is too large" },
                   dl.full, { 1 << 60 }, 0, "complex128")
    end)

    it("a shape too large for the device is a ResourceExhaustedError naming the device", function()
      expect_error("ResourceExhaustedError", { contains = helpers.dev(3) },
                   dl.zeros, { 1 << 40 }, "int8", sim3)
    end)
  end)

  describe("dtype", function()
    it("unknown names are ValueErrors listing the valid names", function()
      local list = " (expected one of: " .. DTYPE_LIST .. ")"
      expect_error("ValueError", 'zeros: unknown dtype "float"' .. list, dl.zeros, { 2 }, "float")
      expect_error("ValueError", 'ones: unknown dtype "Float32"' .. list, dl.ones, { 2 }, "Float32")
      expect_error("ValueError", 'full: unknown dtype "int128"' .. list, dl.full, { 2 }, 1, "int128")
      expect_error("ValueError", 'array: unknown dtype "f4"' .. list, dl.array, { 1 }, "f4")
      expect_error("ValueError", 'frombytes: unknown dtype ""' .. list, dl.frombytes, "", { 0 }, "")
    end)

    it("wrong types are TypeErrors", function()
      local msg = '%s: argument %d (dtype) must be a dtype name such as "float32", got %s'
      expect_error("TypeError", msg:format("zeros", 2, "number"), dl.zeros, { 2 }, 4)
      expect_error("TypeError", msg:format("ones", 2, "table"), dl.ones, { 2 }, {})
      expect_error("TypeError", msg:format("full", 3, "boolean"), dl.full, { 2 }, 1, true)
      expect_error("TypeError", msg:format("array", 2, "number"), dl.array, { 1 }, 32)
      expect_error("TypeError", msg:format("frombytes", 3, "nil"), dl.frombytes, "", { 0 }, nil)
    end)
  end)

  describe("data", function()
    it("missing data is a TypeError", function()
      local msg = "array: argument 1 (data) must be a number, a boolean, {re, im} or nested tables of them, got %s"
      expect_error("TypeError", msg:format("no value"), dl.array)
      expect_error("TypeError", msg:format("nil"), dl.array, nil, "float32")
    end)

    it("a string or function as the whole data is a TypeError naming argument 1", function()
      local msg = "array: argument 1 (data) must be a number, a boolean, {re, im} or nested tables of them, got %s"
      expect_error("TypeError", msg:format("string"), dl.array, "abc")
      expect_error("TypeError", msg:format("function"), dl.array, print)
    end)

    it("a string element is a TypeError naming its position", function()
      expect_error("TypeError",
                   "array: element [2] is a string, expected a number, a boolean or {re, im}",
                   dl.array, { 1, "a" })
      expect_error("TypeError",
                   "array: element [2][1] is a string, expected a number, a boolean or {re, im}",
                   dl.array, { { 1, 2 }, { "3", 4 } }, "float32")
      expect_error("TypeError",
                   "array: element [1] is a FILE*, expected a number, a boolean or {re, im}",
                   dl.array, { io.stdout })
    end)

    it("ragged nested tables are ValueErrors with exact messages", function()
      expect_error("ValueError", "array: ragged nested data: element [2] has length 1, expected 2",
                   dl.array, { { 1, 2 }, { 3 } })
      expect_error("ValueError", "array: ragged nested data: element [2] has length 3, expected 2",
                   dl.array, { { 1, 2 }, { 3, 4, 5 } }, "int8")
      expect_error("ValueError",
                   "array: ragged nested data: element [2] should be a list of length 2, got number",
                   dl.array, { { 1, 2 }, 3 })
      expect_error("ValueError",
                   "array: ragged nested data: element [2] is a table but the shape ends at this depth",
                   dl.array, { 1, { 2 } })
      expect_error("ValueError",
                   "array: ragged nested data: element [1][2] has length 1, expected 2",
                   dl.array, { { { 1, 2 }, { 3 } } })
      expect_error("ValueError", "array: ragged nested data: element [2] has length 1, expected 0",
                   dl.array, { {}, { 1 } })
    end)

    it("nesting deeper than 32 levels is a ValueError", function()
      local t = 1
      for _ = 1, 33 do t = { t } end
      expect_error("ValueError", "array: data is nested deeper than 32 levels", dl.array, t)
      local u = 1
      for _ = 1, 32 do u = { u } end
      assert.are.equal(32, dl.array(u).ndim)
    end)

    it("a non-scalar fill value is a TypeError", function()
      local msg = "full: argument 2 (fill_value) must be a number, a boolean or {re, im}, got %s"
      expect_error("TypeError", msg:format("string"), dl.full, { 2 }, "x", "float32")
      expect_error("TypeError", msg:format("nil"), dl.full, { 2 }, nil, "float32")
      expect_error("TypeError", msg:format("no value"), dl.full, { 2 })
      expect_error("TypeError", msg:format("table"), dl.full, { 2 }, {}, "complex64")
      expect_error("TypeError", msg:format("table"), dl.full, { 2 }, { 1, 2, 3 }, "complex64")
    end)

    it("frombytes data must be a string", function()
      expect_error("TypeError", "frombytes: argument 1 (data) must be a string, got number",
                   dl.frombytes, 1234, { 4 }, "uint8")
      expect_error("TypeError", "frombytes: argument 1 (data) must be a string, got table",
                   dl.frombytes, { 1 }, { 1 }, "uint8")
    end)
  end)

  describe("target", function()
    local function target_msg(fn, arg, got)
      return { pattern = "^" .. fn .. ": argument " .. arg ..
               " %(target%) must be a Device.*, got " .. got .. "$" }
    end

    it("a wrong target type is a TypeError", function()
      expect_error("TypeError", target_msg("array", 3, "string"), dl.array, { 1 }, nil, "sim:0")
      expect_error("TypeError", target_msg("frombytes", 4, "number"), dl.frombytes, "", { 0 }, "int8", 0)
      expect_error("TypeError", target_msg("zeros", 3, "table"), dl.zeros, { 2 }, "int8", {})
      expect_error("TypeError", target_msg("ones", 3, "boolean"), dl.ones, { 2 }, "int8", true)
      expect_error("TypeError", target_msg("full", 4, "string"), dl.full, { 2 }, 1, "int8", "cpu")
      local x = dl.zeros({ 2 }, "int8")
      expect_error("TypeError", target_msg("zeros", 3, "Array"), dl.zeros, { 2 }, "int8", x)
    end)
  end)

  describe("extra arguments", function()
    it("are TypeErrors", function()
      expect_error("TypeError", "array: expected at most 3 arguments, got 4",
                   dl.array, { 1 }, "int32", nil, 1)
      expect_error("TypeError", "zeros: expected at most 3 arguments, got 4",
                   dl.zeros, { 1 }, "int32", nil, 1)
      expect_error("TypeError", "ones: expected at most 3 arguments, got 4",
                   dl.ones, { 1 }, "int32", cpu, "x")
      expect_error("TypeError", "full: expected at most 4 arguments, got 5",
                   dl.full, { 1 }, 0, "int32", nil, 1)
    end)

    it("are TypeErrors for frombytes too", function()
      expect_error("TypeError", "frombytes: expected at most 4 arguments, got 5",
                   dl.frombytes, "\1\2", { 2 }, "uint8", nil, 5)
    end)
  end)

  describe("methods called with a non-array self", function()
    local x = dl.zeros({ 2 }, "float32")
    local index = getmetatable(x).__index
    for _, name in ipairs({ "tolist", "tobytes", "item", "devices", "delete", "is_deleted",
                            "block_until_ready" }) do
      it(name, function()
        local method = index(x, name)
        assert.are.equal("function", type(method))
        local msg = name .. ": argument 1 (array) must be an Array, got %s"
        expect_error("TypeError", msg:format("table"), method, {})
        expect_error("TypeError", msg:format("no value"), method)
        expect_error("TypeError", msg:format("Device"), method, cpu)
        expect_error("TypeError", msg:format("string"), method, "x")
      end)
    end

    it("a method reached through an array rejects a number self", function()
      expect_error("TypeError", "tolist: argument 1 (array) must be an Array, got number",
                   x.tolist, 42)
    end)
  end)
end)
