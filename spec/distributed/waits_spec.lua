-- runs: once
-- ipc-off: no
-- devices: any
-- needs: mpi

-- A process that waits for the others in a collective leaves its core to the rest of
-- the machine (its own worker threads, other processes on the host): after a short spin
-- it polls with sleeps, so a long wait costs little CPU time, yet the call still ends
-- as soon as the others arrive.
local helpers = require "helpers"

describe("a wait in a collective", function()
  it("costs little CPU while another process is late, and ends when it arrives", function()
    local out, err, status = helpers.mpirun(2, [[
local late = 2.0
if dl.process_index() == 1 then os.execute("sleep " .. late) end
local c0 = os.clock()
dl.sync_global_devices("after the late process")
print(("%d cpu %.3f"):format(dl.process_index(), os.clock() - c0))
]], {args = "--devices sim:1"})
    assert.are.equal(0, status, err)
    local cpu = {}
    for _, line in ipairs(helpers.lines(out)) do
      local p, c = line:match("^(%d) cpu ([%d.]+)$")
      assert.truthy(p, line)
      cpu[tonumber(p)] = tonumber(c)
    end
    assert.truthy(cpu[0] and cpu[1], out)
    -- Process 0 waited about 2 s; spinning would have cost about that much CPU time.
    assert.is_true(cpu[0] < 0.4, ("process 0 used %.3f s of CPU while waiting"):format(cpu[0]))
    assert.is_true(cpu[1] < 0.4, ("process 1 used %.3f s of CPU"):format(cpu[1]))
  end)
end)
