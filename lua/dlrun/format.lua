--[[
dlrun.format -- text rendering of arrays (JAX-style repr, NumPy layout rules).

  format.repr(a)                    -> "Array([1., 2.], dtype=float32)"
  format.shape_string(dtype, shape) -> "float32[4,2]"   ("float32[]" for 0-d)
  format.deleted_repr(a)            -> "Array(<deleted>, shape=float32[3])"

`a` provides a.shape (list of non-negative integers), a.dtype, a.size and
a:_elements(first, count) -> list of `count` values, flat row-major order,
`first` 1-based. Only the elements that are printed are fetched, in as few
calls as contiguous runs allow.

Rules (NumPy's arrayprint defaults: linewidth 75, threshold 1000,
edgeitems 3, precision 8; JAX's "Array(" prefix and ", dtype=...)" suffix):

  Layout
  * Elements are separated by ", ". Rows of an n-d array go on separate
    lines, each indented to sit under the first "[" after "Array(". Between
    sub-blocks at depth d (1-based) there are ndim - d - 1 blank lines (one
    blank line between the 2-d blocks of a 3-d array, and so on).
  * A row is wrapped when the next element would pass column 75, counting
    one column for each closing "]" still to come and one for the "," that
    follows the array; continuation lines are indented to the row's first
    element. A row is never wrapped before its first element.
  * If "dtype=...)" would push the last line past 75 columns it goes on a
    new line, indented by the width of "Array(".
  * size > 1000: every axis longer than 6 shows its first 3 and last 3
    entries with "..." between them (a "...," line between elided rows or
    blocks). Widths and number formats are computed from the shown
    elements only.
  * 0-d: "Array(3., dtype=float32)". Zero-size: "Array([], dtype=...)"
    for shape (0,), "Array([], shape=(2, 0), dtype=...)" otherwise.

  Elements (all elements of one array are right-aligned to a common width)
  * bool: "True"/"False"; in arrays of ndim >= 1 True is padded to " True"
    (NumPy always does this so that columns line up).
  * integers: decimal; uint64 values above 2^63-1 arrive as floats and are
    printed as whole numbers (2^64, the float uint64's maximum rounds to,
    prints as 18446744073709551615).
  * floats: every value is first rounded to its dtype (float16, bfloat16,
    float32, float64). Scientific notation is used for the whole array if
    its largest finite |x| >= 1e8 or its smallest non-zero finite |x| < 1e-4;
    otherwise positional. (NumPy also switches when max/min > 1000; dlrun
    does not, so e.g. [0.5, 2000.] stays positional.) Each value gets the
    fewest digits (at most 8 after the point, in the mantissa for
    scientific) that read back to the same value of its dtype (e.g. float16
    0.1 prints "0.1", float32 pi prints "3.1415927"); values needing more
    than 8 are rounded to 8 and trailing zeros dropped. Then all values are
    padded with zeros to the largest digit count (like NumPy's
    floatmode="maxprec_equal", but padding with zeros rather than further
    exact digits), so "1.", "2.5" become "1.0", "2.5", and integral arrays
    print as "1.", "-2.". Exponents have at least two digits, padded to a common
    count: "1.e+20", "1.5e-05", "1.0e-05". Non-finite values print as
    "nan", "inf", "-inf".
  * complex: real and imaginary parts are formatted as two float columns
    (the imaginary column always signed), joined as "1.+2.j", "0.-1.j",
    "nan+infj".
]]

local M = {}

local LINEWIDTH = 75
local THRESHOLD = 1000
local EDGEITEMS = 3
local PRECISION = 8
local PREFIX = "Array("

local fmt, rep, concat = string.format, string.rep, table.concat
local huge = math.huge

---------------------------------------------------------------------------
-- dtype rounding
---------------------------------------------------------------------------

-- Binary floating formats narrower than float64: p = significand bits
-- (including the implicit one), emin = exponent of the smallest normal.
local NARROW = {
  float16 = { p = 11, emin = -14, max = (2 - 2.0 ^ -10) * 2.0 ^ 15 },
  bfloat16 = { p = 8, emin = -126, max = (2 - 2.0 ^ -7) * 2.0 ^ 127 },
  float32 = { p = 24, emin = -126, max = (2 - 2.0 ^ -23) * 2.0 ^ 127 },
}

local function identity(x) return x end

-- Returns a function rounding a Lua number to the nearest value of the
-- given format (ties to even), overflowing to +-inf.
local function make_rounder(spec)
  if not spec then return identity end
  local p, emin, maxv = spec.p, spec.emin, spec.max
  return function(x)
    x = x * 1.0 -- (x + 0.0 would turn -0.0 into 0.0)
    if x ~= x or x == 0 or x == huge or x == -huge then return x end
    local ax = math.abs(x)
    local e = math.floor(math.log(ax, 2))
    if 2.0 ^ e > ax then e = e - 1 elseif 2.0 ^ (e + 1) <= ax then e = e + 1 end
    if e < emin then e = emin end
    local q = 2.0 ^ (e - p + 1)
    local m = ax / q
    local f = math.floor(m)
    local r = m - f
    if r > 0.5 or (r == 0.5 and f % 2 == 1) then f = f + 1 end
    local res = f * q
    if res > maxv then res = huge end
    if x < 0 then return -res end
    return res
  end
end

local FLOAT_DTYPES = {
  float16 = "float16", bfloat16 = "bfloat16", float32 = "float32", float64 = "float64",
}
local COMPLEX_PART = { complex64 = "float32", complex128 = "float64" }
local INT_DTYPES = {
  int8 = true, int16 = true, int32 = true, int64 = true,
  uint8 = true, uint16 = true, uint32 = true, uint64 = true,
}

---------------------------------------------------------------------------
-- element formatting
---------------------------------------------------------------------------

local function rjust(s, w)
  local n = #s
  if n >= w then return s end
  return rep(" ", w - n) .. s
end

-- Right-align a list of strings to their common width (in place).
local function align(strs, minw)
  local w = minw or 0
  for i = 1, #strs do if #strs[i] > w then w = #strs[i] end end
  for i = 1, #strs do strs[i] = rjust(strs[i], w) end
  return strs
end

local function trim_zeros(s)
  -- s looks like "-12.34000"; drop trailing zeros after the point.
  return (s:gsub("(%.%d-)0+$", "%1"))
end

local function reads_back(s, x, round)
  return round(tonumber(s) + 0.0) == x
end

-- Shortest positional form of x with at most PRECISION fraction digits.
-- Returns integer part (with sign) and fraction digits.
local function positional_parts(x, round)
  local s
  for k = 0, PRECISION do
    local t = fmt("%." .. k .. "f", x)
    if reads_back(t, x, round) then s = t break end
  end
  s = s or trim_zeros(fmt("%." .. PRECISION .. "f", x))
  local ip, fp = s:match("^(-?%d+)%.?(%d*)$")
  return ip, fp
end

-- Shortest scientific form of x with at most PRECISION mantissa fraction
-- digits. Returns mantissa integer digit (with sign), fraction digits,
-- exponent sign and exponent digits.
local function scientific_parts(x, round)
  local s
  for k = 0, PRECISION do
    local t = fmt("%." .. k .. "e", x)
    if reads_back(t, x, round) then s = t break end
  end
  if not s then
    s = fmt("%." .. PRECISION .. "e", x)
    local m, e = s:match("^(.-)(e.*)$")
    s = trim_zeros(m) .. e
  end
  local ip, fp, es, ed = s:match("^(-?%d)%.?(%d*)e([-+])(%d+)$")
  ed = ed:gsub("^0+(%d%d)", "%1")
  return ip, fp, es, ed
end

-- Format a column of float values (already plain Lua numbers) of the given
-- float dtype. `signed` forces a "+" on non-negative values (imaginary
-- parts). Returns a list of strings, right-aligned to a common width.
local function format_floats(values, fdtype, signed)
  local round = make_rounder(NARROW[fdtype])
  local xs = {}
  local maxabs, minnz = nil, nil
  for i = 1, #values do
    local x = round(values[i])
    xs[i] = x
    if x == x and x ~= huge and x ~= -huge then
      local ax = math.abs(x)
      if not maxabs or ax > maxabs then maxabs = ax end
      if ax ~= 0 and (not minnz or ax < minnz) then minnz = ax end
    end
  end
  local sci = maxabs ~= nil and (maxabs >= 1e8 or (minnz ~= nil and minnz < 1e-4))

  local parts, fdigits, edigits = {}, 0, 2
  for i = 1, #xs do
    local x = xs[i]
    if x == x and x ~= huge and x ~= -huge then
      local p
      if sci then
        local ip, fp, es, ed = scientific_parts(x, round)
        p = { ip, fp, es, ed }
        if #ed > edigits then edigits = #ed end
      else
        local ip, fp = positional_parts(x, round)
        p = { ip, fp }
      end
      if #p[2] > fdigits then fdigits = #p[2] end
      parts[i] = p
    end
  end

  local out = {}
  for i = 1, #xs do
    local x, p, s = xs[i], parts[i], nil
    if p then
      s = p[1] .. "." .. p[2] .. rep("0", fdigits - #p[2])
      if sci then
        s = s .. "e" .. p[3] .. rep("0", edigits - #p[4]) .. p[4]
      end
      if signed and s:sub(1, 1) ~= "-" then s = "+" .. s end
    elseif x ~= x then
      s = signed and "+nan" or "nan"
    elseif x > 0 then
      s = signed and "+inf" or "inf"
    else
      s = "-inf"
    end
    out[i] = s
  end
  return align(out)
end

local function format_ints(values)
  local out = {}
  for i = 1, #values do
    local v = values[i]
    if math.type(v) == "integer" then
      out[i] = tostring(v)
    elseif v ~= v then
      out[i] = "nan"
    elseif v == huge or v == -huge then
      out[i] = v > 0 and "inf" or "-inf"
    elseif v >= 18446744073709551615 then
      -- 2^64 is what uint64's maximum becomes as a float
      out[i] = "18446744073709551615"
    else
      out[i] = fmt("%.0f", v)
    end
  end
  return align(out)
end

local function format_bools(values, ndim)
  local out = {}
  for i = 1, #values do out[i] = values[i] and "True" or "False" end
  if ndim > 0 then return align(out, 5) end
  return out
end

local function format_complex(values, fdtype)
  local re, im = {}, {}
  for i = 1, #values do
    local v = values[i]
    if type(v) == "table" then
      re[i] = v[1] or v.re or 0.0
      im[i] = v[2] or v.im or 0.0
    else
      re[i], im[i] = v, 0.0
    end
  end
  re = format_floats(re, fdtype, false)
  im = format_floats(im, fdtype, true)
  local out = {}
  for i = 1, #values do out[i] = re[i] .. im[i] .. "j" end
  return out
end

local function format_generic(values)
  local out = {}
  for i = 1, #values do out[i] = tostring(values[i]) end
  return align(out)
end

-- Format a list of element values of `dtype`; returns strings of equal width.
local function format_values(values, dtype, ndim)
  if dtype == "bool" then return format_bools(values, ndim) end
  if INT_DTYPES[dtype] then return format_ints(values) end
  if FLOAT_DTYPES[dtype] then return format_floats(values, dtype, false) end
  if COMPLEX_PART[dtype] then return format_complex(values, COMPLEX_PART[dtype]) end
  return format_generic(values)
end

---------------------------------------------------------------------------
-- shapes
---------------------------------------------------------------------------

local function dims_of(shape)
  local d = {}
  for i = 1, #shape do d[i] = fmt("%d", shape[i]) end
  return d
end

-- Python tuple repr: (), (3,), (2, 0)
local function tuple_repr(shape)
  local d = dims_of(shape)
  if #d == 1 then return "(" .. d[1] .. ",)" end
  return "(" .. concat(d, ", ") .. ")"
end

function M.shape_string(dtype, shape)
  return tostring(dtype) .. "[" .. concat(dims_of(shape or {}), ",") .. "]"
end

function M.deleted_repr(a)
  return PREFIX .. "<deleted>, shape=" .. M.shape_string(a.dtype, a.shape) .. ")"
end

---------------------------------------------------------------------------
-- repr
---------------------------------------------------------------------------

-- Visible positions (0-based) along an axis of length n; `false` marks the
-- "..." gap.
local function visible_positions(n, summarise)
  local pos = {}
  if summarise and n > 2 * EDGEITEMS then
    for i = 0, EDGEITEMS - 1 do pos[#pos + 1] = i end
    pos[#pos + 1] = false
    for i = n - EDGEITEMS, n - 1 do pos[#pos + 1] = i end
  else
    for i = 0, n - 1 do pos[#pos + 1] = i end
  end
  return pos
end

-- Fetch the visible elements. Returns a map from 0-based flat offset to
-- value and the list of visible offsets in row-major order.
local function fetch_visible(a, shape, strides, vis)
  local ndim = #shape
  -- contiguous runs {first0, count}, in row-major order, merged when adjacent
  local runs = {}
  local function add_run(first, count)
    local last = runs[#runs]
    if last and last[1] + last[2] == first then
      last[2] = last[2] + count
    else
      runs[#runs + 1] = { first, count }
    end
  end
  if ndim == 0 then
    add_run(0, 1)
  else
    local function walk(axis, base)
      local pos = vis[axis]
      if axis == ndim then
        local i = 1
        while i <= #pos do
          if pos[i] then
            local j = i
            while pos[j + 1] and pos[j + 1] == pos[j] + 1 do j = j + 1 end
            add_run(base + pos[i], j - i + 1)
            i = j + 1
          else
            i = i + 1
          end
        end
      else
        for _, p in ipairs(pos) do
          if p then walk(axis + 1, base + p * strides[axis]) end
        end
      end
    end
    walk(1, 0)
  end

  local vals, order = {}, {}
  for _, run in ipairs(runs) do
    local first, count = run[1], run[2]
    local got = a:_elements(first + 1, count)
    for k = 1, count do
      vals[first + k - 1] = got[k]
      order[#order + 1] = first + k - 1
    end
  end
  return vals, order
end

function M.repr(a)
  local shape, dtype = a.shape, tostring(a.dtype)
  local ndim = #shape
  local size = a.size
  if size == nil then
    size = 1
    for i = 1, ndim do size = size * shape[i] end
  end
  local dtype_str = "dtype=" .. dtype .. ")"

  if size == 0 then
    local body = ndim == 1 and "[]" or ("[], shape=" .. tuple_repr(shape))
    return PREFIX .. body .. ", " .. dtype_str
  end

  local summarise = size > THRESHOLD
  local strides, vis = {}, {}
  local stride = 1
  for axis = ndim, 1, -1 do
    strides[axis] = stride
    stride = stride * shape[axis]
    vis[axis] = visible_positions(shape[axis], summarise)
  end

  local vals, order = fetch_visible(a, shape, strides, vis)
  local list = {}
  for i, off in ipairs(order) do list[i] = vals[off] end
  local strs = {}
  for i, s in ipairs(format_values(list, dtype, ndim)) do strs[order[i]] = s end

  -- Nested layout. `hanging` is the indent of continuation lines at this
  -- depth, `width` the columns available (one less per "]" still to come).
  local function layout(axis, base, hanging, width)
    if axis > ndim then return strs[base] end
    local pos = vis[axis]
    local npos = #pos
    local inner_hanging = hanging .. " "
    local s
    if axis == ndim then
      local limit = width - 1 -- room for the following "," or "]"
      local lines, line = {}, hanging
      for i = 1, npos do
        local p = pos[i]
        local word = p and strs[base + p] or "..."
        if #line + #word > limit and #line > #hanging then
          lines[#lines + 1] = (line:gsub("%s+$", ""))
          line = hanging
        end
        line = line .. word
        if i < npos then line = line .. ", " end
      end
      lines[#lines + 1] = line
      s = concat(lines, "\n")
    else
      local sep = "," .. rep("\n", ndim - axis)
      local parts = {}
      for i = 1, npos do
        local p = pos[i]
        local item
        if p then
          item = layout(axis + 1, base + p * strides[axis], inner_hanging, width - 1)
        else
          item = "..."
        end
        parts[#parts + 1] = hanging .. item
        if i < npos then parts[#parts + 1] = sep end
      end
      s = concat(parts)
    end
    return "[" .. s:sub(#hanging + 1) .. "]"
  end

  -- the "," that follows the array body takes one column (as in NumPy's
  -- array_repr, which passes suffix="," to array2string)
  local body = layout(1, 0, rep(" ", #PREFIX + 1), LINEWIDTH - 1)
  local text = PREFIX .. body .. ","
  local last_nl = text:match(".*()\n")
  local last_len = last_nl and (#text - last_nl) or #text
  if last_len + 1 + #dtype_str > LINEWIDTH then
    return text .. "\n" .. rep(" ", #PREFIX) .. dtype_str
  end
  return text .. " " .. dtype_str
end

return M
