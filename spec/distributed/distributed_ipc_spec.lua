-- runs: once
-- ipc-off: no
-- devices: any
-- needs: mpi

-- The one-copy path between processes on one host (DLRUN_DISTRIBUTED_IPC):
-- a cross-process piece between two processes that may map each other's
-- memory is one copy, by the receiver, straight out of the sender's memory
-- (sim and cpu memory are memfds; each peer region is mapped once). The
-- same jobs run with the path off (every piece an MPI message): values and
-- byte counts must agree; ipc_bytes says which path carried them. A peer
-- that dies mid-copy, a mapping that fails, and memory a peer freed and
-- gave back never crash or corrupt the others.
local H = require "helpers"
local mpirun, sorted_lines = H.mpirun, H.sorted_lines

local R, C = 64, 48 -- rows per device, columns: a reshard's pieces are strided

-- x: float32 [2 n R, C], x[i][j] = i * C + j, rows over every device; y: the
-- same columns-sharded (each piece a strided box of another process's shard).
local function setup(rows, cols) return ([[
local R, C = %d, %d
local p, n = dl.process_index(), dl.process_count()
local mesh = dl.make_mesh({2 * n}, {"x"})
local rows = dl.NamedSharding(mesh, dl.P("x", nil))
local cols = dl.NamedSharding(mesh, dl.P(nil, "x"))
local function make()
  local here = {}
  for i = 1, 2 * R do
    local r, row = p * 2 * R + i - 1, {}
    for j = 1, C do row[j] = r * C + j - 1 end
    here[i] = row
  end
  return dl.make_array_from_process_local_data(rows, dl.array(here, "float32"))
end
-- Peer regions this process maps (and its own memfds): lines of its maps.
local function memfds()
  local k = 0
  for line in io.lines("/proc/self/maps") do
    if line:find("memfd:dlrun", 1, true) then k = k + 1 end
  end
  return k
end
]]):format(rows, cols) .. H.RESHARD_CHECKS end
local SETUP = setup(R, C)

-- What one process sends (and receives) in the reshard: of each of its 2
-- row shards, the columns of the 2 (n - 1) devices of other processes.
local function moved(n, cols)
  local width = (cols or C) // (2 * n)
  return 2 * R * 4 * width * 2 * (n - 1)
end

local function run(n, code, opts)
  opts = opts or {}
  local env = {DLRUN_DISTRIBUTED_TIMEOUT = "60"}
  for k, v in pairs(opts.env or {}) do env[k] = v end
  return mpirun(n, code, {args = "--devices " .. (opts.devices or "sim:2"), env = env,
                          limit = opts.limit or 120, per_rank = opts.per_rank})
end

describe("memory between processes on one host", function()
  for _, n in ipairs {2, 3, 4} do
    for _, devices in ipairs {"sim:2", "cpu:2"} do
      for _, mode in ipairs {"auto", "off"} do
        it(("on %d processes on %s (DLRUN_DISTRIBUTED_IPC=%s): a reshard has the right values "
            .. "and exact byte counts, %s"):format(n, devices, mode,
               mode == "auto" and "all of it copied straight between the memories"
               or "all of it as messages"), function()
          local out, err, status = run(n, SETUP .. [[
local x = make()
dl.transfer_stats{reset = true}
local y = dl.device_put(x, cols)
print(p, right(y), stats())
local z = dl.device_put(y, rows)
print(p, "back", right(z), stats())]], {devices = devices, env = {DLRUN_DISTRIBUTED_IPC = mode}})
          assert.are.equal("", err)
          assert.are.equal(0, status)
          local b, want = moved(n), {}
          local ipc = mode == "auto" and b or 0
          for p = 0, n - 1 do
            want[#want + 1] = ("%d\ttrue\t%d %d %d"):format(p, b, b, ipc)
            want[#want + 1] = ("%d\tback\ttrue\t%d %d %d"):format(p, b, b, ipc)
          end
          table.sort(want)
          assert.are.same(want, sorted_lines(out))
        end)
      end
    end
  end

  -- Rows of 1 KiB and more stream (non-temporal stores) in a call that
  -- writes DLRUN_STREAM_BYTES or more: pulls, local copies and replicas alike.
  for _, n in ipairs {2, 4} do
    it(("on %d processes, with every copy streaming (DLRUN_STREAM_BYTES=1KiB): a reshard of "
        .. "wide rows has the right values and exact byte counts"):format(n), function()
      local wide = 1024 * n
      local out, err, status = run(n, setup(R, wide) .. [[
local x = make()
dl.transfer_stats{reset = true}
local y = dl.device_put(x, cols)
print(p, right(y), stats())
local z = dl.device_put(y, dl.NamedSharding(mesh, dl.P()))
print(p, "replicated", right(z))]], {env = {DLRUN_STREAM_BYTES = "1KiB"}, limit = 180})
      assert.are.equal("", err)
      assert.are.equal(0, status)
      local b, want = moved(n, wide), {}
      for p = 0, n - 1 do
        want[#want + 1] = ("%d\ttrue\t%d %d %d"):format(p, b, b, b)
        want[#want + 1] = ("%d\treplicated\ttrue"):format(p)
      end
      table.sort(want)
      assert.are.same(want, sorted_lines(out))
    end)
  end

  it("maps each peer's region once, not per transfer, and reads memory the peer freed, "
     .. "reused and gave back as it is now", function()
    local out, err, status = run(3, SETUP .. [[
local x = make()
local y = dl.device_put(x, cols)
local first = memfds()
for _ = 1, 4 do y = dl.device_put(x, cols) end
print(p, "maps", first == memfds(), right(y))
-- Every process frees its arrays, gives the pages back, and makes new ones
-- (at the same addresses): the peers' mappings read the new values.
x:delete(); y:delete()
for _, d in ipairs(dl.local_devices()) do d:release_unused() end
local x2 = make()
local y2 = dl.device_put(x2, cols)
print(p, "after", right(y2), memfds() == first, stats():match("(%d+)$") ~= "0")]])
    assert.are.equal("", err)
    assert.are.equal(0, status)
    assert.are.same({"0\tafter\ttrue\ttrue\ttrue", "0\tmaps\ttrue\ttrue",
                     "1\tafter\ttrue\ttrue\ttrue", "1\tmaps\ttrue\ttrue",
                     "2\tafter\ttrue\ttrue\ttrue", "2\tmaps\ttrue\ttrue"}, sorted_lines(out))
  end)

  it("a mapping that fails on one process is an error on every process; the job goes on",
     function()
    local out, err, status = run(3, SETUP .. [[
local x = make()
local ok, e = pcall(dl.device_put, x, cols)
print(p, ok, e.name, p == 1 and e.message or e.message:match("^.-: "))
local y = dl.device_put(x, cols)
print(p, "again", right(y))]], {per_rank = '[ "$OMPI_COMM_WORLD_RANK" = 1 ] && export DLRUN_FAIL_IPC_MAP=1'})
    assert.are.equal("", err)
    assert.are.equal(0, status)
    assert.are.same({
      "0\tagain\ttrue",
      "0\tfalse\tRuntimeError\tdevice_put (copied between processes) failed on process 1: ",
      "1\tagain\ttrue",
      "1\tfalse\tRuntimeError\tcannot map the memory of process 0: injected failure "
        .. "(DLRUN_FAIL_IPC_MAP)",
      "2\tagain\ttrue",
      "2\tfalse\tRuntimeError\tdevice_put (copied between processes) failed on process 1: ",
    }, sorted_lines(out))
  end)

  it("a copy out of a peer's memory that fails on the device is an error on every process; "
     .. "the job goes on", function()
    local out, err, status = run(3, SETUP .. [[
local x = make()
-- Every block to the devices of the next process: process 1's only copies
-- are its pulls.
local d, moved = dl.devices(), {}
for k = 1, 2 * n do moved[k] = d[(k + 1) % (2 * n) + 1] end
local rotated = dl.NamedSharding(dl.Mesh(moved, {"x"}), dl.P("x", nil))
local function arm(k)
  if p ~= 1 then return end
  for _, dev in ipairs(dl.local_devices()) do
    if dev.platform == "sim" then dl._debug.inject_failure(dev, "copy", k) end
  end
end
arm(1)
local ok, e = pcall(dl.device_put, x, rotated)
print(p, ok, e.name, p == 1 and "own" or e.message:match("^.-: "))
arm(0)
local ok2, y = pcall(dl.device_put, x, rotated)
print(p, "again", ok2, ok2 and right(y))]])
    assert.are.equal("", err)
    assert.are.equal(0, status)
    assert.are.same({
      "0	again	true	true",
      "0	false	RuntimeError	device_put (copied between processes) failed on process 1: ",
      "1	again	true	true", "1	false	RuntimeError	own",
      "2	again	true	true",
      "2	false	RuntimeError	device_put (copied between processes) failed on process 1: ",
    }, sorted_lines(out))
  end)

  it("processes that do not all want it copy through messages, with the same values",
     function()
    local out, err, status = run(2, SETUP .. [[
local x = make()
dl.transfer_stats{reset = true}
print(p, right(dl.device_put(x, cols)), stats())]],
      {per_rank = '[ "$OMPI_COMM_WORLD_RANK" = 1 ] && export DLRUN_DISTRIBUTED_IPC=off'})
    assert.are.equal("", err)
    assert.are.equal(0, status)
    local b = moved(2)
    assert.are.same({("0\ttrue\t%d %d 0"):format(b, b), ("1\ttrue\t%d %d 0"):format(b, b)},
                    sorted_lines(out))
  end)

  it("a peer killed while another copies out of its memory takes the job down promptly; "
     .. "the copier does not crash", function()
    local out, err, status, seconds = run(2, SETUP .. [[
local x = make()
io.stdout:write(p, " ready\n"); io.stdout:flush()
if p == 1 then
  local pid = io.open("/proc/self/stat"):read("n")
  os.execute("(sleep 1; kill -9 " .. pid .. ") &")
end
local y = dl.device_put(x, cols)
print(p, "done", right(y))]], {env = {DLRUN_IPC_DELAY_MS = "3000"}, limit = 60})
    assert.are_not.equal(0, status)
    assert.is_true(seconds < 30, "took " .. seconds .. " s")
    assert.are.same({"0 ready", "1 ready"}, sorted_lines(out))
    assert.falsy(err:find("Segmentation", 1, true), err)
    assert.falsy(err:find("Bus error", 1, true), err)
    assert.falsy(err:find("signal 11", 1, true), err)
    assert.falsy(err:find("signal 7", 1, true), err)
  end)

  it("DLRUN_DISTRIBUTED_IPC other than auto or off is a ValueError naming the choices",
     function()
    local out, err, status = run(2, 'print("never")', {env = {DLRUN_DISTRIBUTED_IPC = "on"}})
    assert.are_not.equal(0, status)
    assert.are.equal("", out)
    assert.truthy(err:find('ValueError: DLRUN_DISTRIBUTED_IPC="on" is not one of auto, off',
                           1, true), err)
  end)
end)
