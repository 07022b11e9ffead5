-- runs: once
-- ipc-off: yes
-- devices: any
-- needs: mpi

-- Many processes (README.md, "Many processes"): a failure on one process
-- after a call is agreed on reaches every process before any result is
-- returned (no wrong value, no wait for the timeout); agreements compare
-- whole values; every process cuts messages alike. On 2, 3 and 4 processes.
local H = require "helpers"

local mpirun, sorted_lines = H.mpirun, H.sorted_lines

-- Lines "<process>\t<k>\t<outcome>" into t[k][process].
local function by_attempt(out)
  local t = {}
  for line in out:gmatch("[^\n]+") do
    local p, k, rest = line:match("^(%d+)\t(%d+)\t(.*)$")
    assert(p, "unexpected line: " .. line)
    t[tonumber(k)] = t[tonumber(k)] or {}
    t[tonumber(k)][tonumber(p)] = rest
  end
  return t
end

-- Process 1 fails its k-th host allocation inside `call`, for k = 1, 2, ...
-- until the call succeeds; every process prints each attempt's outcome (of
-- `shown`, an expression of the result r, made after the injection).
local function inject(setup, call, shown)
  return setup .. "local function shown(r) return " .. (shown or "r") .. " end\n" .. [[
local p = dl.process_index()
local k = 0
repeat
  k = k + 1
  if p == 1 then dl._debug.fail_alloc("host", k) end
  local ok, r = pcall(function() return ]] .. call .. [[ end)
  if p == 1 then dl._debug.fail_alloc("host", 0) end
  local v = ok and shown(r)
  if ok then print(p, k, "ok", type(v) == "string" and v or show(v))
  else print(p, k, r.name, r.message) end
until ok or k == 150]]
end

