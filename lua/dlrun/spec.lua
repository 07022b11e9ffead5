-- PartitionSpec, `dl.P(...)`: one entry per leading array dimension, each nil
-- (not split), an axis name, or a list of axis names (split over their
-- product, first name most significant). Entries are canonicalised as JAX
-- does: an empty list is nil, a one-name list is that name.
local errors = require "dlrun.errors"
local printing = require "dlrun.printing"

local PartitionSpec = {__name = "PartitionSpec"}
-- Entries past n read as nil; a field a PartitionSpec lacks is an AttributeError.
PartitionSpec.__index = function(_, key)
  if type(key) ~= "string" then return nil end
  error(errors.attribute_error("PartitionSpec", key, {"n"}), 2)
end

local function describe(value)
  if type(value) == "table" then
    local parts = {}
    for i = 1, #value do parts[i] = describe(value[i]) end
    return "{" .. table.concat(parts, ", ") .. "}"
  end
  return type(value) == "string" and ("'" .. value .. "'") or tostring(value)
end

local function canonical(entry, position)
  if entry == nil or entry == false then return nil end
  if type(entry) == "string" then
    if entry == "" then return nil end
    return entry
  end
  -- a list that only prints differently (mesh.axis_names) is a plain list
  local mt = getmetatable(entry)
  if type(entry) ~= "table" or (mt and not (type(mt) == "table" and rawget(mt, "__dlrun_printed"))) then
    errors.raise("TypeError",
                 "P: entry %d must be nil, an axis name or a list of axis names, got %s",
                 position, errors.typename(entry))
  end
  local names = {}
  for i = 1, #entry do
    local name = entry[i]
    if type(name) == "table" then
      errors.raise("ValueError",
                   "A tuple inside PartitionSpec cannot contain a nested tuple. Got partition: %s and the nested tuple: %s",
                   describe(entry), describe(name))
    elseif type(name) ~= "string" then
      errors.raise("TypeError", "P: entry %d lists a %s where an axis name was expected",
                   position, errors.typename(name))
    end
    names[i] = name
  end
  if #names == 0 then return nil end
  if #names == 1 then return names[1] end
  return setmetatable(names, printing.tuple) -- prints as ('x', 'y'), as in JAX
end

local function P(...)
  local n = select("#", ...)
  local spec = {n = n}
  for i = 1, n do spec[i] = canonical((select(i, ...)), i) end
  return setmetatable(spec, PartitionSpec)
end

PartitionSpec.__len = function(spec) return spec.n end

PartitionSpec.__eq = function(a, b)
  if a.n ~= b.n then return false end
  for i = 1, a.n do
    local x, y = a[i], b[i]
    if type(x) == "table" and type(y) == "table" then
      if #x ~= #y then return false end
      for k = 1, #x do if x[k] ~= y[k] then return false end end
    elseif x ~= y then
      return false
    end
  end
  return true
end

local function is_spec(value) return getmetatable(value) == PartitionSpec end

return {P = P, PartitionSpec = PartitionSpec, is_spec = is_spec}
