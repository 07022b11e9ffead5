-- runs: every-platform
-- ipc-off: no
-- devices: any
-- needs: none

-- Specs for dlrun.visualize (pure Lua; runs against fake devices and
-- shardings, no native module needed).
-- Run: busted --lpath='lua/?.lua;lua/?/init.lua' spec/arrays/visualize_spec.lua

local visualize = require "dlrun.visualize"
local errors = require "dlrun.errors"

local visualize_sharding = visualize.visualize_sharding
local QUIET = {print = false}

-- Fake devices: tables with id and platform (usable as table keys).
local Device = {}
Device.__index = Device
Device.__tostring = function(d) return ("FakeDevice(%s:%d)"):format(d.platform, d.id) end

local function devices(n, platform)
  local list = {}
  for i = 0, n - 1 do
    list[i + 1] = setmetatable({id = i, platform = platform or "sim"}, Device)
  end
  return list
end

-- A mesh: axis names and sizes, devices in row-major order over the axes.
local function mesh(names, sizes, devs)
  local n = 1
  for _, s in ipairs(sizes) do n = n * s end
  return {names = names, sizes = sizes, devices = devs or devices(n)}
end

-- A fake NamedSharding following JAX's rules: spec[d] is nil (dimension d
-- not sharded), an axis name, or a list of axis names (major first).
-- Dimension d is split into prod(sizes of its axes) equal blocks; a device
-- holds the block numbered by its mesh coordinates along those axes, so
-- devices differing only along unused axes hold the same block (replicas).
-- Records the shapes it was asked about in `calls`.
local function named_sharding(m, spec)
  local s = {calls = {}}
  function s:devices_indices_map(shape)
    self.calls[#self.calls + 1] = shape
    local size = {}
    for k, name in ipairs(m.names) do size[name] = m.sizes[k] end
    local map = {}
    for flat, dev in ipairs(m.devices) do
      local coord, rest = {}, flat - 1
      for k = #m.names, 1, -1 do
        coord[m.names[k]] = rest % m.sizes[k]
        rest = rest // m.sizes[k]
      end
      local index = {}
      for d, n in ipairs(shape) do
        local axes = spec[d]
        if type(axes) == "string" then axes = {axes} end
        if axes == nil then
          index[d] = {1, n}
        else
          local shards, k = 1, 0
          for _, a in ipairs(axes) do
            shards = shards * size[a]
            k = k * size[a] + coord[a]
          end
          assert(n % shards == 0, "fake sharding: dimension not divisible")
          local block = n // shards
          index[d] = {k * block + 1, (k + 1) * block}
        end
      end
      map[dev] = index
    end
    return map
  end
  return s
end

-- A sharding with a hand-written devices_indices_map result.
local function fixed_sharding(map)
  return {devices_indices_map = function() return map end}
end

local function array(shape, sharding)
  return {shape = shape, sharding = sharding}
end

-- Call fn(...), which must raise a dlrun error; returns it.
local function raised(fn, ...)
  local ok, err = pcall(fn, ...)
  assert.is_false(ok, "expected the call to fail")
  assert.is_true(errors.is_error(err), "expected a dlrun error value, got " .. tostring(err))
  return err
end

local function lines(s)
  local out = {}
  for line in (s .. "\n"):gmatch("(.-)\n") do out[#out + 1] = line end
  return out
end

-- The label of a 1-D picture's only cell (its second line, padding removed).
local function only_label(picture)
  return lines(picture)[2]:match("^│ *(.-) *│$")
end

-- Run fn() with io.write replaced; returns the list of strings written and
-- fn's result.
local function capture_write(fn)
  local written = {}
  local real = io.write
  io.write = function(...)
    for i = 1, select("#", ...) do written[#written + 1] = tostring((select(i, ...))) end
    return io.output()
  end
  local ok, result = pcall(fn)
  io.write = real
  assert(ok, result)
  return written, result
end

local function strip_ansi(s)
  return (s:gsub("\27%[[%d;]*m", ""))
end

describe("visualize_sharding layouts", function()
  it("draws a 1-D array sharded 8 ways as one row of 8 cells", function()
    local x = array({16}, named_sharding(mesh({"x"}, {8}), {"x"}))
    assert.are.equal([[
┌───────┬───────┬───────┬───────┬───────┬───────┬───────┬───────┐
│ SIM 0 │ SIM 1 │ SIM 2 │ SIM 3 │ SIM 4 │ SIM 5 │ SIM 6 │ SIM 7 │
└───────┴───────┴───────┴───────┴───────┴───────┴───────┴───────┘]],
      visualize_sharding(x, QUIET))
  end)

  it("draws a 2-D array on a 2x4 mesh with P('x', 'y') as a 2x4 grid", function()
    local x = array({8, 8}, named_sharding(mesh({"x", "y"}, {2, 4}), {"x", "y"}))
    assert.are.equal([[
┌───────┬───────┬───────┬───────┐
│       │       │       │       │
│ SIM 0 │ SIM 1 │ SIM 2 │ SIM 3 │
│       │       │       │       │
│       │       │       │       │
├───────┼───────┼───────┼───────┤
│       │       │       │       │
│ SIM 4 │ SIM 5 │ SIM 6 │ SIM 7 │
│       │       │       │       │
│       │       │       │       │
└───────┴───────┴───────┴───────┘]],
      visualize_sharding(x, QUIET))
  end)

  it("transposes the grid for P('y', 'x') on a 4x2 mesh", function()
    local x = array({8, 8}, named_sharding(mesh({"x", "y"}, {4, 2}), {"y", "x"}))
    assert.are.equal([[
┌───────┬───────┬───────┬───────┐
│       │       │       │       │
│ SIM 0 │ SIM 2 │ SIM 4 │ SIM 6 │
│       │       │       │       │
│       │       │       │       │
├───────┼───────┼───────┼───────┤
│       │       │       │       │
│ SIM 1 │ SIM 3 │ SIM 5 │ SIM 7 │
│       │       │       │       │
│       │       │       │       │
└───────┴───────┴───────┴───────┘]],
      visualize_sharding(x, QUIET))
  end)

  it("lists the replicas of each block in one cell: P('x') on a 4x2 mesh", function()
    local x = array({8}, named_sharding(mesh({"x", "y"}, {4, 2}), {"x"}))
    assert.are.equal([[
┌──────────────┬──────────────┬──────────────┬──────────────┐
│   SIM 0,1    │   SIM 2,3    │   SIM 4,5    │   SIM 6,7    │
└──────────────┴──────────────┴──────────────┴──────────────┘]],
      visualize_sharding(x, QUIET))
  end)

  it("lists four replicas per cell for P('y') on a 4x2 mesh (2-D array)", function()
    local x = array({8, 4}, named_sharding(mesh({"x", "y"}, {4, 2}), {"y"}))
    assert.are.equal([[
┌────────────────────────────┐
│                            │
│        SIM 0,2,4,6         │
│                            │
│                            │
├────────────────────────────┤
│                            │
│        SIM 1,3,5,7         │
│                            │
│                            │
└────────────────────────────┘]],
      visualize_sharding(x, QUIET))
  end)

  it("draws a fully replicated 1-D array as one cell naming all devices", function()
    local x = array({16}, named_sharding(mesh({"x"}, {8}), {}))
    assert.are.equal([[
┌────────────────────────────────────────────────────────┐
│                  SIM 0,1,2,3,4,5,6,7                   │
└────────────────────────────────────────────────────────┘]],
      visualize_sharding(x, QUIET))
  end)

  it("draws a fully replicated 2-D array as one tall cell, label centred", function()
    local x = array({8, 8}, named_sharding(mesh({"x", "y"}, {2, 4}), {}))
    assert.are.equal([[
┌────────────────────────────┐
│                            │
│                            │
│                            │
│    SIM 0,1,2,3,4,5,6,7     │
│                            │
│                            │
│                            │
│                            │
└────────────────────────────┘]],
      visualize_sharding(x, QUIET))
  end)

  it("draws a 1-D array over 4 cpu devices", function()
    local m = mesh({"i"}, {4}, devices(4, "cpu"))
    local x = array({8}, named_sharding(m, {"i"}))
    assert.are.equal([[
┌──────────────┬──────────────┬──────────────┬──────────────┐
│    CPU 0     │    CPU 1     │    CPU 2     │    CPU 3     │
└──────────────┴──────────────┴──────────────┴──────────────┘]],
      visualize_sharding(x, QUIET))
  end)

  it("gives 8 row blocks of a 2-D array one line each", function()
    local x = array({8, 8}, named_sharding(mesh({"x"}, {8}), {"x"}))
    assert.are.equal([[
┌────────────────────────────┐
│           SIM 0            │
├────────────────────────────┤
│           SIM 1            │
├────────────────────────────┤
│           SIM 2            │
├────────────────────────────┤
│           SIM 3            │
├────────────────────────────┤
│           SIM 4            │
├────────────────────────────┤
│           SIM 5            │
├────────────────────────────┤
│           SIM 6            │
├────────────────────────────┤
│           SIM 7            │
└────────────────────────────┘]],
      visualize_sharding(x, QUIET))
  end)

  it("keeps at least 3 lines per row block for up to 4 row blocks", function()
    local x = array({8, 8}, named_sharding(mesh({"x", "y"}, {4, 2}), {"x", "y"}))
    local picture = visualize_sharding(x, QUIET)
    local ls = lines(picture)
    assert.are.equal(17, #ls)                 -- 4 blocks * 3 lines + 5 rules
    assert.are.equal("│              │              │", ls[2])
    assert.are.equal("│    SIM 0     │    SIM 1     │", ls[3])
    assert.are.equal("│              │              │", ls[4])
    assert.are.equal("├──────────────┼──────────────┤", ls[5])
    assert.are.equal("│    SIM 6     │    SIM 7     │", ls[15])
  end)

  it("combines mesh axes for a dimension sharded over ('x', 'y')", function()
    local x = array({8}, named_sharding(mesh({"x", "y"}, {2, 4}), {{"y", "x"}}))
    assert.are.equal([[
┌───────┬───────┬───────┬───────┬───────┬───────┬───────┬───────┐
│ SIM 0 │ SIM 4 │ SIM 1 │ SIM 5 │ SIM 2 │ SIM 6 │ SIM 3 │ SIM 7 │
└───────┴───────┴───────┴───────┴───────┴───────┴───────┴───────┘]],
      visualize_sharding(x, QUIET))
  end)

  it("makes cell widths proportional to uneven blocks", function()
    local d = devices(2)
    local x = array({10}, fixed_sharding {[d[1]] = {{1, 6}}, [d[2]] = {{7, 10}}})
    assert.are.equal([[
┌─────────────────────────────────┬──────────────────────┐
│              SIM 0              │        SIM 1         │
└─────────────────────────────────┴──────────────────────┘]],
      visualize_sharding(x, QUIET))
  end)

  it("makes row heights proportional to uneven row blocks", function()
    local d = devices(2)
    local x = array({8, 8}, fixed_sharding {[d[1]] = {{1, 6}, {1, 8}}, [d[2]] = {{7, 8}, {1, 8}}})
    local ls = lines(visualize_sharding(x, QUIET))
    assert.are.equal(6 + 3 + 3, #ls)          -- 6 and 3 lines, 3 rules
    assert.are.equal("│           SIM 0            │", ls[4])
    assert.are.equal("├────────────────────────────┤", ls[8])
    assert.are.equal("│           SIM 1            │", ls[10])
  end)

  it("widens wide arrays (aspect ratio) up to 78 columns of cells", function()
    local x = array({8, 1024}, named_sharding(mesh({"x", "y"}, {2, 4}), {"x", "y"}))
    local ls = lines(visualize_sharding(x, QUIET))
    assert.are.equal("┌" .. ("─"):rep(19) .. ("┬" .. ("─"):rep(19)):rep(3) .. "┐", ls[1])
    assert.are.equal("│       SIM 0       │       SIM 1       │       SIM 2       │"
                     .. "       SIM 3       │", ls[3])
  end)

  it("draws the single block of a zero-size 1-D array with its devices", function()
    local x = array({0}, named_sharding(mesh({"x"}, {8}), {"x"}))
    assert.are.equal([[
┌────────────────────────────────────────────────────────┐
│                  SIM 0,1,2,3,4,5,6,7                   │
└────────────────────────────────────────────────────────┘]],
      visualize_sharding(x, QUIET))
  end)

  it("draws a zero-size row dimension of a 2-D array as one row block", function()
    local x = array({0, 4}, named_sharding(mesh({"x", "y"}, {2, 4}), {"x", "y"}))
    assert.are.equal([[
┌─────────┬─────────┬─────────┬─────────┐
│         │         │         │         │
│         │         │         │         │
│         │         │         │         │
│ SIM 0,4 │ SIM 1,5 │ SIM 2,6 │ SIM 3,7 │
│         │         │         │         │
│         │         │         │         │
│         │         │         │         │
│         │         │         │         │
└─────────┴─────────┴─────────┴─────────┘]],
      visualize_sharding(x, QUIET))
  end)

  it("asks the sharding for the array's own shape", function()
    local s = named_sharding(mesh({"x"}, {8}), {"x"})
    local shape = {16}
    visualize_sharding(array(shape, s), QUIET)
    assert.are.equal(1, #s.calls)
    assert.are.same({16}, s.calls[1])
  end)
end)

describe("visualize_sharding labels", function()
  it("sorts the ids in a cell numerically whatever the map's order", function()
    local d = devices(12)
    local map = {}
    for _, k in ipairs {11, 2, 10, 1} do map[d[k + 1]] = {{1, 4}} end
    local picture = visualize_sharding(array({4}, fixed_sharding(map)), QUIET)
    assert.are.equal("SIM 1,2,10,11", only_label(picture))
  end)

  it("upper-cases the platform", function()
    local m = mesh({"x"}, {2}, devices(2, "cpu"))
    local picture = visualize_sharding(array({2}, named_sharding(m, {})), QUIET)
    assert.are.equal("CPU 0,1", only_label(picture))
    assert.falsy(picture:find("cpu", 1, true))
  end)

  it("groups devices of different platforms in one cell by platform", function()
    local c = setmetatable({id = 0, platform = "cpu"}, Device)
    local s0 = setmetatable({id = 0, platform = "sim"}, Device)
    local s1 = setmetatable({id = 1, platform = "sim"}, Device)
    local map = {[s1] = {{1, 3}}, [c] = {{1, 3}}, [s0] = {{1, 3}}}
    local picture = visualize_sharding(array({3}, fixed_sharding(map)), QUIET)
    assert.are.equal("CPU 0 SIM 0,1", only_label(picture))
  end)

  it("widens a cell to fit a long label with a space either side", function()
    -- A replicated square 2-D array has 28 columns to spare; the label needs 43.
    local x = array({16, 16}, named_sharding(mesh({"x"}, {16}), {}))
    local ls = lines(visualize_sharding(x, QUIET))
    local label = "SIM 0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15"
    assert.are.equal("│ " .. label .. " │", ls[5])
    assert.are.equal("┌" .. ("─"):rep(#label + 2) .. "┐", ls[1])
  end)

  it("widens narrow cells to fit two-digit ids", function()
    local x = array({16}, named_sharding(mesh({"x"}, {16}), {"x"}))
    local ls = lines(visualize_sharding(x, QUIET))
    assert.truthy(ls[2]:find("│ SIM 9 │ SIM 10 │ SIM 11 │", 1, true))
    assert.truthy(ls[1]:find("┬───────┬────────┬", 1, true))
    assert.are.equal(3, #ls)
  end)
end)

describe("visualize_sharding errors", function()
  local RANK_MESSAGE = "`visualize_sharding` only works for shapes with 1 and 2 dimensions."

  it("raises ValueError for a 0-d array", function()
    local x = array({}, named_sharding(mesh({"x"}, {8}), {}))
    local err = raised(visualize_sharding, x, QUIET)
    assert.are.equal("ValueError", err.name)
    assert.are.equal(RANK_MESSAGE, err.message)
    assert.is_true(errors.ValueError:is_instance(err))
  end)

  it("raises ValueError for a 3-d array, before asking the sharding", function()
    local s = named_sharding(mesh({"x"}, {8}), {"x"})
    local err = raised(visualize_sharding, array({8, 2, 2}, s), QUIET)
    assert.are.equal("ValueError: " .. RANK_MESSAGE, tostring(err))
    assert.are.equal(0, #s.calls)
  end)

  it("raises TypeError for values that are not arrays", function()
    local cases = {
      {nil, "nil"}, {42, "number"}, {"abc", "string"}, {true, "boolean"},
      {{}, "table"}, {{shape = {4}}, "table"}, {{sharding = {}}, "table"},
      {io.stdout, "FILE*"}, {setmetatable({}, {__name = "dlrun.Device"}), "dlrun.Device"},
    }
    for _, case in ipairs(cases) do
      local err = raised(visualize_sharding, case[1], QUIET)
      assert.are.equal("TypeError", err.name)
      assert.are.equal("visualize_sharding: argument 1 (x) must be an Array, got " .. case[2],
                       err.message)
    end
  end)

  it("raises TypeError for opts that are not a table", function()
    local x = array({8}, named_sharding(mesh({"x"}, {8}), {"x"}))
    local err = raised(visualize_sharding, x, "quiet")
    assert.are.equal("TypeError", err.name)
    assert.are.equal("visualize_sharding: argument 2 (opts) must be a table, got string",
                     err.message)
  end)

  it("reads opts flat: an unknown key, even one holding opts itself, is a TypeError", function()
    local x = array({8}, named_sharding(mesh({"x"}, {8}), {"x"}))
    local opts = {print = false}
    opts.self = opts
    local err = raised(visualize_sharding, x, opts)
    assert.are.equal("TypeError", err.name)
    assert.are.equal("visualize_sharding: unexpected option 'self' (expected print, quiet, color)",
                     err.message)
  end)

  it("passes on a dlrun error raised while reading the array", function()
    local deleted = setmetatable({}, {__index = function(_, k)
      error(errors.new("RuntimeError", "Array has been deleted with shape=float32[3]."))
    end})
    local err = raised(visualize_sharding, deleted, QUIET)
    assert.are.equal("RuntimeError", err.name)
    assert.are.equal("Array has been deleted with shape=float32[3].", err.message)
  end)
end)

describe("visualize_sharding output", function()
  local function x8() return array({16}, named_sharding(mesh({"x"}, {8}), {"x"})) end

  it("prints the picture and a newline by default, and returns it", function()
    local written, picture = capture_write(function() return visualize_sharding(x8()) end)
    assert.are.equal(picture .. "\n", table.concat(written))
    assert.are.equal(visualize_sharding(x8(), QUIET), picture)
  end)

  it("writes to io.output()", function()
    local path = os.tmpname()
    local old = io.output()
    local f = assert(io.open(path, "w"))
    io.output(f)
    local ok, picture = pcall(visualize_sharding, x8(), {})
    io.output(old)
    f:close()
    assert(ok, picture)
    local rf = assert(io.open(path, "r"))
    local text = rf:read("a")
    rf:close()
    os.remove(path)
    assert.are.equal(picture .. "\n", text)
  end)

  it("prints nothing with print = false", function()
    local written, picture = capture_write(function()
      return visualize_sharding(x8(), {print = false})
    end)
    assert.are.same({}, written)
    assert.truthy(picture:find("SIM 7", 1, true))
  end)

  it("prints nothing with quiet = true", function()
    local written, picture = capture_write(function()
      return visualize_sharding(x8(), {quiet = true})
    end)
    assert.are.same({}, written)
    assert.truthy(picture:find("SIM 0", 1, true))
  end)

  it("prints with print = true or quiet = false", function()
    local written = capture_write(function()
      visualize_sharding(x8(), {print = true})
      visualize_sharding(x8(), {quiet = false})
    end)
    assert.are.equal(4, #written)
    assert.are.equal(written[1] .. written[2], written[3] .. written[4])
  end)
end)

describe("visualize_sharding colour", function()
  local function grid() return array({8, 8}, named_sharding(mesh({"x", "y"}, {2, 4}), {"x", "y"})) end

  it("uses no escape codes by default or with color = false", function()
    assert.falsy(visualize_sharding(grid(), QUIET):find("\27", 1, true))
    assert.falsy(visualize_sharding(grid(), {print = false, color = false}):find("\27", 1, true))
  end)

  it("draws the same picture under the colour codes with color = true", function()
    local coloured = visualize_sharding(grid(), {print = false, color = true})
    assert.truthy(coloured:find("\27[48;5;", 1, true))
    assert.truthy(coloured:find("\27[0m", 1, true))
    assert.are.equal(visualize_sharding(grid(), QUIET), strip_ansi(coloured))
  end)

  it("gives each cell its own 256-colour background, cycling", function()
    local function backgrounds(x)
      local seen, order = {}, {}
      for line in visualize_sharding(x, {print = false, color = true}):gmatch("[^\n]+") do
        for bg, text in line:gmatch("\27%[48;5;(%d+)m([^\27]*)") do
          local label = text:match("%S.*%S")
          if label and not seen[label] then
            seen[label] = bg
            order[#order + 1] = label
          end
        end
      end
      return seen, order
    end
    local seen, order = backgrounds(grid())
    assert.are.equal(8, #order)
    local distinct = {}
    for _, label in ipairs(order) do distinct[seen[label]] = true end
    local count = 0
    for _ in pairs(distinct) do count = count + 1 end
    assert.are.equal(8, count)
    -- 16 cells: the palette (10 colours) repeats from the 11th cell on.
    local seen16 = backgrounds(array({16}, named_sharding(mesh({"x"}, {16}), {"x"})))
    assert.are.equal(seen16["SIM 0"], seen16["SIM 10"])
    assert.are_not.equal(seen16["SIM 0"], seen16["SIM 1"])
  end)

  it("colours the padding lines of a cell too, leaving the borders plain", function()
    local ls = lines(visualize_sharding(grid(), {print = false, color = true}))
    assert.are.equal("┌───────┬───────┬───────┬───────┐", ls[1])
    assert.truthy(ls[2]:match("^│\27%[[%d;]+m\27%[48;5;%d+m       \27%[0m│"))
  end)
end)
