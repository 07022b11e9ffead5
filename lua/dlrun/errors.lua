-- dlrun's error values. Every error dlrun raises is a table with `name` and
-- `message`; tostring(err) is "Name: message"; Class:is_instance(err) follows
-- the hierarchy below (IndivisibleError is a ValueError, and so on).
local M = {}

local Instance = {}
Instance.__index = Instance
Instance.__tostring = function(e) return e.name .. ": " .. e.message end

local Class = {}
Class.__index = Class
Class.__tostring = function(c) return "<dlrun error class " .. c.name .. ">" end
-- Class("message") makes an error value (to raise with error()).
Class.__call = function(c, message) return M.new(c, message) end

function Class:is_instance(value)
  if type(value) ~= "table" or getmetatable(value) ~= Instance then return false end
  local c = value.class
  while c do
    if c == self then return true end
    c = c.parent
  end
  return false
end

local function define(name, parent)
  local c = setmetatable({name = name, parent = parent}, Class)
  M[name] = c
  return c
end

local Error = define("Error")
define("BufferError", Error)
local ValueError = define("ValueError", Error)
define("IndivisibleError", ValueError)
define("DuplicateSpecError", ValueError)
define("TypeError", Error)
define("RuntimeError", Error)
define("ResourceExhaustedError", Error)
define("AssertionError", Error)
define("AttributeError", Error)

function M.new(class, message)
  if type(class) == "string" then class = assert(M[class], class) end
  return setmetatable({name = class.name, message = tostring(message), class = class}, Instance)
end

-- Raise `class` with a formatted message, blaming the caller of the caller.
function M.raise(class, fmt, ...)
  error(M.new(class, select("#", ...) > 0 and fmt:format(...) or fmt), 3)
end

-- The AttributeError for reading `key` that an object of type `typename`
-- does not have, as Python words it (3.10 and later), suggesting the
-- closest of `names` (lua/dlrun/suggest.lua): "'Array' object has no
-- attribute 'shpae'. Did you mean: 'shape'?".
function M.attribute_error(typename, key, names)
  -- A NUL shows as \0: a message is C text, which a NUL would cut short.
  local message = ("'%s' object has no attribute '%s'"):format(typename, (key:gsub("%z", "\\0")))
  local near = require("dlrun.suggest")(key, names)
  if near then message = message .. (". Did you mean: '%s'?"):format(near) end
  return M.new("AttributeError", message)
end

-- Whether reading v[key] raised the AttributeError above: a protected read
-- for code that probes optional fields (Python's hasattr). Returns the
-- value, or nil when v has no such field; other errors pass on.
function M.probe(v, key)
  local ok, value = pcall(function() return v[key] end)
  if ok then return value end
  if M.AttributeError:is_instance(value) then return nil end
  error(value, 0)
end

function M.is_error(value)
  return type(value) == "table" and getmetatable(value) == Instance
end

-- The type of v as messages name it: its metatable's __name when that is a
-- string ("FILE*", "Device", "PartitionSpec"), else type(v). As the C side.
function M.typename(v)
  local mt = getmetatable(v)
  local name = type(mt) == "table" and rawget(mt, "__name")
  return type(name) == "string" and name or type(v)
end

-- How messages show a value that should have been a number: a number as
-- itself ("-1", "1.5", "inf"), a string quoted after its type (string "0", escaped,
-- cut after 40 bytes with ...), a boolean after its type (boolean true), any
-- other value by typename. As the C side (dlrun_lua_describe).
local QUOTE_MAX = 40
local ESCAPES = {["\n"] = "\\n", ["\t"] = "\\t", ["\r"] = "\\r", ['"'] = '\\"', ["\\"] = "\\\\"}

-- A float in the fewest digits that read back as it (as Python's repr), so
-- 2^64 shows as 1.8446744073709552e+19, not tostring's 1.844674407371e+19.
local function float_text(x)
  local s
  for digits = 14, 17 do
    s = ("%." .. digits .. "g"):format(x)
    if tonumber(s) == x then break end
  end
  return s:find("^-?%d+$") and s .. ".0" or s
end

function M.describe(v)
  local t = type(v)
  if math.type(v) == "float" then return float_text(v) end
  if t == "number" then return tostring(v) end
  if t == "boolean" then return "boolean " .. tostring(v) end
  if t ~= "string" then return M.typename(v) end
  local s = v:sub(1, QUOTE_MAX):gsub('[%c"\\]', function(c)
    return ESCAPES[c] or ("\\%03d"):format(c:byte())
  end)
  return ('string "%s"%s'):format(s, #v > QUOTE_MAX and "..." or "")
end

-- TypeError "<fn>: expected at most <max> arguments, got <n>" (the C
-- functions' text) when more than max values follow: check_nargs(fn, max, ...).
function M.check_nargs(fn, max, ...)
  local n = select("#", ...)
  if n > max then
    error(M.new("TypeError", ("%s: expected at most %d argument%s, got %d")
      :format(fn, max, max == 1 and "" or "s", n)), 3)
  end
end

return M
