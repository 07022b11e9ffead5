-- runs: every-platform
-- ipc-off: no
-- devices: 8
-- needs: none

-- A catalogue of bad input (README.md, "Development"): every public Lua
-- function and method of dlrun called with wrong types, nil, missing and
-- extra arguments, negative and huge sizes, NaN and infinities where integers
-- are expected, unknown dtype names, deleted arrays, consumed capsules,
-- foreign userdata, and producers whose __dlpack__ returns garbage or raises.
-- Each case names the error class and the message it must raise (exactly, or
-- {contains = ...} / {pattern = ...} for long or platform-dependent texts).
--
-- A case is a table:
--   name     what is called, with what
--   fn       the call (for in-process cases)
--   child    Lua code run instead in a fresh `dlrun` process (for calls that
--            could crash the interpreter); it runs as a function body after a
--            prelude defining d0, d1, M, S1, S2, x, cap (see CHILD_PRELUDE)
--   class, message   the dlrun error the call must raise; message is a string
--            (exact), {contains = "text" or {"text", ...}} or {pattern = "..."}
--   returns  instead of an error: the call succeeds and returns this value
--   returns_type  instead of an error: the call succeeds and returns a value of this type
--   ok       instead of an error: the call succeeds (whatever it returns)
--   passthrough  the call raises exactly this value (a producer's own error)
--
-- After the table, nothing may have leaked: every device memory's bytes_in_use
-- and dl.live_exports() are back to their values from before the catalogue.
--
-- The busted process runs on the default devices (8 devices of the default
-- platform, sim or opencl, and the host cpu device); the catalogue needs at least 2 devices of the default backend.
-- Run from the repository root: busted spec/arrays/catalogue_spec.lua

local helpers = require "helpers"
local dl = require "dlrun"

-- ---------------------------------------------------------------------------
-- Memory and exports before anything of the catalogue exists
-- ---------------------------------------------------------------------------

local function all_devices()
  local list = {}
  for _, platform in ipairs(helpers.platform == "cpu" and {"cpu"} or {helpers.platform, "cpu"}) do
    local ok, devs = pcall(dl.devices, platform)
    if ok then for _, d in ipairs(devs) do list[#list + 1] = d end end
  end
  return list
end

local function settle()
  for _, d in ipairs(all_devices()) do d:synchronize() end
  collectgarbage("collect")
  collectgarbage("collect")
  for _, d in ipairs(all_devices()) do d:synchronize() end
end

local function memory_snapshot()
  local snap = {}
  for _, d in ipairs(all_devices()) do
    for _, kind in ipairs {"device", "pinned_host"} do
      snap[tostring(d) .. " " .. kind] = d:memory_stats(kind).bytes_in_use
    end
  end
  return snap
end

settle()
local MEMORY_BEFORE = memory_snapshot()
local EXPORTS_BEFORE = dl.live_exports()

-- ---------------------------------------------------------------------------
-- Fixtures (all in F, dropped before the leak check)
-- ---------------------------------------------------------------------------

local F = {}
do
  local devs = dl.devices()
  assert(#devs >= 2, "the catalogue needs at least 2 devices of the default backend")
  F.d0, F.d1 = devs[1], devs[2]
  F.H = dl.host_device()
  F.M = dl.Mesh({F.d0, F.d1}, {"x"})
  F.S1 = dl.SingleDeviceSharding(F.d0)
  F.S2 = dl.NamedSharding(F.M, dl.P("x"))
  F.R2 = dl.NamedSharding(F.M, dl.P())
  F.x = dl.arange(4, "float32")                -- float32[4] on d0
  F.xs = dl.arange(4, "float32", F.S2)         -- split over d0, d1
  F.xr = dl.arange(4, "float32", F.R2)         -- replicated on d0, d1
  F.x0 = dl.array(1.5)                         -- 0-d
  F.x3 = dl.zeros({2, 2, 2})                   -- 3-d
  F.dead = dl.zeros({2, 3})
  F.dead:delete()
  F.dead_s = dl.zeros(4, "float32", F.S2)
  F.dead_s:delete()
  F.used = dl.to_dlpack(F.x)                   -- consumed legacy capsule
  F.imported = dl.from_dlpack(F.used)
  F.used_v = F.x:__dlpack__{max_version = {1, 1}} -- consumed versioned capsule
  F.imported_v = dl.from_dlpack(F.used_v)
  F.P = dl.P("x")
end

local DEAD = "Array has been deleted with shape=float32[2,3]."
local DEAD_S = "Array has been deleted with shape=float32[4]."
local DTYPES = "(expected one of: bool, int8, int16, int32, int64, uint8, uint16, uint32, "
               .. "uint64, float16, bfloat16, float32, float64, complex64, complex128, "
               .. "float8_e3m4, float8_e4m3, float8_e4m3b11fnuz, float8_e4m3fn, float8_e4m3fnuz, "
               .. "float8_e5m2, float8_e5m2fnuz, float8_e8m0fnu, int4, uint4, int2, uint2, "
               .. "float4_e2m1fn, float6_e2m3fn, float6_e3m2fn)"
local TWO_DEVICES = "to_dlpack can only pack a dlpack tensor from an array on a singular "
                    .. "device, but an array with a Sharding over 2 devices was provided."

-- A fresh capsule of F.x (an unconsumed export).
local function capsule() return dl.to_dlpack(F.x) end

-- A producer object for from_dlpack with the given __dlpack__.
local function producer(dlpack)
  return {__dlpack__ = dlpack, __dlpack_device__ = function() return 1, 0 end}
end

-- Values of the wrong kind, with the type name dlrun must report for them.
local function wrong_values()
  return {
    {"a string", "oops", "string"},
    {"a number", 42, "number"},
    {"a boolean", true, "boolean"},
    {"a function", print, "function"},
    {"a table", {}, "table"},
    {"io.stdout", io.stdout, "FILE*"},
    {"nil", nil, "nil"},
  }
end

-- dlrun objects of the wrong kind.
local function dlrun_values()
  return {
    {"a Device", F.d0, "Device"},
    {"a Mesh", F.M, "Mesh"},
    {"a Sharding", F.S1, "Sharding"},
    {"a Capsule", F.used, "Capsule"},
    {"an Array", F.x, "Array"},
  }
end

-- "fn: expected at most n arguments, got m" (the creation functions' text)
local function too_many(fn, n, m)
  return {contains = {fn .. ": expected at most " .. n .. " argument", "got " .. m}}
end

local cases = {}
local function add(c) cases[#cases + 1] = c end

-- ---------------------------------------------------------------------------
-- Runtime and devices
-- ---------------------------------------------------------------------------

for _, w in ipairs(wrong_values()) do
  if w[2] ~= nil and w[3] ~= "string" then
    for _, fn in ipairs {"devices", "device_count"} do
      add {name = fn .. "(" .. w[1] .. ")", fn = function() return dl[fn](w[2]) end,
           class = "TypeError",
           message = fn .. ': argument 1 (backend) must be a platform name such as "sim" or '
                     .. '"cpu", got ' .. w[3]}
    end
  end
end
for _, fn in ipairs {"devices", "device_count"} do
  add {name = fn .. "('gpu')", fn = function() return dl[fn]("gpu") end, class = "RuntimeError",
       message = {pattern = "^Unknown backend: 'gpu' requested, but no platforms that are "
                            .. "instances of gpu are present%. Platforms present are: "}}
  add {name = fn .. "('')", fn = function() return dl[fn]("") end, class = "RuntimeError",
       message = {contains = "Unknown backend: '' requested"}}
  add {name = fn .. "(a Device)", fn = function() return dl[fn](F.d0) end, class = "TypeError",
       message = fn .. ': argument 1 (backend) must be a platform name such as "sim" or "cpu", '
                 .. "got Device"}
  add {name = fn .. "('sim', extra)", fn = function() return dl[fn]("sim", "cpu") end,
       class = "TypeError", message = too_many(fn, 1, 2)}
end
for _, fn in ipairs {"default_backend", "host_device", "device_spec", "live_exports",
                     "reset_transfer_stats"} do
  add {name = fn .. "(extra)", fn = function() return dl[fn]("sim") end, class = "TypeError",
       message = too_many(fn, 0, 1)}
end

-- configure: type errors come before the check that the runtime is running.
local CONFIGURE_OPTIONS = "configure: argument 1 (options) must be a table {devices=, "
                          .. "device_memory=, ...}, got "
local CONFIGURE_KEYS = "devices, device_memory, device_memory_fraction, device_preallocate, "
  .. "pinned_host_memory, pinned_host_memory_fraction, pinned_host_preallocate, host_memory, "
  .. "host_memory_fraction"
add {name = "configure()", fn = function() return dl.configure() end, class = "TypeError",
     message = CONFIGURE_OPTIONS .. "no value"}
for _, w in ipairs(wrong_values()) do
  if w[3] ~= "table" then
    add {name = "configure(" .. w[1] .. ")", fn = function() return dl.configure(w[2]) end,
         class = "TypeError", message = CONFIGURE_OPTIONS .. w[3]}
  end
end
add {name = "configure(a Device)", fn = function() return dl.configure(F.d0) end,
     class = "TypeError", message = CONFIGURE_OPTIONS .. "Device"}
add {name = "configure{bogus=1}", fn = function() return dl.configure {bogus = 1} end,
     class = "ValueError",
     message = "configure: unknown option 'bogus' (expected " .. CONFIGURE_KEYS .. ")"}
add {name = "configure{[1]=5}", fn = function() return dl.configure {5} end,
     class = "ValueError",
     message = "configure: unknown option '1' (expected " .. CONFIGURE_KEYS .. ")"}
add {name = "configure{devices=5}", fn = function() return dl.configure {devices = 5} end,
     class = "TypeError",
     message = 'configure: option devices must be a device spec string such as "sim:8", got number'}
add {name = "configure{devices=io.stdout}",
     fn = function() return dl.configure {devices = io.stdout} end, class = "TypeError",
     message = 'configure: option devices must be a device spec string such as "sim:8", got FILE*'}
add {name = "configure{devices='sim:0'}", fn = function() return dl.configure {devices = "sim:0"} end,
     class = "ValueError",
     message = 'invalid device count "0" for sim in device spec "sim:0" (expected an integer '
               .. "from 1 to 65536)"}
add {name = "configure{devices='gpu:2'}", fn = function() return dl.configure {devices = "gpu:2"} end,
     class = "ValueError",
     message = 'unknown platform "gpu" in device spec "gpu:2" (expected '
               .. helpers.known_platforms() .. ', or auto)'}
local DEVICE_MEMORY_TYPE = "configure: option device_memory must be a number of bytes, a size "
                           .. 'string such as "2GiB" or a share of host RAM such as "25%", got '
add {name = "configure{device_memory=true}",
     fn = function() return dl.configure {device_memory = true} end, class = "TypeError",
     message = DEVICE_MEMORY_TYPE .. "boolean"}
add {name = "configure{device_memory={}}",
     fn = function() return dl.configure {device_memory = {}} end, class = "TypeError",
     message = DEVICE_MEMORY_TYPE .. "table"}
add {name = "configure{device_memory=io.stdout}",
     fn = function() return dl.configure {device_memory = io.stdout} end, class = "TypeError",
     message = DEVICE_MEMORY_TYPE .. "FILE*"}
add {name = "configure{device_memory=NaN}",
     fn = function() return dl.configure {device_memory = 0 / 0} end, class = "ValueError",
     message = {pattern = "^configure: device_memory must be a whole number of bytes, got %-?nan$"}}
add {name = "configure{device_memory=inf}",
     fn = function() return dl.configure {device_memory = math.huge} end, class = "ValueError",
     message = "configure: device_memory must be a whole number of bytes, got inf"}
add {name = "configure{device_memory=-inf}",
     fn = function() return dl.configure {device_memory = -math.huge} end, class = "ValueError",
     message = "configure: device_memory must be a whole number of bytes, got -inf"}
add {name = "configure{device_memory=1.5}",
     fn = function() return dl.configure {device_memory = 1.5} end, class = "ValueError",
     message = "configure: device_memory must be a whole number of bytes, got 1.5"}
add {name = "configure{device_memory=-1}",
     fn = function() return dl.configure {device_memory = -1} end, class = "ValueError",
     message = "configure: device_memory must be positive, got -1"}
add {name = "configure{device_memory=0}",
     fn = function() return dl.configure {device_memory = 0} end, class = "ValueError",
     message = "configure: device_memory must be positive, got 0"}
add {name = "configure{device_memory=math.mininteger}",
     fn = function() return dl.configure {device_memory = math.mininteger} end,
     class = "ValueError",
     message = "configure: device_memory must be positive, got " .. math.mininteger}
add {name = "configure{device_memory='abc'}",
     fn = function() return dl.configure {device_memory = "abc"} end, class = "ValueError",
     message = 'invalid memory size "abc" (expected a positive number with an optional unit: B, '
               .. 'KiB, MiB, GiB, TiB, kB, MB, GB, TB; e.g. "2GiB")'}
add {name = "configure{device_memory=2^62} (already running)",
     fn = function() return dl.configure {device_memory = 2 ^ 62} end, class = "RuntimeError",
     message = {contains = "configure must be called before the runtime is first used (it is "
                           .. "already running with devices "}}
add {name = "configure{device_memory=math.maxinteger} (already running)",
     fn = function() return dl.configure {device_memory = math.maxinteger} end,
     class = "RuntimeError",
     message = {contains = "configure must be called before the runtime is first used"}}
add {name = "configure({}, extra)", fn = function() return dl.configure({}, {}) end,
     class = "TypeError", message = too_many("configure", 1, 2)}

-- ---------------------------------------------------------------------------
-- Device methods and metamethods
-- ---------------------------------------------------------------------------

for _, m in ipairs {"memory_stats", "synchronize"} do
  local values = wrong_values()
  values[#values + 1] = {"an Array", F.x, "Array"}
  values[#values + 1] = {"a Sharding", F.S1, "Sharding"}
  for _, w in ipairs(values) do
    add {name = "Device." .. m .. "(" .. w[1] .. ")", fn = function() return F.d0[m](w[2]) end,
         class = "TypeError",
         message = m .. ": argument 1 (self) must be a Device, got " .. w[3]}
  end
  add {name = "Device." .. m .. "()", fn = function() return F.d0[m]() end, class = "TypeError",
       message = m .. ": argument 1 (self) must be a Device, got no value"}
end
add {name = "d:memory_stats('bogus')", fn = function() return F.d0:memory_stats("bogus") end,
     class = "ValueError",
     message = "memory_stats: unknown memory kind 'bogus' (expected \"device\" or \"pinned_host\")"}
add {name = "d:memory_stats('')", fn = function() return F.d0:memory_stats("") end,
     class = "ValueError",
     message = "memory_stats: unknown memory kind '' (expected \"device\" or \"pinned_host\")"}
add {name = "d:memory_stats(7)", fn = function() return F.d0:memory_stats(7) end,
     class = "TypeError",
     message = 'memory_stats: argument 2 (memory_kind) must be "device" or "pinned_host", got number'}
add {name = "d:memory_stats(io.stdout)", fn = function() return F.d0:memory_stats(io.stdout) end,
     class = "TypeError",
     message = 'memory_stats: argument 2 (memory_kind) must be "device" or "pinned_host", got FILE*'}
add {name = "d:memory_stats('device', extra)",
     fn = function() return F.d0:memory_stats("device", "pinned_host") end, class = "TypeError",
     message = too_many("memory_stats", 2, 3)}
add {name = "d:synchronize(extra)", fn = function() return F.d0:synchronize(1) end,
     class = "TypeError", message = too_many("synchronize", 1, 2)}
add {name = "Device __index on io.stdout",
     fn = function() return getmetatable(F.d0).__index(io.stdout, "id") end, class = "TypeError",
     message = "Device.__index: argument 1 (self) must be a Device, got FILE*"}
add {name = "Device __tostring on a string",
     fn = function() return getmetatable(F.d0).__tostring("d") end, class = "TypeError",
     message = "tostring: argument 1 (self) must be a Device, got string"}
add {name = "Device < number", fn = function() return F.d0 < 5 end, class = "TypeError",
     message = "<: argument 2 (other) must be a Device, got number"}
add {name = "number < Device", fn = function() return 5 < F.d0 end, class = "TypeError",
     message = "<: argument 1 (self) must be a Device, got number"}
add {name = "Device < Array", fn = function() return F.d0 < F.x end, class = "TypeError",
     message = "<: argument 2 (other) must be a Device, got Array"}
add {name = "Device == io.stdout", fn = function() return F.d0 == io.stdout end, returns = false}

-- ---------------------------------------------------------------------------
-- Array creation
-- ---------------------------------------------------------------------------

local ARRAY_DATA = "array: argument 1 (data) must be a number, a boolean, {re, im} or nested "
                   .. "tables of them, got "
add {name = "array()", fn = function() return dl.array() end, class = "TypeError",
     message = ARRAY_DATA .. "no value"}
for _, w in ipairs(wrong_values()) do
  local t = w[3]
  if t ~= "number" and t ~= "boolean" and t ~= "table" then
    add {name = "array(" .. w[1] .. ")", fn = function() return dl.array(w[2]) end,
         class = "TypeError", message = ARRAY_DATA .. t}
  end
end
for _, w in ipairs(dlrun_values()) do
  add {name = "array(" .. w[1] .. ")", fn = function() return dl.array(w[2]) end,
       class = "TypeError", message = ARRAY_DATA .. w[3]}
end
add {name = "array({1, 'a'})", fn = function() return dl.array({1, "a"}) end, class = "TypeError",
     message = "array: element [2] is a string, expected a number, a boolean or {re, im}"}
add {name = "array({1, io.stdout})", fn = function() return dl.array({1, io.stdout}) end,
     class = "TypeError",
     message = "array: element [2] is a FILE*, expected a number, a boolean or {re, im}"}
add {name = "array({{1, 2}, {3}}) (ragged)", fn = function() return dl.array({{1, 2}, {3}}) end,
     class = "ValueError",
     message = "array: ragged nested data: element [2] has length 1, expected 2"}
add {name = "array({{1, 2}, 3}) (ragged)", fn = function() return dl.array({{1, 2}, 3}) end,
     class = "ValueError",
     message = "array: ragged nested data: element [2] should be a list of length 2, got number"}
add {name = "array(a table that contains itself)",
     fn = function() local t = {}; t[1] = t; return dl.array(t) end, class = "ValueError",
     message = "array: data is nested deeper than 32 levels"}
add {name = "array(nested 40 deep)",
     fn = function()
       local t = 1
       for _ = 1, 40 do t = {t} end
       return dl.array(t)
     end,
     class = "ValueError", message = "array: data is nested deeper than 32 levels"}
add {name = "array(NaN, 'int32')", fn = function() return dl.array(0 / 0, "int32") end,
     class = "ValueError",
     message = {pattern = "^array: value %-?nan is not an integer, cannot store in int32$"}}
add {name = "array(inf, 'int32')", fn = function() return dl.array(math.huge, "int32") end,
     class = "ValueError", message = "array: value inf is not an integer, cannot store in int32"}
add {name = "array({1, -inf}, 'int64')", fn = function() return dl.array({1, -math.huge}, "int64") end,
     class = "ValueError",
     message = "array: element [2]: value -inf is not an integer, cannot store in int64"}
add {name = "array(2^62, 'int32')", fn = function() return dl.array(2 ^ 62, "int32") end,
     class = "ValueError",
     message = "array: value 4.6116860184273879e+18 does not fit in int32 (range -2147483648 to "
               .. "2147483647)"}
add {name = "array(math.maxinteger, 'int32')",
     fn = function() return dl.array(math.maxinteger, "int32") end, class = "ValueError",
     message = "array: value 9223372036854775807 does not fit in int32 (range -2147483648 to "
               .. "2147483647)"}
add {name = "array(-1, 'uint64')", fn = function() return dl.array(-1, "uint64") end,
     class = "ValueError", message = "array: value -1 does not fit in uint64 (range 0 to 18446744073709551615)"}
add {name = "array({1, 300}, 'uint8')", fn = function() return dl.array({1, 300}, "uint8") end,
     class = "ValueError",
     message = "array: element [2]: value 300 does not fit in uint8 (range 0 to 255)"}
add {name = "array(1.5, 'int8')", fn = function() return dl.array(1.5, "int8") end,
     class = "ValueError", message = "array: value 1.5 is not an integer, cannot store in int8"}
add {name = "array({re=1, im=2}, 'float32')",
     fn = function() return dl.array({re = 1, im = 2}, "float32") end, class = "ValueError",
     message = "array: complex value (1+2j) cannot be stored in float32"}
add {name = "array(2, 'bool')", fn = function() return dl.array(2, "bool") end,
     class = "ValueError", message = "array: value 2 does not fit in bool (expected true, false, 0 or 1)"}
add {name = "array(1, 'bogus')", fn = function() return dl.array(1, "bogus") end,
     class = "ValueError", message = 'array: unknown dtype "bogus" ' .. DTYPES}
add {name = "array(1, 'Float32')", fn = function() return dl.array(1, "Float32") end,
     class = "ValueError", message = 'array: unknown dtype "Float32" ' .. DTYPES}
add {name = "array(1, 'float')", fn = function() return dl.array(1, "float") end,
     class = "ValueError", message = 'array: unknown dtype "float" ' .. DTYPES}
add {name = "array(1, 32)", fn = function() return dl.array(1, 32) end, class = "TypeError",
     message = 'array: argument 2 (dtype) must be a dtype name such as "float32", got number'}
add {name = "array(1, io.stdout)", fn = function() return dl.array(1, io.stdout) end,
     class = "TypeError",
     message = 'array: argument 2 (dtype) must be a dtype name such as "float32", got FILE*'}
for _, w in ipairs(wrong_values()) do
  if w[2] ~= nil then
    add {name = "array(1, nil, target = " .. w[1] .. ")",
         fn = function() return dl.array(1, nil, w[2]) end, class = "TypeError",
         message = "array: argument 3 (target) must be a Device or a Sharding, got " .. w[3]}
  end
end
add {name = "array(1, nil, a Mesh)", fn = function() return dl.array(1, nil, F.M) end,
     class = "TypeError",
     message = "array: argument 3 (target) must be a Device or a Sharding, got Mesh"}
add {name = "array(1, 'float32', d0, extra)", fn = function() return dl.array(1, "float32", F.d0, 1) end,
     class = "TypeError", message = "array: expected at most 3 arguments, got 4"}
add {name = "array({1, 2, 3}, nil, 2-way split) (indivisible)",
     fn = function() return dl.array({1, 2, 3}, nil, F.S2) end, class = "IndivisibleError",
     message = {contains = "implies that array axis 0 is partitioned 2 times, but the dimension "
                           .. "size is 3"}}
add {name = "array(1, nil, 2-way split) (rank 0)", fn = function() return dl.array(1, nil, F.S2) end,
     class = "ValueError",
     message = {contains = "is only valid for values of rank at least 1, but was applied to a "
                           .. "value of rank 0. For scalars the PartitionSpec should be P()"}}

-- frombytes(s, shape, dtype [, target])
local FROMBYTES_DATA = "frombytes: argument 1 (data) must be a string, got "
for _, w in ipairs(wrong_values()) do
  if w[3] ~= "string" then
    add {name = "frombytes(" .. w[1] .. ", 1, 'int8')",
         fn = function() return dl.frombytes(w[2], 1, "int8") end, class = "TypeError",
         message = FROMBYTES_DATA .. w[3]}
  end
end
add {name = "frombytes(an Array, 4, 'float32')",
     fn = function() return dl.frombytes(F.x, 4, "float32") end, class = "TypeError",
     message = FROMBYTES_DATA .. "Array"}
add {name = "frombytes('ab', 3, 'int8') (too short)", fn = function() return dl.frombytes("ab", 3, "int8") end,
     class = "ValueError", message = "frombytes: got 2 bytes but shape int8[3] needs 3"}
add {name = "frombytes('abcd', 3, 'int8') (too long)",
     fn = function() return dl.frombytes("abcd", 3, "int8") end, class = "ValueError",
     message = "frombytes: got 4 bytes but shape int8[3] needs 3"}
add {name = "frombytes('', {}, 'float32') (0-d needs 4)",
     fn = function() return dl.frombytes("", {}, "float32") end, class = "ValueError",
     message = "frombytes: got 0 bytes but shape float32[] needs 4"}
add {name = "frombytes('', 2^62 (integer), 'int8')",
     fn = function() return dl.frombytes("", 1 << 62, "int8") end, class = "ValueError",
     message = "frombytes: got 0 bytes but shape int8[4611686018427387904] needs 4611686018427387904"}
add {name = "frombytes('ab', 2) (no dtype)", fn = function() return dl.frombytes("ab", 2) end,
     class = "TypeError",
     message = 'frombytes: argument 3 (dtype) must be a dtype name such as "float32", got no value'}
add {name = "frombytes('ab', 2, 'bogus')", fn = function() return dl.frombytes("ab", 2, "bogus") end,
     class = "ValueError", message = 'frombytes: unknown dtype "bogus" ' .. DTYPES}
add {name = "frombytes('ab', 2, 'int8', 'd0')",
     fn = function() return dl.frombytes("ab", 2, "int8", "d0") end, class = "TypeError",
     message = "frombytes: argument 4 (target) must be a Device or a Sharding, got string"}
add {name = "frombytes('ab', 2, 'int8', d0, extra)",
     fn = function() return dl.frombytes("ab", 2, "int8", F.d0, 1) end, class = "TypeError",
     message = "frombytes: expected at most 4 arguments, got 5"}

-- Shapes: every function that takes one, with every kind of bad shape.
local SHAPE_TAKERS = {
  {"zeros", function(s) return dl.zeros(s) end, 1},
  {"ones", function(s) return dl.ones(s) end, 1},
  {"full", function(s) return dl.full(s, 1) end, 1},
  {"frombytes", function(s) return dl.frombytes("", s, "int8") end, 2},
  {"shard_shape", function(s) return F.S1:shard_shape(s) end, 2},
  {"devices_indices_map", function(s) return F.S1:devices_indices_map(s) end, 2},
  {"make_array_from_callback",
   function(s) return dl.make_array_from_callback(s, F.S1, function() return 0 end) end, 1},
  {"make_array_from_single_device_arrays",
   function(s) return dl.make_array_from_single_device_arrays(s, F.S1, {F.x}) end, 1},
}
local thirty_three = {}
for i = 1, 33 do thirty_three[i] = 1 end
for _, taker in ipairs(SHAPE_TAKERS) do
  local fn, call, arg = taker[1], taker[2], taker[3]
  local function shape_type(got)
    return ("%s: argument %d (shape) must be an integer or a list of integers, got %s")
           :format(fn, arg, got)
  end
  local bad = {
    {"'x'", "x", "TypeError", shape_type("string")},
    {"nil", nil, "TypeError", shape_type("nil")},
    {"true", true, "TypeError", shape_type("boolean")},
    {"io.stdout", io.stdout, "TypeError", shape_type("FILE*")},
    {"a Device", F.d0, "TypeError", shape_type("Device")},
    {"{2, 'a'}", {2, "a"}, "TypeError", shape_type("string at position 2")},
    {"{2, {}}", {2, {}}, "TypeError", shape_type("table at position 2")},
    {"-1", -1, "ValueError", fn .. ": shape entry 1 is negative (-1)"},
    {"{2, -3}", {2, -3}, "ValueError", fn .. ": shape entry 2 is negative (-3)"},
    {"math.mininteger", math.mininteger, "ValueError",
     fn .. ": shape entry 1 is negative (" .. math.mininteger .. ")"},
    {"1.5", 1.5, "ValueError", fn .. ": shape entry 1 must be an integer, got 1.5"},
    {"NaN", 0 / 0, "ValueError", {pattern = "^" .. fn .. ": shape entry 1 must be an integer, got %-?nan$"}},
    {"inf", math.huge, "ValueError", fn .. ": shape entry 1 must be an integer, got inf"},
    {"{-inf}", {-math.huge}, "ValueError", fn .. ": shape entry 1 must be an integer, got -inf"},
    {"2^63 (float)", 2.0 ^ 63, "ValueError",
     fn .. ": shape entry 1 is too large (9.2233720368547758e+18)"},
    {"33 dimensions", thirty_three, "ValueError", fn .. ": shape has 33 dimensions (at most 32)"},
    {"{2^62, 2^62}", {1 << 62, 1 << 62}, "ValueError",
     fn .. ": shape (4611686018427387904, 4611686018427387904) has too many elements (overflows int64)"},
  }
  for _, b in ipairs(bad) do
    if b[1] == "{2^62, 2^62}" and (fn == "shard_shape" or fn == "devices_indices_map") then
      -- Nothing is allocated: index arithmetic alone is fine for any int64 shape.
      add {name = fn .. "(shape = " .. b[1] .. ")", fn = function() return call(b[2]) end,
           returns_type = "table"}
    else
      add {name = fn .. "(shape = " .. b[1] .. ")", fn = function() return call(b[2]) end,
           class = b[3], message = b[4]}
    end
  end
end
-- Shapes whose byte size overflows (creation functions only).
for _, fn in ipairs {"zeros", "ones"} do
  add {name = fn .. "(2^62)", fn = function() return dl[fn](1 << 62) end, class = "ValueError",
       message = fn .. ": shape (4611686018427387904,) of float32 is too large: its byte size "
                 .. "overflows int64"}
  add {name = fn .. "(math.maxinteger)", fn = function() return dl[fn](math.maxinteger) end,
       class = "ValueError",
       message = fn .. ": shape (9223372036854775807,) of float32 is too large: its byte size "
                 .. "overflows int64"}
  add {name = fn .. "(2^62 as a float)", fn = function() return dl[fn](2 ^ 62) end,
       class = "ValueError",
       message = fn .. ": shape (4611686018427387904,) of float32 is too large: its byte size "
                 .. "overflows int64"}
  add {name = fn .. "(2^50, 'int8') (out of memory)", fn = function() return dl[fn](1 << 50, "int8") end,
       class = "ResourceExhaustedError",
       message = {pattern = "^Out of memory on %a+Device%(id=%d+%) while allocating "
                            .. "1125899906842624 bytes %(1%.00PiB%)"}}
  add {name = fn .. "(2, 'bogus')", fn = function() return dl[fn](2, "bogus") end,
       class = "ValueError", message = fn .. ': unknown dtype "bogus" ' .. DTYPES}
  add {name = fn .. "(2, '')", fn = function() return dl[fn](2, "") end,
       class = "ValueError", message = fn .. ': unknown dtype "" ' .. DTYPES}
  add {name = fn .. "(2, {})", fn = function() return dl[fn](2, {}) end, class = "TypeError",
       message = fn .. ': argument 2 (dtype) must be a dtype name such as "float32", got table'}
  add {name = fn .. "(2, 'float32', 'd0')", fn = function() return dl[fn](2, "float32", "d0") end,
       class = "TypeError",
       message = fn .. ": argument 3 (target) must be a Device or a Sharding, got string"}
  add {name = fn .. "(2, 'float32', a Mesh)", fn = function() return dl[fn](2, "float32", F.M) end,
       class = "TypeError",
       message = fn .. ": argument 3 (target) must be a Device or a Sharding, got Mesh"}
  add {name = fn .. "(2, 'float32', io.stdout)",
       fn = function() return dl[fn](2, "float32", io.stdout) end, class = "TypeError",
       message = fn .. ": argument 3 (target) must be a Device or a Sharding, got FILE*"}
  add {name = fn .. "(2, 'float32', d0, extra)", fn = function() return dl[fn](2, "float32", F.d0, 1) end,
       class = "TypeError", message = fn .. ": expected at most 3 arguments, got 4"}
  add {name = fn .. "(3, 'float32', 2-way split) (indivisible)",
       fn = function() return dl[fn](3, "float32", F.S2) end, class = "IndivisibleError",
       message = "NamedSharding(mesh=Mesh('x': 2), spec=PartitionSpec('x',), memory_kind=device) "
                 .. "implies that array axis 0 is partitioned 2 times, but the dimension size is 3 "
                 .. "(full shape: (3,), per-dimension tiling factors: (2,) should evenly divide the shape)"}
  add {name = fn .. "({}, 'float32', 2-way split) (rank 0)",
       fn = function() return dl[fn]({}, "float32", F.S2) end, class = "ValueError",
       message = "Sharding NamedSharding(mesh=Mesh('x': 2), spec=PartitionSpec('x',), "
                 .. "memory_kind=device) is only valid for values of rank at least 1, but was "
                 .. "applied to a value of rank 0. For scalars the PartitionSpec should be P()"}
end

-- full(shape, value [, dtype [, target]])
local FILL = "full: argument 2 (fill_value) must be a number, a boolean or {re, im}, got "
for _, w in ipairs(wrong_values()) do
  if w[3] ~= "number" and w[3] ~= "boolean" then
    add {name = "full(2, " .. w[1] .. ")", fn = function() return dl.full(2, w[2]) end,
         class = "TypeError", message = FILL .. w[3]}
  end
end
add {name = "full(2)", fn = function() return dl.full(2) end, class = "TypeError",
     message = FILL .. "no value"}
add {name = "full(2, an Array)", fn = function() return dl.full(2, F.x0) end, class = "TypeError",
     message = FILL .. "Array"}
add {name = "full(2, {re='a'})", fn = function() return dl.full(2, {re = "a"}) end,
     class = "TypeError", message = FILL .. "table"}
add {name = "full(2, NaN, 'int32')", fn = function() return dl.full(2, 0 / 0, "int32") end,
     class = "ValueError",
     message = {pattern = "^full: value %-?nan is not an integer, cannot store in int32$"}}
add {name = "full(2, inf, 'int16')", fn = function() return dl.full(2, math.huge, "int16") end,
     class = "ValueError", message = "full: value inf is not an integer, cannot store in int16"}
add {name = "full(2, 300, 'uint8')", fn = function() return dl.full(2, 300, "uint8") end,
     class = "ValueError", message = "full: value 300 does not fit in uint8 (range 0 to 255)"}
add {name = "full(2, math.maxinteger, 'int32')",
     fn = function() return dl.full(2, math.maxinteger, "int32") end, class = "ValueError",
     message = "full: value 9223372036854775807 does not fit in int32 (range -2147483648 to 2147483647)"}
add {name = "full(2, {1, 2}, 'float32') (complex into real)",
     fn = function() return dl.full(2, {1, 2}, "float32") end, class = "ValueError",
     message = "full: complex value (1+2j) cannot be stored in float32"}
add {name = "full(2, 1, 'bogus')", fn = function() return dl.full(2, 1, "bogus") end,
     class = "ValueError", message = 'full: unknown dtype "bogus" ' .. DTYPES}
add {name = "full(2, 1, 5)", fn = function() return dl.full(2, 1, 5) end, class = "TypeError",
     message = 'full: argument 3 (dtype) must be a dtype name such as "float32", got number'}
add {name = "full(2, 1, nil, 'd0')", fn = function() return dl.full(2, 1, nil, "d0") end,
     class = "TypeError",
     message = "full: argument 4 (target) must be a Device or a Sharding, got string"}
add {name = "full(2, 1, 'int32', d0, extra)", fn = function() return dl.full(2, 1, "int32", F.d0, 1) end,
     class = "TypeError", message = "full: expected at most 4 arguments, got 5"}
add {name = "full(2^62, 1)", fn = function() return dl.full(1 << 62, 1) end, class = "ValueError",
     message = "full: shape (4611686018427387904,) of int32 is too large: its byte size overflows int64"}

-- arange(n | start, stop [, step] [, dtype] [, target])
add {name = "arange()", fn = function() return dl.arange() end, class = "TypeError",
     message = "arange: argument 1 (stop) must be a number, got no value"}
for _, w in ipairs(wrong_values()) do
  if w[3] ~= "number" then
    add {name = "arange(" .. w[1] .. ")", fn = function() return dl.arange(w[2]) end,
         class = "TypeError",
         message = "arange: argument 1 (stop) must be a number, got " .. w[3]}
  end
end
add {name = "arange(NaN)", fn = function() return dl.arange(0 / 0) end, class = "ValueError",
     message = "arange: start, stop and step must be finite"}
add {name = "arange(inf)", fn = function() return dl.arange(math.huge) end, class = "ValueError",
     message = "arange: start, stop and step must be finite"}
add {name = "arange(-inf, 0)", fn = function() return dl.arange(-math.huge, 0) end,
     class = "ValueError", message = "arange: start, stop and step must be finite"}
add {name = "arange(0, 1, NaN)", fn = function() return dl.arange(0, 1, 0 / 0) end,
     class = "ValueError", message = "arange: start, stop and step must be finite"}
add {name = "arange(0, 10, 0)", fn = function() return dl.arange(0, 10, 0) end,
     class = "ValueError", message = "arange: step must not be zero"}
add {name = "arange(0, 10, 0.0)", fn = function() return dl.arange(0, 10, 0.0) end,
     class = "ValueError", message = "arange: step must not be zero"}
add {name = "arange(2^62) (float)", fn = function() return dl.arange(2 ^ 62) end,
     class = "ValueError",
     message = "arange: shape (4611686018427387904,) of float32 is too large: its byte size "
               .. "overflows int64"}
add {name = "arange(2^62) (integer)", fn = function() return dl.arange(1 << 62) end,
     class = "ValueError",
     message = "arange: value 4611686018427387903 does not fit in int32 (range -2147483648 to "
               .. "2147483647)"}
add {name = "arange(math.mininteger, math.maxinteger)",
     fn = function() return dl.arange(math.mininteger, math.maxinteger) end, class = "ValueError",
     message = "arange: too many values"}
add {name = "arange(-1e300, 1e300, 1e-300)", fn = function() return dl.arange(-1e300, 1e300, 1e-300) end,
     class = "ValueError", message = "arange: too many values (inf)"}
add {name = "arange(math.maxinteger)", fn = function() return dl.arange(math.maxinteger) end,
     class = "ValueError",
     message = "arange: value 9223372036854775806 does not fit in int32 (range -2147483648 to "
               .. "2147483647)"}
add {name = "arange(300, 'uint8')", fn = function() return dl.arange(300, "uint8") end,
     class = "ValueError", message = "arange: value 299 does not fit in uint8 (range 0 to 255)"}
add {name = "arange(0, 2, 0.5, 'int32')", fn = function() return dl.arange(0, 2, 0.5, "int32") end,
     class = "ValueError",
     message = "arange: integer dtype int32 needs integral start and step, got start=0 step=0.5"}
add {name = "arange(5, 'bogus')", fn = function() return dl.arange(5, "bogus") end,
     class = "ValueError", message = 'arange: unknown dtype "bogus" ' .. DTYPES}
add {name = "arange(5, {})", fn = function() return dl.arange(5, {}) end, class = "TypeError",
     message = 'arange: argument 2 (dtype) must be a dtype name such as "float32", got table'}
add {name = "arange(1, 2, 3, 4)", fn = function() return dl.arange(1, 2, 3, 4) end,
     class = "TypeError",
     message = 'arange: argument 4 (dtype) must be a dtype name such as "float32", got number'}
add {name = "arange(5, 'int32', 'd0')", fn = function() return dl.arange(5, "int32", "d0") end,
     class = "TypeError",
     message = "arange: argument 3 (target) must be a Device or a Sharding, got string"}
add {name = "arange(5, 'int32', io.stdout)", fn = function() return dl.arange(5, "int32", io.stdout) end,
     class = "TypeError",
     message = "arange: argument 3 (target) must be a Device or a Sharding, got FILE*"}
add {name = "arange(5, 'int32', d0, extra)", fn = function() return dl.arange(5, "int32", F.d0, 1) end,
     class = "TypeError", message = "arange: expected at most 3 arguments, got 4"}
add {name = "arange(5, nil, 2-way split) (indivisible)",
     fn = function() return dl.arange(5, nil, F.S2) end, class = "IndivisibleError",
     message = {contains = "implies that array axis 0 is partitioned 2 times, but the dimension size is 5"}}

-- ---------------------------------------------------------------------------
-- Array methods and properties
-- ---------------------------------------------------------------------------

local ARRAY_METHODS = {"tolist", "tobytes", "item", "devices", "delete", "is_deleted",
                       "block_until_ready", "addressable_data", "__dlpack__", "__dlpack_device__"}
for _, m in ipairs(ARRAY_METHODS) do
  local values = wrong_values()
  for _, v in ipairs(dlrun_values()) do
    if v[3] ~= "Array" then values[#values + 1] = v end
  end
  for _, w in ipairs(values) do
    add {name = "Array." .. m .. "(" .. w[1] .. ")", fn = function() return F.x[m](w[2]) end,
         class = "TypeError", message = m .. ": argument 1 (array) must be an Array, got " .. w[3]}
  end
  add {name = "Array." .. m .. "()", fn = function() return F.x[m]() end, class = "TypeError",
       message = m .. ": argument 1 (array) must be an Array, got no value"}
end
-- Extra arguments to methods (counted with self, as Python counts them).
for _, m in ipairs {"tolist", "tobytes", "item", "devices", "delete", "is_deleted",
                    "block_until_ready", "__dlpack_device__"} do
  add {name = "x:" .. m .. "(extra)", fn = function() local a = dl.array(1.5); return a[m](a, "extra") end,
       class = "TypeError", message = too_many(m, 1, 2)}
end
add {name = "x:addressable_data(1, extra)", fn = function() local a = dl.zeros(2); return a:addressable_data(1, 2) end,
     class = "TypeError", message = too_many("addressable_data", 2, 3)}
add {name = "x:__dlpack__({}, extra)", fn = function() return F.x:__dlpack__({}, {}) end,
     class = "TypeError", message = too_many("__dlpack__", 2, 3)}

add {name = "x:item() of 4 elements", fn = function() return F.x:item() end, class = "ValueError",
     message = "can only convert an array of size 1 to a Lua scalar (size is 4)"}
add {name = "x:item() of 0 elements", fn = function() return dl.zeros(0):item() end,
     class = "ValueError", message = "can only convert an array of size 1 to a Lua scalar (size is 0)"}
add {name = "#x of a 0-d array", fn = function() return #F.x0 end, class = "TypeError",
     message = "len() of unsized object (a 0-d array)"}
add {name = "x:addressable_data()", fn = function() return F.xs:addressable_data() end,
     class = "TypeError", message = "addressable_data: argument 2 (i) must be an integer, got no value"}
add {name = "x:addressable_data('1')", fn = function() return F.xs:addressable_data("1") end,
     class = "TypeError", message = "addressable_data: argument 2 (i) must be an integer, got string"}
add {name = "x:addressable_data(io.stdout)", fn = function() return F.xs:addressable_data(io.stdout) end,
     class = "TypeError", message = "addressable_data: argument 2 (i) must be an integer, got FILE*"}
add {name = "x:addressable_data(1.5)", fn = function() return F.xs:addressable_data(1.5) end,
     class = "TypeError", message = "addressable_data: argument 2 (i) must be an integer, got 1.5"}
add {name = "x:addressable_data(NaN)", fn = function() return F.xs:addressable_data(0 / 0) end,
     class = "TypeError",
     message = {pattern = "^addressable_data: argument 2 %(i%) must be an integer, got %-?nan$"}}
add {name = "x:addressable_data(inf)", fn = function() return F.xs:addressable_data(math.huge) end,
     class = "TypeError", message = "addressable_data: argument 2 (i) must be an integer, got inf"}
add {name = "x:addressable_data(2.0)", fn = function() return F.xs:addressable_data(2.0) end,
     returns_type = "userdata"}
for _, i in ipairs {0, -1, 3, 1 << 62, math.maxinteger, math.mininteger} do
  add {name = "x:addressable_data(" .. i .. ") of 2 shards",
       fn = function() return F.xs:addressable_data(i) end, class = "ValueError",
       message = "addressable_data: index " .. i .. " is out of range (1 to 2)"}
end

-- Metamethods reached through getmetatable with foreign values.
add {name = "Array __index on io.stdout",
     fn = function() return getmetatable(F.x).__index(io.stdout, "shape") end, class = "TypeError",
     message = "Array.__index: argument 1 (array) must be an Array, got FILE*"}
add {name = "Array __len on a Device", fn = function() return getmetatable(F.x).__len(F.d0) end,
     class = "TypeError", message = "#: argument 1 (array) must be an Array, got Device"}
add {name = "Array __tostring on a table", fn = function() return getmetatable(F.x).__tostring({}) end,
     class = "TypeError", message = "tostring: argument 1 (array) must be an Array, got table"}
add {name = "Array __gc on io.stdout (a no-op)",
     fn = function() return getmetatable(F.x).__gc(io.stdout) end, ok = true}
add {name = "Array __close on a string (a no-op)",
     fn = function() return getmetatable(F.x).__close("x") end, ok = true}
add {name = "Array closed by <close>, then used", fn = function()
       local kept
       do
         local y <close> = dl.zeros(2)
         kept = y
       end
       return kept:tolist()
     end,
     class = "RuntimeError", message = "Array has been deleted with shape=float32[2]."}
add {name = "Array __gc then use", fn = function()
       local y = dl.zeros(2)
       getmetatable(y).__gc(y)
       return y:tolist()
     end,
     class = "RuntimeError", message = {contains = {"Array", "released"}}}

-- ---------------------------------------------------------------------------
-- Deleted arrays: metadata stays readable, everything else raises JAX's text
-- ---------------------------------------------------------------------------

local DEAD_USES = {
  {"tolist", function(a) return a:tolist() end},
  {"tobytes", function(a) return a:tobytes() end},
  {"item", function(a) return a:item() end},
  {"devices", function(a) return a:devices() end},
  {"block_until_ready", function(a) return a:block_until_ready() end},
  {"addressable_data(1)", function(a) return a:addressable_data(1) end},
  {"addressable_shards", function(a) return a.addressable_shards end},
  {"__dlpack__", function(a) return a:__dlpack__() end},
  {"__dlpack__{max_version={1,1}}", function(a) return a:__dlpack__{max_version = {1, 1}} end},
  {"__dlpack_device__", function(a) return a:__dlpack_device__() end},
  {"to_dlpack", function(a) return dl.to_dlpack(a) end},
  {"from_dlpack", function(a) return dl.from_dlpack(a) end},
  {"device_put (no target)", function(a) return dl.device_put(a) end},
  {"device_put to d1", function(a) return dl.device_put(a, F.d1) end},
  {"device_put to the host", function(a) return dl.device_put(a, F.H) end},
  {"device_put may_alias=false", function(a) return dl.device_put(a, nil, {may_alias = false}) end},
  {"device_put donate=true", function(a) return dl.device_put(a, F.d1, {donate = true}) end},
  {"device_put in a table", function(a) return dl.device_put({a}, F.d1) end},
  {"device_get", function(a) return dl.device_get(a) end},
  {"device_get in a table", function(a) return dl.device_get({k = {a}}) end},
  {"export", function(a) return dl.export(a) end},
  {"export strategy=gather", function(a) return dl.export(a, {strategy = "gather"}) end},
  {"export strategy=host", function(a) return dl.export(a, {strategy = "host"}) end},
  {"export strategy=shards", function(a) return dl.export(a, {strategy = "shards"}) end},
  {"try_export", function(a) return dl.try_export(a) end},
  {"ensure_single_device", function(a) return dl.ensure_single_device(a) end},
  {"ensure_single_device(d1)", function(a) return dl.ensure_single_device(a, F.d1) end},
}
for _, use in ipairs(DEAD_USES) do
  add {name = "deleted array: " .. use[1], fn = function() return use[2](F.dead) end,
       class = "RuntimeError", message = DEAD}
  add {name = "deleted sharded array: " .. use[1], fn = function() return use[2](F.dead_s) end,
       class = "RuntimeError", message = DEAD_S}
end
add {name = "deleted array: make_array_from_single_device_arrays",
     fn = function()
       local a = dl.zeros(2, "float32", F.d0)
       local b = dl.zeros(2, "float32", F.d1)
       b:delete()
       return dl.make_array_from_single_device_arrays(4, F.S2, {a, b})
     end,
     class = "RuntimeError", message = "Array has been deleted with shape=float32[2]."}
add {name = "deleted array: returned by make_array_from_callback",
     fn = function()
       return dl.make_array_from_callback(4, F.S2, function()
         local a = dl.zeros(2)
         a:delete()
         return a
       end)
     end,
     class = "RuntimeError", message = "Array has been deleted with shape=float32[2]."}
add {name = "deleted array: is_dlpack_exportable", fn = function() return dl.is_dlpack_exportable(F.dead) end,
     returns = false}
add {name = "deleted array: delete() again", fn = function() return F.dead:delete() end, ok = true}
add {name = "deleted array: is_deleted()", fn = function() return F.dead:is_deleted() end, returns = true}
add {name = "deleted array: #x", fn = function() return #F.dead end, returns = 2}
add {name = "deleted array: dtype", fn = function() return F.dead.dtype end, returns = "float32"}
add {name = "deleted array: nbytes", fn = function() return F.dead.nbytes end, returns = 24}
add {name = "deleted array: tostring", fn = function() return tostring(F.dead) end,
     returns_type = "string"}
add {name = "deleted array: visualize_sharding (metadata only, as JAX)",
     fn = function() return dl.visualize_sharding(F.dead_s, {print = false}) end,
     returns_type = "string"}

-- ---------------------------------------------------------------------------
-- Meshes, specs, shardings
-- ---------------------------------------------------------------------------

local MESH_DEVICES = "Mesh: argument 1 (devices) must be a nested table of Devices, got "
for _, w in ipairs(wrong_values()) do
  if w[3] ~= "table" then
    add {name = "Mesh(" .. w[1] .. ", {'x'})", fn = function() return dl.Mesh(w[2], {"x"}) end,
         class = "TypeError", message = MESH_DEVICES .. w[3]}
  end
end
add {name = "Mesh(a Device, {})", fn = function() return dl.Mesh(F.d0, {}) end,
     class = "TypeError", message = MESH_DEVICES .. "Device"}
add {name = "Mesh({d0, 5}, {'x'})", fn = function() return dl.Mesh({F.d0, 5}, {"x"}) end,
     class = "TypeError", message = {contains = {"Mesh: ", "devices", "number"}}}
add {name = "Mesh({d0, io.stdout}, {'x'})", fn = function() return dl.Mesh({F.d0, io.stdout}, {"x"}) end,
     class = "TypeError", message = {contains = {"Mesh: ", "devices", "FILE*"}}}
add {name = "Mesh({d0, an Array}, {'x'})", fn = function() return dl.Mesh({F.d0, F.x}, {"x"}) end,
     class = "TypeError", message = {contains = {"Mesh: ", "devices", "Array"}}}
add {name = "Mesh({}, {'x'})", fn = function() return dl.Mesh({}, {"x"}) end, class = "ValueError",
     message = "a mesh needs at least one device"}
add {name = "Mesh({d0, d0}, {'x'})", fn = function() return dl.Mesh({F.d0, F.d0}, {"x"}) end,
     class = "ValueError",
     message = "Mesh contains duplicate devices: " .. tostring(F.d0) .. " appears twice"}
add {name = "Mesh({d0, d1}, {'x', 'y'})", fn = function() return dl.Mesh({F.d0, F.d1}, {"x", "y"}) end,
     class = "ValueError",
     message = "Mesh requires the ndim of its first argument (`devices`) to equal the length of its "
               .. "second argument (`axis_names`), but got devices.ndim == 1 and len(axis_names) == 2."}
add {name = "Mesh({{d0}, {d1, d0}}, {'x', 'y'})",
     fn = function() return dl.Mesh({{F.d0}, {F.d1, F.d0}}, {"x", "y"}) end, class = "ValueError",
     message = "Mesh: the devices table is ragged: a level has 2 entries, expected 1"}
add {name = "Mesh({{d0}, 5}, {'x', 'y'})", fn = function() return dl.Mesh({{F.d0}, 5}, {"x", "y"}) end,
     class = "ValueError", message = "Mesh: the devices table is ragged (expected depth 2)"}
add {name = "Mesh({d0}, 5)", fn = function() return dl.Mesh({F.d0}, 5) end, class = "TypeError",
     message = "Mesh: argument 2 (axis_names) must be a list of axis names, got number"}
add {name = "Mesh({d0}, nil)", fn = function() return dl.Mesh({F.d0}) end, class = "TypeError",
     message = "Mesh: argument 2 (axis_names) must be a list of axis names, got nil"}
add {name = "Mesh({d0}, io.stdout)", fn = function() return dl.Mesh({F.d0}, io.stdout) end,
     class = "TypeError",
     message = "Mesh: argument 2 (axis_names) must be a list of axis names, got FILE*"}
add {name = "Mesh({d0}, {5})", fn = function() return dl.Mesh({F.d0}, {5}) end, class = "TypeError",
     message = "Mesh: axis name 1 must be a string, got number"}
add {name = "Mesh({d0}, {''})", fn = function() return dl.Mesh({F.d0}, {""}) end,
     class = "ValueError", message = "mesh axis 1 has an empty name"}
add {name = "Mesh({{d0}, {d1}}, {'x', 'x'})",
     fn = function() return dl.Mesh({{F.d0}, {F.d1}}, {"x", "x"}) end, class = "ValueError",
     message = "mesh axis names must be unique, got 'x' twice"}
add {name = "Mesh(17 axes)", fn = function()
       local devs, names = F.d0, {}
       for i = 1, 17 do devs = {devs}; names[i] = "a" .. i end
       return dl.Mesh(devs, names)
     end,
     class = "ValueError", message = "Mesh: at most 16 mesh axes, got 17"}
add {name = "Mesh({d0}, {'x'}, extra)", fn = function() return dl.Mesh({F.d0}, {"x"}, 1) end,
     class = "TypeError", message = too_many("Mesh", 2, 3)}

local MAKE_MESH_SIZES = "make_mesh: argument 1 (axis_sizes) must be a list of integers, got "
for _, w in ipairs(wrong_values()) do
  if w[3] ~= "table" then
    add {name = "make_mesh(" .. w[1] .. ", {'x'})", fn = function() return dl.make_mesh(w[2], {"x"}) end,
         class = "TypeError", message = MAKE_MESH_SIZES .. w[3]}
  end
end
add {name = "make_mesh({'a'}, {'x'})", fn = function() return dl.make_mesh({"a"}, {"x"}) end,
     class = "TypeError",
     message = "make_mesh: argument 1 (axis_sizes) must be a list of integers, got string at position 1"}
add {name = "make_mesh({-1}, {'x'})", fn = function() return dl.make_mesh({-1}, {"x"}) end,
     class = "ValueError", message = {contains = {"make_mesh: ", "axis", "-1"}}}
add {name = "make_mesh({NaN}, {'x'})", fn = function() return dl.make_mesh({0 / 0}, {"x"}) end,
     class = "ValueError", message = {contains = {"make_mesh: ", "axis", "nan"}}}
add {name = "make_mesh({inf}, {'x'})", fn = function() return dl.make_mesh({math.huge}, {"x"}) end,
     class = "ValueError", message = {contains = {"make_mesh: ", "axis", "inf"}}}
add {name = "make_mesh({0}, {'x'})", fn = function() return dl.make_mesh({0}, {"x"}) end,
     class = "ValueError",
     message = "make_mesh: every axis size must be at least 1, got mesh_shape (0,)"}
add {name = "make_mesh({2^62}, {'x'})", fn = function() return dl.make_mesh({1 << 62}, {"x"}) end,
     class = "ValueError",
     message = {pattern = "^Number of devices %d+ must be >= the product of mesh_shape "
                          .. "%(4611686018427387904,%)$"}}
add {name = "make_mesh({2^61+1, 8}, {'x', 'y'}) (product overflows)",
     fn = function() return dl.make_mesh({(1 << 61) + 1, 8}, {"x", "y"}) end, class = "ValueError",
     message = {contains = "must be >= the product of mesh_shape (2305843009213693953, 8)"}}
add {name = "make_mesh({2^61+1, 4}, {'x', 'y'}) (product overflows)",
     fn = function() return dl.make_mesh({(1 << 61) + 1, 4}, {"x", "y"}) end, class = "ValueError",
     message = {contains = "must be >= the product of mesh_shape (2305843009213693953, 4)"}}
add {name = "make_mesh({2, 4}, {'x'})", fn = function() return dl.make_mesh({2, 4}, {"x"}) end,
     class = "ValueError", message = "make_mesh: 2 axis sizes but 1 axis names were given"}
add {name = "make_mesh({2}, 5)", fn = function() return dl.make_mesh({2}, 5) end, class = "TypeError",
     message = "make_mesh: argument 2 (axis_names) must be a list of axis names, got number"}
add {name = "make_mesh({2}, {'x'}, 'devs')", fn = function() return dl.make_mesh({2}, {"x"}, "devs") end,
     class = "TypeError", message = "make_mesh: argument 3 (devices) must be a list of Devices, got string"}
add {name = "make_mesh({2}, {'x'}, a Device)", fn = function() return dl.make_mesh({2}, {"x"}, F.d0) end,
     class = "TypeError", message = "make_mesh: argument 3 (devices) must be a list of Devices, got Device"}
add {name = "make_mesh({2}, {'x'}, {d0, 5})", fn = function() return dl.make_mesh({2}, {"x"}, {F.d0, 5}) end,
     class = "TypeError", message = {contains = {"make_mesh: ", "element 2 of devices", "Device"}}}
add {name = "make_mesh({2}, {'x'}, {d0, io.stdout})",
     fn = function() return dl.make_mesh({2}, {"x"}, {F.d0, io.stdout}) end,
     class = "TypeError", message = {contains = {"make_mesh: ", "element 2 of devices", "Device"}}}
add {name = "make_mesh({2}, {'x'}, {d0, d0})", fn = function() return dl.make_mesh({2}, {"x"}, {F.d0, F.d0}) end,
     class = "ValueError",
     message = "Mesh contains duplicate devices: " .. tostring(F.d0) .. " appears twice"}
add {name = "make_mesh({1}, {'x'}, {d0}, extra)",
     fn = function() return dl.make_mesh({1}, {"x"}, {F.d0}, 1) end, class = "TypeError",
     message = too_many("make_mesh", 3, 4)}

-- Mesh fields on foreign values
add {name = "Mesh __index on io.stdout", fn = function() return getmetatable(F.M).__index(io.stdout, "size") end,
     class = "TypeError", message = "Mesh.__index: argument 1 (mesh) must be a Mesh, got FILE*"}
add {name = "Mesh __tostring on a Sharding", fn = function() return getmetatable(F.M).__tostring(F.S1) end,
     class = "TypeError", message = "tostring: argument 1 (mesh) must be a Mesh, got Sharding"}

-- P(...)
add {name = "P(5)", fn = function() return dl.P(5) end, class = "TypeError",
     message = "P: entry 1 must be nil, an axis name or a list of axis names, got number"}
add {name = "P('x', true)", fn = function() return dl.P("x", true) end, class = "TypeError",
     message = "P: entry 2 must be nil, an axis name or a list of axis names, got boolean"}
add {name = "P(print)", fn = function() return dl.P(print) end, class = "TypeError",
     message = "P: entry 1 must be nil, an axis name or a list of axis names, got function"}
add {name = "P(io.stdout)", fn = function() return dl.P(io.stdout) end, class = "TypeError",
     message = "P: entry 1 must be nil, an axis name or a list of axis names, got FILE*"}
add {name = "P(a Device)", fn = function() return dl.P(F.d0) end, class = "TypeError",
     message = "P: entry 1 must be nil, an axis name or a list of axis names, got Device"}
add {name = "P({1})", fn = function() return dl.P({1}) end, class = "TypeError",
     message = "P: entry 1 lists a number where an axis name was expected"}
add {name = "P({'x', false})", fn = function() return dl.P({"x", false}) end, class = "TypeError",
     message = {contains = "P: entry 1 lists a"}}
add {name = "P({{'x'}})", fn = function() return dl.P({{"x"}}) end, class = "ValueError",
     message = "A tuple inside PartitionSpec cannot contain a nested tuple. Got partition: {{'x'}} "
               .. "and the nested tuple: {'x'}"}
add {name = "P(33 entries) in NamedSharding",
     fn = function() return dl.NamedSharding(F.M, dl.P(table.unpack({}, 1, 33))) end,
     class = "ValueError", message = "NamedSharding: a PartitionSpec has at most 32 entries"}

-- NamedSharding(mesh, spec [, memory_kind])
local NS_MESH = "NamedSharding: argument 1 (mesh) must be a Mesh, got "
for _, w in ipairs(wrong_values()) do
  add {name = "NamedSharding(" .. w[1] .. ", P())", fn = function() return dl.NamedSharding(w[2], dl.P()) end,
       class = "TypeError", message = NS_MESH .. w[3]}
end
add {name = "NamedSharding(a Sharding, P())", fn = function() return dl.NamedSharding(F.S1, dl.P()) end,
     class = "TypeError", message = NS_MESH .. "Sharding"}
add {name = "NamedSharding(a Device, P())", fn = function() return dl.NamedSharding(F.d0, dl.P()) end,
     class = "TypeError", message = NS_MESH .. "Device"}
local NS_SPEC = "NamedSharding: argument 2 (spec) must be a PartitionSpec made by dl.P(...), got "
for _, w in ipairs(wrong_values()) do
  add {name = "NamedSharding(M, " .. w[1] .. ")", fn = function() return dl.NamedSharding(F.M, w[2]) end,
       class = "TypeError", message = NS_SPEC .. w[3]}
end
add {name = "NamedSharding(M, {'x'}) (a plain list)", fn = function() return dl.NamedSharding(F.M, {"x"}) end,
     class = "TypeError", message = NS_SPEC .. "table"}
add {name = "NamedSharding(M, {n=1, 5}) (a forged spec)",
     fn = function() return dl.NamedSharding(F.M, {n = 1, 5}) end,
     class = "TypeError", message = NS_SPEC .. "table"}
add {name = "NamedSharding(M, {n=NaN}) (a forged spec)",
     fn = function() return dl.NamedSharding(F.M, {n = 0 / 0}) end,
     class = "TypeError", message = NS_SPEC .. "table"}
add {name = "NamedSharding(M, {n=1.5, 'x'}) (a forged spec)",
     fn = function() return dl.NamedSharding(F.M, {n = 1.5, "x"}) end,
     class = "TypeError", message = NS_SPEC .. "table"}
add {name = "NamedSharding(M, {n=2^62}) (a forged spec)",
     fn = function() return dl.NamedSharding(F.M, {n = 1 << 62}) end,
     class = "TypeError", message = NS_SPEC .. "table"}
add {name = "NamedSharding(M, {n=1, {true}}) (a forged spec)",
     fn = function() return dl.NamedSharding(F.M, {n = 1, {true}}) end,
     class = "TypeError", message = NS_SPEC .. "table"}
add {name = "NamedSharding(M, a P whose entry was set to true)",
     fn = function() local p = dl.P("x"); p[1] = true; return dl.NamedSharding(F.M, p) end,
     class = "TypeError", message = {contains = {"NamedSharding", "entry 1", "boolean"}}}
add {name = "NamedSharding(M, a P whose entry was set to {true})",
     fn = function() local p = dl.P("x"); p[1] = {true}; return dl.NamedSharding(F.M, p) end,
     class = "TypeError", message = {contains = {"NamedSharding", "entry 1", "boolean"}}}
add {name = "NamedSharding(M, a P whose entry was set to {'x', 7})",
     fn = function() local p = dl.P("x"); p[1] = {"x", 7}; return dl.NamedSharding(F.M, p) end,
     class = "TypeError", message = {contains = {"NamedSharding", "entry 1", "number"}}}
add {name = "tostring(a P whose entry was set to {'x', {}})",
     fn = function() local p = dl.P("x"); p[1] = {"x", {}}; return tostring(p) end,
     class = "TypeError", message = {contains = {"entry 1", "table"}}}
add {name = "NamedSharding(M, P('z'))", fn = function() return dl.NamedSharding(F.M, dl.P("z")) end,
     class = "ValueError",
     message = "Resource axis: z of PartitionSpec('z',) is not found in mesh: ('x',)."}
add {name = "NamedSharding(M, P('x', 'x'))", fn = function() return dl.NamedSharding(F.M, dl.P("x", "x")) end,
     class = "DuplicateSpecError",
     message = "A single NamedSharding spec specification can map every mesh axis to at most one "
               .. "positional dimension, but PartitionSpec('x', 'x') has duplicate entries for `x`"}
add {name = "NamedSharding(M, P(), 'bogus')", fn = function() return dl.NamedSharding(F.M, dl.P(), "bogus") end,
     class = "ValueError",
     message = "NamedSharding: unknown memory kind 'bogus' (expected \"device\" or \"pinned_host\")"}
add {name = "NamedSharding(M, P(), 7)", fn = function() return dl.NamedSharding(F.M, dl.P(), 7) end,
     class = "TypeError",
     message = 'NamedSharding: argument 3 (memory_kind) must be "device" or "pinned_host", got number'}
add {name = "NamedSharding(M, P(), {memory_kind=7})",
     fn = function() return dl.NamedSharding(F.M, dl.P(), {memory_kind = 7}) end, class = "TypeError",
     message = 'NamedSharding: argument 3 (memory_kind) must be "device" or "pinned_host", got number'}
add {name = "NamedSharding(M, P(), {memory_kind='bogus'})",
     fn = function() return dl.NamedSharding(F.M, dl.P(), {memory_kind = "bogus"}) end,
     class = "ValueError",
     message = "NamedSharding: unknown memory kind 'bogus' (expected \"device\" or \"pinned_host\")"}
add {name = "NamedSharding(M, P(), {bogus=1})",
     fn = function() return dl.NamedSharding(F.M, dl.P(), {bogus = 1}) end, class = "TypeError",
     message = {contains = {"NamedSharding", "bogus"}}}
add {name = "NamedSharding(M, P(), 'device', extra)",
     fn = function() return dl.NamedSharding(F.M, dl.P(), "device", 1) end, class = "TypeError",
     message = too_many("NamedSharding", 3, 4)}

-- SingleDeviceSharding(device [, memory_kind])
for _, w in ipairs(wrong_values()) do
  add {name = "SingleDeviceSharding(" .. w[1] .. ")",
       fn = function() return dl.SingleDeviceSharding(w[2]) end, class = "TypeError",
       message = "SingleDeviceSharding: argument 1 (device) must be a Device, got " .. w[3]}
end
add {name = "SingleDeviceSharding(a Sharding)", fn = function() return dl.SingleDeviceSharding(F.S1) end,
     class = "TypeError", message = "SingleDeviceSharding: argument 1 (device) must be a Device, got Sharding"}
add {name = "SingleDeviceSharding(d0, 'bogus')", fn = function() return dl.SingleDeviceSharding(F.d0, "bogus") end,
     class = "ValueError",
     message = "SingleDeviceSharding: unknown memory kind 'bogus' (expected \"device\" or \"pinned_host\")"}
add {name = "SingleDeviceSharding(d0, true)", fn = function() return dl.SingleDeviceSharding(F.d0, true) end,
     class = "TypeError",
     message = 'SingleDeviceSharding: argument 2 (memory_kind) must be "device" or "pinned_host", got boolean'}
add {name = "SingleDeviceSharding(d0, 'device', extra)",
     fn = function() return dl.SingleDeviceSharding(F.d0, "device", 1) end, class = "TypeError",
     message = too_many("SingleDeviceSharding", 2, 3)}

-- Sharding methods with a foreign self
for _, m in ipairs {"shard_shape", "devices_indices_map", "is_equivalent_to", "with_memory_kind"} do
  local values = wrong_values()
  values[#values + 1] = {"a Mesh", F.M, "Mesh"}
  values[#values + 1] = {"a Device", F.d0, "Device"}
  values[#values + 1] = {"an Array", F.x, "Array"}
  for _, w in ipairs(values) do
    add {name = "Sharding." .. m .. "(" .. w[1] .. ")", fn = function() return F.S2[m](w[2], 4, 1) end,
         class = "TypeError", message = m .. ": argument 1 (sharding) must be a Sharding, got " .. w[3]}
  end
end
add {name = "s:shard_shape({3}) of a 2-way split", fn = function() return F.S2:shard_shape({3}) end,
     class = "IndivisibleError",
     message = {contains = "implies that array axis 0 is partitioned 2 times, but the dimension size is 3"}}
add {name = "s:devices_indices_map({}) of a 2-way split", fn = function() return F.S2:devices_indices_map({}) end,
     class = "ValueError", message = {contains = "is only valid for values of rank at least 1"}}
add {name = "s:shard_shape({4}, extra)", fn = function() return F.S2:shard_shape({4}, 1) end,
     class = "TypeError", message = too_many("shard_shape", 2, 3)}
add {name = "s:devices_indices_map({4}, extra)", fn = function() return F.S2:devices_indices_map({4}, 1) end,
     class = "TypeError", message = too_many("devices_indices_map", 2, 3)}
local EQUIV_OTHER = "is_equivalent_to: argument 2 (sharding) must be a Sharding, got "
for _, w in ipairs(wrong_values()) do
  add {name = "s:is_equivalent_to(" .. w[1] .. ", 1)", fn = function() return F.S2:is_equivalent_to(w[2], 1) end,
       class = "TypeError", message = EQUIV_OTHER .. w[3]}
end
add {name = "s:is_equivalent_to(a Mesh, 1)", fn = function() return F.S2:is_equivalent_to(F.M, 1) end,
     class = "TypeError", message = EQUIV_OTHER .. "Mesh"}
local EQUIV_NDIM = "is_equivalent_to: argument 3 (ndim) must be an integer from 0 to 32, got "
add {name = "s:is_equivalent_to(s)", fn = function() return F.S2:is_equivalent_to(F.S2) end,
     class = "TypeError", message = EQUIV_NDIM .. "no value"}
add {name = "s:is_equivalent_to(s, '1')", fn = function() return F.S2:is_equivalent_to(F.S2, "1") end,
     class = "TypeError", message = EQUIV_NDIM .. "string"}
add {name = "s:is_equivalent_to(s, io.stdout)", fn = function() return F.S2:is_equivalent_to(F.S2, io.stdout) end,
     class = "TypeError", message = EQUIV_NDIM .. "FILE*"}
for _, v in ipairs {{"-1", -1}, {"33", 33}, {"2^62", 1 << 62}, {"math.mininteger", math.mininteger},
                    {"1.5", 1.5}, {"inf", math.huge}} do
  add {name = "s:is_equivalent_to(s, " .. v[1] .. ")", fn = function() return F.S2:is_equivalent_to(F.S2, v[2]) end,
       class = "TypeError", message = EQUIV_NDIM .. tostring(v[2])}
end
add {name = "s:is_equivalent_to(s, NaN)", fn = function() return F.S2:is_equivalent_to(F.S2, 0 / 0) end,
     class = "TypeError", message = {pattern = "must be an integer from 0 to 32, got %-?nan$"}}
add {name = "s:is_equivalent_to(s, 1.0)", fn = function() return F.S2:is_equivalent_to(F.S2, 1.0) end,
     returns = true}
add {name = "s:is_equivalent_to(s, 1, extra)", fn = function() return F.S2:is_equivalent_to(F.S2, 1, 1) end,
     class = "TypeError", message = too_many("is_equivalent_to", 3, 4)}
add {name = "s:with_memory_kind('bogus')", fn = function() return F.S2:with_memory_kind("bogus") end,
     class = "ValueError",
     message = "with_memory_kind: unknown memory kind 'bogus' (expected \"device\" or \"pinned_host\")"}
add {name = "s:with_memory_kind(5)", fn = function() return F.S2:with_memory_kind(5) end,
     class = "TypeError",
     message = 'with_memory_kind: argument 2 (memory_kind) must be "device" or "pinned_host", got number'}
add {name = "s:with_memory_kind('device', extra)", fn = function() return F.S2:with_memory_kind("device", 1) end,
     class = "TypeError", message = too_many("with_memory_kind", 2, 3)}
add {name = "Sharding __index on io.stdout", fn = function() return getmetatable(F.S1).__index(io.stdout, "mesh") end,
     class = "TypeError", message = "Sharding.__index: argument 1 (sharding) must be a Sharding, got FILE*"}
add {name = "Sharding __tostring on a Mesh", fn = function() return getmetatable(F.S1).__tostring(F.M) end,
     class = "TypeError", message = "tostring: argument 1 (sharding) must be a Sharding, got Mesh"}
add {name = "Sharding == io.stdout", fn = function() return F.S1 == io.stdout end, returns = false}
add {name = "Sharding == a Device", fn = function() return F.S1 == F.d0 end, returns = false}

-- ---------------------------------------------------------------------------
-- Transfers
-- ---------------------------------------------------------------------------

add {name = "device_put()", fn = function() return dl.device_put() end, class = "TypeError",
     message = "device_put: argument 1 (x) must be an Array or data, got no value"}
add {name = "device_put(nil)", fn = function() return dl.device_put(nil) end, class = "TypeError",
     message = {contains = {"device_put: argument 1 (x)", "got nil"}}}
add {name = "device_put('oops')", fn = function() return dl.device_put("oops") end, class = "TypeError",
     message = {contains = {"device_put: argument 1 (x)", "got string"}}}
add {name = "device_put(io.stdout)", fn = function() return dl.device_put(io.stdout) end, class = "TypeError",
     message = {contains = {"device_put: argument 1 (x)", "got FILE*"}}}
add {name = "device_put(a Device)", fn = function() return dl.device_put(F.d0, F.d1) end, class = "TypeError",
     message = {contains = {"device_put: argument 1 (x)", "got Device"}}}
add {name = "device_put({x, 'oops'}, d1)", fn = function() return dl.device_put({F.x, "oops"}, F.d1) end,
     class = "TypeError", message = {contains = {"device_put", "string"}}}
for _, w in ipairs(wrong_values()) do
  if w[2] ~= nil and w[3] ~= "table" then
    add {name = "device_put(x, " .. w[1] .. ")", fn = function() return dl.device_put(F.x, w[2]) end,
         class = "TypeError",
         message = "device_put: argument 2 (target) must be a Device or a Sharding, got " .. w[3]}
  end
end
add {name = "device_put(x, a Mesh)", fn = function() return dl.device_put(F.x, F.M) end, class = "TypeError",
     message = "device_put: argument 2 (target) must be a Device or a Sharding, got Mesh"}
add {name = "device_put(x, an Array)", fn = function() return dl.device_put(F.x, F.xs) end, class = "TypeError",
     message = "device_put: argument 2 (target) must be a Device or a Sharding, got Array"}
add {name = "device_put(x, d1, 'opts')", fn = function() return dl.device_put(F.x, F.d1, "opts") end,
     class = "TypeError",
     message = "device_put: argument 3 (options) must be a table {donate=, may_alias=}, got string"}
add {name = "device_put(x, d1, io.stdout)", fn = function() return dl.device_put(F.x, F.d1, io.stdout) end,
     class = "TypeError",
     message = "device_put: argument 3 (options) must be a table {donate=, may_alias=}, got FILE*"}
add {name = "device_put(x, d1, {bogus=true})", fn = function() return dl.device_put(F.x, F.d1, {bogus = true}) end,
     class = "ValueError", message = "device_put: unknown option 'bogus' (expected donate, may_alias)"}
add {name = "device_put(x, {true}) (a key that is not a name)",
     fn = function() return dl.device_put(F.x, {true}) end, class = "ValueError",
     message = "device_put: unknown option '1' (expected donate, may_alias)"}
add {name = "device_put(x, d1, {donate=1})", fn = function() return dl.device_put(F.x, F.d1, {donate = 1}) end,
     class = "TypeError", message = "device_put: option donate must be a boolean, got number"}
add {name = "device_put(x, d1, {may_alias='yes'})",
     fn = function() return dl.device_put(F.x, F.d1, {may_alias = "yes"}) end, class = "TypeError",
     message = "device_put: option may_alias must be a boolean, got string"}
add {name = "device_put(x, d1, {donate=true, may_alias=true})",
     fn = function() return dl.device_put(F.x, F.d1, {donate = true, may_alias = true}) end,
     class = "ValueError", message = "may_alias and donate cannot be True at the same time."}
add {name = "device_put(x, d1, {}, extra)", fn = function() return dl.device_put(F.x, F.d1, {}, 1) end,
     class = "TypeError", message = too_many("device_put", 3, 4)}
add {name = "device_put(3-element data, 2-way split)",
     fn = function() return dl.device_put({1, 2, 3}, F.S2) end, class = "IndivisibleError",
     message = {contains = "but the dimension size is 3"}}
add {name = "device_put(x3, 2-way split of dim 0) is fine, of a 0-d is not",
     fn = function() return dl.device_put(F.x0, F.S2) end, class = "ValueError",
     message = {contains = "is only valid for values of rank at least 1, but was applied to a value of rank 0"}}

add {name = "device_get('oops') passes through", fn = function() return dl.device_get("oops") end,
     returns = "oops"}
add {name = "device_get(io.stdout) passes through", fn = function() return dl.device_get(io.stdout) end,
     returns = io.stdout}
add {name = "device_get(x, d1) (a target it does not take)", fn = function() return dl.device_get(F.x, F.d1) end,
     class = "TypeError", message = too_many("device_get", 1, 2)}

local MFSDA = "make_array_from_single_device_arrays"
for _, w in ipairs(wrong_values()) do
  add {name = MFSDA .. "(4, " .. w[1] .. ", {...})",
       fn = function() return dl.make_array_from_single_device_arrays(4, w[2], {F.x}) end,
       class = "TypeError", message = MFSDA .. ": argument 2 (sharding) must be a Sharding, got " .. w[3]}
end
add {name = MFSDA .. "(4, a Device, {...})",
     fn = function() return dl.make_array_from_single_device_arrays(4, F.d0, {F.x}) end,
     class = "TypeError", message = MFSDA .. ": argument 2 (sharding) must be a Sharding, got Device"}
for _, w in ipairs(wrong_values()) do
  if w[3] ~= "table" then
    add {name = MFSDA .. "(4, S1, " .. w[1] .. ")",
         fn = function() return dl.make_array_from_single_device_arrays(4, F.S1, w[2]) end,
         class = "TypeError", message = MFSDA .. ": argument 3 (arrays) must be a list of Arrays, got " .. w[3]}
  end
end
add {name = MFSDA .. "(4, S1, an Array)",
     fn = function() return dl.make_array_from_single_device_arrays(4, F.S1, F.x) end,
     class = "TypeError", message = MFSDA .. ": argument 3 (arrays) must be a list of Arrays, got Array"}
add {name = MFSDA .. "(4, S1, {'a'})",
     fn = function() return dl.make_array_from_single_device_arrays(4, F.S1, {"a"}) end,
     class = "TypeError", message = MFSDA .. ": element 1 of arrays is not an Array"}
add {name = MFSDA .. "(4, S1, {x, io.stdout})",
     fn = function() return dl.make_array_from_single_device_arrays(4, F.S1, {F.x, io.stdout}) end,
     class = "TypeError", message = MFSDA .. ": element 2 of arrays is not an Array"}
add {name = MFSDA .. "(4, S2, {})",
     fn = function() return dl.make_array_from_single_device_arrays(4, F.S2, {}) end,
     class = "ValueError",
     message = "Expected 2 per-device arrays (this is how many devices are addressable by the "
               .. "sharding), but got 0"}
add {name = MFSDA .. "(4, S1, {x}, extra)",
     fn = function() return dl.make_array_from_single_device_arrays(4, F.S1, {F.x}, 1) end,
     class = "TypeError", message = too_many(MFSDA, 3, 4)}

local MAFC = "make_array_from_callback"
for _, w in ipairs(wrong_values()) do
  if w[3] ~= "function" then
    add {name = MAFC .. "(4, S1, " .. w[1] .. ")",
         fn = function() return dl.make_array_from_callback(4, F.S1, w[2]) end,
         class = "TypeError", message = MAFC .. ": argument 3 (data_callback) must be a function, got " .. w[3]}
  end
end
add {name = MAFC .. "(4, 'S1', fn)",
     fn = function() return dl.make_array_from_callback(4, "S1", function() return 0 end) end,
     class = "TypeError", message = MAFC .. ": argument 2 (sharding) must be a Sharding, got string"}
add {name = MAFC .. "(4, S1, fn, 'bogus')",
     fn = function() return dl.make_array_from_callback(4, F.S1, function() return 0 end, "bogus") end,
     class = "ValueError", message = MAFC .. ': unknown dtype "bogus" ' .. DTYPES}
add {name = MAFC .. "(4, S1, fn, 5)",
     fn = function() return dl.make_array_from_callback(4, F.S1, function() return 0 end, 5) end,
     class = "TypeError", message = MAFC .. ': argument 4 (dtype) must be a dtype name such as "float32", got number'}
add {name = MAFC .. ": the callback returns nil",
     fn = function() return dl.make_array_from_callback(4, F.S1, function() end) end,
     class = "TypeError", message = {contains = {MAFC .. ": ", "callback", "nil"}}}
add {name = MAFC .. ": the callback returns a string",
     fn = function() return dl.make_array_from_callback(4, F.S1, function() return "s" end) end,
     class = "TypeError", message = {contains = {MAFC .. ": ", "callback", "string"}}}
add {name = MAFC .. ": the callback returns io.stdout",
     fn = function() return dl.make_array_from_callback(4, F.S1, function() return io.stdout end) end,
     class = "TypeError", message = {contains = {MAFC .. ": ", "callback", "FILE*"}}}
add {name = MAFC .. ": the callback returns the wrong shape",
     fn = function() return dl.make_array_from_callback(4, F.S2, function() return {1, 2, 3} end) end,
     class = "ValueError",
     message = "Expected shard shape (2,) doesn't match the single device array shape (3,). Shape of "
               .. "Array is int32[4] with sharding " .. tostring(F.S2)}
add {name = MAFC .. ": the callback raises a dlrun error (passed on)",
     fn = function()
       return dl.make_array_from_callback(4, F.S1, function() error(dl.ValueError("mine")) end)
     end,
     class = "ValueError", message = "mine"}
add {name = MAFC .. "(4, S1, fn, 'float32', extra)",
     fn = function()
       return dl.make_array_from_callback(4, F.S1, function() return {0, 0, 0, 0} end, "float32", 1)
     end,
     class = "TypeError", message = too_many(MAFC, 4, 5)}

add {name = "transfer_stats('reset')", fn = function() return dl.transfer_stats("reset") end,
     class = "TypeError", message = "transfer_stats: argument 1 (options) must be a table {reset=}, got string"}
add {name = "transfer_stats(io.stdout)", fn = function() return dl.transfer_stats(io.stdout) end,
     class = "TypeError", message = "transfer_stats: argument 1 (options) must be a table {reset=}, got FILE*"}
add {name = "transfer_stats({bogus=true})", fn = function() return dl.transfer_stats({bogus = true}) end,
     class = "TypeError", message = {contains = {"transfer_stats", "bogus", "reset"}}}
add {name = "transfer_stats({}, extra)", fn = function() return dl.transfer_stats({}, 1) end,
     class = "TypeError", message = too_many("transfer_stats", 1, 2)}
add {name = "trace_start(1)", fn = function() return dl.trace_start(1) end, class = "TypeError",
     message = "trace_start: argument 1 (path) must be a string, got number"}
add {name = "trace_start(io.stdout)", fn = function() return dl.trace_start(io.stdout) end,
     class = "TypeError", message = "trace_start: argument 1 (path) must be a string, got FILE*"}
add {name = "trace_start(path, extra)", fn = function() return dl.trace_start("t.json", 1) end,
     class = "TypeError", message = too_many("trace_start", 1, 2)}
add {name = "trace_stop() when off", fn = function() return dl.trace_stop() end,
     class = "RuntimeError", message = "trace_stop: tracing is not on"}
add {name = "trace_stop(extra)", fn = function() return dl.trace_stop(1) end, class = "TypeError",
     message = too_many("trace_stop", 0, 1)}
add {name = "stats(extra)", fn = function() return dl.stats({}) end, class = "TypeError",
     message = too_many("stats", 0, 1)}

-- ---------------------------------------------------------------------------
-- DLPack export: __dlpack__, to_dlpack, __dlpack_device__
-- ---------------------------------------------------------------------------

for _, fn in ipairs {"__dlpack__", "to_dlpack"} do
  local function export(opts) return dl.to_dlpack(F.x, opts) end
  if fn == "__dlpack__" then export = function(opts) return F.x:__dlpack__(opts) end end
  local OPTIONS = fn .. ": argument 2 (options) must be a table {stream=, max_version=, dl_device=, copy=, legacy_sharing=, legacy_knows_1_1=}, got "
  for _, w in ipairs(wrong_values()) do
    if w[2] ~= nil and w[3] ~= "table" then
      add {name = fn .. "(" .. w[1] .. ")", fn = function() return export(w[2]) end,
           class = "TypeError", message = OPTIONS .. w[3]}
    end
  end
  add {name = fn .. "{bogus=1}", fn = function() return export {bogus = 1} end, class = "TypeError",
       message = fn .. ": unexpected option 'bogus' (expected stream, max_version, dl_device, copy, legacy_sharing, legacy_knows_1_1)"}
  add {name = fn .. "{5} (a key that is not a name)", fn = function() return export {5} end,
       class = "TypeError",
       message = fn .. ": unexpected option '1' (expected stream, max_version, dl_device, copy, legacy_sharing, legacy_knows_1_1)"}
  add {name = fn .. "{max_version='1.1'}", fn = function() return export {max_version = "1.1"} end,
       class = "TypeError", message = fn .. ": max_version must be a pair of integers {a, b}, got string"}
  add {name = fn .. "{max_version={1}}", fn = function() return export {max_version = {1}} end,
       class = "TypeError", message = fn .. ": max_version must be a pair of integers {a, b}, got {1, nil}"}
  add {name = fn .. "{max_version={NaN, 0}}", fn = function() return export {max_version = {0 / 0, 0}} end,
       class = "TypeError", message = fn .. ": max_version must be a pair of integers {a, b}, got {" .. tostring(0 / 0) .. ", 0}"}
  add {name = fn .. "{max_version={1.5, 0}}", fn = function() return export {max_version = {1.5, 0}} end,
       class = "TypeError", message = fn .. ": max_version must be a pair of integers {a, b}, got {1.5, 0}"}
  add {name = fn .. "{max_version={-1, 0}}", fn = function() return export {max_version = {-1, 0}} end,
       class = "BufferError", message = fn .. ": max_version (-1, 0) is not a version"}
  add {name = fn .. "{max_version={2^40, 0}}", fn = function() return export {max_version = {1 << 40, 0}} end,
       class = "BufferError", message = fn .. ": max_version (1099511627776, 0) is not a version"}
  add {name = fn .. "{max_version={0, 4}}", fn = function() return export {max_version = {0, 4}} end,
       class = "BufferError",
       message = "dlrun does not support any version below (0, 5) but version (0, 4) was requested."}
  add {name = fn .. "{dl_device=5}", fn = function() return export {dl_device = 5} end,
       class = "TypeError", message = fn .. ": dl_device must be a pair of integers {a, b}, got 5"}
  add {name = fn .. "{dl_device={1, inf}}", fn = function() return export {dl_device = {1, math.huge}} end,
       class = "TypeError", message = fn .. ": dl_device must be a pair of integers {a, b}, got {1, inf}"}
  add {name = fn .. "{dl_device={7, 0}}", fn = function() return export {dl_device = {7, 0}} end,
       class = "BufferError",
       message = "The device specification passed to to_dlpack contains an unsupported device type "
                 .. "(DLDeviceType: 7 (kDLVulkan))"}
  add {name = fn .. "{dl_device={-1, 0}}", fn = function() return export {dl_device = {-1, 0}} end,
       class = "BufferError",
       message = "The device specification passed to to_dlpack contains an unsupported device type "
                 .. "(DLDeviceType: -1 (unknown to DLPack 1.3))"}
  add {name = fn .. "{dl_device={" .. helpers.dl_type .. ", 99}}",
       fn = function() return export {dl_device = {helpers.dl_type, 99}} end,
       class = "BufferError",
       message = "The device specification passed to to_dlpack names device id 99, which does not "
                 .. "exist for DLDeviceType " .. helpers.dl_type_text(helpers.dl_type)}
  add {name = fn .. "{dl_device={1, -1}}", fn = function() return export {dl_device = {1, -1}} end,
       class = "BufferError",
       message = "The device specification passed to to_dlpack names device id -1, which does not "
                 .. "exist for DLDeviceType 1 (kDLCPU)"}
  add {name = fn .. "{dl_device={1, 2^32}} (an id past int32)",
       fn = function() return export {dl_device = {1, 1 << 32}} end, class = "BufferError",
       message = "The device specification passed to to_dlpack names device id 4294967296, which "
                 .. "does not exist for DLDeviceType 1 (kDLCPU)"}
  add {name = fn .. "{dl_device={2^32+1, 0}} (a type past int32)",
       fn = function() return export {dl_device = {(1 << 32) + 1, 0}} end, class = "BufferError",
       message = "The device specification passed to to_dlpack contains an unsupported device type "
                 .. "(DLDeviceType: 4294967297 (unknown to DLPack 1.3))"}
  add {name = fn .. "{dl_device={1, 0}, copy=false}", fn = function() return export {dl_device = {1, 0}, copy = false} end,
       class = "ValueError",
       message = {contains = "which requires a copy since the source device is " .. tostring(F.d0)
                             .. ", however copy=False."}}
  add {name = fn .. "{copy='yes'}", fn = function() return export {copy = "yes"} end,
       class = "TypeError", message = fn .. ": copy must be a boolean or nil, got string"}
  add {name = fn .. "{copy=1}", fn = function() return export {copy = 1} end,
       class = "TypeError", message = fn .. ": copy must be a boolean or nil, got number"}
  add {name = fn .. "{stream='s'}", fn = function() return export {stream = "s"} end,
       class = "BufferError", message = fn .. ": stream must be nil or an integer, got string"}
  add {name = fn .. "{stream=1.5}", fn = function() return export {stream = 1.5} end,
       class = "BufferError", message = fn .. ": stream must be nil or an integer, got 1.5"}
  add {name = fn .. "{stream=NaN}", fn = function() return export {stream = 0 / 0} end,
       class = "BufferError", message = fn .. ": stream must be nil or an integer, got " .. tostring(0 / 0)}
  add {name = fn .. "{stream=5}", fn = function() return export {stream = 5} end,
       class = "BufferError",
       message = "stream must be " .. helpers.streams() .. " for arrays on "
                 .. tostring(F.d0) .. ", got 5"}
  add {name = fn .. "{stream=math.mininteger}", fn = function() return export {stream = math.mininteger} end,
       class = "BufferError",
       message = "stream must be " .. helpers.streams() .. " for arrays on "
                 .. tostring(F.d0) .. ", got " .. math.mininteger}
end
add {name = "to_dlpack(a sharded array)", fn = function() return dl.to_dlpack(F.xs) end,
     class = "BufferError", message = TWO_DEVICES}
add {name = "to_dlpack(a replicated array)", fn = function() return dl.to_dlpack(F.xr) end,
     class = "BufferError", message = TWO_DEVICES}
add {name = "xs:__dlpack_device__() (sharded)", fn = function() return F.xs:__dlpack_device__() end,
     class = "BufferError", message = "__dlpack__ only supported for unsharded arrays."}
add {name = "to_dlpack(x, {}, extra)", fn = function() return dl.to_dlpack(F.x, {}, 1) end,
     class = "TypeError", message = too_many("to_dlpack", 2, 3)}
for _, w in ipairs(wrong_values()) do
  add {name = "to_dlpack(" .. w[1] .. ")", fn = function() return dl.to_dlpack(w[2]) end,
       class = "TypeError", message = "to_dlpack: argument 1 (array) must be an Array, got " .. w[3]}
end
add {name = "to_dlpack(a Capsule)", fn = function() return dl.to_dlpack(F.used) end,
     class = "TypeError", message = "to_dlpack: argument 1 (array) must be an Array, got Capsule"}

-- ---------------------------------------------------------------------------
-- Capsules
-- ---------------------------------------------------------------------------

for _, field in ipairs {"version", "flags", "read_only", "is_copied", "device", "shape", "strides", "dtype"} do
  add {name = "consumed capsule ." .. field, fn = function() return F.used[field] end,
       class = "BufferError",
       message = "the capsule has been consumed (used_dltensor): " .. field .. " is gone"}
  add {name = "consumed versioned capsule ." .. field, fn = function() return F.used_v[field] end,
       class = "BufferError",
       message = "the capsule has been consumed (used_dltensor_versioned): " .. field .. " is gone"}
end
add {name = "consumed capsule .name", fn = function() return F.used.name end, returns = "used_dltensor"}
add {name = "consumed versioned capsule .name", fn = function() return F.used_v.name end,
     returns = "used_dltensor_versioned"}
add {name = "tostring(consumed capsule)", fn = function() return tostring(F.used) end,
     returns = "Capsule(used_dltensor)"}
add {name = "Capsule __index on io.stdout (nothing there)",
     fn = function() return getmetatable(F.used).__index(io.stdout, "shape") end, ok = true}

-- ---------------------------------------------------------------------------
-- DLPack import: from_dlpack
-- ---------------------------------------------------------------------------

local NO_METHODS = "The array passed to from_dlpack must have __dlpack__ and __dlpack_device__ methods."
add {name = "from_dlpack()", fn = function() return dl.from_dlpack() end, class = "TypeError", message = NO_METHODS}
for _, w in ipairs(wrong_values()) do
  add {name = "from_dlpack(" .. w[1] .. ")", fn = function() return dl.from_dlpack(w[2]) end,
       class = "TypeError", message = NO_METHODS}
end
add {name = "from_dlpack(a Device)", fn = function() return dl.from_dlpack(F.d0) end,
     class = "TypeError", message = NO_METHODS}
add {name = "from_dlpack(a Mesh)", fn = function() return dl.from_dlpack(F.M) end,
     class = "TypeError", message = NO_METHODS}
add {name = "from_dlpack({__dlpack__ = f}) (no __dlpack_device__)",
     fn = function() return dl.from_dlpack({__dlpack__ = function() return capsule() end}) end,
     class = "TypeError", message = NO_METHODS}
add {name = "from_dlpack(a consumed capsule)", fn = function() return dl.from_dlpack(F.used) end,
     class = "BufferError",
     message = "from_dlpack: the capsule has already been consumed (its name is used_dltensor)"}
add {name = "from_dlpack(a consumed versioned capsule)", fn = function() return dl.from_dlpack(F.used_v) end,
     class = "BufferError",
     message = "from_dlpack: the capsule has already been consumed (its name is used_dltensor_versioned)"}
add {name = "from_dlpack(a sharded array)", fn = function() return dl.from_dlpack(F.xs) end,
     class = "BufferError", message = TWO_DEVICES}
add {name = "from_dlpack(cap, 'opts')", fn = function() return dl.from_dlpack(capsule(), "opts") end,
     class = "TypeError", message = "from_dlpack: argument 2 (options) must be a table {device=, copy=}, got string"}
add {name = "from_dlpack(cap, io.stdout)", fn = function() return dl.from_dlpack(capsule(), io.stdout) end,
     class = "TypeError", message = "from_dlpack: argument 2 (options) must be a table {device=, copy=}, got FILE*"}
add {name = "from_dlpack(cap, {copy=1})", fn = function() return dl.from_dlpack(capsule(), {copy = 1}) end,
     class = "TypeError", message = "from_dlpack: copy must be a boolean or nil, got number"}
add {name = "from_dlpack(cap, {device=5})", fn = function() return dl.from_dlpack(capsule(), {device = 5}) end,
     class = "TypeError", message = "from_dlpack: device must be a Device or a Sharding, got number"}
add {name = "from_dlpack(cap, {device=io.stdout})",
     fn = function() return dl.from_dlpack(capsule(), {device = io.stdout}) end,
     class = "TypeError", message = "from_dlpack: device must be a Device or a Sharding, got FILE*"}
add {name = "from_dlpack(cap, {device=a Mesh})", fn = function() return dl.from_dlpack(capsule(), {device = F.M}) end,
     class = "TypeError", message = "from_dlpack: device must be a Device or a Sharding, got Mesh"}
add {name = "from_dlpack(cap, {device=2-way sharding})",
     fn = function() return dl.from_dlpack(capsule(), {device = F.S2}) end, class = "ValueError",
     message = "from_dlpack can only unpack a dlpack tensor onto a singular device, but a Sharding "
               .. "with 2 devices was provided."}
add {name = "from_dlpack(cap, {bogus=1})", fn = function() return dl.from_dlpack(capsule(), {bogus = 1}) end,
     class = "TypeError", message = "from_dlpack: unexpected option 'bogus' (expected device, copy)"}
add {name = "from_dlpack(cap, {}, extra)", fn = function() return dl.from_dlpack(capsule(), {}, 1) end,
     class = "TypeError", message = too_many("from_dlpack", 2, 3)}

-- Producers whose __dlpack__ returns garbage.
for _, g in ipairs {{"a number", 42, "number"}, {"a table", {}, "table"}, {"nil", nil, "nil"},
                    {"a string", "dltensor", "string"}, {"a boolean", false, "boolean"},
                    {"io.stdout", io.stdout, "FILE*"}} do
  add {name = "from_dlpack(a producer whose __dlpack__ returns " .. g[1] .. ")",
       fn = function() return dl.from_dlpack(producer(function() return g[2] end)) end,
       class = "TypeError", message = "from_dlpack: __dlpack__ returned a " .. g[3] .. ", not a Capsule"}
end
add {name = "from_dlpack(a producer whose __dlpack__ returns an Array)",
     fn = function() return dl.from_dlpack(producer(function() return F.x end)) end,
     class = "TypeError", message = {contains = {"from_dlpack: __dlpack__ returned a", "Array", "not a Capsule"}}}
add {name = "from_dlpack(a producer whose __dlpack__ returns a consumed capsule)",
     fn = function() return dl.from_dlpack(producer(function() return F.used end)) end,
     class = "BufferError",
     message = "from_dlpack: the capsule has already been consumed (its name is used_dltensor)"}
add {name = "from_dlpack(a producer whose __dlpack__ is a number)",
     fn = function() return dl.from_dlpack({__dlpack__ = 5, __dlpack_device__ = 5}) end,
     class = "TypeError", message = {contains = {"from_dlpack", "__dlpack__", "number"}}}
add {name = "from_dlpack(a producer whose __dlpack__ is a table)",
     fn = function() return dl.from_dlpack({__dlpack__ = {}, __dlpack_device__ = {}}) end,
     class = "TypeError", message = {contains = {"from_dlpack", "__dlpack__", "table"}}}

-- Producers whose __dlpack__ raises: their own error comes back unchanged (as
-- Python's from_dlpack lets a producer's exception through); a TypeError first
-- makes dlrun ask again without max_version.
local RAISED_TABLE = {reason = "not an error value"}
local MINE = dl.BufferError("the producer's own BufferError")
add {name = "from_dlpack(a producer raising a string)",
     fn = function() return dl.from_dlpack(producer(function() error("boom", 0) end)) end,
     passthrough = "boom"}
add {name = "from_dlpack(a producer raising a non-error table)",
     fn = function() return dl.from_dlpack(producer(function() error(RAISED_TABLE) end)) end,
     passthrough = RAISED_TABLE}
add {name = "from_dlpack(a producer raising a dlrun BufferError)",
     fn = function() return dl.from_dlpack(producer(function() error(MINE) end)) end,
     passthrough = MINE}
add {name = "from_dlpack(a producer raising a dlrun TypeError, twice)",
     fn = function()
       return dl.from_dlpack(producer(function() error(dl.TypeError("no max_version, please")) end))
     end,
     class = "TypeError", message = "no max_version, please"}
add {name = "from_dlpack(a producer refusing max_version, then returning garbage)",
     fn = function()
       return dl.from_dlpack(producer(function(_, opts)
         if opts and opts.max_version then error(dl.TypeError("unexpected max_version")) end
         return 7
       end))
     end,
     class = "TypeError", message = "from_dlpack: __dlpack__ returned a number, not a Capsule"}
add {name = "from_dlpack(a producer raising nil)",
     fn = function() return dl.from_dlpack(producer(function() error(nil) end)) end,
     passthrough = nil}


-- ---------------------------------------------------------------------------
-- Export strategies
-- ---------------------------------------------------------------------------

for _, fn in ipairs {"export", "try_export", "ensure_single_device"} do
  for _, w in ipairs(wrong_values()) do
    add {name = fn .. "(" .. w[1] .. ")", fn = function() return dl[fn](w[2]) end,
         class = "TypeError", message = fn .. ": argument 1 (x) must be an Array, got " .. w[3]}
  end
  for _, w in ipairs(dlrun_values()) do
    if w[3] ~= "Array" then
      add {name = fn .. "(" .. w[1] .. ")", fn = function() return dl[fn](w[2]) end,
           class = "TypeError", message = fn .. ": argument 1 (x) must be an Array, got " .. w[3]}
    end
  end
end
for _, fn in ipairs {"export", "try_export"} do
  local OPTS = fn .. ": argument 2 (opts) must be a table {strategy=, device=, max_version=, "
               .. "dl_device=, copy=, stream=, legacy_sharing=, legacy_knows_1_1=}, got "
  for _, w in ipairs(wrong_values()) do
    if w[2] ~= nil and w[3] ~= "table" then
      add {name = fn .. "(x, " .. w[1] .. ")", fn = function() return dl[fn](F.xs, w[2]) end,
           class = "TypeError", message = OPTS .. w[3]}
    end
  end
  -- a P is named by its metatable's __name, as device_put(x, P) names it
  add {name = fn .. "(x, a P)", fn = function() return dl[fn](F.xs, F.P) end,
       class = "TypeError", message = OPTS .. "PartitionSpec"}
  add {name = fn .. "(x, {bogus=1})", fn = function() return dl[fn](F.xs, {bogus = 1}) end,
       class = "TypeError",
       message = fn .. ": unexpected option 'bogus' (expected strategy, device, max_version, dl_device, copy, stream, legacy_sharing, legacy_knows_1_1)"}
  add {name = fn .. "(x, {strategy=5})", fn = function() return dl[fn](F.xs, {strategy = 5}) end,
       class = "TypeError", message = fn .. ": option strategy must be a string, got number"}
  add {name = fn .. "(x, {strategy='bogus'})", fn = function() return dl[fn](F.xs, {strategy = "bogus"}) end,
       class = "ValueError",
       message = fn .. ': unknown strategy "bogus" (expected "auto", "gather", "allgather", "replica", "host" or "shards")'}
  add {name = fn .. "(x, {device=5})", fn = function() return dl[fn](F.xs, {device = 5}) end,
       class = "TypeError", message = fn .. ": option device must be a Device, got number"}
  add {name = fn .. "(x, {device=io.stdout})", fn = function() return dl[fn](F.xs, {device = io.stdout}) end,
       class = "TypeError", message = fn .. ": option device must be a Device, got FILE*"}
  add {name = fn .. "(x, {device=a Sharding})", fn = function() return dl[fn](F.xs, {device = F.S1}) end,
       class = "TypeError", message = fn .. ": option device must be a Device, got Sharding"}
  add {name = fn .. "(x, {}, extra)", fn = function() return dl[fn](F.xs, {}, 1) end,
       class = "TypeError", message = too_many(fn, 2, 3)}
  add {name = fn .. "(x, {max_version={0, 4}})", fn = function() return dl[fn](F.x, {max_version = {0, 4}}) end,
       class = "BufferError",
       message = "dlrun does not support any version below (0, 5) but version (0, 4) was requested."}
end
add {name = "export(xs, {strategy='replica'}) of a split array",
     fn = function() return dl.export(F.xs, {strategy = "replica"}) end, class = "ValueError",
     message = 'export: strategy "replica" needs a fully replicated array, but the array is sharded as '
               .. tostring(F.S2)}
add {name = "export(xs, {strategy='gather', copy=false})",
     fn = function() return dl.export(F.xs, {strategy = "gather", copy = false}) end, class = "ValueError",
     message = {contains = 'export: copy=false forbids copies, but strategy "gather" had to copy'}}
add {name = "export(xs, {strategy='host', copy=false})",
     fn = function() return dl.export(F.xs, {strategy = "host", copy = false}) end, class = "ValueError",
     message = {contains = 'export: copy=false forbids copies, but strategy "host" had to copy'}}
add {name = "export(x, {max_version='1'}) (a bad DLPack option passes through)",
     fn = function() return dl.export(F.x, {max_version = "1"}) end, class = "TypeError",
     message = "__dlpack__: max_version must be a pair of integers {a, b}, got string"}
-- kDLVulkan (7): a device type no platform of dlrun exports (kDLCUDA, 2, is cuda's)
add {name = "try_export(xs, {dl_device={7, 0}}) (not a one-device BufferError)",
     fn = function() return dl.try_export(F.xs, {dl_device = {7, 0}}) end, class = "BufferError",
     message = "The device specification passed to to_dlpack contains an unsupported device type (DLDeviceType: 7 (kDLVulkan))"}
for _, w in ipairs(wrong_values()) do
  if w[2] ~= nil then
    add {name = "ensure_single_device(xs, " .. w[1] .. ")",
         fn = function() return dl.ensure_single_device(F.xs, w[2]) end, class = "TypeError",
         message = "ensure_single_device: argument 2 (device) must be a Device, got " .. w[3]}
  end
end
add {name = "ensure_single_device(xs, a Sharding)", fn = function() return dl.ensure_single_device(F.xs, F.S1) end,
     class = "TypeError", message = "ensure_single_device: argument 2 (device) must be a Device, got Sharding"}
add {name = "ensure_single_device(xs, d0, extra)", fn = function() return dl.ensure_single_device(F.xs, F.d0, 1) end,
     class = "TypeError", message = too_many("ensure_single_device", 2, 3)}
local EXPORTABLE = {
  {"a string", "oops", false}, {"nil", nil, false}, {"io.stdout", io.stdout, false},
  {"a table with __dlpack__", producer(capsule), false}, {"a Capsule", F.used, false},
  {"a Device", F.d0, false}, {"a sharded array", F.xs, false}, {"a replicated array", F.xr, false},
  {"a deleted array", F.dead, false}, {"a one-device array", F.x, true},
}
for _, e in ipairs(EXPORTABLE) do
  add {name = "is_dlpack_exportable(" .. e[1] .. ")", fn = function() return dl.is_dlpack_exportable(e[2]) end,
       returns = e[3]}
end
add {name = "is_dlpack_exportable(x, extra)", fn = function() return dl.is_dlpack_exportable(F.x, 1) end,
     returns = false} -- never raises (docs/export.md)

-- ---------------------------------------------------------------------------
-- visualize_sharding
-- ---------------------------------------------------------------------------

local VIS_X = "visualize_sharding: argument 1 (x) must be an Array, got "
for _, w in ipairs(wrong_values()) do
  add {name = "visualize_sharding(" .. w[1] .. ")", fn = function() return dl.visualize_sharding(w[2]) end,
       class = "TypeError", message = VIS_X .. w[3]}
end
for _, w in ipairs(dlrun_values()) do
  if w[3] ~= "Array" then
    add {name = "visualize_sharding(" .. w[1] .. ")", fn = function() return dl.visualize_sharding(w[2]) end,
         class = "TypeError", message = VIS_X .. w[3]}
  end
end
add {name = "visualize_sharding({shape={2}, sharding='S'}) (a look-alike)",
     fn = function() return dl.visualize_sharding({shape = {2}, sharding = "S"}, {print = false}) end,
     class = "TypeError", message = VIS_X .. "table"}
add {name = "visualize_sharding({shape={2}, sharding={}}) (a look-alike)",
     fn = function() return dl.visualize_sharding({shape = {2}, sharding = {}}, {print = false}) end,
     class = "TypeError", message = VIS_X .. "table"}
for _, w in ipairs(wrong_values()) do
  if w[2] ~= nil and w[3] ~= "table" then
    add {name = "visualize_sharding(x, " .. w[1] .. ")",
         fn = function() return dl.visualize_sharding(F.xs, w[2]) end, class = "TypeError",
         message = "visualize_sharding: argument 2 (opts) must be a table, got " .. w[3]}
  end
end
add {name = "visualize_sharding(x, {bogus=1})",
     fn = function() return dl.visualize_sharding(F.xs, {print = false, bogus = 1}) end, class = "TypeError",
     message = {contains = {"visualize_sharding", "bogus"}}}
add {name = "visualize_sharding(a 0-d array)", fn = function() return dl.visualize_sharding(F.x0, {print = false}) end,
     class = "ValueError", message = "`visualize_sharding` only works for shapes with 1 and 2 dimensions."}
add {name = "visualize_sharding(a 3-d array)", fn = function() return dl.visualize_sharding(F.x3, {print = false}) end,
     class = "ValueError", message = "`visualize_sharding` only works for shapes with 1 and 2 dimensions."}
add {name = "visualize_sharding(x, {print=false}, extra)",
     fn = function() return dl.visualize_sharding(F.xs, {print = false}, 1) end, class = "TypeError",
     message = too_many("visualize_sharding", 2, 3)}

-- ---------------------------------------------------------------------------
-- Error classes with garbage
-- ---------------------------------------------------------------------------

for _, w in ipairs(wrong_values()) do
  add {name = "ValueError:is_instance(" .. w[1] .. ")", fn = function() return dl.ValueError:is_instance(w[2]) end,
       returns = false}
end
add {name = "ValueError:is_instance({name='ValueError', message='m'}) (a look-alike)",
     fn = function() return dl.ValueError:is_instance({name = "ValueError", message = "m"}) end,
     returns = false}
add {name = "Error:is_instance(a TypeError)", fn = function() return dl.Error:is_instance(dl.TypeError("m")) end,
     returns = true}

-- ---------------------------------------------------------------------------
-- In a child process: calls that could take the interpreter down
-- ---------------------------------------------------------------------------

local CHILD_PRELUDE = [[
local dl = require "dlrun"
local devs = dl.devices()
local d0, d1 = devs[1], devs[2]
local M = dl.Mesh({d0, d1}, {"x"})
local S1 = dl.SingleDeviceSharding(d0)
local S2 = dl.NamedSharding(M, dl.P("x"))
local x = dl.arange(4, "float32")
local cap = dl.to_dlpack(x)
local function catalogue_case()
%s
end
local ok, err = pcall(catalogue_case)
local name, message
if ok then name, message = "OK", tostring(err)
elseif type(err) == "table" and getmetatable(err) and err.name and err.message then
  name, message = err.name, err.message
else name, message = "RAW", type(err) .. ": " .. tostring(err) end
io.stdout:write("CATALOGUE-RESULT ", name, "\n", message, "\nCATALOGUE-END\n")
io.stdout:flush()
collectgarbage("collect")
io.stdout:write("CATALOGUE-EXIT\n")
]]

add {name = "Capsule __tostring on io.stdout", child = [[
  return getmetatable(cap).__tostring(io.stdout)]],
     class = "TypeError", message = "tostring: argument 1 (capsule) must be a Capsule, got FILE*"}
add {name = "Capsule __tostring on a string", child = [[
  return getmetatable(cap).__tostring("cap")]],
     class = "TypeError", message = "tostring: argument 1 (capsule) must be a Capsule, got string"}
add {name = "Capsule __gc on io.stdout (a no-op)", child = [[
  getmetatable(cap).__gc(io.stdout)
  io.stdout:write("")]], ok = true}
add {name = "Capsule __gc on a string (a no-op)", child = [[
  getmetatable(cap).__gc("cap")]], ok = true}
add {name = "Mesh __gc on io.stdout (a no-op; io.stdout still works)", child = [[
  getmetatable(M).__gc(io.stdout)
  io.stdout:write("")]], ok = true}
add {name = "Mesh __gc on a string (a no-op)", child = [[
  getmetatable(M).__gc("m")]], ok = true}
add {name = "Sharding __gc on io.stdout (a no-op; io.stdout still works)", child = [[
  getmetatable(S1).__gc(io.stdout)
  io.stdout:write("")]], ok = true}
add {name = "Sharding __gc on a number (a no-op)", child = [[
  getmetatable(S1).__gc(5)]], ok = true}
add {name = "Mesh __gc then use names the released Mesh", child = [[
  local m = dl.Mesh({d0}, {"x"})
  getmetatable(m).__gc(m)
  return tostring(m)]],
     class = "RuntimeError", message = {contains = {"Mesh", "released"}}}
add {name = "make_mesh({2^62}, {'x'}, a list claiming 2^62 devices)", child = [[
  local t = setmetatable({}, {__len = function() return 1 << 62 end, __index = function() return d0 end})
  return dl.make_mesh({1 << 62}, {"x"}, t)]],
     class = "ValueError", message = {contains = {"make_mesh", "devices"}}}
add {name = "make_mesh({0}, {'x'}, a list claiming -5 devices)", child = [[
  local t = setmetatable({}, {__len = function() return -5 end})
  return dl.make_mesh({0}, {"x"}, t)]],
     class = "ValueError", message = {contains = {"make_mesh", "devices"}}}
add {name = "Mesh(a table claiming 2^40 devices, {'x'})", child = [[
  local t = setmetatable({}, {__len = function() return 1 << 40 end,
                              __index = function(_, k) if type(k) == "number" then return d0 end end})
  return dl.Mesh(t, {"x"})]],
     class = "ValueError", message = {contains = {"Mesh", "devices"}}}
add {name = "array(a table claiming 2^40 elements, 'float32')", child = [[
  local t = setmetatable({}, {__len = function() return 1 << 40 end,
                              __index = function(_, k) if type(k) == "number" then return 0 end end})
  return dl.array(t, "float32")]],
     class = "ResourceExhaustedError", message = {contains = {"array", "4398046511104 bytes"}}}
add {name = "array(a table claiming 2^40 elements) (dtype inferred)", child = [[
  local t = setmetatable({}, {__len = function() return 1 << 40 end,
                              __index = function(_, k) if type(k) == "number" then return 0 end end})
  return dl.array(t)]],
     class = "ResourceExhaustedError", message = {contains = {"array", "bytes"}}}
add {name = "array(a table claiming -5 elements)", child = [[
  return dl.array(setmetatable({}, {__len = function() return -5 end}))]],
     class = "ValueError", message = {contains = {"array: ", "-5"}}}
add {name = "zeros(a table whose length is not an integer)", child = [[
  return dl.zeros(setmetatable({}, {__len = function() return "x" end}))]],
     class = "TypeError", message = {contains = {"zeros: ", "shape"}}}

-- ---------------------------------------------------------------------------
-- Running the catalogue
-- ---------------------------------------------------------------------------

local function describe_outcome(ok, value)
  if ok and type(value) == "string" then return ("returned %q"):format(value:sub(1, 60)) end
  if ok then return "returned " .. tostring(value) end
  if dl.Error:is_instance(value) then return ("raised %s: %s"):format(value.name, value.message) end
  return ("raised a raw %s: %s"):format(type(value), tostring(value))
end

local function check_message(got, want)
  if type(want) == "string" then
    assert(got == want, ("message %q\n  expected %q"):format(got, want))
  elseif want.pattern then
    assert(got:match(want.pattern), ("message %q\n  does not match %q"):format(got, want.pattern))
  elseif want.contains then
    local parts = type(want.contains) == "table" and want.contains or {want.contains}
    for _, part in ipairs(parts) do
      assert(got:find(part, 1, true), ("message %q\n  does not contain %q"):format(got, part))
    end
  end
end

-- Children get CHILD_SECONDS to report (a call that loops for ever fails its case).
local CHILD_SECONDS = 5
local TIMEOUT = os.execute("command -v timeout >/dev/null 2>&1")
                and ("timeout -k 2 %d "):format(CHILD_SECONDS) or ""

-- The outcome of a child case: ok, value (a table {name=, message=} standing for an error).
local function run_child(code)
  local script = os.tmpname()
  local f = assert(io.open(script, "w"))
  f:write((CHILD_PRELUDE:gsub("%%s", function() return code end)))
  f:close()
  local outfile, errfile = os.tmpname(), os.tmpname()
  local line = ("DLRUN_DEVICES=sim:2,cpu:1 DLRUN_DEVICE_MEMORY=64MiB %s%s %s >%s 2>%s")
               :format(TIMEOUT, helpers.shell_quote(helpers.exe), helpers.shell_quote(script),
                       outfile, errfile)
  local _, _, status = os.execute(line)
  local function slurp(path)
    local h = assert(io.open(path, "rb"))
    local text = h:read("a")
    h:close()
    os.remove(path)
    return text
  end
  local out, err = slurp(outfile), slurp(errfile)
  os.remove(script)
  local name, message = out:match("CATALOGUE%-RESULT ([^\n]*)\n(.-)\nCATALOGUE%-END\n")
  if not name then
    local why = status == 124 and ("did not finish within %d s"):format(CHILD_SECONDS)
                or ("died (exit status %s)"):format(tostring(status))
    return false, {crash = ("the child %s before reporting; stderr: %s"):format(why, err:sub(1, 400))}
  end
  if not out:find("CATALOGUE-EXIT", 1, true) then
    return false, {crash = ("the child reported %s: %s, then died (exit status %s) collecting "
                            .. "garbage; stderr: %s"):format(name, message, tostring(status),
                                                             err:sub(1, 400))}
  end
  if name == "OK" then return true, message end
  return false, {name = name, message = message}
end

local function check(c)
  local ok, value, got
  if c.child then
    ok, value = run_child(c.child)
    assert(ok or not value.crash, not ok and value.crash)
    if ok then got = "returned " .. value
    elseif value.name == "RAW" then got = "raised a raw error: " .. value.message
    else got = ("raised %s: %s"):format(value.name, value.message) end
    if not ok and value.name == "RAW" then value = value.message end
  else
    ok, value = pcall(c.fn)
    got = describe_outcome(ok, value)
  end
  if c.ok then
    assert(ok, "expected success, but the call " .. got)
  elseif c.returns ~= nil then
    assert(ok and rawequal(value, c.returns),
           ("expected it to return %s, but the call %s"):format(tostring(c.returns), got))
  elseif c.returns_type then
    assert(ok and type(value) == c.returns_type,
           ("expected it to return a %s, but the call %s"):format(c.returns_type, got))
  elseif c.class == nil then -- passthrough (possibly of nil)
    assert(not ok and rawequal(value, c.passthrough),
           ("expected the producer's own error %s to come back unchanged, but the call %s")
           :format(tostring(c.passthrough), got))
  else
    assert(not ok, ("expected %s, but the call %s"):format(c.class, got))
    assert(type(value) == "table" and value.name and value.message,
           ("expected a dlrun %s value, but the call %s"):format(c.class, got))
    assert(value.name == c.class, ("expected %s, but the call %s"):format(c.class, got))
    check_message(value.message, c.message)
  end
end

describe("bad input catalogue", function()
  for _, c in ipairs(cases) do
    it(c.name, function() check(c) end)
  end

  it("leaks no device memory and no exports", function()
    -- Closures of the cases still reach the fixtures: delete their arrays
    -- (frees their device memory now); everything the cases made is garbage.
    for _, v in pairs(F) do
      if getmetatable(v) == getmetatable(dl.zeros(0)) then v:delete() end
    end
    cases = nil
    F = nil
    settle()
    assert.are.same(MEMORY_BEFORE, memory_snapshot())
    assert.are.equal(EXPORTS_BEFORE, dl.live_exports())
  end)
end)
