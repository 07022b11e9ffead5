-- runs: every-platform
-- ipc-off: no
-- devices: any
-- needs: mpi

-- Packed sub-byte arrays in a job of two processes: reshards across
-- processes move their bytes, process_allgather and broadcast_one_to_all
-- carry them as packed runs (an array whose bits do not fill whole bytes
-- cannot be gathered, with a ValueError), and assert_equal compares their
-- elements (float4_e2m1fn's -0 equals 0).
local H = require "helpers"

local SCRIPT = [[
local p, n = dl.process_index(), dl.process_count()
local function show(label, f)
  local ok, v = pcall(f)
  if ok then print(p, label, v) else print(p, label, v.name, v.message) end
end
local function hex(s)
  return (s:gsub(".", function(c) return string.format("%02X", c:byte()) end))
end
local m = dl.make_mesh({#dl.devices()}, {"x"})
local k = #dl.devices()
show("reshard", function()
  local x = dl.make_array_from_callback({4 * k}, dl.NamedSharding(m, dl.P("x")), function(idx)
    local first = idx[1][1]
    local t = {}
    for i = first, idx[1][2] do t[#t + 1] = (i - 1) % 16 - 8 end
    return dl.array(t, "int4")
  end)
  local y = dl.device_put(x, dl.NamedSharding(m, dl.P()))
  return hex(dl.process_allgather(y, true):tobytes():sub(1, 4))
end)
show("allgather", function()
  return hex(dl.process_allgather(dl.array({p, -p, 3, -8}, "int4")):tobytes())
end)
show("allgather odd", function() return dl.process_allgather(dl.array({1, 2, 3}, "int4")) end)
show("broadcast", function()
  return hex(dl.broadcast_one_to_all(dl.array({p, 1, 2, 3}, "uint2")):tobytes())
end)
show("equal", function()
  dl.assert_equal(dl.array({p == 0 and 0.0 or -0.0, 6}, "float4_e2m1fn"))
  return "ok"
end)
show("differ", function()
  dl.assert_equal(dl.array({1, 2, p == 1 and 3 or 4}, "uint4"))
  return "ok"
end)
]]

describe("sub-byte dtypes in a job", function()
  it("reshard, gather, broadcast and compare packed arrays on two processes", function()
    local out, err, status = H.mpirun(2, SCRIPT)
    assert.are.equal("", err)
    assert.are.equal(0, status)
    local lines = H.sorted_lines(out)
    local want = {}
    for p = 0, 1 do
      local function add(s) want[#want + 1] = p .. "\t" .. s end
      add("reshard\t98BADCFE")
      add("allgather\t0083F183")
      add("allgather odd\tValueError\tprocess_allgather: int4[3] takes 12 bits, not whole bytes, "
          .. "so the copies gathered would not each start on a byte of the packed result")
      add("broadcast\tE4")
      add("equal\tok")
      add("differ\tAssertionError\tProcess 1 holds a value different from process 0's (the "
          .. "first difference is at flat element 2).")
    end
    for _, l in ipairs(want) do
      local found = false
      for _, g in ipairs(lines) do found = found or g == l end
      assert(found, "missing line: " .. l .. "\ngot:\n" .. table.concat(lines, "\n"))
    end
  end)
end)
