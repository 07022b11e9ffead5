-- runs: every-platform
-- ipc-off: no
-- devices: any
-- needs: none

-- The sub-byte dtypes (docs/lua-api.md, "Sub-byte dtypes"): int4, uint4,
-- int2, uint2, float4_e2m1fn, float6_e2m3fn, float6_e3m2fn, stored packed as
-- DLPack 1.1 lays them out (element i is bits i*b .. i*b+b-1, little-endian).
-- Values and their rounding as ml_dtypes converts, printing as NumPy prints
-- ml_dtypes arrays, bytes, fills and arange on the running platform's
-- devices (bit for bit the host's), reshards and the ValueError of a
-- sharding that would split a byte, DLPack both ways, and the refusals.
-- Run from the repository root: busted spec/arrays/subbyte_spec.lua

local dl = require "dlrun"
local helpers = require "helpers"
local expect_error = helpers.expect_error

local function hex(s)
  return (s:gsub(".", function(c) return string.format("%02X", c:byte()) end))
end

local D = dl.devices()

describe("sub-byte dtypes", function()
  it("are dtypes with itemsize 1 and packed nbytes", function()
    local a = dl.array({1, -2, 3}, "int4")
    assert.are.equal("int4", a.dtype)
    assert.are.equal(3, a.size)
    assert.are.equal(1, a.itemsize)
    assert.are.equal(2, a.nbytes)
    assert.are.equal(3, dl.zeros({4}, "float6_e3m2fn").nbytes)
    assert.are.equal(1, dl.zeros({3}, "uint2").nbytes)
  end)

  it("pack element i into bits i*b .. i*b+b-1: int4 [1, -2, 3] is E1 03", function()
    assert.are.equal("E103", hex(dl.array({1, -2, 3}, "int4"):tobytes()))
    assert.are.equal("E4", hex(dl.array({0, 1, 2, 3}, "uint2"):tobytes()))
    assert.are.equal("4E", hex(dl.arange(-2, 2, "int2"):tobytes())) -- 2, 3, 0, 1
    -- 7.5 is 0b011111 in float6_e2m3fn: four of them in three bytes
    assert.are.equal("DFF77D", hex(dl.full({4}, 7.5, "float6_e2m3fn"):tobytes()))
    -- padding after the last element is zero
    assert.are.equal("FF0F", hex(dl.full({3}, -1, "int4"):tobytes()))
  end)

  it("read back from bytes, tolist and item", function()
    local a = dl.frombytes("\xE1\x03", {3}, "int4")
    assert.are.same({1, -2, 3}, a:tolist())
    assert.are.equal(3, dl.full({}, 3, "uint4"):item())
    assert.are.equal("integer", math.type(dl.full({}, 3, "uint4"):item()))
    assert.are.same({{0.5, 6.0}, {-1.5, 3.0}},
                    dl.array({{0.5, 6}, {-1.5, 3}}, "float4_e2m1fn"):tolist())
    expect_error("ValueError", "frombytes: got 1 bytes but shape int4[3] needs 2",
                 dl.frombytes, "\xE1", {3}, "int4")
    -- Lua data is counted in elements, not in packed bytes
    local claimed = setmetatable({}, {__len = function() return (1 << 31) + 2 end})
    expect_error("ResourceExhaustedError", "array: nested data of shape (2147483650,) would "
                 .. "need 536870913 bytes as int2; Lua data gives at most 2147483648 elements",
                 dl.array, claimed, "int2")
  end)

  it("integers store exactly or fail, as the byte-sized ones", function()
    expect_error("ValueError", "array: element [1]: value 8 does not fit in int4 (range -8 to 7)",
                 dl.array, {8}, "int4")
    expect_error("ValueError", "full: value -1 does not fit in uint2 (range 0 to 3)",
                 dl.full, {2}, -1, "uint2")
    expect_error("ValueError", "full: value 1.5 is not an integer, cannot store in int2",
                 dl.full, {2}, 1.5, "int2")
    expect_error("ValueError", "arange: value 16 does not fit in uint4 (range 0 to 15)",
                 dl.arange, 17, "uint4")
  end)

  it("the MX floats round to nearest even and saturate, with no inf and no NaN", function()
    -- ml_dtypes: past the largest and infinities give +-largest; a NaN gives
    -- zero with its sign bit flipped; 5 ties between 4 and 6 and goes to 4.
    local f = dl.array({5, 7, 1e9, -1e9, math.huge, -math.huge, 0.25, 0.75, -0.0}, "float4_e2m1fn")
    assert.are.same({4.0, 6.0, 6.0, -6.0, 6.0, -6.0, 0.0, 1.0, -0.0}, f:tolist())
    assert.are.equal("-0.0", tostring(f:tolist()[9]))
    local nan = math.abs(0 / 0) -- sign bit clear
    assert.are.equal("08", hex(dl.full({}, nan, "float4_e2m1fn"):tobytes()))
    assert.are.equal("00", hex(dl.full({}, -nan, "float4_e2m1fn"):tobytes()))
    assert.are.same({7.5, -7.5, 0.125}, dl.array({100, -8, 0.1}, "float6_e2m3fn"):tolist())
    assert.are.same({28.0, 0.0625, 12.0}, dl.array({29, 0.07, 13}, "float6_e3m2fn"):tolist())
  end)

  it("print as NumPy prints ml_dtypes arrays: each element its scalar's repr", function()
    assert.are.equal("Array([1, -2, 3], dtype=int4)", tostring(dl.array({1, -2, 3}, "int4")))
    assert.are.equal("Array([[0.5, -0],\n       [6, 1.5]], dtype=float4_e2m1fn)",
                     tostring(dl.array({{0.5, -0.0}, {6, 1.5}}, "float4_e2m1fn")))
    assert.are.equal("Array([7.5, 0.125, -3], dtype=float6_e2m3fn)",
                     tostring(dl.array({7.5, 0.125, -3}, "float6_e2m3fn")))
    assert.are.equal("Array(3, dtype=uint4)", tostring(dl.full({}, 3, "uint4")))
    assert.are.equal("Array([0, 1, 2, 3], dtype=uint2)", tostring(dl.arange(4, "uint2")))
  end)

  it("fill and arange on every device of the platform, bit for bit the host's", function()
    local host = dl.full({5}, -3, "int4", dl.devices("cpu")[1]):tobytes()
    for _, d in ipairs(D) do
      assert.are.equal(host, dl.full({5}, -3, "int4", d):tobytes())
      assert.are.equal("1032547698BADCFE", hex(dl.arange(16, "uint4", d):tobytes()))
      assert.are.equal(hex(dl.full({6}, 1.5, "float6_e3m2fn", dl.devices("cpu")[1]):tobytes()),
                       hex(dl.full({6}, 1.5, "float6_e3m2fn", d):tobytes()))
    end
  end)

  it("reshard where every shard starts and ends on a byte", function()
    local n = #D >= 4 and 4 or #D
    local devs = {}
    for i = 1, n do devs[i] = D[i] end
    local m = dl.Mesh(devs, {"x"})
    local x = dl.frombytes(string.rep("\x10\x32\x54\x76", 2 * n), {16 * n}, "uint4")
    local y = dl.device_put(x, dl.NamedSharding(m, dl.P("x")))
    assert.are.equal(x:tobytes(), y:tobytes())
    assert.are.equal(("\x10\x32\x54\x76"):rep(2), y.addressable_shards[1].data:tobytes())
    local z = dl.device_put(y, dl.NamedSharding(m, dl.P()))
    assert.are.same(x:tolist(), z:tolist())
    local w = dl.device_put(y, dl.devices("cpu")[1])
    assert.are.equal(x:tobytes(), w:tobytes())
    -- rows of 12 bits: two rows make three bytes
    local r = dl.device_put(dl.frombytes(("\x21\x43\x65"):rep(n), {2 * n, 3}, "int4"),
                            dl.NamedSharding(m, dl.P("x")))
    assert.are.equal("214365", hex(r.addressable_shards[n].data:tobytes()))
  end)

  it("a sharding that would split a byte is a ValueError naming the rule", function()
    local m = dl.Mesh({D[1], D[2] or D[1]}, {"x"})
    if #D < 2 then pending("needs two devices") return end
    local s = dl.NamedSharding(m, dl.P("x"))
    expect_error("ValueError", {contains = "shard [0:3, 0:3] of int4[6,3] does not start and end "
                 .. "on a byte: packed int4 (4 bits each) holds 12 bits in each index of dim 0, so "
                 .. "a shard may split dim 0 only at multiples of 2 (index 3 is not one)"},
                 dl.device_put, dl.zeros({6, 3}, "int4"), s)
    expect_error("ValueError", {contains = "shard [0:2, 0:1] of uint2[2,2] does not start and "
                 .. "end on a byte: packed uint2 (2 bits each) lays out dims 0 to 1 as one run "
                 .. "of bits, so a shard must hold dim 1 whole"},
                 dl.zeros, {2, 2}, "uint2", dl.NamedSharding(m, dl.P(nil, "x")))
    expect_error("ValueError", {contains = "NamedSharding("}, dl.arange, 2, "int4", s)
  end)

  it("go through DLPack both ways, packed, with no padded flag", function()
    for _, d in ipairs({D[1], dl.devices("cpu")[1]}) do
      local x = dl.array({1, -2, 3, 7, -8}, "int4", d)
      local y = dl.from_dlpack(x:__dlpack__({max_version = {1, 1}}))
      assert.are.equal("int4", y.dtype)
      assert.are.equal(x:tobytes(), y:tobytes())
      local z = dl.from_dlpack(x:__dlpack__({legacy_knows_1_1 = true}))
      assert.are.same({1, -2, 3, 7, -8}, z:tolist())
      expect_error("BufferError", "int4 is a packed sub-byte type (code=0 (kDLInt), bits=4), "
                   .. "whose layout DLPack 1.1 set: the consumer of a legacy DLPack tensor (no "
                   .. "max_version) may predate it. Ask for max_version (1, 0) or later, or pass "
                   .. "legacy_knows_1_1=true if the consumer reads DLPack 1.1's type codes.",
                   function() return x:__dlpack__() end)
      -- A versioned consumer asking for (1, 0) (PyTorch) gets it labelled 1.1.
      local cap = x:__dlpack__({max_version = {1, 0}})
      assert.are.same({1, 1}, cap.version)
      assert.are.same({1, -2, 3, 7, -8}, dl.from_dlpack(cap):tolist())
    end
  end)

  -- uint4 0..3 on each of up to 4 devices: the array, its bytes, the count.
  local function spread_uint4()
    local n = #D >= 4 and 4 or #D
    local devs = {}
    for i = 1, n do devs[i] = D[i] end
    local bytes = ("\x10\x32"):rep(n)
    return dl.device_put(dl.frombytes(bytes, {4 * n}, "uint4"),
                         dl.NamedSharding(dl.Mesh(devs, {"x"}), dl.P("x"))), bytes, n
  end

  it("describe their shards in __partitioned__, each a packed DLPack tensor", function()
    local x, bytes, n = spread_uint4()
    local p = x:__partitioned__()
    assert.are.same({4 * n}, p.shape)
    assert.are.same({n}, p.partition_tiling)
    local last = p.partitions[n]
    assert.are.same({4 * (n - 1)}, last.start)
    assert.are.same({4}, last.shape)
    local y = dl.from_dlpack(last.data)
    assert.are.equal("uint4", y.dtype)
    assert.are.same({0, 1, 2, 3}, y:tolist())
  end)

  it("leave through dl.export's strategies and dl.device_get as their packed bytes", function()
    local x, bytes, n = spread_uint4()
    for _, strategy in ipairs({"gather", "host", "auto"}) do
      local r = dl.export(x, {strategy = strategy, max_version = {1, 1}})
      assert.are.equal(bytes, dl.from_dlpack(r.capsule):tobytes())
    end
    local r = dl.export(x, {strategy = "shards", max_version = {1, 1}})
    assert.are.equal("\x10\x32", dl.from_dlpack(r.shards[n].capsule):tobytes())
    assert.are.equal(bytes, dl.device_get(x):tobytes())
    local t = dl.device_get({a = dl.array({1, -2}, "int2"), b = dl.array({0.5}, "float4_e2m1fn")})
    assert.are.same({1, -2}, t.a:tolist())
    assert.are.same({0.5}, t.b:tolist())
  end)

  it("have no __cuda_array_interface__: its typestr counts whole bytes", function()
    expect_error("TypeError", "__cuda_array_interface__() cannot describe float4_e2m1fn: its "
                 .. "elements are packed, 4 bits each (DLPack 1.1's layout), and the interface's "
                 .. "typestr has whole bytes per element; use __dlpack__ with max_version (1, 1)",
                 function() return dl.zeros({2}, "float4_e2m1fn"):__cuda_array_interface__() end)
  end)
end)
