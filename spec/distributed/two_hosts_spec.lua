-- runs: once
-- ipc-off: no
-- devices: any
-- needs: mpi, uts-namespace

-- A job over two hosts, simulated on this machine (README.md, "Many processes"): mpirun
-- --host host-a:2,host-b:2 starts each host's daemon through scripts/two-hosts-agent.sh, in
-- a UTS namespace named after the host, so that MPI sees two nodes (processes 0 and 1 on
-- host-a, 2 and 3 on host-b; TCP between them). A piece between two processes of one host
-- goes the one-copy path (the receiver copies it out of the sender's memory), a piece
-- between hosts as an MPI message: values are right either way, bytes_sent and
-- bytes_received are the plan's, and ipc_bytes is exactly the plan's bytes between
-- processes of one host; the trace names each peer's pieces "copy" (same host) or
-- "receive" (the other host). A failure on host-b, before or inside a collective, is an
-- error on every process of both hosts, promptly.
local H = require "helpers"
local mpirun, sorted_lines = H.mpirun, H.sorted_lines

local N, K = 4, 3 -- processes (2 a host), sim devices each: process p's k-th has id K p + k
local HOSTS = {"host-a", "host-b"}
local function host(p) return p // 2 end -- index into HOSTS, from 0
local RB, CB = 16, 6 -- rows of a row block, columns of a column block

-- x: float32 [8 RB, C = 8 CB], x[i][j] = i C + j, rows over ROWS (8 devices, process p holding
-- 2, 1, 2 and 3 of them: an uneven plan, so that the bytes between a pair depend on both
-- ends), then columns over COLS (3, 2, 1 and 2 of them). Mesh orders interleave the
-- processes, so each piece crosses from any process to any other.
local ROWS = {10, 0, 6, 4, 11, 1, 8, 9}
local COLS = {7, 3, 11, 0, 5, 2, 9, 1}

local SETUP = ([[
local RB, CB = %d, %d
local R, C = 8 * RB, 8 * CB
local p = dl.process_index()
local function mesh(ids)
  local d = {}
  for i, id in ipairs(ids) do d[i] = dl.devices()[id + 1] end
  return dl.Mesh(d, {"x"})
end
local rows = dl.NamedSharding(mesh({%s}), dl.P("x", nil))
local cols = dl.NamedSharding(mesh({%s}), dl.P(nil, "x"))
local function make()
  return dl.make_array_from_callback({R, C}, rows, function(index)
    local t = {}
    for i = index[1][1], index[1][2] do
      local row = {}
      for j = index[2][1], index[2][2] do row[#row + 1] = (i - 1) * C + j - 1 end
      t[#t + 1] = row
    end
    return dl.array(t, "float32")
  end)
end
local f = assert(io.open("/proc/sys/kernel/hostname"))
local hostname = f:read("l")
f:close()
]]):format(RB, CB, table.concat(ROWS, ", "), table.concat(COLS, ", ")) .. H.RESHARD_CHECKS

-- The plan, computed here from the meshes: bytes[s][q], what process s sends process q
-- (every row block meets every column block in one RB x CB float32 piece).
local function plan(from, to)
  local bytes = {}
  for s = 0, N - 1 do
    bytes[s] = {}
    for q = 0, N - 1 do bytes[s][q] = 0 end
  end
  for _, a in ipairs(from) do
    for _, b in ipairs(to) do
      local s, q = a // K, b // K
      bytes[s][q] = bytes[s][q] + RB * CB * 4
    end
  end
  return bytes
end

-- "sent received ipc" of process p under the plan; ipc counts what p received from a
-- process of its own host, when the one-copy path is on.
local function figures(bytes, p, ipc_on)
  local sent, received, ipc = 0, 0, 0
  for q = 0, N - 1 do
    if q ~= p then
      sent, received = sent + bytes[p][q], received + bytes[q][p]
      if ipc_on and host(q) == host(p) then ipc = ipc + bytes[q][p] end
    end
  end
  return ("%d %d %d"):format(sent, received, ipc)
end

-- Runs code after SETUP on N processes over HOSTS (helpers.mpirun); env adds to theirs.
local function run(code, env)
  local all = {DLRUN_DISTRIBUTED_TIMEOUT = "60"}
  for k, v in pairs(env or {}) do all[k] = v end
  return mpirun(N, SETUP .. code, {hosts = HOSTS, args = "--devices sim:" .. K, env = all})
end

describe("a job over two simulated hosts", function()
  it("the launch agent runs a command under the host name it is given", function()
    local out, status = H.capture_status("scripts/two-hosts-agent.sh host-b "
                                         .. "'cat /proc/sys/kernel/hostname; echo $((6 * 7))'")
    assert.are.same({"host-b\n42\n", 0}, {out, status})
  end)

  -- The plans differ between every two ways to pair the processes: a wrong host (for
  -- one, 0 and 2 on one host) gives other ipc_bytes.
  it("the spec's plan tells the pairings of processes apart", function()
    local bytes = plan(ROWS, COLS)
    local function ipc(pair)
      local t = {}
      for p = 0, N - 1 do t[#t + 1] = bytes[pair[p]][p] end
      return table.concat(t, " ")
    end
    local a = ipc({[0] = 1, 0, 3, 2})
    assert.are_not.equal(a, ipc({[0] = 2, 3, 0, 1}))
    assert.are_not.equal(a, ipc({[0] = 3, 2, 1, 0}))
  end)

  for _, mode in ipairs {"auto", "off"} do
    it(("rows to columns and back (DLRUN_DISTRIBUTED_IPC=%s): right values, the plan's "
        .. "bytes, %s"):format(mode, mode == "auto"
           and "copied straight within a host and sent as messages between hosts"
           or "every piece a message"), function()
      local base = os.tmpname()
      local out, err, status = run(([[
local x = make()
dl.transfer_stats{reset = true}
dl.trace_start(%q)
local y = dl.device_put(x, cols):block_until_ready()
dl.trace_stop()
print(p, hostname, "columns", right(y), stats())
local z = dl.device_put(y, rows):block_until_ready()
print(p, hostname, "rows", right(z), stats())]]):format(base .. ".json"),
                                   {DLRUN_DISTRIBUTED_IPC = mode})
      assert.are.equal("", err)
      assert.are.equal(0, status)
      local there, back = plan(ROWS, COLS), plan(COLS, ROWS)
      local want = {}
      for p = 0, N - 1 do
        local name = HOSTS[host(p) + 1]
        want[#want + 1] = ("%d\t%s\tcolumns\ttrue\t%s"):format(p, name,
                                                             figures(there, p, mode == "auto"))
        want[#want + 1] = ("%d\t%s\trows\ttrue\t%s"):format(p, name,
                                                          figures(back, p, mode == "auto"))
      end
      table.sort(want)
      assert.are.same(want, sorted_lines(out))
      -- Each process's trace: what came from each other process, and how.
      for p = 0, N - 1 do
        local path = ("%s.%d.json"):format(base, p)
        local from = {}
        for _, line in ipairs(H.trace_transfers(path)) do
          local how, s, bytes = line:match("^(%w+) %S+ (%d+) %S+ (%d+)$")
          if how then
            local key = how .. " from " .. s
            from[key] = (from[key] or 0) + tonumber(bytes)
          end
        end
        os.remove(path)
        local got, expected = {}, {}
        for key, bytes in pairs(from) do got[#got + 1] = key .. " " .. bytes end
        for s = 0, N - 1 do
          if s ~= p then
            local how = mode == "auto" and host(s) == host(p) and "copy" or "receive"
            expected[#expected + 1] = ("%s from %d %d"):format(how, s, there[s][p])
          end
        end
        table.sort(got)
        table.sort(expected)
        assert.are.same(expected, got, "process " .. p)
      end
      os.remove(base)
    end)
  end

  it("a bad call on host-b is an error on every process of both hosts; the job goes on",
     function()
    local out, err, status, seconds = run([[
local x = make()
local ok, e = pcall(dl.device_put, x, cols, p == 3 and {bogus = true} or nil)
print(p, ok, e.name, e.message)
print(p, "again", right(dl.device_put(x, cols)))]])
    assert.are.equal("", err)
    assert.are.equal(0, status)
    assert.is_true(seconds < 30, "took " .. seconds .. " s")
    local own = "device_put: unknown option 'bogus' (expected donate, may_alias)"
    local theirs = "RuntimeError\tdevice_put failed on process 3: ValueError: " .. own
    assert.are.same({
      "0\tagain\ttrue", "0\tfalse\t" .. theirs, "1\tagain\ttrue", "1\tfalse\t" .. theirs,
      "2\tagain\ttrue", "2\tfalse\t" .. theirs, "3\tagain\ttrue", "3\tfalse\tValueError\t" .. own,
    }, sorted_lines(out))
  end)

  it("a failure on host-b inside a reshard (a host allocation, at each point in turn) is an "
     .. "error on every process of both hosts; the job goes on", function()
    -- Process 2 fails its k-th host allocation inside the call, k = 1, 2, ... until the
    -- call succeeds; every process prints each attempt's outcome.
    local out, err, status, seconds = run([[
local x = make()
local k = 0
repeat
  k = k + 1
  if p == 2 then dl._debug.fail_alloc("host", k) end
  local ok, r = pcall(dl.device_put, x, cols)
  if p == 2 then dl._debug.fail_alloc("host", 0) end
  if ok then print(p, k, "ok", right(r), stats()) else print(p, k, r.name, r.message) end
until ok or k == 60]])
    assert.are.equal("", err)
    assert.are.equal(0, status)
    assert.is_true(seconds < 60, "took " .. seconds .. " s")
    local t = {} -- t[k][p]: the outcome of attempt k on process p
    for _, line in ipairs(H.lines(out)) do
      local p, k, rest = line:match("^(%d+)\t(%d+)\t(.*)$")
      assert(p, "unexpected line: " .. line)
      k, p = tonumber(k), tonumber(p)
      t[k] = t[k] or {}
      t[k][p] = rest
    end
    assert.is_true(#t >= 2, "no allocation failed:\n" .. out)
    local bytes = plan(ROWS, COLS)
    for k = 1, #t do
      if k == #t then
        for p = 0, N - 1 do
          -- the transfer counts of every attempt: the failed ones moved nothing
          assert.are.equal("ok\ttrue\t" .. figures(bytes, p, true), t[k][p], "process " .. p)
        end
      else
        local name, msg = t[k][2]:match("^(%w+)\t(.*)$")
        assert(name and name ~= "ok", "attempt " .. k .. " succeeded on process 2 alone:\n" .. out)
        for p = 0, N - 1 do
          if p ~= 2 then
            local step = (t[k][p] or ""):match("^RuntimeError\tdevice_put (%([%w ]+%) )failed on ")
            assert(step, "attempt " .. k .. ", process " .. p .. ": " .. tostring(t[k][p]))
            assert.are.equal(("RuntimeError\tdevice_put %sfailed on process 2: %s: %s"):format(
                               step, name, msg), t[k][p])
          end
        end
      end
    end
  end)

  it("an uncaught error on host-b while host-a waits in a collective ends the whole job "
     .. "promptly", function()
    local out, err, status, seconds = run([[
local x = make()
print(p, "ready")
io.stdout:flush()
if p == 3 then error("host-b gives up") end
dl.device_put(x, cols)
print(p, "done")]])
    assert.are_not.equal(0, status)
    assert.is_true(seconds < 30, "took " .. seconds .. " s")
    assert.are.same({"0\tready", "1\tready", "2\tready", "3\tready"}, sorted_lines(out))
    assert.truthy(err:find("\ndlrun%[3%]: %(command line%):%d+: host%-b gives up\n"), err)
  end)

  it("a process of host-b that dies before a collective takes the job down promptly",
     function()
    local out, _, status, seconds = run([[
local x = make()
print(p, "ready")
io.stdout:flush()
if p == 2 then
  os.execute("kill -9 " .. io.open("/proc/self/stat"):read("n"))
end
dl.device_put(x, cols)
print(p, "done")]])
    assert.are_not.equal(0, status)
    assert.is_true(seconds < 30, "took " .. seconds .. " s")
    assert.are.same({"0\tready", "1\tready", "2\tready", "3\tready"}, sorted_lines(out))
  end)
end)
