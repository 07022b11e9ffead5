-- runs: every-platform
-- ipc-off: no
-- devices: any
-- needs: none

-- The float8 family (docs/lua-api.md, "The float8 family"; docs/dlpack.md):
-- float8_e3m4, float8_e4m3, float8_e4m3b11fnuz, float8_e4m3fn,
-- float8_e4m3fnuz, float8_e5m2, float8_e5m2fnuz, float8_e8m0fnu, as ml_dtypes
-- defines them. Every one of the 256 bit patterns of each format is read
-- back and compared with a decoder written here from the formats' own
-- descriptions (not from dlrun's code); every rounding is compared with a
-- reference that searches the format's values for the nearest one; the
-- boundaries are the values ml_dtypes documents. Fills, arange, reshards,
-- DLPack and __partitioned__ run on the default devices (every platform's
-- pass) and must give the host's bytes.
local helpers = require "helpers"
local dl = require "dlrun"

local expect_error = helpers.expect_error
local huge = math.huge

local NAMES = {"float8_e3m4", "float8_e4m3", "float8_e4m3b11fnuz", "float8_e4m3fn",
               "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz", "float8_e8m0fnu"}

-- Each format as ml_dtypes' README describes it: exponent and mantissa
-- bits, bias, and where its special values are.
--   ieee: exponent all ones is inf (mantissa 0) or NaN; -0 exists
--   fn:   no inf; only S.1111.111 is NaN; -0 exists
--   fnuz: no inf; 0x80 (the would-be -0) is the only NaN
--   e8m0: unsigned, every pattern 2^(E - 127) but 0xFF, the NaN
local FORMATS = {
  float8_e3m4 = {e = 3, m = 4, bias = 3, kind = "ieee", code = 7},
  float8_e4m3 = {e = 4, m = 3, bias = 7, kind = "ieee", code = 8},
  float8_e4m3b11fnuz = {e = 4, m = 3, bias = 11, kind = "fnuz", code = 9},
  float8_e4m3fn = {e = 4, m = 3, bias = 7, kind = "fn", code = 10},
  float8_e4m3fnuz = {e = 4, m = 3, bias = 8, kind = "fnuz", code = 11},
  float8_e5m2 = {e = 5, m = 2, bias = 15, kind = "ieee", code = 12},
  float8_e5m2fnuz = {e = 5, m = 2, bias = 16, kind = "fnuz", code = 13},
  float8_e8m0fnu = {e = 8, m = 0, bias = 127, kind = "e8m0", code = 14},
}

-- The value of pattern `b` (0..255) of format f: a Lua float, or nil for NaN.
local function decode(f, b)
  if f.kind == "e8m0" then
    if b == 255 then return nil end
    return 2.0 ^ (b - 127)
  end
  local sign = b >= 128 and -1.0 or 1.0
  local mag = b % 128
  local E = mag >> f.m
  local M = mag & ((1 << f.m) - 1)
  local Emax = (1 << f.e) - 1
  if f.kind == "fnuz" and b == 128 then return nil end
  if f.kind == "fn" and mag == 127 then return nil end
  if f.kind == "ieee" and E == Emax then
    if M == 0 then return sign * huge end
    return nil
  end
  local v
  if E == 0 then
    v = M * 2.0 ^ (1 - f.bias - f.m)
  else
    v = (1 + M / 2.0 ^ f.m) * 2.0 ^ (E - f.bias)
  end
  return sign * v
end

local function is_nan(x) return x ~= x end

-- Whether x's sign bit is set (NaNs included).
local function signbit(x) return string.pack("<d", x):byte(8) >= 128 end

-- NaNs of each sign (0 / 0 gives either, by machine).
local PNAN = string.unpack("<d", string.pack("<I8", 0x7FF8000000000000))
local NNAN = string.unpack("<d", string.pack("<I8", 0xFFF8000000000000))

-- The format's finite non-negative values in increasing order, each with
-- its pattern; then its largest finite value.
local function ladder(f)
  local vals = {}
  for b = 0, (f.kind == "e8m0" and 254 or 127) do
    local v = decode(f, b)
    if v and v < huge then vals[#vals + 1] = {v = v, b = b} end
  end
  table.sort(vals, function(x, y) return x.v < y.v end)
  return vals, vals[#vals].v
end

-- What x becomes in format f, found by searching the format's values for
-- the nearest (ties to the even pattern, i.e. the even significand), with
-- a virtual value one step past the largest standing for overflow, which
-- gives inf where the format has one, else NaN, as ml_dtypes converts
-- without saturation. e8m0fnu: zero and negatives are NaN, a tie rounds up
-- (its significand is always 1), and below 2^-126 it rounds as if 0x00
-- were the subnormal 0.5 * 2^-126, as ml_dtypes does. Returns the pattern.
local function reference(f, x)
  local vals, maxv = ladder(f)
  local nan_pos = ({ieee = nil, fn = 0x7F, fnuz = 0x80, e8m0 = 0xFF})[f.kind]
  local neg = signbit(x)
  local function signed(b, overflow)
    if overflow then
      if f.kind == "ieee" then
        local inf = ((1 << f.e) - 1) << f.m
        return neg and (0x80 | inf) or inf
      end
      if f.kind == "fn" then return neg and 0xFF or 0x7F end
      return nan_pos
    end
    if not neg then return b end
    if f.kind == "fnuz" and b == 0 then return 0 end
    return 0x80 | b
  end
  if is_nan(x) then
    if f.kind == "ieee" then
      local q = (((1 << f.e) - 1) << f.m) | (1 << (f.m - 1))
      return neg and (0x80 | q) or q
    end
    return signed(nil, true)
  end
  if f.kind == "e8m0" then
    if x <= 0 then return 0xFF end
    if x == huge then return 0xFF end
    if x < 2.0 ^ -126 then return x <= 2.0 ^ -127 and 0x00 or 0x01 end
  end
  local ax = math.abs(x)
  if ax == huge then return signed(nil, true) end
  local step = maxv - vals[#vals - 1].v
  if f.kind == "e8m0" then step = maxv end
  if ax > maxv + step then return signed(nil, true) end
  local cands = {}
  for i = 1, #vals do cands[i] = vals[i] end
  cands[#cands + 1] = {v = maxv + step, b = vals[#vals].b + 1, over = true}
  local best
  for _, c in ipairs(cands) do
    local d = math.abs(c.v - ax)
    if not best or d < best.d then
      best = {d = d, c = c}
    elseif d == best.d then
      local take = f.kind == "e8m0" and c.v > best.c.v or c.b % 2 == 0
      if take then best = {d = d, c = c} end
    end
  end
  return signed(best.c.b, best.c.over)
end

local function bytes_of(list)
  local t = {}
  for i, b in ipairs(list) do t[i] = string.char(b) end
  return table.concat(t)
end

local function hexes(s)
  return (s:gsub(".", function(c) return string.format("%02X ", c:byte()) end))
end

local ALL = {}
for b = 0, 255 do ALL[b + 1] = b end
local ALL_BYTES = bytes_of(ALL)

describe("the float8 family", function()
  it("has ml_dtypes' names, 1-byte elements and DLPack 1.1's codes 7 to 14", function()
    for _, name in ipairs(NAMES) do
      local x = dl.zeros({2}, name)
      assert.are.equal(name, x.dtype)
      assert.are.equal(1, x.itemsize)
      assert.are.equal(2, x.nbytes)
      local c = x:__dlpack__{max_version = {1, 1}}
      assert.are.equal(name, c.dtype)
    end
  end)

  for _, name in ipairs(NAMES) do
    local f = FORMATS[name]
    describe(name, function()
      it("reads every one of its 256 bit patterns as the independent decoder does", function()
        local x = dl.frombytes(ALL_BYTES, {256}, name)
        assert.are.equal(ALL_BYTES, x:tobytes())
        local got = x:tolist()
        assert.are.equal(256, #got)
        for b = 0, 255 do
          local want, v = decode(f, b), got[b + 1]
          assert.are.equal("float", math.type(v))
          if want == nil then
            assert.is_true(is_nan(v), ("pattern 0x%02X: %s, want nan"):format(b, v))
          else
            assert.are.equal(want, v, ("pattern 0x%02X"):format(b))
            if want == 0 then
              assert.are.equal(1 / want, 1 / v, ("sign of zero of 0x%02X"):format(b))
            end
          end
        end
        assert.are.equal(decode(f, 0x38) or 0 / 0, dl.frombytes("\x38", {}, name):item())
      end)

      it("stores every value it reads back as the same pattern (NaNs as its NaN)", function()
        local vals, want = {}, {}
        for b = 0, 255 do
          local v = decode(f, b)
          vals[#vals + 1] = v or (b >= 128 and NNAN or PNAN)
          want[#want + 1] = v == nil and reference(f, vals[#vals]) or b
        end
        -- the NaN a float gives is the format's own
        local got = dl.array(vals, name):tobytes()
        assert.are.equal(hexes(bytes_of(want)), hexes(got))
      end)

      it("rounds to nearest even as a search of its values finds, overflow and underflow included",
         function()
        local vals, maxv = ladder(f)
        local xs = {}
        local function add(x) xs[#xs + 1] = x; xs[#xs + 1] = -x end
        for i = 1, #vals do
          local v = vals[i].v
          add(v)
          add(v * (1 + 2.0 ^ -40))
          add(v * (1 - 2.0 ^ -40))
          if i < #vals then
            local mid = (v + vals[i + 1].v) / 2
            add(mid)
            add(mid * (1 + 2.0 ^ -40))
            add(mid * (1 - 2.0 ^ -40))
          end
        end
        local step = maxv - vals[#vals - 1].v
        add(maxv + step / 2)
        add((maxv + step / 2) * (1 + 2.0 ^ -40))
        add(maxv * 4)
        add(1e300)
        add(huge)
        add(5e-324)
        add(vals[2].v / 2)
        add(vals[2].v / 4)
        add(0.1)
        add(1 / 3)
        add(0.0)
        local want = {}
        for i, x in ipairs(xs) do want[i] = reference(f, x) end
        assert.are.equal(hexes(bytes_of(want)), hexes(dl.array(xs, name):tobytes()))
      end)

      it("converts integers with the same single rounding", function()
        local ints = {0, 1, -1, 2, 3, 5, 7, 9, 17, 19, 31, 33, 100, 255, 448, 449, 465, 1000,
                      57344, 61439, 61440, 1 << 40, -(1 << 40), math.maxinteger, math.mininteger}
        local want = {}
        for i, n in ipairs(ints) do want[i] = reference(f, n + 0.0) end
        -- math.maxinteger is 2^63 - 1: as a float it is 2^63, which rounds
        -- to the same pattern in every format (no boundary lies between)
        assert.are.equal(hexes(bytes_of(want)), hexes(dl.array(ints, name):tobytes()))
        assert.are.equal(hexes(bytes_of({reference(f, 1.0)})),
                         hexes(dl.array(true, name):tobytes()))
      end)
    end)
  end

  -- ml_dtypes' documented limits (float8.h's numeric_limits and README):
  -- largest finite, smallest subnormal, the first value past the largest
  -- that rounds away from it, and what inf and NaN become.
  -- Columns: largest finite and its pattern, smallest subnormal, the first
  -- value past the largest that rounds away from it and what it gives, the
  -- NaN a NaN gives, the midpoint below the largest and whether that tie
  -- goes to the largest (an even pattern; e8m0fnu's ties round up).
  local LIMITS = {
    {"float8_e3m4", 15.5, 0x6F, 2.0 ^ -6, 15.75, 0x70, 0x78, 15.25, false},
    {"float8_e4m3", 240.0, 0x77, 2.0 ^ -9, 248.0, 0x78, 0x7C, 232.0, false},
    {"float8_e4m3b11fnuz", 30.0, 0x7F, 2.0 ^ -13, 31.0, 0x80, 0x80, 29.0, false},
    {"float8_e4m3fn", 448.0, 0x7E, 2.0 ^ -9, 464.0 * (1 + 2.0 ^ -40), 0x7F, 0x7F, 432.0, true},
    {"float8_e4m3fnuz", 240.0, 0x7F, 2.0 ^ -10, 248.0, 0x80, 0x80, 232.0, false},
    {"float8_e5m2", 57344.0, 0x7B, 2.0 ^ -16, 61440.0, 0x7C, 0x7E, 53248.0, false},
    {"float8_e5m2fnuz", 57344.0, 0x7F, 2.0 ^ -17, 61440.0, 0x80, 0x80, 53248.0, false},
    {"float8_e8m0fnu", 2.0 ^ 127, 0xFE, 2.0 ^ -127, 1.5 * 2.0 ^ 127, 0xFF, 0xFF, 1.5 * 2.0 ^ 126,
     true},
  }
  for _, row in ipairs(LIMITS) do
    local name, maxv, maxb, tiny, first_over, over_b, nan_b, mid, mid_to_max = table.unpack(row)
    it(name .. " has ml_dtypes' largest and smallest values, overflow and NaN", function()
      local x = dl.array({maxv, tiny, first_over, huge, PNAN}, name)
      local b = {x:tobytes():byte(1, -1)}
      assert.are.same({maxb, name == "float8_e8m0fnu" and 0x00 or 0x01, over_b, over_b}, {
        b[1], b[2], b[3], b[4]})
      assert.are.equal(nan_b, b[5])
      assert.are.same({maxv, tiny}, dl.frombytes(string.char(maxb, b[2]), {2}, name):tolist())
      -- just below the first value that rounds away, the largest stays
      local below = first_over * (1 - 2.0 ^ -40)
      assert.are.equal(maxb, dl.array(below, name):tobytes():byte())
      -- the first values that round to the largest
      local prev = dl.frombytes(string.char(maxb - 1), {}, name):item()
      assert.are.equal(mid, (prev + maxv) / 2)
      assert.are.same({mid_to_max and maxb or maxb - 1, maxb, maxb - 1},
                      {dl.array({mid, mid * (1 + 2.0 ^ -40), mid * (1 - 2.0 ^ -40)}, name)
                         :tobytes():byte(1, -1)})
    end)
  end

  it("gives e4m3fn's 464 (a tie) to 448, an even pattern, and -inf to -NaN (0xFF)", function()
    assert.are.equal("\x7E\xFE\x7F\xFF\x80", dl.array({464.0, -464.0, huge, -huge, -0.0},
                                                      "float8_e4m3fn"):tobytes())
  end)

  it("has no negative zero in the fnuz formats: -0.0 and tiny negatives store 0x00", function()
    for _, name in ipairs({"float8_e4m3fnuz", "float8_e5m2fnuz", "float8_e4m3b11fnuz"}) do
      assert.are.equal("\0\0\x80\x80\x80",
                       dl.array({-0.0, -1e-30, -huge, PNAN, NNAN}, name):tobytes())
    end
  end)

  it("gives NaN for e8m0fnu values from 1.5 * 2^128 to 2^129 (ml_dtypes wraps to 0x00 there)",
     function()
    assert.are.equal("\xFF\xFF\xFF\xFF", dl.array({2.0 ^ 128, 1.5 * 2.0 ^ 128, 1.99 * 2.0 ^ 128,
                                                   2.0 ^ 129}, "float8_e8m0fnu"):tobytes())
  end)

  it("keeps e8m0fnu to positive powers of two: zero and negatives are NaN", function()
    assert.are.equal("\xFF\xFF\xFF\x7F\x81\x7F\x00\x01\xFE\xFF",
                     dl.array({0.0, -0.0, -1.0, 1.0, 3.0, 0.75, 2.0 ^ -140, 1.2 * 2.0 ^ -127,
                               1.4 * 2.0 ^ 127, huge}, "float8_e8m0fnu"):tobytes())
  end)

  it("prints as NumPy prints an ml_dtypes array (each element its scalar's repr)", function()
    assert.are.equal("Array([1, 2.5, 448, nan, -0, 0.00195312, -6], dtype=float8_e4m3fn)",
                     tostring(dl.array({1, 2.5, 448, 0 / 0, -0.0, 2.0 ^ -9, -6}, "float8_e4m3fn")))
    assert.are.equal("Array([inf, -inf, nan, 57344, 1.52588e-05], dtype=float8_e5m2)",
                     tostring(dl.array({huge, -huge, 0 / 0, 57344, 2.0 ^ -16}, "float8_e5m2")))
    assert.are.equal("Array([5.87747e-39, 1, 1.70141e+38, nan], dtype=float8_e8m0fnu)",
                     tostring(dl.frombytes("\0\x7F\xFE\xFF", {4}, "float8_e8m0fnu")))
    assert.are.equal("Array(0.5, dtype=float8_e3m4)", tostring(dl.array(0.5, "float8_e3m4")))
    assert.are.equal("Array([[0, 1],\n       [2, 3]], dtype=float8_e4m3fnuz)",
                     tostring(dl.array({{0, 1}, {2, 3}}, "float8_e4m3fnuz")))
    -- str(), as a Shard's data shows it
    local shard = dl.array({0.5, -1, 30}, "float8_e4m3b11fnuz").addressable_shards[1]
    assert.truthy(tostring(shard):find("data=[0.5 -1 30])", 1, true), tostring(shard))
  end)

  it("is listed in the unknown-dtype error", function()
    local ok, e = pcall(dl.zeros, {1}, "float8")
    assert.is_false(ok)
    assert.are.equal("ValueError", e.name)
    assert.truthy(e.message:find("float8_e3m4, float8_e4m3, float8_e4m3b11fnuz, float8_e4m3fn, "
                                 .. "float8_e4m3fnuz, float8_e5m2, float8_e5m2fnuz, "
                                 .. "float8_e8m0fnu, int4", 1, true), e.message)
  end)
end)

describe("float8 on the default devices", function()
  local H = dl.host_device()
  local D = dl.devices()

  for _, name in ipairs(NAMES) do
    it(name .. ": arange, full and zeros give the host's bytes on " .. tostring(D[1]), function()
      local on_host = dl.arange(-300, 300, 0.37, name, H):tobytes()
      local on_dev = dl.arange(-300, 300, 0.37, name, D[1])
      assert.are.equal(D[1], on_dev:devices()[1])
      assert.are.equal(hexes(on_host), hexes(on_dev:tobytes()))
      local ints_host = dl.arange(-70000, 70000, 77, name, H):tobytes()
      assert.are.equal(ints_host, dl.arange(-70000, 70000, 77, name, D[1]):tobytes())
      -- a sequence over a sharded array: each shard's part from its own offset
      local mesh = dl.make_mesh({#D}, {"x"})
      local s = dl.NamedSharding(mesh, dl.P("x"))
      assert.are.equal(on_host:sub(1, 1616), dl.arange(-300, -300 + 1616 * 0.37 - 0.1, 0.37, name,
                                                       s):tobytes())
      for _, v in ipairs({0.1, -3.0, 1e9, -0.0}) do
        local want = dl.full({5}, v, name, H):tobytes()
        assert.are.equal(want, dl.full({5}, v, name, D[1]):tobytes())
        assert.are.equal(want:sub(1, 1):rep(2 * #D), dl.full({2 * #D}, v, name, s):tobytes())
      end
      -- zeros are full(0), as JAX's: e8m0fnu has no zero, so they are NaN
      local zero = name == "float8_e8m0fnu" and "\xFF" or "\0"
      assert.are.equal(zero:rep(7), dl.zeros({7}, name, D[1]):tobytes())
    end)

    it(name .. ": reshards keep every byte", function()
      local mesh = dl.make_mesh({#D}, {"x"})
      local n = 256 * #D
      local bytes = ALL_BYTES:rep(#D)
      local x = dl.frombytes(bytes, {n}, name, dl.NamedSharding(mesh, dl.P("x")))
      local y = dl.device_put(x, dl.NamedSharding(mesh, dl.P()))
      assert.are.equal(bytes, y:tobytes())
      local z = dl.device_put(y, D[#D])
      assert.are.equal(bytes, z:tobytes())
      assert.are.equal(bytes, dl.device_put(z, H):tobytes())
    end)

    it(name .. ": DLPack round trips, legacy and versioned, on the host and on a device", function()
      for _, where in ipairs({H, D[1]}) do
        local x = dl.frombytes(ALL_BYTES, {16, 16}, name, where)
        for _, opts in ipairs({{max_version = {1, 1}}, {max_version = {2, 0}},
                               {legacy_knows_1_1 = true}}) do
          local c = x:__dlpack__(opts)
          assert.are.equal(opts.max_version and "dltensor_versioned" or "dltensor", c.name)
          assert.are.equal(name, c.dtype)
          local y = dl.from_dlpack(c)
          assert.are.equal(name, y.dtype)
          assert.are.equal(where, y:devices()[1])
          assert.are.equal(ALL_BYTES, y:tobytes())
        end
        assert.are.equal(ALL_BYTES, dl.from_dlpack(x):tobytes())
        assert.are.equal(ALL_BYTES, dl.from_dlpack(x:__dlpack__{max_version = {1, 1},
                                                               dl_device = {1, 0}}):tobytes())
      end
    end)

    it(name .. ": a legacy consumer, which cannot know the code, gets a BufferError naming it; "
       .. "a versioned one gets the tensor labelled 1.1", function()
      local x = dl.zeros({3}, name)
      local code = ("%d (kDL%s)"):format(FORMATS[name].code,
                                        name:gsub("^float8", "Float8"))
      expect_error("BufferError", ("%s has DLPack type code %s, which DLPack 1.1 added: the "
                   .. "consumer of a legacy DLPack tensor (no max_version) may predate it. Ask "
                   .. "for max_version (1, 0) or later, or pass legacy_knows_1_1=true if the "
                   .. "consumer reads DLPack 1.1's type codes."):format(name, code),
                   x.__dlpack__, x)
      expect_error("TypeError", "__dlpack__: legacy_knows_1_1 must be a boolean or nil, got string",
                   x.__dlpack__, x, {legacy_knows_1_1 = "yes"})
      -- PyTorch asks for (1, 0) and reads 1.1's codes: the tensor says 1.1.
      local cap = x:__dlpack__{max_version = {1, 0}}
      assert.are.same({1, 1}, cap.version)
      assert.are.equal(name, dl.from_dlpack(cap).dtype)
      -- the export strategies pass the option on
      local ok, e = pcall(dl.export, x)
      assert.is_false(ok)
      assert.are.equal("BufferError", e.name)
      assert.are.equal(name, dl.from_dlpack(dl.export(x, {legacy_knows_1_1 = true}).capsule).dtype)
      assert.are.equal(name, dl.from_dlpack(dl.export(x, {max_version = {1, 1}}).capsule).dtype)
    end)

    it(name .. ": __partitioned__ describes it and from_partitioned rebuilds it", function()
      local mesh = dl.make_mesh({#D}, {"x"})
      local bytes = ALL_BYTES:rep(#D)
      local x = dl.frombytes(bytes, {#D, 256}, name, dl.NamedSharding(mesh, dl.P("x")))
      local d = x:__partitioned__()
      local y = dl.from_partitioned(d)
      assert.are.equal(name, y.dtype)
      assert.are.equal(bytes, y:tobytes())
    end)
  end
end)