-- Each attempt failed on every process (process 1 with its own error, the
-- others with "<call...> failed on process 1: <name>: <message>", `call` a
-- pattern), and the last succeeded everywhere with `want`.
local function check_attempts(n, out, call, want)
  local t = by_attempt(out)
  assert.is_true(#t >= 2, "no allocation failed:\n" .. out)
  for k = 1, #t do
    local own = t[k][1]
    if k == #t then
      for p = 0, n - 1 do assert.are.equal("ok\t" .. want, t[k][p]) end
    else
      local name, msg = own:match("^(%w+)\t(.*)$")
      assert(name and name ~= "ok", "attempt " .. k .. " succeeded on process 1 alone:\n" .. out)
      for p = 0, n - 1 do
        if p ~= 1 then
          local got = t[k][p]
          local prefix = got:match("^RuntimeError\t(" .. call .. "[^\t]-) failed on process 1: ")
          assert(prefix, "attempt " .. k .. ", process " .. p .. ": " .. tostring(got)
                         .. "\n(process 1: " .. own .. ")")
          assert.are.equal("RuntimeError\t" .. prefix .. " failed on process 1: " .. name
                           .. ": " .. msg, got)
        end
      end
    end
  end
end

describe("a host allocation that fails on one process after the agreement", function()
  for _, n in ipairs {2, 3, 4} do
    it("inside process_allgather raises on every process, on " .. n .. " processes", function()
      local out, err, status = mpirun(n, inject(H.SHOW_SHARDS .. [[
local x = dl.array({dl.process_index() + 1, 10}, "float32")
]], "dl.process_allgather(x)"), {env = {DLRUN_DISTRIBUTED_TIMEOUT = "60"}})
      assert.are.equal("", err)
      assert.are.equal(0, status)
      local rows = {}
      for p = 0, n - 1 do rows[#rows + 1] = (p + 1) .. ".0,10.0" end
      check_attempts(n, out, "process_allgather", table.concat(rows, ";"))
    end)

    -- On 4 devices a process copies what it receives to its 3 other
    -- replicas after the exchange: several copies, none of them allowed to
    -- fail there for want of memory.
    for _, per in ipairs(n == 2 and {2, 4} or {2}) do
      it(("inside a device_put between processes raises on every process, on %d processes "
          .. "of %d devices"):format(n, per), function()
        local out, err, status = mpirun(n, inject(H.SHOW_SHARDS .. ([[
local m = dl.make_mesh({%d * dl.process_count()}, {"x"})
local x = dl.arange(0, 4 * dl.process_count(), 1, "int32", dl.NamedSharding(m, dl.P("x")))
local rep = dl.NamedSharding(m, dl.P())
]]):format(per), "dl.device_put(x, rep)", "r.addressable_shards[1].data"),
                                            {args = "--devices sim:" .. per,
                                             env = {DLRUN_DISTRIBUTED_TIMEOUT = "60"}})
        assert.are.equal("", err)
        assert.are.equal(0, status)
        local all = {}
        for i = 0, 4 * n - 1 do all[#all + 1] = i end
        check_attempts(n, out, "device_put", table.concat(all, ","))
      end)
    end
  end
end)

describe("a host allocation that fails on one process inside the other collectives", function()
  it("broadcast_one_to_all and assert_equal raise on every process", function()
    local x = H.SHOW_SHARDS .. [[
local x = dl.array({7, 8}, "int16")
]]
    local out, err, status = mpirun(3, inject(x, "dl.broadcast_one_to_all(x)"),
                                    {env = {DLRUN_DISTRIBUTED_TIMEOUT = "60"}})
    assert.are.equal("", err)
    assert.are.equal(0, status)
    check_attempts(3, out, "broadcast_one_to_all", "7,8")
    out, err, status = mpirun(3, inject(x, "dl.assert_equal(x)", "'equal'"),
                              {env = {DLRUN_DISTRIBUTED_TIMEOUT = "60"}})
    assert.are.equal("", err)
    assert.are.equal(0, status)
    check_attempts(3, out, "assert_equal", "equal")
  end)

  it("process_allgather of a global array (a device_put inside) raises on every process",
     function()
    local out, err, status = mpirun(3, inject(H.SHOW_SHARDS .. [[
local g = dl.arange(0, 6, 1, "int32", dl.NamedSharding(dl.make_mesh({3}, {"x"}), dl.P("x")))
]], "dl.process_allgather(g, true)"), {args = "--devices sim:1",
                                          env = {DLRUN_DISTRIBUTED_TIMEOUT = "60"}})
    assert.are.equal("", err)
    assert.are.equal(0, status)
    -- The put inside says which of its steps met the failure.
    check_attempts(3, out, "[%w_]+", "0,1,2,3,4,5")
  end)
end)

describe("DLRUN_DISTRIBUTED_MESSAGE_BYTES", function()
  for _, n in ipairs {2, 3, 4} do
    it("set otherwise on one process is a ValueError on every process when joining, on " .. n
       .. " processes", function()
      local last = n - 1
      local out, err, status, secs = mpirun(n, [[print("ran")]], {
        per_rank = "export DLRUN_DISTRIBUTED_MESSAGE_BYTES=$((OMPI_COMM_WORLD_RANK == " .. last
                   .. " ? 8192 : 4096))"})
      assert.are.equal("", out)
      assert.are_not.equal(0, status)
      assert.is_true(secs < 60)
      for p = 0, n - 1 do
        local other = p == last and 0 or last
        local line = "dlrun[" .. p .. "]: ValueError: DLRUN_DISTRIBUTED_MESSAGE_BYTES mismatch: "
                     .. "process " .. p .. " has '" .. (p == last and 8192 or 4096)
                     .. "', process " .. other .. " '" .. (p == last and 4096 or 8192) .. "'\n"
        assert.is_truthy(err:find(line, 1, true), "missing: " .. line .. "in:\n" .. err)
      end
    end)
  end
end)

describe("agreements compare whole values", function()
  it("sync_global_devices names that differ after a NUL, in their hash only, or past 512 "
     .. "bytes raise on every process; equal ones pass", function()
    -- "kjrbxw" and "kpscra" have the same 32-bit FNV-1a hash and length.
    local out, err, status = mpirun(2, [[
local p = dl.process_index()
local long = ("x"):rep(600)
for _, names in ipairs {{"a\0b", "a\0c"}, {"kjrbxw", "kpscra"}, {long .. "0", long .. "1"},
                        {"same\0", "same\0"}, {long, long}} do
  local ok, e = pcall(dl.sync_global_devices, names[p + 1])
  print(p, ok, ok or e.name, ok or e.message)
end]])
    assert.are.equal("", err)
    assert.are.equal(0, status)
    local x95 = ("x"):rep(95)
    local want = {}
    for p = 0, 1 do
      local q = 1 - p
      local function line(a, b, tail)
        return p .. "\tfalse\tRuntimeError\tsync_global_devices name mismatch: process " .. p
               .. " has '" .. a .. "', process " .. q .. " '" .. b .. "'" .. (tail or "")
      end
      local mine, theirs = {"a\\0b", "kjrbxw"}, {"a\\0c", "kpscra"}
      if p == 1 then mine, theirs = theirs, mine end
      want[#want + 1] = line(mine[1], theirs[1])
      want[#want + 1] = line(mine[2], theirs[2])
      want[#want + 1] = line(x95 .. "...", x95 .. "...", " (they differ from byte 600 on)")
      want[#want + 1] = p .. "\ttrue\ttrue\ttrue"
      want[#want + 1] = p .. "\ttrue\ttrue\ttrue"
    end
    table.sort(want)
    assert.are.same(want, sorted_lines(out))
  end)

  for _, n in ipairs {3, 4} do
    it("a name with NUL names the barrier escaped when a process is late, on " .. n
       .. " processes", function()
      local out = mpirun(n, [[
if dl.process_index() > 0 then os.execute("sleep 2") end
local ok, e = pcall(dl.sync_global_devices, "late\0" .. dl.process_index())
if dl.process_index() == 0 then print(ok, e.message) end
]], {env = {DLRUN_DISTRIBUTED_TIMEOUT = "0.5"}})
      local who = n == 3 and "processes 1 and 2" or "processes 1, 2 and 3"
      assert.are.equal("false\tsync_global_devices('late\\00'): " .. who
                       .. " did not arrive within 0.5 s\n", out)
    end)
  end
end)
