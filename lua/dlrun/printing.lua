-- How dlrun's table results print: metatables holding __tostring only, so
-- that the tables index, count (#), iterate (ipairs, pairs) and unpack as
-- before, and messages still call them tables; a Shard's adds __name
-- ("Shard", as messages call it) and an __index that refuses unknown
-- fields. Forms follow what JAX and Python print for the same values:
--   tuple        x.shape, shard_shape(), axis_names   (16, 4)  (8,)  ()  ('x', 'y')
--   slice        one {first, last} entry of an index  slice(0, 2, None)
--   whole_slice  an entry covering its whole dimension slice(None, None, None)
--   list         dl.devices(), addressable_shards      [SimDevice(id=0), SimDevice(id=1)]
--   set          device_set, x:devices()              {SimDevice(id=0), SimDevice(id=1)}
--   index_map    devices_indices_map(shape)           {SimDevice(id=0): (slice(0, 2, None),), ...}
--   shard        an element of addressable_shards     Shard(device=..., index=..., replica_id=0, data=[0. 1.])
--   mesh_devices mesh.devices, as NumPy prints an object array
--   record       stats tables, sorted by key          {bytes_in_use=0, num_allocs=1}
-- ordered(t, keys) gives mesh.shape its OrderedDict form in axis order.
local errors = require "dlrun.errors"
local format = require "dlrun.format"

local M = {}

-- Marks these metatables for dlrun's own checks (lua_rawget on the
-- metatable, never seen by pairs): tables carrying one are still plain
-- tables to trees, PartitionSpec entries and options.
local MARK = "__dlrun_printed"

local function new(tostring_fn)
  return {__tostring = tostring_fn, [MARK] = true}
end

-- Python's repr of a string: single quotes unless it holds one and no
-- double quote; backslashes, the quote and control bytes escaped.
local function string_repr(s)
  local q = (s:find("'", 1, true) and not s:find('"', 1, true)) and '"' or "'"
  local escapes = {["\\"] = "\\\\", ["\n"] = "\\n", ["\r"] = "\\r", ["\t"] = "\\t", [q] = "\\" .. q}
  return q .. s:gsub("[%c\\'\"]", function(c)
    return escapes[c] or (c == "'" or c == '"') and c or ("\\x%02x"):format(c:byte())
  end) .. q
end

-- A value inside a Python container: repr for strings, numbers, booleans
-- and nil; tostring for the rest (Devices, Arrays, printed tables).
local function repr(v)
  local t = type(v)
  if t == "string" then return string_repr(v) end
  if t == "nil" then return "None" end
  if t == "boolean" then return v and "True" or "False" end
  if math.type(v) == "float" then return errors.describe(v) end
  return tostring(v)
end
M.repr = repr

local function items(t, from, to, show)
  local parts = {}
  for i = from, to do parts[#parts + 1] = (show or repr)(t[i]) end
  return parts
end

M.tuple = new(function(t)
  local n = #t
  if n == 1 then return "(" .. repr(t[1]) .. ",)" end
  return "(" .. table.concat(items(t, 1, n), ", ") .. ")"
end)

-- A {first, last} pair (1-based, inclusive) is Python's slice(first - 1, last).
M.slice = new(function(t)
  return ("slice(%s, %s, None)"):format(repr(t[1] and t[1] - 1), repr(t[2]))
end)
M.whole_slice = new(function() return "slice(None, None, None)" end)

M.list = new(function(t) return "[" .. table.concat(items(t, 1, #t), ", ") .. "]" end)

M.set = new(function(t)
  if #t == 0 then return "set()" end
  return "{" .. table.concat(items(t, 1, #t), ", ") .. "}"
end)

-- The keys of t in dlrun's order for them: Devices by platform then id,
-- other keys by their text.
local function sorted_keys(t)
  local keys = {}
  for k in pairs(t) do keys[#keys + 1] = k end
  table.sort(keys, function(a, b)
    local ta, tb = type(a), type(b)
    if ta == "userdata" and tb == "userdata" then
      local ok, less = pcall(function() return a < b end)
      if ok then return less end
    end
    if ta ~= tb then return ta < tb end
    if ta == "number" then return a < b end
    return tostring(a) < tostring(b)
  end)
  return keys
end

M.index_map = new(function(t)
  local parts = {}
  for _, k in ipairs(sorted_keys(t)) do parts[#parts + 1] = repr(k) .. ": " .. repr(t[k]) end
  return "{" .. table.concat(parts, ", ") .. "}"
end)

-- mesh.shape: OrderedDict({'x': 4, 'y': 2}), keys in the order given.
function M.ordered(t, keys)
  return setmetatable(t, new(function(d)
    local parts = {}
    for _, k in ipairs(keys) do parts[#parts + 1] = repr(k) .. ": " .. repr(d[k]) end
    return "OrderedDict({" .. table.concat(parts, ", ") .. "})"
  end))
end

-- A Lua table as its constructor would read (for stats): keys sorted,
-- `name=value` for identifier keys, tables inside shown the same way
-- unless they print themselves.
local function record(t, seen)
  if seen[t] then return "{...}" end
  seen[t] = true
  local parts, n = {}, #t
  local function show(v)
    if type(v) == "string" then return ("%q"):format(v) end
    if math.type(v) == "float" then return errors.describe(v) end
    if type(v) == "table" then
      local mt = getmetatable(v)
      if not (type(mt) == "table" and rawget(mt, "__tostring")) then return record(v, seen) end
    end
    return tostring(v)
  end
  for i = 1, n do parts[#parts + 1] = show(t[i]) end
  for _, k in ipairs(sorted_keys(t)) do
    if not (math.type(k) == "integer" and k >= 1 and k <= n) then
      local key = type(k) == "string" and k:match("^[%a_][%w_]*$") and k or "[" .. show(k) .. "]"
      parts[#parts + 1] = key .. "=" .. show(t[k])
    end
  end
  seen[t] = nil
  return "{" .. table.concat(parts, ", ") .. "}"
end
M.record = new(function(t) return record(t, {}) end)

-- mesh.devices (every level): NumPy's repr of an object array of devices,
-- array([[SimDevice(id=0), SimDevice(id=1)],
--        [SimDevice(id=2), SimDevice(id=3)]], dtype=object)
M.mesh_devices = new(function(t)
  local shape, level = {}, t
  while type(level) == "table" do
    shape[#shape + 1] = #level
    level = level[1]
  end
  local flat = {}
  local function walk(v, depth)
    if depth > #shape then flat[#flat + 1] = tostring(v) return end
    for i = 1, shape[depth] do walk(type(v) == "table" and v[i] or nil, depth + 1) end
  end
  walk(t, 1)
  return format.object_repr(shape, flat)
end)

-- A Shard prints as JAX's: its data as str() shows an array (NumPy's
-- str), None for another process's shard.
local SHARD_FIELDS = {"data", "device", "index", "replica_id"}
local SHARD_KNOWN = {data = true, device = true, index = true, replica_id = true}
M.shard = new(function(s)
  local data = rawget(s, "data")
  local ok, deleted = pcall(function() return data:is_deleted() end)
  local text = data == nil and "None" or (ok and not deleted) and format.str(data) or tostring(data)
  return ("Shard(device=%s, index=%s, replica_id=%s, data=%s)")
    :format(repr(rawget(s, "device")), repr(rawget(s, "index")), repr(rawget(s, "replica_id")), text)
end)
M.shard.__name = "Shard"
M.shard.__index = function(s, key)
  if type(key) ~= "string" or SHARD_KNOWN[key] then return nil end
  error(errors.attribute_error("Shard", key, SHARD_FIELDS), 2)
end

return M
