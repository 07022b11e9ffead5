-- runs: every-platform
-- ipc-off: no
-- devices: any
-- needs: none

-- Specs for converting Lua values into array elements (docs/lua-api.md, "Arrays":
-- float16 and bfloat16 round to nearest even; integers that do not fit the
-- dtype and non-integral values for integer dtypes are errors, never a silent
-- wrap; complex values are {re, im}). Exercised through dl.array / dl.full and
-- read back with tolist / tobytes.
-- Run from the repository root: busted spec/arrays/convert_spec.lua

local dl = require "dlrun"

local expect_error = require("helpers").expect_error

-- The value read back, checking its Lua number subtype.
local function int_of(x)
  local v = x:item()
  assert.are.equal("integer", math.type(v))
  return v
end

local function float_of(x)
  local v = x:item()
  assert.are.equal("float", math.type(v))
  return v
end

-- The 16-bit pattern of the 0-d float16/bfloat16 array holding v.
local function bits16(v, dtype)
  local x = dl.array(v, dtype)
  local s = x:tobytes()
  assert.are.equal(2, #s)
  return (string.unpack("<I2", s))
end

local function hex(n) return string.format("0x%04X", n) end

local INT64_RANGE = "(range -9223372036854775808 to 9223372036854775807)"
local UINT64_RANGE = "(range 0 to 18446744073709551615)"

describe("integer conversion", function()
  describe("values in range are stored exactly", function()
    it("at each dtype's limits", function()
      assert.are.same({ -128, 127 }, dl.array({ -128, 127 }, "int8"):tolist())
      assert.are.same({ 0, 255 }, dl.array({ 0, 255 }, "uint8"):tolist())
      assert.are.same({ -32768, 32767 }, dl.array({ -32768, 32767 }, "int16"):tolist())
      assert.are.same({ 0, 65535 }, dl.array({ 0, 65535 }, "uint16"):tolist())
      assert.are.same({ -2147483648, 2147483647 }, dl.array({ -2147483648, 2147483647 }, "int32"):tolist())
      assert.are.same({ 0, 4294967295 }, dl.array({ 0, 4294967295 }, "uint32"):tolist())
      assert.are.same({ math.mininteger, math.maxinteger },
                      dl.array({ math.mininteger, math.maxinteger }, "int64"):tolist())
      assert.are.same({ 0, math.maxinteger }, dl.array({ 0, math.maxinteger }, "uint64"):tolist())
    end)

    it("with the right bytes", function()
      assert.are.equal(string.pack("<b<b", -128, 127), dl.array({ -128, 127 }, "int8"):tobytes())
      assert.are.equal(string.pack("<i2<i2", -2, 300), dl.array({ -2, 300 }, "int16"):tobytes())
      assert.are.equal(string.pack("<I4", 4294967295), dl.array(4294967295, "uint32"):tobytes())
    end)

    it("float -2^63 into int64 and 2^63 into uint64", function()
      assert.are.equal(math.mininteger, int_of(dl.array(-2.0 ^ 63, "int64")))
      local u = dl.array(2.0 ^ 63, "uint64")
      assert.are.equal(string.pack("<I8", math.mininteger), u:tobytes())
      assert.are.equal(2.0 ^ 63, float_of(u))
      local top = dl.array(2.0 ^ 64 - 2048, "uint64") -- largest double below 2^64
      assert.are.equal(string.pack("<I8", -2048), top:tobytes())
    end)
  end)

  describe("values out of range are errors, never wrapped", function()
    local cases = {
      { "int8", 128, "value 128 does not fit in int8 (range -128 to 127)" },
      { "int8", -129, "value -129 does not fit in int8 (range -128 to 127)" },
      { "uint8", -1, "value -1 does not fit in uint8 (range 0 to 255)" },
      { "uint8", 256, "value 256 does not fit in uint8 (range 0 to 255)" },
      { "int16", 32768, "value 32768 does not fit in int16 (range -32768 to 32767)" },
      { "int16", -32769, "value -32769 does not fit in int16 (range -32768 to 32767)" },
      { "uint16", 65536, "value 65536 does not fit in uint16 (range 0 to 65535)" },
      { "int32", 1 << 31, "value 2147483648 does not fit in int32 (range -2147483648 to 2147483647)" },
      { "int32", 2.0 ^ 31, "value 2147483648 does not fit in int32 (range -2147483648 to 2147483647)" },
      { "int32", -(1 << 31) - 1,
        "value -2147483649 does not fit in int32 (range -2147483648 to 2147483647)" },
      { "uint32", 1 << 32, "value 4294967296 does not fit in uint32 (range 0 to 4294967295)" },
      { "uint32", -1, "value -1 does not fit in uint32 (range 0 to 4294967295)" },
      { "int64", 9.2233720368547758e18, "value 9.2233720368547758e+18 does not fit in int64 " .. INT64_RANGE },
      { "int64", -2.0 ^ 64, "value -1.8446744073709552e+19 does not fit in int64 " .. INT64_RANGE },
      { "uint64", -1, "value -1 does not fit in uint64 " .. UINT64_RANGE },
      { "uint64", math.mininteger, "value -9223372036854775808 does not fit in uint64 " .. UINT64_RANGE },
      { "uint64", -1.0, "value -1 does not fit in uint64 " .. UINT64_RANGE },
      { "uint64", 2.0 ^ 64, "value 1.8446744073709552e+19 does not fit in uint64 " .. UINT64_RANGE },
    }
    for _, c in ipairs(cases) do
      local dtype, v, msg = c[1], c[2], c[3]
      it(("%s %s (%s)"):format(dtype, msg:match("^value (%S+)"), math.type(v)), function()
        expect_error("ValueError", "array: element [2]: " .. msg, dl.array, { 0, v }, dtype)
        expect_error("ValueError", "array: " .. msg, dl.array, v, dtype)
        expect_error("ValueError", "full: " .. msg, dl.full, { 3 }, v, dtype)
      end)
    end

    it("names the nested position of the bad element", function()
      expect_error("ValueError", "array: element [2][2]: value 300 does not fit in uint8 (range 0 to 255)",
                   dl.array, { { 1, 2 }, { 3, 300 } }, "uint8")
      expect_error("ValueError", "array: element [2]: value 300 does not fit in uint8 (range 0 to 255)",
                   dl.array, { 1, 300 }, "uint8")
    end)

    it("applies to the inferred int32 too", function()
      expect_error("ValueError",
                   "array: element [1]: value 1099511627776 does not fit in int32 (range -2147483648 to 2147483647)",
                   dl.array, { 1 << 40 })
    end)
  end)

  describe("non-integral floats into integer dtypes", function()
    local NAN = 0 / 0
    local cases = {
      { "int32", 1.5, "1.5" },
      { "int8", -0.5, "-0.5" },
      { "uint64", 0.1, "0.10000000000000001" },
      { "int64", NAN, "nan" },
      { "uint8", math.huge, "inf" },
      { "int16", -math.huge, "-inf" },
      { "int32", -NAN, "nan" },
    }
    for _, c in ipairs(cases) do
      local dtype, v, shown = c[1], c[2], c[3]
      it(("%s %s is an error"):format(dtype, shown), function()
        local msg = ("value %s is not an integer, cannot store in %s"):format(shown, dtype)
        expect_error("ValueError", "array: element [1]: " .. msg, dl.array, { v }, dtype)
        expect_error("ValueError", "array: " .. msg, dl.array, v, dtype)
        expect_error("ValueError", "full: " .. msg, dl.full, { 2, 2 }, v, dtype)
      end)
    end

    it("integral floats are accepted", function()
      local x = dl.array({ 3.0, -2.0, 0.0 }, "int32")
      assert.are.same({ 3, -2, 0 }, x:tolist())
      assert.are.equal("integer", math.type(x:tolist()[1]))
      assert.are.equal(255, int_of(dl.array(255.0, "uint8")))
      assert.are.same({ 7, 7 }, dl.full({ 2 }, 7.0, "int64"):tolist())
    end)
  end)
end)

describe("float conversion", function()
  it("float32 rounds 0.1 to the float32 value", function()
    local x = dl.array({ 0.1 })
    assert.are.equal("float32", x.dtype)
    assert.are.equal(0.10000000149011612, x:tolist()[1])
    assert.are.equal(string.pack("f", 0.1), x:tobytes())
  end)

  it("float64 keeps 0.1 exactly", function()
    assert.are.equal(0.1, float_of(dl.array(0.1, "float64")))
  end)

  it("integers convert to floats, rounding to nearest", function()
    assert.are.equal(16777216.0, float_of(dl.array(16777217, "float32")))
    assert.are.equal(16777220.0, float_of(dl.array(16777219, "float32")))
    assert.are.equal(2.0 ^ 53, float_of(dl.array((1 << 53) + 1, "float64")))
    assert.are.equal(-3.0, float_of(dl.array(-3, "float64")))
  end)

  describe("float16 rounds to nearest even", function()
    local cases = {
      { 1.0, 0x3C00, "1.0" },
      { -1.0, 0xBC00, "-1.0" },
      { 0.0, 0x0000, "0.0" },
      { -0.0, 0x8000, "-0.0" },
      { 65504.0, 0x7BFF, "65504 (the largest finite)" },
      { 65519.0, 0x7BFF, "65519 (just below the halfway point)" },
      { 65520.0, 0x7C00, "65520 (halfway, to inf)" },
      { 1e10, 0x7C00, "1e10 (overflow to inf)" },
      { -1e10, 0xFC00, "-1e10 (overflow to -inf)" },
      { math.huge, 0x7C00, "inf" },
      { -math.huge, 0xFC00, "-inf" },
      { 2.0 ^ -14, 0x0400, "2^-14 (smallest normal)" },
      { 2.0 ^ -24, 0x0001, "2^-24 (smallest subnormal)" },
      { 2.0 ^ -25, 0x0000, "2^-25 (tie to even: 0)" },
      { 2.0 ^ -25 * 1.0000001, 0x0001, "just above 2^-25" },
      { 3 * 2.0 ^ -25, 0x0002, "3*2^-25 (tie to even: 2)" },
      { 1 + 2.0 ^ -11, 0x3C00, "1 + 2^-11 (tie to even, down)" },
      { 1 + 3 * 2.0 ^ -11, 0x3C02, "1 + 3*2^-11 (tie to even, up)" },
      { 1 + 2.0 ^ -11 + 2.0 ^ -30, 0x3C01, "just above 1 + 2^-11" },
      { 0.1, 0x2E66, "0.1" },
      { 65504, 0x7BFF, "integer 65504" },
      { 65520, 0x7C00, "integer 65520 (to inf)" },
      { 2049, 0x6800, "integer 2049 (tie to even: 2048)" },
      { 2051, 0x6802, "integer 2051 (tie to even: 2052)" },
      { -2049, 0xE800, "integer -2049" },
    }
    for _, c in ipairs(cases) do
      it(c[3] .. " -> " .. hex(c[2]), function()
        assert.are.equal(hex(c[2]), hex(bits16(c[1], "float16")))
      end)
    end

    it("NaN stays NaN", function()
      local b = bits16(0 / 0, "float16")
      assert.are.equal(0x7C00, b & 0x7C00)
      assert.are_not.equal(0, b & 0x03FF)
      local v = dl.array(0 / 0, "float16"):item()
      assert.is_true(v ~= v)
    end)

    it("reads back the float16 value", function()
      assert.are.equal(0.0999755859375, float_of(dl.array(0.1, "float16")))
      assert.are.equal(65504.0, float_of(dl.array(65504, "float16")))
      assert.are.equal(math.huge, float_of(dl.array(70000, "float16")))
      assert.are.equal(2.0 ^ -24, float_of(dl.array(2.0 ^ -24, "float16")))
    end)

    it("dl.full rounds the same way", function()
      local x = dl.full({ 2 }, 1 + 3 * 2.0 ^ -11, "float16")
      assert.are.equal(string.pack("<I2<I2", 0x3C02, 0x3C02), x:tobytes())
    end)
  end)

  describe("bfloat16 rounds to nearest even", function()
    local cases = {
      { 1.0, 0x3F80, "1.0" },
      { -2.0, 0xC000, "-2.0" },
      { 1 + 2.0 ^ -8, 0x3F80, "1 + 2^-8 (tie to even, down)" },
      { 1 + 3 * 2.0 ^ -8, 0x3F82, "1 + 3*2^-8 (tie to even, up)" },
      { 1 + 2.0 ^ -8 + 2.0 ^ -20, 0x3F81, "just above 1 + 2^-8" },
      { 3.3895313892515355e38, 0x7F7F, "the largest finite" },
      { 3.4028234663852886e38, 0x7F80, "float32's max (to inf)" },
      { math.huge, 0x7F80, "inf" },
      { -math.huge, 0xFF80, "-inf" },
      { 2.0 ^ -133, 0x0001, "2^-133 (smallest subnormal)" },
      { 2.0 ^ -134, 0x0000, "2^-134 (tie to even: 0)" },
      { 0.1, 0x3DCD, "0.1" },
      { 257, 0x4380, "integer 257 (tie to even: 256)" },
      { 259, 0x4382, "integer 259 (tie to even: 260)" },
    }
    for _, c in ipairs(cases) do
      it(c[3] .. " -> " .. hex(c[2]), function()
        assert.are.equal(hex(c[2]), hex(bits16(c[1], "bfloat16")))
      end)
    end

    it("NaN stays NaN", function()
      local b = bits16(0 / 0, "bfloat16")
      assert.are.equal(0x7F80, b & 0x7F80)
      assert.are_not.equal(0, b & 0x007F)
      local v = dl.array({ 0 / 0 }, "bfloat16"):tolist()[1]
      assert.is_true(v ~= v)
    end)

    it("reads back the bfloat16 value", function()
      assert.are.equal(0.10009765625, float_of(dl.array(0.1, "bfloat16")))
    end)
  end)
end)

describe("bool conversion", function()
  it("takes true and false", function()
    assert.are.same({ true, false }, dl.array({ true, false }, "bool"):tolist())
    assert.are.equal("\1\0", dl.array({ true, false }, "bool"):tobytes())
  end)

  it("takes 0 and 1, integer or float", function()
    assert.are.same({ false, true, false, true }, dl.array({ 0, 1, 0.0, 1.0 }, "bool"):tolist())
    assert.are.same({ true, true }, dl.full({ 2 }, 1, "bool"):tolist())
  end)

  it("rejects other numbers", function()
    local function msg(v) return "value " .. v .. " does not fit in bool (expected true, false, 0 or 1)" end
    expect_error("ValueError", "array: element [1]: " .. msg("2"), dl.array, { 2 }, "bool")
    expect_error("ValueError", "array: " .. msg("-1"), dl.array, -1, "bool")
    expect_error("ValueError", "array: element [2]: " .. msg("0.5"), dl.array, { 1, 0.5 }, "bool")
    expect_error("ValueError", "full: " .. msg("2"), dl.full, { 2 }, 2, "bool")
    expect_error("ValueError", "full: " .. msg("nan"), dl.full, { 2 }, 0 / 0, "bool")
  end)

  it("booleans convert to 1 and 0 in numeric dtypes", function()
    assert.are.same({ 1, 0 }, dl.array({ true, false }, "int32"):tolist())
    assert.are.same({ 1, 0 }, dl.array({ true, false }, "uint64"):tolist())
    assert.are.same({ 1.0, 0.0 }, dl.array({ true, false }, "float64"):tolist())
    assert.are.equal(0x3C00, bits16(true, "float16"))
    assert.are.same({ { 1.0, 0.0 } }, dl.array({ true }, "complex64"):tolist())
  end)
end)

describe("complex conversion", function()
  it("takes {re, im} pairs", function()
    local x = dl.full({ 2 }, { 1.5, -2 }, "complex64")
    assert.are.same({ { 1.5, -2.0 }, { 1.5, -2.0 } }, x:tolist())
    assert.are.equal(string.pack("ffff", 1.5, -2, 1.5, -2), x:tobytes())
    assert.are.same({ { 1.0, 2.0 }, { 3.0, -4.0 } }, dl.array({ { 1, 2 }, { 3, -4 } }, "complex128"):tolist())
  end)

  it("takes {re = , im = } tables", function()
    local x = dl.array({ { re = 1, im = 2 }, { re = -3, im = 0.5 } }, "complex128")
    assert.are.same({ { 1.0, 2.0 }, { -3.0, 0.5 } }, x:tolist())
    assert.are.equal(string.pack("dddd", 1, 2, -3, 0.5), x:tobytes())
    assert.are.same({ 5.0, 0.0 }, dl.full({}, { re = 5 }, "complex64"):item())
  end)

  it("gives real numbers an imaginary part 0", function()
    assert.are.same({ { 1.0, 0.0 }, { 2.5, 0.0 }, { -3.0, 0.0 } },
                    dl.array({ 1, 2.5, -3 }, "complex64"):tolist())
    assert.are.same({ 7.0, 0.0 }, dl.array(7, "complex128"):item())
    assert.are.equal(string.pack("dd", 2, 0), dl.full({ 1 }, 2, "complex128"):tobytes())
  end)

  it("rounds each part of complex64 to float32", function()
    local x = dl.array({ { 0.1, 0.2 } }, "complex64")
    assert.are.equal(string.pack("ff", 0.1, 0.2), x:tobytes())
    local v = x:tolist()[1]
    assert.are.equal(0.10000000149011612, v[1])
    assert.are.equal(0.20000000298023224, v[2])
  end)

  it("complex values into a real dtype are errors", function()
    expect_error("ValueError", "array: complex value (1+2j) cannot be stored in float32",
                 dl.array, { re = 1, im = 2 }, "float32")
    expect_error("ValueError", "array: element [2]: complex value (1-2j) cannot be stored in int32",
                 dl.array, { 0, { re = 1, im = -2 } }, "int32")
    expect_error("ValueError", "full: complex value (1.5+0j) cannot be stored in float64",
                 dl.full, { 2 }, { 1.5, 0 }, "float64")
    expect_error("ValueError", "full: complex value (0+1j) cannot be stored in bool",
                 dl.full, { 2 }, { re = 0, im = 1 }, "bool")
  end)
end)

describe("tables that are not array data (keys other than 1..n)", function()
  local TREE = ", but a table of array data has only the keys 1..n (a table with other keys is "
               .. "a tree, which dl.device_put maps key by key)"

  it("raise a TypeError naming a key, never an empty array", function()
    expect_error("TypeError", 'array: data has the key "a"' .. TREE, dl.array, { a = 1 })
    expect_error("TypeError", 'array: data has the key "a"' .. TREE, dl.array, { 1, 2, a = 3 })
    expect_error("TypeError", 'array: element [2] has the key "x"' .. TREE, dl.array,
                 { { 1, 2 }, { 3, 4, x = 5 } })
    expect_error("TypeError", "array: element [1][2] has the key 0" .. TREE, dl.array,
                 { { { 1 }, { 2, [0] = 0 } } }, "int8")
  end)

  it("name the least such key: numbers by value, then strings byte-wise, then booleans", function()
    expect_error("TypeError", "array: data has the key -1" .. TREE, dl.array,
                 { 1, b = 1, a = 2, [true] = 3, [-1] = 4, [2.5] = 5 })
    expect_error("TypeError", "array: data has the key 2.5" .. TREE, dl.array,
                 { 1, b = 1, [true] = 3, [2.5] = 5 })
    expect_error("TypeError", 'array: data has the key "B"' .. TREE, dl.array,
                 { 1, b = 1, B = 2, [false] = 3 })
    expect_error("TypeError", "array: data has the key false" .. TREE, dl.array,
                 { [true] = 1, [false] = 2 })
    expect_error("TypeError", "array: data has a key of type function" .. TREE, dl.array,
                 { [print] = 1 })
  end)

  it("in a complex element, keys other than re and im", function()
    expect_error("TypeError", 'array: element [1] has the key "x", but a complex element '
                 .. "{re=, im=} has only the keys re and im", dl.array,
                 { { re = 1, im = 2, x = 3 } })
    expect_error("TypeError", "array: data has the key 1, but a complex element {re=, im=} has "
                 .. "only the keys re and im", dl.array, { re = 1, [1] = 2 }, "complex64")
    assert.are.same({ { 1, 2 } }, dl.array({ { re = 1, im = 2 } }):tolist())
  end)

  it("an empty table is still data of shape (0,)", function()
    local x = dl.array({})
    assert.are.same({ 0 }, x.shape)
    assert.are.equal("float32", x.dtype)
    assert.are.same({ 2, 0 }, dl.array({ {}, {} }).shape)
  end)
end)
