-- runs: once
-- ipc-off: no
-- devices: any
-- needs: mpi

-- How many worker threads a runtime starts (README, "Devices and memory"): one per core
-- the process may use; processes of one job on one host that no launcher bound share
-- the host's cores evenly; DLRUN_WORKERS sets the number; dl.stats() and --stats say how
-- many and why. The expected figures come from nproc, which reads the same affinity.
local helpers = require "helpers"

local function nproc(all)
  local p = assert(io.popen(all and "nproc --all" or "nproc"))
  local n = tonumber(p:read("a"))
  p:close()
  return n
end

local function plural(n, word) return ("%d %s%s"):format(n, word, n == 1 and "" or "s") end

-- The note of a process alone with `cores` cores.
local function alone_note(cores)
  local n = math.min(cores, 64)
  return ("%s: the %s this process may use (DLRUN_WORKERS sets it)"):format(
    plural(n, "worker thread"), plural(cores, "core"))
end

local SHOW = "local s = dl.stats() print(s.workers, s.workers_note)"

describe("worker threads", function()
  it("are one per core this process may use, by default", function()
    local out, err, code = helpers.run_code('local dl = require "dlrun" ' .. SHOW)
    assert.are.equal("", err)
    assert.are.equal(0, code)
    local cores = nproc(false)
    assert.are.equal(("%d\t%s\n"):format(math.min(cores, 64), alone_note(cores)), out)
  end)

  it("follow the affinity a launcher gives (taskset to one core: one worker)", function()
    local first = helpers.capture("taskset -cp $$"):match(": (%d+)")
    local out, status = helpers.capture_status("taskset -c " .. first .. " " .. helpers.exe
                                               .. " -e 'local dl = require \"dlrun\" " .. SHOW .. "'")
    assert.are.equal(0, status)
    assert.are.equal("1\t" .. alone_note(1) .. "\n", out)
  end)

  it("are DLRUN_WORKERS when it is set, and --stats says so", function()
    local out, err, code = helpers.run({"--stats", "-e", 'local dl = require "dlrun" '
                                        .. "dl.zeros({4}) " .. SHOW}, nil, {DLRUN_WORKERS = "3"})
    assert.are.equal(0, code)
    assert.are.equal("3\t3 worker threads (DLRUN_WORKERS=3)\n", out)
    local lines = helpers.lines(err)
    assert.truthy(lines[1]:match("^dlrun stats %("))
    assert.are.equal("3 worker threads (DLRUN_WORKERS=3)", lines[2])
    assert.truthy(lines[3]:match("^device +in use"))
    out = helpers.run_code('local dl = require "dlrun" ' .. SHOW, nil, {DLRUN_WORKERS = "auto"})
    assert.are.equal(("%d\t%s\n"):format(math.min(nproc(false), 64), alone_note(nproc(false))),
                     out)
  end)

  it("refuse a bad DLRUN_WORKERS before the script runs, naming it", function()
    for _, bad in ipairs({"0", "65", "-2", "two", "3x", " 4", "1.5"}) do
      local out, err, code = helpers.run_code('print("ran")', nil, {DLRUN_WORKERS = bad})
      assert.are.equal("", out)
      assert.are.equal(1, code)
      assert.are.equal(("dlrun: ValueError: DLRUN_WORKERS=\"%s\" is not auto or a whole "
                        .. "number from 1 to 64\n"):format(bad), err)
    end
  end)

  -- Each process prints its index, its nproc, the machine's, and what dl.stats() says.
  local REPORT = [[
local function n(c) local p = io.popen(c) local v = tonumber(p:read("a")) p:close() return v end
local s = dl.stats()
print(("%d %d %d %d\t%s"):format(dl.process_index(), n("nproc"), n("nproc --all"), s.workers,
                                 s.workers_note))
]]

  local function check_job(np, mca)
    local out, err, status = helpers.mpirun(np, REPORT, {mca = mca, args = "--devices sim:1"})
    assert.are.equal(0, status, err)
    local seen = 0
    for _, line in ipairs(helpers.lines(out)) do
      local p, mine, all, workers, note = line:match("^(%d+) (%d+) (%d+) (%d+)\t(.*)$")
      assert.truthy(p, line)
      mine, all, workers = tonumber(mine), tonumber(all), tonumber(workers)
      local want, want_note
      if mine < all then -- bound by mpirun: its cores are its own
        want, want_note = mine, alone_note(mine)
      else -- unbound: the host's cores shared by the job's processes
        want = math.max(1, mine // np)
        want_note = ("%s: %s this process may use, shared by the job's %d processes on this "
                     .. "host (DLRUN_WORKERS sets it)"):format(plural(want, "worker thread"),
                                                               plural(mine, "core"), np)
      end
      assert.are.equal(want, workers, line)
      assert.are.equal(want_note, note)
      seen = seen + 1
    end
    assert.are.equal(np, seen, out .. err)
  end

  it("are shared by the unbound processes of a job on one host", function()
    check_job(4, helpers.MCA_SHM .. " --bind-to none")
  end)

  it("follow mpirun's binding of a job's processes", function()
    check_job(2, helpers.MCA_SHM)
  end)
end)
