--[[
dlrun.visualize -- a text picture of how a 1-D or 2-D array is laid out over
devices (JAX's jax.debug.visualize_array_sharding, drawn as plain text).

  visualize.visualize_sharding(x [, opts]) -> string

`x` provides x.shape (a list of 1 or 2 non-negative integers) and
x.sharding, whose x.sharding:devices_indices_map(shape) returns a table
Device -> index; an index is a list of {first, last} pairs, one per
dimension, 1-based and inclusive ({1, n} for a whole dimension of size n,
{1, 0} for a zero-size one). Devices have `.id` (0-based) and `.platform`.

The picture is returned without a trailing newline and, unless
opts.print == false or opts.quiet == true, also written with io.write
followed by "\n". With opts.color == true every cell gets its own
background colour (256-colour ANSI escapes, cycling through a fixed
palette); with opts.color == nil, colour is used when the picture is printed
to a terminal (M.stdout_is_terminal, set by the dlrun module); otherwise the
picture is plain text.

Layout
  * One cell per distinct block (index). All devices holding the block are
    listed in it: "SIM 0,1" -- the platform in upper case, then the sorted
    ids joined by ",". Devices of several platforms in one cell give one such
    group per platform, separated by a space ("CPU 0 SIM 1").
  * 1-D: one row of cells, one per distinct range, in index order.
    2-D: a grid; rows are the distinct row ranges and columns the distinct
    column ranges, both in index order. A grid position no device holds is
    drawn as an empty cell.
  * Widths: each column gets floor(frac * W) characters inside its borders,
    frac being the column's share of its dimension (1 for a zero-size
    dimension), clamped to [7, 78] and widened to fit every label in the
    column with a space either side. W is 56 for 1-D arrays (so an 8-way
    split gives 7-wide cells, the picture 65 columns). For 2-D arrays W
    follows the array's aspect ratio as in JAX, floor(2.5 * 8 * ncols /
    nrows), clamped to [28, 78] (an 8x8 array on a 2x4 mesh gives 7-wide
    cells, like JAX).
  * Heights (2-D only; 1-D rows are one line): each row block gets
    floor(frac * 8) lines, at least 3 while the picture then stays within
    20 lines (up to 4 row blocks), otherwise at least 2 or 1 (8 row blocks:
    one line each, 17 lines in all). Labels are centred, an odd spare
    column or line going to the right or bottom.
  * Boxes use light box-drawing characters with a line between every row
    and every column (rich's SQUARE box with show_lines).

Errors: a rank other than 1 or 2 raises ValueError "`visualize_sharding`
only works for shapes with 1 and 2 dimensions." (JAX's text); an argument
that is not an array (M.is_array: the dlrun module's Arrays only; on its own
this module takes anything with shape and sharding) raises TypeError
"visualize_sharding: argument 1 (x) must be an Array, got <type>"; opts
other than nil or a table raise TypeError "... argument 2 (opts) must be a
table, got <type>", an opts key other than print, quiet and color TypeError
"... unexpected option '<key>' (expected print, quiet, color)", and a third
argument TypeError "visualize_sharding: expected at most 2 arguments, got 3".
]]

local errors = require "dlrun.errors"

local M = {}

local FN = "visualize_sharding"

-- Width budget of a 1-D row; base height and width bounds for 2-D grids.
local WIDTH_1D = 56
local BASE_HEIGHT = 8
local HEIGHT_TO_WIDTH = 2.5
local MIN_WIDTH_2D, MAX_WIDTH_2D = 28, 78
local MIN_CELL, MAX_CELL = 7, 78
local MAX_LINES = 20

