-- runs: every-platform
-- ipc-off: no
-- devices: any
-- needs: mpi

-- dl.assert_equal compares values as JAX does (np.equal): per dtype, so -0.0 equals 0.0 and a
-- NaN equals nothing, not even another NaN. Every process reaches the same outcome: it passes
-- everywhere or raises the same AssertionError everywhere, on 1, 2, 3 and 4 processes.
local H = require "helpers"

local mpirun, sorted_lines = H.mpirun, H.sorted_lines

-- Each process prints "p\tlabel\tok" or "p\tlabel\tfalse\tname\tmessage".
local SCRIPT = [[
local p, n = dl.process_index(), dl.process_count()
local function try(label, x, message)
  local ok, e = pcall(dl.assert_equal, x, message)
  print(p, label, ok and "ok" or "false\t" .. e.name .. "\t" .. e.message)
end
local zero = p % 2 == 0 and 0.0 or -0.0
for _, dt in ipairs {"float16", "bfloat16", "float32", "float64"} do
  try(dt, dl.array({1, zero, 3}, dt))
end
for _, dt in ipairs {"complex64", "complex128"} do
  try(dt, dl.array({{re = zero, im = 1}, {re = 2, im = -zero}}, dt))
end
try("nan everywhere", dl.array({1, 0 / 0}, "float32"), "nan.")
try("nan in a complex", dl.array({{re = 1, im = 0 / 0}}, "complex64"))
try("nan on the last", dl.array({1, 2, p == n - 1 and 0 / 0 or 3}, "float64"))
try("a real difference", dl.array({1, 2, p == n - 1 and 2.5 or 2}, "float64"), "drift.")
try("integers", dl.array({p == 1 and 7 or 0, 1}, "int32"))
try("equal integers", dl.array({5, -1}, "int64"))
]]

local function expected(n)
  local want = {}
  local all = "Processes 0, 1 and 2"
  if n == 2 then all = "Processes 0 and 1" elseif n == 4 then all = "Processes 0, 1, 2 and 3" end
  local NAN = ", a NaN: NaN equals no value, not even NaN)."
  for p = 0, n - 1 do
    local function add(label, rest) want[#want + 1] = p .. "\t" .. label .. "\t" .. rest end
    for _, dt in ipairs {"float16", "bfloat16", "float32", "float64", "complex64", "complex128",
                         "equal integers"} do
      add(dt, "ok")
    end
    local A = "false\tAssertionError\t"
    add("nan everywhere", A .. "nan. " .. all .. " hold values different from process 0's (the "
        .. "first difference is at flat element 1" .. NAN)
    add("nan in a complex", A .. all .. " hold values different from process 0's (the first "
        .. "difference is at flat element 0" .. NAN)
    add("nan on the last", A .. "Process " .. n - 1 .. " holds a value different from process "
        .. "0's (the first difference is at flat element 2" .. NAN)
    add("a real difference", A .. "drift. Process " .. n - 1 .. " holds a value different from "
        .. "process 0's (the first difference is at flat element 2).")
    add("integers", A .. "Process 1 holds a value different from process 0's (the first "
        .. "difference is at flat element 0).")
  end
  table.sort(want)
  return want
end

describe("assert_equal compares values per dtype (np.equal)", function()
  for _, n in ipairs {2, 3, 4} do
    it("on " .. n .. " processes: -0.0 equals 0.0, NaN equals nothing, differences raise "
       .. "everywhere", function()
      local out, err, status = mpirun(n, SCRIPT)
      assert.are.equal("", err)
      assert.are.equal(0, status)
      assert.are.same(expected(n), sorted_lines(out))
    end)
  end

  it("alone, as a job of one: a NaN still equals nothing", function()
    local out, err, status = H.run_code('local dl = require "dlrun"\n' .. [[
print(pcall(dl.assert_equal, dl.array({-0.0, 0.0}, "float32")))
local ok, e = pcall(dl.assert_equal, dl.array({1, 0 / 0}, "bfloat16"), "alone.")
print(ok, e.name, e.message)
print(pcall(dl.assert_equal, dl.array({2, 3}, "uint8")))]])
    assert.are.equal("", err)
    assert.are.equal(0, status)
    assert.are.equal("true\nfalse\tAssertionError\talone. Process 0 holds a value different "
                     .. "from process 0's (the first difference is at flat element 1, a NaN: NaN "
                     .. "equals no value, not even NaN).\ntrue\n", out)
  end)
end)
