--[[
dlrun.format -- text rendering of arrays (JAX-style repr, NumPy layout rules).

  format.repr(a)                    -> "Array([1., 2.], dtype=float32)"
  format.shape_string(dtype, shape) -> "float32[4,2]"   ("float32[]" for 0-d)
  format.deleted_repr(a)            -> "Array(<deleted>, shape=float32[3])"
  format.global_repr(a)             -> "Array(shape=(8,), dtype=float32, sharding=...)"

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

  Elements (NumPy's formatters; all elements of one array line up)
  * bool: "True"/"False"; in arrays of ndim >= 1 True is padded to " True".
  * integers: decimal, right-aligned. uint64 values arrive as their raw
    bits in a Lua integer (negative from 2^63 up) and print unsigned.
  * floats (floatmode "maxprec"): every value is first rounded to its dtype
    (float16, bfloat16, float32, float64). Scientific notation is used for
    the whole array when, over its finite non-zero |x|, max >= 1e8, min <
    1e-4 or max/min > 1000 (the ratio rounded to the dtype); otherwise
    positional. Each value gets the shortest digits that read back to the
    same value of its dtype (Dragon4's unique mode: float16 0.1 prints
    "0.1", float32 pi "3.1415927"), with at most 8 digits after the point
    (or in the mantissa's fraction), the exact value rounded to 8 when more
    are needed. Positional values print their integer part in full (float16
    8192 is "8192.", not "8190."), are aligned on the point and padded on
    the right with spaces: "0.  ", "0.25". Scientific mantissas all get the
    largest fraction length, shorter ones extended with their own further
    digits (float32 0.3 as "3.0000001e-01"); exponents have at least two
    digits, padded to a common count. nan, inf and -inf are right-aligned
    to the full width. bfloat16, which NumPy lacks, follows the same rules
    at its own precision.
  * the float8 family (float8_e3m4 ... float8_e8m0fnu): as NumPy prints an
    ml_dtypes array, whose scalars are not NumPy floats: each element is its
    scalar's repr, C++'s `<<` of the value as a float ("%g": six significant
    digits, no trailing point: "1", "2.5", "448", "0.00195312",
    "1.70141e+38", "-0", "inf"; every NaN is "nan"), neither padded nor
    aligned, nor ever switched to scientific notation as a whole.
  * the sub-byte types (int4, uint4, int2, uint2, float4_e2m1fn,
    float6_e2m3fn, float6_e3m2fn): as NumPy prints ml_dtypes' arrays of
    them, each element its scalar's repr, neither padded nor aligned: the
    integers in decimal ("-8", "15"), the floats as the float8 family's
    ("0.5", "-0", "7.5", "28").
  * complex: real and imaginary parts are formatted as two float columns
    (the imaginary one always signed), joined as "1.+2.j", "0.-1.j",
    "nan+infj", the "j" placed before the imaginary column's padding.
]]

local errors = require "dlrun.errors"

local M = {}

local MAX_NDIM = 32 -- DLRUN_MAX_NDIM
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
local FLOAT8_DTYPES = {
  float8_e3m4 = true, float8_e4m3 = true, float8_e4m3b11fnuz = true, float8_e4m3fn = true,
  float8_e4m3fnuz = true, float8_e5m2 = true, float8_e5m2fnuz = true, float8_e8m0fnu = true,
}
-- Sub-byte types: ml_dtypes' scalars, printed one by one.
local SUBBYTE_INT_DTYPES = { int4 = true, uint4 = true, int2 = true, uint2 = true }
local SUBBYTE_FLOAT_DTYPES = { float4_e2m1fn = true, float6_e2m3fn = true, float6_e3m2fn = true }
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

-- The p-digit decimal nearest to x > 0: its digits and the decimal exponent
-- of the first one.
local function nearest_digits(x, p)
  local m, e = fmt("%." .. (p - 1) .. "e", x):match("^(%d[.]?%d*)e([-+]%d+)$")
  return (m:gsub("%.", "")), tonumber(e)
end

local function reads_back(digits, e, x, round)
  return round(tonumber(digits .. "e" .. (e - #digits + 1)) + 0.0) == x
end

local function is_power_of_two(x)
  local e = math.floor(math.log(x, 2))
  return 2.0 ^ e == x or 2.0 ^ (e + 1) == x or 2.0 ^ (e - 1) == x
end

-- Shortest decimal form of a finite x > 0 that reads back to x in its dtype
-- (`round`): the digits (no trailing zeros) and the decimal exponent of the
-- first one, as NumPy's Dragon4 finds them in unique mode. Whether the
-- nearest p-digit number reads back only gets truer as p grows, so p is
-- found by bisection.
local function shortest(x, round)
  local lo, hi = 1, 17
  while lo < hi do
    local mid = (lo + hi) // 2
    local d, e = nearest_digits(x, mid)
    if reads_back(d, e, x, round) then hi = mid else lo = mid + 1 end
  end
  local digits, e = nearest_digits(x, lo)
  if is_power_of_two(x) then
    -- Just above a power of two the values reading back to x reach half
    -- as far below x as above it: the next p-digit number up from the
    -- nearest may read back when the nearest does not.
    for p = 1, lo - 1 do
      local d, de = nearest_digits(x, p)
      local up = tostring(math.tointeger(tonumber(d)) + 1)
      if #up > p then up, de = up:sub(1, p), de + 1 end
      if reads_back(up, de, x, round) then return (up:gsub("0+$", "")), de end
    end
  end
  return digits, e
end

-- Split "d.ddde+XX" into integer digit, fraction digits, exponent.
local function split_sci(s)
  local ip, fp, ex = s:match("^(%d)%.?(%d*)e([-+]%d+)$")
  return ip, fp, tonumber(ex)
end

-- Positional parts of a finite x (NumPy's dragon4_positional, unique,
-- at most PRECISION fraction digits, trailing zeros trimmed): integer part
-- with sign and fraction digits.
local function positional_parts(x, round, plus)
  local sign = (x < 0 or (x == 0 and 1 / x < 0)) and "-" or (plus and "+" or "")
  local ax = math.abs(x)
  local ip, fp
  if ax == 0 then
    ip, fp = "0", ""
  else
    local d, e = shortest(ax, round)
    if #d - 1 - e > PRECISION then
      -- too many digits: round the exact value to PRECISION places
      ip, fp = fmt("%." .. PRECISION .. "f", ax):match("^(%d+)%.(%d*)$")
      fp = fp:gsub("0+$", "")
    elseif e >= #d - 1 then
      -- the integer part is always printed in full, exactly
      ip, fp = fmt("%.0f", ax), ""
    elseif e >= 0 then
      ip, fp = d:sub(1, e + 1), d:sub(e + 2)
    else
      ip, fp = "0", rep("0", -e - 1) .. d
    end
  end
  return sign .. ip, fp
end

-- Scientific parts of a finite x (dragon4_scientific, unique, at most
-- PRECISION fraction digits): mantissa integer digit with sign, fraction
-- digits, exponent.
local function scientific_parts(x, round, plus)
  local sign = (x < 0 or (x == 0 and 1 / x < 0)) and "-" or (plus and "+" or "")
  local ax = math.abs(x)
  if ax == 0 then return sign .. "0", "", 0 end
  local d, e = shortest(ax, round)
  if #d - 1 > PRECISION then
    local ip, fp, ex = split_sci(fmt("%." .. PRECISION .. "e", ax))
    return sign .. ip, (fp:gsub("0+$", "")), ex
  end
  return sign .. d:sub(1, 1), d:sub(2), e
end

local function is_finite(x) return x == x and x ~= huge and x ~= -huge end

-- Whether NumPy would print these dtype-rounded values in scientific
-- notation: judged on the finite non-zero magnitudes; the ratio is computed
-- in the dtype, as NumPy does (so it may round, or overflow to inf).
local function wants_scientific(xs, round)
  local maxv, minv
  for i = 1, #xs do
    local x = xs[i]
    if is_finite(x) and x ~= 0 then
      local ax = math.abs(x)
      if not maxv or ax > maxv then maxv = ax end
      if not minv or ax < minv then minv = ax end
    end
  end
  if not maxv then return false end
  return maxv >= 1e8 or minv < 1e-4 or round(maxv / minv) > 1000
end

-- Format a column of float values of the given float dtype as NumPy's
-- FloatingFormat does (floatmode "maxprec"). `plus` forces a sign on
-- non-negative values (imaginary parts). Returns equal-width strings.
local function format_floats(values, fdtype, plus)
  local round = make_rounder(NARROW[fdtype])
  local xs = {}
  for i = 1, #values do xs[i] = round(values[i] * 1.0) end
  local sci = wants_scientific(xs, round)

  -- first pass: each finite value's shortest parts, and the widths
  local parts, pad_left, pad_right, exp_size, nfinite = {}, 0, 0, 0, 0
  for i = 1, #xs do
    local x = xs[i]
    if is_finite(x) then
      nfinite = nfinite + 1
      local ip, fp, ex
      if sci then
        ip, fp, ex = scientific_parts(x, round, plus)
        local n = #fmt("%02d", math.abs(ex))
        if n > exp_size then exp_size = n end
      else
        ip, fp = positional_parts(x, round, plus)
      end
      parts[i] = { ip, fp, ex }
      if #ip > pad_left then pad_left = #ip end
      if #fp > pad_right then pad_right = #fp end
    end
  end

  -- In scientific notation every mantissa gets the same number of fraction
  -- digits: values with fewer are printed again, rounded from their exact
  -- value (NumPy's min_digits), e.g. float32 0.3 as 3.0000001e-01.
  local precision = pad_right
  if sci then pad_right = exp_size + 2 + precision end

  -- nan/inf are right-aligned to the full width, which they may widen
  local any_neg_inf = false
  for i = 1, #xs do if xs[i] == -huge then any_neg_inf = true end end
  if nfinite < #xs then
    local inflen = 3 + ((plus or any_neg_inf) and 1 or 0)
    pad_left = math.max(pad_left, 3 - (pad_right + 1), inflen - (pad_right + 1))
  end
  local width = pad_left + pad_right + 1

  local out = {}
  for i = 1, #xs do
    local x, p = xs[i], parts[i]
    local s
    if p and sci then
      local ip, fp, ex = p[1], p[2], p[3]
      if #fp < precision then
        local sign = ip:match("^[-+]?")
        ip, fp, ex = split_sci(fmt("%." .. precision .. "e", math.abs(x)))
        ip = sign .. ip
      end
      s = rjust(ip, pad_left) .. "." .. fp .. "e" .. (ex < 0 and "-" or "+")
        .. fmt("%0" .. exp_size .. "d", math.abs(ex))
    elseif p then
      s = rjust(p[1], pad_left) .. "." .. p[2] .. rep(" ", pad_right - #p[2])
    else
      if x ~= x then s = plus and "+nan" or "nan"
      elseif x > 0 then s = plus and "+inf" or "inf"
      else s = "-inf" end
      s = rjust(s, width)
    end
    out[i] = s
  end
  return out
end

-- uint64 values arrive as integers holding the raw 64 bits (negative ones
-- stand for 2^63 and above).
local function unsigned_string(v)
  if v >= 0 then return fmt("%d", v) end
  local q = (v >> 1) // 5 -- v as unsigned, divided by 10
  return fmt("%d%d", q, v - q * 10)
end

local function format_ints(values, dtype)
  local out = {}
  for i = 1, #values do
    local v = values[i]
    if math.type(v) ~= "integer" then
      out[i] = fmt("%.0f", v) -- a whole number handed over as a float
    elseif dtype == "uint64" then
      out[i] = unsigned_string(v)
    else
      out[i] = fmt("%d", v)
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
  for i = 1, #values do
    -- the "j" goes before the imaginary column's right padding
    local body, pad = im[i]:match("^(.-)( *)$")
    out[i] = re[i] .. body .. "j" .. pad
  end
  return out
end

-- ml_dtypes' scalar repr: the value as a float through C++'s default
-- stream format (%g), a NaN of either sign as "nan".
local function format_float8(values)
  local out = {}
  for i = 1, #values do
    local x = values[i] * 1.0
    out[i] = x ~= x and "nan" or fmt("%g", x)
  end
  return out
end

-- ml_dtypes' int4 ... uint2 scalars: their decimal repr, unpadded.
local function format_subbyte_ints(values)
  local out = {}
  for i = 1, #values do out[i] = fmt("%d", values[i]) end
  return out
end

local function format_generic(values)
  local out = {}
  for i = 1, #values do out[i] = tostring(values[i]) end
  return align(out)
end

-- Format a list of element values of `dtype`; returns strings of equal width
-- (the float8 family's: each its own width, as ml_dtypes prints them).
local function format_values(values, dtype, ndim)
  if dtype == "bool" then return format_bools(values, ndim) end
  if INT_DTYPES[dtype] then return format_ints(values, dtype) end
  if FLOAT_DTYPES[dtype] then return format_floats(values, dtype, false) end
  if COMPLEX_PART[dtype] then return format_complex(values, COMPLEX_PART[dtype]) end
  if FLOAT8_DTYPES[dtype] then return format_float8(values) end
  if SUBBYTE_FLOAT_DTYPES[dtype] then return format_float8(values) end
  if SUBBYTE_INT_DTYPES[dtype] then return format_subbyte_ints(values) end
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

-- An array whose values this process does not hold (it spans processes):
-- JAX's text without values, and the sharding, which JAX leaves out.
function M.global_repr(a)
  return PREFIX .. "shape=" .. tuple_repr(a.shape) .. ", dtype=" .. tostring(a.dtype)
         .. ", sharding=" .. tostring(a.sharding) .. ")"
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

-- The visible positions, strides and element texts (flat offset -> text)
-- of `a` (of `shape` and `size`), as NumPy formats them.
local function element_texts(a, shape, size)
  local ndim, dtype = #shape, tostring(a.dtype)
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
  return vis, strides, strs
end

-- NumPy's nested layout of the element texts: `hanging` is the indent of
-- continuation lines, `width` the columns available, `sep` what separates
-- elements (", " in repr, " " in str; rows end with it right-trimmed).
local function layout_body(ndim, vis, strides, strs, hanging0, width0, sep)
  local row_sep = sep:gsub("%s+$", "")
  -- `hanging` is the indent of continuation lines at this depth, `width`
  -- the columns available (one less per "]" still to come).
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
        if i < npos then line = line .. sep end
      end
      lines[#lines + 1] = line
      s = concat(lines, "\n")
    else
      local rows = row_sep .. rep("\n", ndim - axis)
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
        if i < npos then parts[#parts + 1] = rows end
      end
      s = concat(parts)
    end
    return "[" .. s:sub(#hanging + 1) .. "]"
  end
  return layout(1, 0, hanging0, width0)
end

-- repr's text around the body: prefix, body, "," and "dtype=...)", which
-- goes on a line of its own when it would pass the line width.
local function repr_text(prefix, shape, size, dtype, vis, strides, strs)
  local dtype_str = "dtype=" .. dtype .. ")"
  if size == 0 then
    local body = #shape == 1 and "[]" or ("[], shape=" .. tuple_repr(shape))
    return prefix .. body .. ", " .. dtype_str
  end
  -- the "," that follows the array body takes one column (as in NumPy's
  -- array_repr, which passes suffix="," to array2string)
  local body = layout_body(#shape, vis, strides, strs, rep(" ", #prefix + 1), LINEWIDTH - 1, ", ")
  local text = prefix .. body .. ","
  local last_nl = text:match(".*()\n")
  local last_len = last_nl and (#text - last_nl) or #text
  if last_len + 1 + #dtype_str > LINEWIDTH then
    return text .. "\n" .. rep(" ", #prefix) .. dtype_str
  end
  return text .. " " .. dtype_str
end

local function shape_and_size(a)
  local shape = a.shape
  local ndim = #shape
  -- The layout recurses once per dimension; arrays have at most MAX_NDIM.
  if ndim > MAX_NDIM then
    errors.raise("ValueError", "repr: shape has %d dimensions, at most %d are supported",
      ndim, MAX_NDIM)
  end
  local size = a.size
  if size == nil then
    size = 1
    for i = 1, ndim do size = size * shape[i] end
  end
  return shape, size
end

function M.repr(a)
  local shape, size = shape_and_size(a)
  local vis, strides, strs
  if size > 0 then vis, strides, strs = element_texts(a, shape, size) end
  return repr_text(PREFIX, shape, size, tostring(a.dtype), vis, strides, strs)
end

-- NumPy's str of the array (what JAX's str(x) and a Shard's data show):
-- "[0. 1.]", rows on lines of their own, no prefix nor dtype; a 0-d array
-- as its scalar ("1.0", "3", "(1+2j)").
function M.str(a)
  local shape, size = shape_and_size(a)
  if size == 0 then return "[]" end
  local vis, strides, strs = element_texts(a, shape, size)
  if #shape > 0 then return layout_body(#shape, vis, strides, strs, " ", LINEWIDTH, " ") end
  local text = strs[0]:gsub("%.([ej+-])", "%1"):gsub("%.$", ".0")
  if COMPLEX_PART[tostring(a.dtype)] then text = "(" .. text:gsub("%.0$", "") .. ")" end
  return text
end

-- NumPy's repr of an object array of `shape` whose elements (row-major)
-- print as the strings in flat: "array([SimDevice(id=0), SimDevice(id=1)],
-- dtype=object)". Object elements are not padded to a common width.
function M.object_repr(shape, flat)
  local size = #flat
  local vis, strides, strs = {}, {}, {}
  local stride = 1
  for axis = #shape, 1, -1 do
    strides[axis] = stride
    stride = stride * shape[axis]
    vis[axis] = visible_positions(shape[axis], size > THRESHOLD)
  end
  for i = 1, size do strs[i - 1] = flat[i] end
  return repr_text("array(", shape, size, "object", vis, strides, strs)
end

return M