-- Background / foreground 256-colour pairs (close to matplotlib's tab10).
local PALETTE = {
  {bg = 31, fg = 231},  -- blue
  {bg = 208, fg = 16},  -- orange
  {bg = 34, fg = 16},   -- green
  {bg = 160, fg = 231}, -- red
  {bg = 97, fg = 231},  -- purple
  {bg = 95, fg = 231},  -- brown
  {bg = 176, fg = 16},  -- pink
  {bg = 244, fg = 16},  -- grey
  {bg = 142, fg = 16},  -- olive
  {bg = 38, fg = 16},   -- cyan
}
local RESET = "\27[0m"

local OPTION_KEYS = {print = true, quiet = true, color = true}

local function type_error(arg, what, expected, value)
  error(errors.new("TypeError", ("%s: argument %d (%s) must be %s, got %s")
    :format(FN, arg, what, expected, errors.typename(value))), 3)
end

-- x.shape and x.sharding, or nil when x is not array-like. A dlrun error
-- raised while reading them (a deleted array, say) is passed on.
local function array_fields(x)
  local t = type(x)
  if t ~= "table" and t ~= "userdata" then return nil end
  local ok, shape, sharding = pcall(function() return x.shape, x.sharding end)
  if not ok then
    -- (an object without those fields is not array-like)
    if errors.is_error(shape) and not errors.AttributeError:is_instance(shape) then
      error(shape, 0)
    end
    return nil
  end
  if type(shape) ~= "table" or sharding == nil then return nil end
  return shape, sharding
end

-- The {first, last} range an index entry stands for (nil: the whole dim).
local function range_of(entry, n)
  if entry == nil then return 1, n end
  return entry[1] or 1, entry[2] or n
end

-- Distinct ranges in index order: list of {first, last, key}, and key -> position.
local function order_ranges(set)
  local list = {}
  for key, r in pairs(set) do list[#list + 1] = {r[1], r[2], key} end
  table.sort(list, function(a, b)
    if a[1] ~= b[1] then return a[1] < b[1] end
    return a[2] < b[2]
  end)
  local pos = {}
  for i, r in ipairs(list) do pos[r[3]] = i end
  return list, pos
end

local function id_string(id)
  return tostring(math.tointeger(id) or id)
end

local function device_label(devices)
  local groups, platforms = {}, {}
  for _, d in ipairs(devices) do
    local p = tostring(d.platform)
    if not groups[p] then
      groups[p] = {}
      platforms[#platforms + 1] = p
    end
    table.insert(groups[p], d.id)
  end
  table.sort(platforms)
  local parts = {}
  for _, p in ipairs(platforms) do
    local ids = groups[p]
    table.sort(ids)
    local strs = {}
    for i, id in ipairs(ids) do strs[i] = id_string(id) end
    parts[#parts + 1] = p:upper() .. " " .. table.concat(strs, ",")
  end
  return table.concat(parts, " ")
end

-- The share of a dimension of size n that the range [first, last] covers.
local function fraction(first, last, n)
  if n <= 0 then return 1 end
  return math.max(last - first + 1, 0) / n
end

local function clamp(v, lo, hi)
  return math.max(lo, math.min(hi, v))
end

local function centred(text, width)
  local spare = width - #text
  local left = spare // 2
  return (" "):rep(left) .. text .. (" "):rep(spare - left)
end

local function rule(widths, left, mid, right)
  local parts = {}
  for j, w in ipairs(widths) do parts[j] = ("─"):rep(w) end
  return left .. table.concat(parts, mid) .. right
end

local function render(shape, map, color)
  local ndim = #shape
  local rows, cols, cells = {}, {}, {}
  for device, index in pairs(map) do
    local r1, r2, c1, c2
    if ndim == 1 then
      r1, r2 = 1, 1
      c1, c2 = range_of(index[1], shape[1])
    else
      r1, r2 = range_of(index[1], shape[1])
      c1, c2 = range_of(index[2], shape[2])
    end
    local rk, ck = r1 .. ":" .. r2, c1 .. ":" .. c2
    rows[rk] = {r1, r2}
    cols[ck] = {c1, c2}
    local key = rk .. "|" .. ck
    cells[key] = cells[key] or {row = rk, col = ck, devices = {}}
    table.insert(cells[key].devices, device)
  end

  local row_list, row_pos = order_ranges(rows)
  local col_list, col_pos = order_ranges(cols)
  local nrows, ncols = #row_list, #col_list
  if nrows == 0 then row_list, nrows = {{1, 1, ""}}, 1 end
  if ncols == 0 then col_list, ncols = {{1, 1, ""}}, 1 end

  local labels = {}
  for i = 1, nrows do labels[i] = {} for j = 1, ncols do labels[i][j] = "" end end
  for _, cell in pairs(cells) do
    labels[row_pos[cell.row]][col_pos[cell.col]] = device_label(cell.devices)
  end

  -- Column widths.
  local ncol_dim = shape[ndim]
  local budget
  if ndim == 1 then
    budget = WIDTH_1D
  else
    local aspect = 1
    if shape[1] > 0 and shape[2] > 0 then aspect = shape[2] / shape[1] end
    budget = clamp(math.floor(HEIGHT_TO_WIDTH * BASE_HEIGHT * aspect), MIN_WIDTH_2D, MAX_WIDTH_2D)
  end
  local widths = {}
  for j, r in ipairs(col_list) do
    local w = clamp(math.floor(fraction(r[1], r[2], ncol_dim) * budget), MIN_CELL, MAX_CELL)
    for i = 1, nrows do w = math.max(w, #labels[i][j] + 2) end
    widths[j] = w
  end

  -- Row heights.
  local heights = {}
  if ndim == 1 then
    heights[1] = 1
  else
    local min_h = clamp((MAX_LINES - 1) // nrows - 1, 1, 3)
    for i, r in ipairs(row_list) do
      heights[i] = math.max(min_h, math.floor(fraction(r[1], r[2], shape[1]) * BASE_HEIGHT))
    end
  end

  local out = {rule(widths, "┌", "┬", "┐")}
  local n = 0
  for i = 1, nrows do
    if i > 1 then out[#out + 1] = rule(widths, "├", "┼", "┤") end
    local h = heights[i]
    local label_line = (h - 1) // 2 + 1
    local styles = {}
    for j = 1, ncols do
      if color then
        local c = PALETTE[n % #PALETTE + 1]
        n = n + 1
        styles[j] = ("\27[38;5;%dm\27[48;5;%dm"):format(c.fg, c.bg)
      end
    end
    for line = 1, h do
      local parts = {}
      for j = 1, ncols do
        local text = line == label_line and labels[i][j] or ""
        local s = centred(text, widths[j])
        if color then s = styles[j] .. s .. RESET end
        parts[j] = s
      end
      out[#out + 1] = "│" .. table.concat(parts, "│") .. "│"
    end
  end
  out[#out + 1] = rule(widths, "└", "┴", "┘")
  return table.concat(out, "\n")
end

function M.visualize_sharding(...)
  errors.check_nargs(FN, 2, ...)
  local x, opts = ...
  local shape, sharding
  if M.is_array(x) then shape, sharding = array_fields(x) end
  if not shape then type_error(1, "x", "an Array", x) end
  if opts ~= nil and type(opts) ~= "table" then type_error(2, "opts", "a table", opts) end
  opts = opts or {}
  for k in pairs(opts) do
    if not OPTION_KEYS[k] then
      error(errors.new("TypeError", ("%s: unexpected option '%s' (expected print, quiet, color)")
        :format(FN, tostring(k))), 2)
    end
  end
  if #shape < 1 or #shape > 2 then
    error(errors.new("ValueError",
      "`visualize_sharding` only works for shapes with 1 and 2 dimensions."), 2)
  end
  local map = sharding:devices_indices_map(shape)
  local printing = opts.print ~= false and opts.quiet ~= true
  local color = opts.color
  if color == nil then color = printing and M.stdout_is_terminal() end
  local picture = render(shape, map, color == true)
  if printing then
    io.write(picture, "\n")
  end
  return picture
end

-- Replaced by the dlrun module with a real check of standard output.
function M.stdout_is_terminal() return false end

-- Whether x is an array. The dlrun module replaces this with a check for
-- its own Arrays (a look-alike table would fail later, in raw Lua errors).
function M.is_array(x) return array_fields(x) ~= nil end

return M
