-- runs: once
-- ipc-off: no
-- devices: any
-- needs: python3-numpy

-- Specs for dlrun.format (pure Lua; no native module needed).
-- Run: busted --lpath='lua/?.lua;lua/?/init.lua' spec/arrays/format_spec.lua

local format = require "dlrun.format"

local NAN = 0 / 0
local INF = math.huge

-- Round a number to float32 / float16 the way the C binding would hand
-- such values over (exact doubles of the narrow value).
local function f32(x) return (string.unpack("f", string.pack("f", x))) end
local F16_0_1 = 0.0999755859375     -- float16(0.1)
local F16_0_2 = 0.199951171875      -- float16(0.2)
local F16_1_3 = 0.333251953125      -- float16(1/3)
local BF16_0_1 = 0.10009765625      -- bfloat16(0.1)

-- A fake array: values come from `data` (a list, or a function of the
-- 1-based flat index); every _elements call is recorded.
local function fake(dtype, shape, data)
  local size = 1
  for _, d in ipairs(shape) do size = size * d end
  local a = { shape = shape, dtype = dtype, size = size,
              calls = {}, fetched = 0 }
  function a:_elements(first, count)
    assert(math.type(first) == "integer" and math.type(count) == "integer")
    assert(first >= 1 and count >= 1 and first + count - 1 <= self.size,
      "out of range fetch")
    self.calls[#self.calls + 1] = { first, count }
    self.fetched = self.fetched + count
    local out = {}
    for i = 1, count do
      local k = first + i - 1
      if type(data) == "function" then out[i] = data(k) else out[i] = data[k] end
    end
    return out
  end
  return a
end

local function iota(k) return k - 1 end            -- 0, 1, 2, ... (integers)
local function fiota(k) return (k - 1) + 0.0 end   -- 0., 1., 2., ... (floats)

local function lines(t) return table.concat(t, "\n") end

describe("dlrun.format.repr", function()
  describe("1-d", function()
    it("prints integral float32 values with a trailing point", function()
      local a = fake("float32", { 3 }, { 1.0, 2.0, 3.0 })
      assert.are.equal("Array([1., 2., 3.], dtype=float32)", format.repr(a))
      assert.are.same({ { 1, 3 } }, a.calls)
    end)

    it("prints int32 values", function()
      assert.are.equal("Array([1, 2, 3], dtype=int32)",
        format.repr(fake("int32", { 3 }, { 1, 2, 3 })))
    end)

    it("right-aligns integers with negatives to a common width", function()
      assert.are.equal("Array([   -5,    10,   200, -3000], dtype=int64)",
        format.repr(fake("int64", { 4 }, { -5, 10, 200, -3000 })))
    end)

    it("prints unsigned integers", function()
      assert.are.equal("Array([  0, 255,   7], dtype=uint8)",
        format.repr(fake("uint8", { 3 }, { 0, 255, 7 })))
    end)

    it("prints uint64 values from 2^63 up, which arrive as their raw bits", function()
      local a = fake("uint64", { 3 }, { 1, math.mininteger, -1 })
      assert.are.equal(
        "Array([                   1,  9223372036854775808, 18446744073709551615],"
          .. "\n      dtype=uint64)",
        format.repr(a))
    end)

    it("pads True when False is present", function()
      assert.are.equal("Array([ True, False], dtype=bool)",
        format.repr(fake("bool", { 2 }, { true, false })))
    end)

    it("pads True in arrays even without False, as NumPy does", function()
      assert.are.equal("Array([ True,  True], dtype=bool)",
        format.repr(fake("bool", { 2 }, { true, true })))
    end)
  end)

  describe("0-d", function()
    it("prints a float32 scalar", function()
      local a = fake("float32", {}, { 3.0 })
      assert.are.equal("Array(3., dtype=float32)", format.repr(a))
      assert.are.same({ { 1, 1 } }, a.calls)
    end)

    it("prints a fractional float scalar", function()
      assert.are.equal("Array(0.5, dtype=float32)", format.repr(fake("float32", {}, { 0.5 })))
    end)

    it("prints int and bool scalars without padding", function()
      assert.are.equal("Array(7, dtype=int32)", format.repr(fake("int32", {}, { 7 })))
      assert.are.equal("Array(True, dtype=bool)", format.repr(fake("bool", {}, { true })))
      assert.are.equal("Array(False, dtype=bool)", format.repr(fake("bool", {}, { false })))
    end)

    it("prints a complex scalar", function()
      assert.are.equal("Array(1.5-0.5j, dtype=complex64)",
        format.repr(fake("complex64", {}, { { 1.5, -0.5 } })))
    end)
  end)

  describe("empty arrays", function()
    it("prints shape (0,) as []", function()
      local a = fake("float32", { 0 }, {})
      assert.are.equal("Array([], dtype=float32)", format.repr(a))
      assert.are.equal(0, #a.calls)
    end)

    it("prints shape (0, 4) with its shape", function()
      local a = fake("float32", { 0, 4 }, {})
      assert.are.equal("Array([], shape=(0, 4), dtype=float32)", format.repr(a))
      assert.are.equal(0, #a.calls)
    end)

    it("prints shape (2, 0) with its shape", function()
      local a = fake("int32", { 2, 0 }, {})
      assert.are.equal("Array([], shape=(2, 0), dtype=int32)", format.repr(a))
      assert.are.equal(0, #a.calls)
    end)
  end)

  describe("nested dimensions", function()
    it("prints 2-d rows aligned under the first bracket", function()
      local a = fake("float32", { 2, 2 }, { 1.0, 2.0, 3.0, 4.0 })
      assert.are.equal(lines {
        "Array([[1., 2.],",
        "       [3., 4.]], dtype=float32)",
      }, format.repr(a))
      assert.are.same({ { 1, 4 } }, a.calls)
    end)

    it("separates 3-d blocks with one blank line", function()
      assert.are.equal(lines {
        "Array([[[ 0,  1,  2,  3],",
        "        [ 4,  5,  6,  7],",
        "        [ 8,  9, 10, 11]],",
        "",
        "       [[12, 13, 14, 15],",
        "        [16, 17, 18, 19],",
        "        [20, 21, 22, 23]]], dtype=int8)",
      }, format.repr(fake("int8", { 2, 3, 4 }, iota)))
    end)

    it("separates 4-d blocks with two blank lines", function()
      assert.are.equal(lines {
        "Array([[[[0, 1],",
        "         [2, 3]]],",
        "",
        "",
        "       [[[4, 5],",
        "         [6, 7]]]], dtype=int32)",
      }, format.repr(fake("int32", { 2, 1, 2, 2 }, iota)))
    end)

    it("pads 2-d bool arrays", function()
      assert.are.equal(lines {
        "Array([[ True, False],",
        "       [ True,  True]], dtype=bool)",
      }, format.repr(fake("bool", { 2, 2 }, { true, false, true, true })))
    end)
  end)

  describe("floats", function()
    it("pads fraction digits with spaces to a common width", function()
      assert.are.equal("Array([1.5 , 2.25, 3.  ], dtype=float32)",
        format.repr(fake("float32", { 3 }, { 1.5, 2.25, 3.0 })))
    end)

    it("aligns signed fractional values", function()
      assert.are.equal("Array([ 0.5  ,  0.25 , -1.125], dtype=float64)",
        format.repr(fake("float64", { 3 }, { 0.5, 0.25, -1.125 })))
    end)

    it("prints float32 values with the fewest digits that read back", function()
      assert.are.equal("Array([0.1, 0.2, 0.3], dtype=float32)",
        format.repr(fake("float32", { 3 }, { f32(0.1), f32(0.2), f32(0.3) })))
      assert.are.equal("Array(3.1415927, dtype=float32)",
        format.repr(fake("float32", {}, { f32(math.pi) })))
    end)

    it("rounds values to the dtype before choosing digits", function()
      -- plain doubles handed in for a float32 array still print short
      assert.are.equal("Array([0.1, 0.2], dtype=float32)",
        format.repr(fake("float32", { 2 }, { 0.1, 0.2 })))
    end)

    it("caps float64 digits at 8 after the point", function()
      assert.are.equal("Array(3.14159265, dtype=float64)",
        format.repr(fake("float64", {}, { math.pi })))
      assert.are.equal("Array([0.33333333, 0.5       ], dtype=float64)",
        format.repr(fake("float64", { 2 }, { 1 / 3, 0.5 })))
    end)

    it("drops noise digits beyond the cap", function()
      assert.are.equal("Array([0.3, 0.1], dtype=float64)",
        format.repr(fake("float64", { 2 }, { 0.1 + 0.2, 0.1 })))
    end)

    it("prints float16 values short", function()
      assert.are.equal("Array([0.1, 0.2], dtype=float16)",
        format.repr(fake("float16", { 2 }, { F16_0_1, F16_0_2 })))
      assert.are.equal("Array(0.1, dtype=float16)",
        format.repr(fake("float16", {}, { F16_0_1 })))
      assert.are.equal("Array([0.1   , 0.3333], dtype=float16)",
        format.repr(fake("float16", { 2 }, { F16_0_1, F16_1_3 })))
    end)

    -- NumPy has no bfloat16; these follow the float rules at bfloat16's
    -- precision (8 significant bits, float32's exponent range).
    it("prints bfloat16 values with the fewest digits that read back in bfloat16", function()
      assert.are.equal("Array([0.1, 1. ], dtype=bfloat16)",
        format.repr(fake("bfloat16", { 2 }, { BF16_0_1, 1.0 })))
      assert.are.equal("Array([0.334, 3.   ], dtype=bfloat16)",
        format.repr(fake("bfloat16", { 2 }, { 0.333984375, 3.0 })))
      -- 1048576 = 2^20: 1.05e6 is nearer to it than to its neighbours
      -- (1044480 and 1056768), so 3 digits are enough
      assert.are.equal("Array([1.05e+06, 5.00e-01], dtype=bfloat16)",
        format.repr(fake("bfloat16", { 2 }, { 1048576.0, 0.5 })))
      assert.are.equal("Array(3.39e+38, dtype=bfloat16)",
        format.repr(fake("bfloat16", {}, { 3.3895313892515355e38 })))
      assert.are.equal("Array(9.e-41, dtype=bfloat16)", -- the smallest subnormal, 2^-133
        format.repr(fake("bfloat16", {}, { 2.0 ^ -133 })))
    end)

    it("keeps large integral values positional below 1e8 while max/min <= 1000", function()
      assert.are.equal("Array([12345678.,    99999.], dtype=float64)",
        format.repr(fake("float64", { 2 }, { 12345678.0, 99999.0 })))
    end)

    it("prints integral digits in full, beyond the shortest round trip", function()
      -- float16 8192: "8190" would read back, but positional output spells
      -- the integer part out
      assert.are.equal("Array(8192., dtype=float16)",
        format.repr(fake("float16", {}, { 8192.0 })))
    end)

    it("prints negative zero", function()
      assert.are.equal("Array([-0.,  1.], dtype=float64)",
        format.repr(fake("float64", { 2 }, { -0.0, 1.0 })))
      assert.are.equal("Array(-0., dtype=float16)",
        format.repr(fake("float16", {}, { -0.0 })))
    end)

    it("stays positional at exactly 1e-4", function()
      assert.are.equal("Array(0.0001, dtype=float64)",
        format.repr(fake("float64", {}, { 1e-4 })))
    end)
  end)

  describe("scientific notation", function()
    it("is used when the smallest non-zero |x| < 1e-4", function()
      assert.are.equal("Array([1.0e-05, 1.5e-05], dtype=float64)",
        format.repr(fake("float64", { 2 }, { 1e-5, 1.5e-5 })))
      assert.are.equal("Array([0.e+00, 1.e-05], dtype=float32)",
        format.repr(fake("float32", { 2 }, { 0.0, f32(1e-5) })))
    end)

    it("is used when the largest |x| >= 1e8", function()
      assert.are.equal("Array([ 1.e+20, -2.e+20], dtype=float32)",
        format.repr(fake("float32", { 2 }, { f32(1e20), f32(-2e20) })))
      assert.are.equal("Array(1.e+08, dtype=float64)",
        format.repr(fake("float64", {}, { 1e8 })))
      assert.are.equal("Array([1.5e+08, 2.0e+00], dtype=float64)",
        format.repr(fake("float64", { 2 }, { 1.5e8, 2.0 })))
    end)

    it("is used when max/min > 1000, the ratio taken in the dtype", function()
      assert.are.equal("Array([1.2345678e+07, 1.0000000e+00], dtype=float64)",
        format.repr(fake("float64", { 2 }, { 12345678.0, 1.0 })))
      assert.are.equal("Array([5.e-01, 2.e+03], dtype=float64)",
        format.repr(fake("float64", { 2 }, { 0.5, 2000.0 })))
      assert.are.equal("Array([0.001, 1.   ], dtype=float64)",
        format.repr(fake("float64", { 2 }, { 0.001, 1.0 })))
    end)

    it("extends shorter mantissas with the value's own further digits", function()
      -- float32 0.3 is 0.30000001192...: NumPy prints its 8th digit, not 0
      assert.are.equal("Array([3.0000001e-01, 3.3333334e-01, 9.9999997e-06], dtype=float32)",
        format.repr(fake("float32", { 3 }, { f32(0.3), f32(1 / 3), f32(1e-5) })))
    end)

    it("pads exponents to a common number of digits", function()
      assert.are.equal("Array([1.e-005, 1.e+100], dtype=float64)",
        format.repr(fake("float64", { 2 }, { 1e-5, 1e100 })))
    end)
  end)

  describe("non-finite values", function()
    it("prints nan, inf and -inf right-aligned", function()
      assert.are.equal("Array([  1.,  nan,  inf, -inf], dtype=float32)",
        format.repr(fake("float32", { 4 }, { 1.0, NAN, INF, -INF })))
    end)

    it("prints arrays with only non-finite values", function()
      assert.are.equal("Array([nan, inf], dtype=float64)",
        format.repr(fake("float64", { 2 }, { NAN, INF })))
    end)

    it("pads nan next to fractional values", function()
      assert.are.equal("Array([0.25,  nan], dtype=float32)",
        format.repr(fake("float32", { 2 }, { 0.25, NAN })))
    end)
  end)

  describe("complex", function()
    it("prints real and imaginary parts as floats", function()
      assert.are.equal("Array([1.+2.j, 0.-1.j], dtype=complex64)",
        format.repr(fake("complex64", { 2 }, { { 1.0, 2.0 }, { 0.0, -1.0 } })))
    end)

    it("aligns the real and imaginary columns separately", function()
      assert.are.equal("Array([ 1.+10.j,  1. +2.j, nan+infj], dtype=complex128)",
        format.repr(fake("complex128", { 3 },
          { { 1.0, 10.0 }, { 1.0, 2.0 }, { NAN, INF } })))
    end)

    it("formats complex64 parts at float32 precision", function()
      assert.are.equal("Array([0.1+0.25j, 2. -1.5j ], dtype=complex64)",
        format.repr(fake("complex64", { 2 }, { { 0.1, 0.25 }, { 2.0, -1.5 } })))
    end)

    it("uses scientific form per column", function()
      assert.are.equal("Array(1.e-05+1.j, dtype=complex128)",
        format.repr(fake("complex128", {}, { { 1e-5, 1.0 } })))
    end)
  end)

  describe("summarisation", function()
    it("elides the middle of a 2000-element vector and fetches only the edges", function()
      local a = fake("float32", { 2000 }, function(k) return k + 999.0 end)
      assert.are.equal(
        "Array([1000., 1001., 1002., ..., 2997., 2998., 2999.], dtype=float32)",
        format.repr(a))
      assert.are.same({ { 1, 3 }, { 1998, 3 } }, a.calls)
      assert.are.equal(6, a.fetched)
      assert.is_true(a.fetched < 20)
    end)

    it("summarises only above 1000 elements", function()
      local a = fake("int32", { 1001 }, iota)
      assert.are.equal("Array([   0,    1,    2, ...,  998,  999, 1000], dtype=int32)",
        format.repr(a))
      assert.are.equal(6, a.fetched)

      local b = fake("int32", { 1000 }, iota)
      local s = format.repr(b)
      assert.are.same({ { 1, 1000 } }, b.calls)
      local head = "Array([  0,   1,   2,   3,"
      local tail = lines {
        "       988, 989, 990, 991, 992, 993, 994, 995, 996, 997, 998, 999],",
        "      dtype=int32)",
      }
      assert.are.equal(head, s:sub(1, #head))
      assert.are.equal(tail, s:sub(-#tail))
      assert.is_nil(s:find("...", 1, true))
    end)

    it("summarises a 100x100 array with a '...,' row", function()
      local a = fake("int32", { 100, 100 }, iota)
      assert.are.equal(lines {
        "Array([[   0,    1,    2, ...,   97,   98,   99],",
        "       [ 100,  101,  102, ...,  197,  198,  199],",
        "       [ 200,  201,  202, ...,  297,  298,  299],",
        "       ...,",
        "       [9700, 9701, 9702, ..., 9797, 9798, 9799],",
        "       [9800, 9801, 9802, ..., 9897, 9898, 9899],",
        "       [9900, 9901, 9902, ..., 9997, 9998, 9999]], dtype=int32)",
      }, format.repr(a))
      assert.are.equal(36, a.fetched)
      -- adjacent row segments are fetched together
      assert.are.same({ { 1, 3 }, { 98, 6 }, { 198, 6 }, { 298, 3 },
                        { 9701, 3 }, { 9798, 6 }, { 9898, 6 }, { 9998, 3 } }, a.calls)
    end)

    it("elides rows only when the last axis is short", function()
      local a = fake("int16", { 400, 3 }, iota)
      assert.are.equal(lines {
        "Array([[   0,    1,    2],",
        "       [   3,    4,    5],",
        "       [   6,    7,    8],",
        "       ...,",
        "       [1191, 1192, 1193],",
        "       [1194, 1195, 1196],",
        "       [1197, 1198, 1199]], dtype=int16)",
      }, format.repr(a))
      assert.are.same({ { 1, 9 }, { 1192, 9 } }, a.calls)
    end)

    it("elides 3-d blocks with a '...,' line between blank lines", function()
      local a = fake("int32", { 7, 2, 100 }, iota)
      assert.are.equal(lines {
        "Array([[[   0,    1,    2, ...,   97,   98,   99],",
        "        [ 100,  101,  102, ...,  197,  198,  199]],",
        "",
        "       [[ 200,  201,  202, ...,  297,  298,  299],",
        "        [ 300,  301,  302, ...,  397,  398,  399]],",
        "",
        "       [[ 400,  401,  402, ...,  497,  498,  499],",
        "        [ 500,  501,  502, ...,  597,  598,  599]],",
        "",
        "       ...,",
        "",
        "       [[ 800,  801,  802, ...,  897,  898,  899],",
        "        [ 900,  901,  902, ...,  997,  998,  999]],",
        "",
        "       [[1000, 1001, 1002, ..., 1097, 1098, 1099],",
        "        [1100, 1101, 1102, ..., 1197, 1198, 1199]],",
        "",
        "       [[1200, 1201, 1202, ..., 1297, 1298, 1299],",
        "        [1300, 1301, 1302, ..., 1397, 1398, 1399]]], dtype=int32)",
      }, format.repr(a))
      assert.are.equal(72, a.fetched)
    end)

    it("computes the float format from the shown elements only", function()
      -- the hidden middle holds 0.125, which would force scientific
      -- notation and three fraction digits; only integral values are shown
      local a = fake("float64", { 2000 }, function(k)
        if k == 1000 then return 0.125 end
        return k + 999.0
      end)
      assert.are.equal(
        "Array([1000., 1001., 1002., ..., 2997., 2998., 2999.], dtype=float64)",
        format.repr(a))
    end)
  end)

  describe("line wrapping", function()
    it("wraps a long float row at 75 columns", function()
      local s = format.repr(fake("float32", { 30 }, fiota))
      assert.are.equal(lines {
        "Array([ 0.,  1.,  2.,  3.,  4.,  5.,  6.,  7.,  8.,  9., 10., 11., 12.,",
        "       13., 14., 15., 16., 17., 18., 19., 20., 21., 22., 23., 24., 25.,",
        "       26., 27., 28., 29.], dtype=float32)",
      }, s)
      for line in s:gmatch("[^\n]+") do assert.is_true(#line <= 75) end
    end)

    it("moves dtype to its own line when it does not fit", function()
      assert.are.equal(lines {
        "Array([ 0,  1,  2,  3,  4,  5,  6,  7,  8,  9, 10, 11, 12, 13, 14, 15, 16,",
        "       17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33,",
        "       34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47, 48, 49, 50,",
        "       51, 52, 53, 54, 55, 56, 57, 58, 59, 60, 61, 62, 63, 64, 65, 66, 67,",
        "       68, 69, 70, 71, 72, 73, 74, 75, 76, 77, 78, 79, 80, 81, 82, 83, 84,",
        "       85, 86, 87, 88, 89, 90, 91, 92, 93, 94, 95, 96, 97, 98, 99],",
        "      dtype=int32)",
      }, format.repr(fake("int32", { 100 }, iota)))
    end)

    it("keeps room for the trailing comma when filling a row", function()
      -- 23 one-digit items would end at column 75; the "," after the
      -- array needs that column, so 22 go on the first line
      assert.are.equal(lines {
        "Array([0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 0, 1,",
        "       2, 3, 4, 5, 6, 7, 8, 9], dtype=int32)",
      }, format.repr(fake("int32", { 30 }, function(k) return (k - 1) % 10 end)))
    end)

    it("keeps dtype on the last line when it ends exactly at column 75", function()
      local function teens(k) return k + 9 end
      assert.are.equal(lines {
        "Array([10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26,",
        "       27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40], dtype=int8)",
      }, format.repr(fake("int8", { 31 }, teens)))
      assert.are.equal(lines {
        "Array([10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26,",
        "       27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40],",
        "      dtype=int16)",
      }, format.repr(fake("int16", { 31 }, teens)))
    end)

    it("never wraps before a row's first element", function()
      local shape = {}
      for i = 1, 32 do shape[i] = 1 end
      local a = fake("complex128", shape, { { 1.2345678e100, -2.5e-100 } })
      assert.are.equal(
        "Array(" .. ("["):rep(32) .. "1.2345678e+100-2.5e-100j" .. ("]"):rep(32) .. ","
          .. "\n      dtype=complex128)",
        format.repr(a))
    end)

    it("wraps rows of a 2-d array under the row's first element", function()
      local a = fake("int32", { 2, 20 }, function(k) return (k - 1) * 1001 end)
      assert.are.equal(lines {
        "Array([[    0,  1001,  2002,  3003,  4004,  5005,  6006,  7007,  8008,",
        "         9009, 10010, 11011, 12012, 13013, 14014, 15015, 16016, 17017,",
        "        18018, 19019],",
        "       [20020, 21021, 22022, 23023, 24024, 25025, 26026, 27027, 28028,",
        "        29029, 30030, 31031, 32032, 33033, 34034, 35035, 36036, 37037,",
        "        38038, 39039]], dtype=int32)",
      }, format.repr(a))
    end)
  end)

  it("prints the deepest arrays dlrun has (32 dimensions)", function()
    local shape = {}
    for i = 1, 32 do shape[i] = 1 end
    assert.are.equal("Array(" .. ("["):rep(32) .. "7" .. ("]"):rep(32) .. ",\n      dtype=int8)",
      format.repr(fake("int8", shape, { 7 })))
  end)

  it("refuses a 100000-dimension shape with a ValueError, not a stack overflow", function()
    local shape = {}
    for i = 1, 100000 do shape[i] = 1 end
    local a = fake("int8", shape, { 7 })
    local ok, err = pcall(format.repr, a)
    assert.is_false(ok)
    assert.are.equal("ValueError", err.name)
    assert.are.equal("repr: shape has 100000 dimensions, at most 32 are supported", err.message)
    assert.are.equal(0, #a.calls)
  end)

  it("works with objects whose fields come from a metatable", function()
    local store = { 5, 6 }
    local mt = { __index = {
      shape = { 2 }, dtype = "int16", size = 2,
      _elements = function(_, first, count)
        return { table.unpack(store, first, first + count - 1) }
      end,
    } }
    assert.are.equal("Array([5, 6], dtype=int16)", format.repr(setmetatable({}, mt)))
  end)
end)

describe("dlrun.format.shape_string", function()
  it("formats dtype and dims like JAX", function()
    assert.are.equal("float32[3]", format.shape_string("float32", { 3 }))
    assert.are.equal("int32[4,2]", format.shape_string("int32", { 4, 2 }))
    assert.are.equal("float32[]", format.shape_string("float32", {}))
    assert.are.equal("bool[0,5]", format.shape_string("bool", { 0, 5 }))
  end)
end)

describe("dlrun.format.deleted_repr", function()
  it("names the shape without touching elements", function()
    local a = fake("float32", { 3 }, { 1.0, 2.0, 3.0 })
    assert.are.equal("Array(<deleted>, shape=float32[3])", format.deleted_repr(a))
    assert.are.equal(0, #a.calls)
    assert.are.equal("Array(<deleted>, shape=int8[])",
      format.deleted_repr(fake("int8", {}, { 1 })))
  end)
end)

-- The table in spec/data/format_cases.lua holds arrays of every dtype and
-- the text NumPy prints for them (see spec/data/make_format_cases.py).
local CASES_FILE = "spec/data/format_cases.lua"
local GENERATOR = "spec/data/make_format_cases.py"
local PYTHON = require("python_side").PYTHON -- DLRUN_PYTHON, else /usr/bin/python3
local QUOTED_PYTHON = require("helpers").shell_quote(PYTHON)
local cases = dofile(CASES_FILE)

local function unhex(h)
  return (h:gsub("%x%x", function(b) return string.char(tonumber(b, 16)) end))
end

describe("tostring(Array) prints as NumPy does", function()
  local dl = require "dlrun"
  for _, c in ipairs(cases.cases) do
    it(c.name, function()
      assert.are.equal(c.expect, tostring(dl.frombytes(unhex(c.hex), c.shape, c.dtype)))
    end)
  end
end)

-- The texts below are what NumPy 1.24 prints for the same arrays.
describe("dlrun.format.str (NumPy's str, for a Shard's data)", function()
  it("separates elements by a space and puts rows on lines of their own", function()
    assert.are.equal("[[1.5 2. ]\n [3.  4. ]]", format.str(fake("float32", { 2, 2 }, { 1.5, 2, 3, 4 })))
    assert.are.equal(lines {
      "[[[ 0  1  2  3]", "  [ 4  5  6  7]", "  [ 8  9 10 11]]", "",
      " [[12 13 14 15]", "  [16 17 18 19]", "  [20 21 22 23]]]" },
      format.str(fake("int64", { 2, 3, 4 }, iota)))
  end)

  it("wraps at 75 columns, continuation lines indented by one", function()
    assert.are.equal(lines {
      "[ 0.  1.  2.  3.  4.  5.  6.  7.  8.  9. 10. 11. 12. 13. 14. 15. 16. 17.",
      " 18. 19. 20. 21. 22. 23. 24. 25. 26. 27. 28. 29. 30. 31. 32. 33. 34. 35.",
      " 36. 37. 38. 39.]" }, format.str(fake("float32", { 40 }, fiota)))
  end)

  it("prints a 0-d array as its scalar and a zero-size one as []", function()
    assert.are.equal("5", format.str(fake("int32", {}, { 5 })))
    assert.are.equal("1.0", format.str(fake("float32", {}, { 1.0 })))
    assert.are.equal("1e-05", format.str(fake("float32", {}, { f32(1e-5) })))
    assert.are.equal("(1+2j)", format.str(fake("complex64", {}, { { 1, 2 } })))
    assert.are.equal("True", format.str(fake("bool", {}, { true })))
    assert.are.equal("[]", format.str(fake("float64", { 0, 3 }, {})))
  end)
end)

describe("dlrun.format.object_repr (NumPy's repr of an object array, for mesh.devices)", function()
  local function devs(n)
    local t = {}
    for i = 1, n do t[i] = ("SimDevice(id=%d)"):format(i - 1) end
    return t
  end

  it("does not pad elements, wraps at 75 columns and moves dtype=object when it must", function()
    assert.are.equal(lines {
      "array([SimDevice(id=0), SimDevice(id=1), SimDevice(id=2), SimDevice(id=3),",
      "       SimDevice(id=4), SimDevice(id=5), SimDevice(id=6), SimDevice(id=7),",
      "       SimDevice(id=8), SimDevice(id=9), SimDevice(id=10),",
      "       SimDevice(id=11)], dtype=object)" }, format.object_repr({ 12 }, devs(12)))
    assert.are.equal(lines {
      "array([SimDevice(id=0), SimDevice(id=1), SimDevice(id=2), SimDevice(id=3),",
      "       SimDevice(id=4), SimDevice(id=5), SimDevice(id=6), SimDevice(id=7)],",
      "      dtype=object)" }, format.object_repr({ 8 }, devs(8)))
  end)

  it("lays out 2-d and 3-d meshes as NumPy does", function()
    assert.are.equal(lines {
      "array([[SimDevice(id=0), SimDevice(id=1), SimDevice(id=2),",
      "        SimDevice(id=3)],",
      "       [SimDevice(id=4), SimDevice(id=5), SimDevice(id=6),",
      "        SimDevice(id=7)]], dtype=object)" }, format.object_repr({ 2, 4 }, devs(8)))
    assert.are.equal(lines {
      "array([[[SimDevice(id=0), SimDevice(id=1)],",
      "        [SimDevice(id=2), SimDevice(id=3)]],",
      "",
      "       [[SimDevice(id=4), SimDevice(id=5)],",
      "        [SimDevice(id=6), SimDevice(id=7)]]], dtype=object)" },
      format.object_repr({ 2, 2, 2 }, devs(8)))
  end)
end)

describe(CASES_FILE, function()
  it("is what " .. GENERATOR .. " writes with this machine's NumPy", function()
    local p = io.popen(QUOTED_PYTHON .. " -c 'import numpy; print(numpy.__version__)' 2>/dev/null")
    local version = p:read("l")
    p:close()
    assert(version, PYTHON .. " with NumPy is missing (scripts/deps.sh installs python3-numpy)")
    assert.are.equal(cases.numpy, version,
                     "the cases were made with another NumPy: regenerate them with " .. GENERATOR)
    local g = io.popen(QUOTED_PYTHON .. " " .. GENERATOR)
    local text = g:read("a")
    assert.is_true(g:close())
    local f = assert(io.open(CASES_FILE, "rb"))
    local committed = f:read("a")
    f:close()
    assert.are.equal(committed, text)
  end)
end)
