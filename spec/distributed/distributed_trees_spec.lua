-- runs: every-platform
-- ipc-off: yes
-- devices: any
-- needs: mpi

-- Trees of global arrays across processes: lua_next's order differs from process to process,
-- so device_put walks every tree in one order (numbers by value, then strings byte-wise, then
-- false and true): every process puts the same array at the same time, on 2, 3 and 4
-- processes, with or without a tree of targets.
local H = require "helpers"

local mpirun, sorted_lines = H.mpirun, H.sorted_lines

local SCRIPT = [[
local p, n = dl.process_index(), dl.process_count()
local mesh = dl.make_mesh({2 * n}, {"x"})
local rows = dl.NamedSharding(mesh, dl.P("x"))
local everywhere = dl.NamedSharding(mesh, dl.P())
local keys = {}
for k = 1, 24 do keys[#keys + 1] = "w" .. k end
for _, k in ipairs {-3, 1.5, 7, true, false} do keys[#keys + 1] = k end
local tree, targets, value = {nested = {}}, {}, {}
for i, k in ipairs(keys) do
  tree[k] = dl.arange(100 * i, 100 * i + 2 * n, 1, "int32", rows)
  tree.nested[k] = dl.arange(-100 * i, -100 * i + 2 * n, 1, "int32", rows)
  targets[k] = everywhere
  value[k] = i
end
targets.nested = everywhere
local function check(how, r)
  local bad = 0
  for _, k in ipairs(keys) do
    for sign, t in pairs {[1] = r, [-1] = r.nested} do
      local x = t[k]
      local got = x.addressable_shards[1].data:tolist()
      if not x.is_fully_replicated or #got ~= 2 * n or got[1] ~= sign * 100 * value[k]
         or got[2 * n] ~= sign * 100 * value[k] + 2 * n - 1 then
        bad = bad + 1
      end
    end
  end
  print(p, how, bad)
end
check("one target", dl.device_put(tree, everywhere))
check("a tree of targets", dl.device_put(tree, targets))
]]

describe("device_put of a tree of global arrays", function()
  for _, n in ipairs {2, 3, 4} do
    it("on " .. n .. " processes: many keys of every kind, one order everywhere", function()
      local out, err, status = mpirun(n, SCRIPT, {args = "--devices sim:2", limit = 300})
      assert.are.equal("", err)
      assert.are.equal(0, status)
      local want = {}
      for p = 0, n - 1 do
        want[#want + 1] = p .. "\tone target\t0"
        want[#want + 1] = p .. "\ta tree of targets\t0"
      end
      table.sort(want)
      assert.are.same(want, sorted_lines(out))
    end)
  end
end)
