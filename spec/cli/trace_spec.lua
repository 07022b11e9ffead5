-- runs: every-platform
-- ipc-off: no
-- devices: 8
-- needs: mpi, python3

-- dlrun --trace and --stats (README.md, "The dlrun command"; docs/lua-api.md, "Tracing and
-- stats").
local helpers = require "helpers"

local PIPELINE = [[
local dl = require "dlrun"
local mesh = dl.make_mesh({8}, {"x"})
local x = dl.arange(0, 1024, 1, "float32", dl.NamedSharding(mesh, dl.P("x")))
local y = dl.device_put(x, dl.devices()[1])
local c = y:__dlpack__{legacy_sharing = "share"}
local z = dl.from_dlpack(c)
c, z = nil, nil
collectgarbage()
print("done")
]]

-- Parse JSON with the specs' Python (spec/python_side.lua: DLRUN_PYTHON, else
-- Debian's python3, which the deps script installs) and print "<name> <count>" lines plus track names.
local SUMMARY = [[
import collections, json, sys
d = json.load(open(sys.argv[1]))
ev = d["traceEvents"]
print("events", len(ev))
for name, n in sorted(collections.Counter(e["name"] for e in ev if e["ph"] == "X").items()):
    print("name", name, n)
for e in ev:
    if e["ph"] == "M" and e["name"] == "thread_name":
        print("track", e["pid"], e["args"]["name"])
copies = [e for e in ev if e["name"] == "copy"]
print("copy_bytes", sum(e["args"]["bytes"] for e in copies))
print("copy_fields", all({"bytes", "src", "dst"} <= set(e["args"]) for e in copies))
print("durations", all(isinstance(e["dur"], int) and e["dur"] >= 0 for e in ev if e["ph"] == "X"))
]]

local PYTHON = require("python_side").PYTHON

local function python_summary(path)
  local script = os.tmpname()
  local f = assert(io.open(script, "w"))
  f:write(SUMMARY)
  f:close()
  local p = assert(io.popen(helpers.shell_quote(PYTHON) .. " " .. helpers.shell_quote(script) .. " "
                            .. helpers.shell_quote(path) .. " 2>&1"))
  local out = p:read("a")
  p:close()
  os.remove(script)
  return out
end

-- The cases below read sim's device tracks and the stats of sim:8, whatever
-- auto gives in this pass (every CUDA device in the cuda pass): their
-- devices are sim:8.
describe("dlrun --trace", function()
  -- Host execution records each unit as it runs; a module's queue (cuda,
  -- opencl) has its work recorded by the library when it completes
  -- (src/device/enqueue.c): the same events, on the same tracks.
  it("records the pipeline's work on the tracks of what auto gives (" .. helpers.auto().spec .. ")",
     function()
    local trace = os.tmpname()
    local out, err, status = helpers.run({"--trace", trace, "-"}, PIPELINE, {DLRUN_DEVICES = ""})
    assert.are.same({"done\n", "", 0}, {out, err, status})
    local summary = python_summary(trace)
    os.remove(trace)
    assert.truthy(summary:find("name arange 8\n", 1, true), summary)
    assert.truthy(summary:find("name copy 8\n", 1, true), summary)
    assert.truthy(summary:find("copy_bytes 4096\n", 1, true), summary)
    for i = 0, 7 do
      assert.truthy(summary:find("track 1 " .. helpers.auto_dev(i) .. "\n", 1, true), summary)
    end
  end)

  it("writes valid Chrome trace JSON with the pipeline's events and tracks", function()
    local trace = os.tmpname()
    local out, err, status = helpers.run({"--trace", trace, "-"}, PIPELINE, {DLRUN_DEVICES = "sim:8"})
    assert.are.equal("done\n", out)
    assert.are.equal("", err)
    assert.are.equal(0, status)
    local summary = python_summary(trace)
    os.remove(trace)
    -- 8 shards filled, 7 copied in + 1 local copy, one export, import, deleter
    assert.truthy(summary:find("name arange 8\n", 1, true), summary)
    assert.truthy(summary:find("name copy 8\n", 1, true), summary)
    assert.truthy(summary:find("name export 1\n", 1, true), summary)
    assert.truthy(summary:find("name import 1\n", 1, true), summary)
    assert.truthy(summary:find("name deleter 1\n", 1, true), summary)
    assert.truthy(summary:find("name alloc 9\n", 1, true), summary)
    assert.truthy(summary:find("copy_bytes 4096\n", 1, true), summary)
    assert.truthy(summary:find("copy_fields True\n", 1, true), summary)
    assert.truthy(summary:find("durations True\n", 1, true), summary)
    -- one track per device stream (pid 1) and per host thread (pid 2)
    for i = 0, 7 do
      assert.truthy(summary:find("track 1 SimDevice(id=" .. i .. ")\n", 1, true), summary)
    end
    assert.truthy(summary:find("track 2 host thread 1\n", 1, true), summary)
  end)

  -- The work of each module's queue, in every pass: on the CUDA driver double
  -- of the tests and on pocl's CPU devices (pending where one is not here).
  local BUILD = helpers.exe:match("^(.*)/[^/]*$") or "build"
  local PTHREADS = ("pthread "):rep(8):sub(1, -2)
  for _, m in ipairs {
    {platform = "cuda", class = "CudaDevice",
     env = {DLRUN_CUDA_LIBRARY = BUILD .. "/tests/cuda-double/libcuda.so.1",
            CUDA_DOUBLE_DEVICES = "8"}},
    {platform = "opencl", class = "OpenclDevice", env = {POCL_DEVICES = PTHREADS}},
  } do
    it("records the work of " .. m.platform .. ":8's queues on their device tracks", function()
      local listed = helpers.run({"--list-devices"}, nil, m.env)
      if not ("\n" .. listed):find("\n" .. m.platform .. " +available: 8 devices\n") then
        return pending(m.platform .. ":8 is not here: " .. listed)
      end
      local trace = os.tmpname()
      local out, err, status = helpers.run({"--devices", m.platform .. ":8", "--trace", trace, "-"},
                                           PIPELINE, m.env)
      assert.are.same({"done\n", "", 0}, {out, err, status})
      local summary = python_summary(trace)
      os.remove(trace)
      for _, line in ipairs {"name arange 8", "name copy 8", "copy_bytes 4096",
                             "copy_fields True", "durations True"} do
        assert.truthy(summary:find(line .. "\n", 1, true), summary)
      end
      for i = 0, 7 do
        assert.truthy(summary:find(("track 1 %s(id=%d)\n"):format(m.class, i), 1, true), summary)
      end
    end)
  end

  it("refuses an unwritable trace file before the script runs, with status 1", function()
    local out, err, status = helpers.run({"--trace", "/nonexistent-dir/t.json", "-e", "print('ran')"})
    assert.are.equal("", out)
    assert.are.equal('dlrun: RuntimeError: cannot write the trace file "/nonexistent-dir/t.json": '
                       .. "No such file or directory\n", err)
    assert.are.equal(1, status)
  end)

  it("creates the file before the script runs", function()
    local trace = os.tmpname()
    os.remove(trace)
    local code = ("print(io.open(%q) ~= nil)"):format(trace)
    local out, err, status = helpers.run({"--trace", trace, "-e", code})
    assert.are.equal("true\n", out)
    assert.are.equal("", err)
    assert.are.equal(0, status)
    os.remove(trace)
  end)

  -- A script ending with os.exit skips the end of main; the trace must be
  -- complete all the same.
  for _, ending in ipairs{"os.exit(3)", "os.exit(3, true)", "os.exit(true)"} do
    it(("is complete when the script ends with %s"):format(ending), function()
      local trace = os.tmpname()
      local code = PIPELINE .. ending .. "\n"
      local out, err, status = helpers.run({"--trace", trace, "--stats", "-"}, code,
                                           {DLRUN_DEVICES = "sim:8"})
      assert.are.equal("done\n", out)
      assert.are.equal(ending == "os.exit(true)" and 0 or 3, status)
      assert.truthy(err:find("^dlrun stats %(sim:8,cpu:1%)\n"), err)
      local summary = python_summary(trace)
      os.remove(trace)
      assert.truthy(summary:find("name arange 8\n", 1, true), summary)
      assert.truthy(summary:find("name copy 8\n", 1, true), summary)
      assert.truthy(summary:find("name export 1\n", 1, true), summary)
      assert.truthy(summary:find("copy_bytes 4096\n", 1, true), summary)
      assert.truthy(summary:find("track 1 SimDevice(id=7)\n", 1, true), summary)
    end)
  end

  -- Events are streamed to the file, not kept: tracing a run of 150000
  -- events adds almost nothing to its peak memory (kept, they cost about 220
  -- bytes each: over 30 MiB).
  it("keeps memory flat however many events there are", function()
    local code = [[
      local dl = require "dlrun"
      local dev = dl.devices()[1]
      for i = 1, tonumber(arg[1]) do   -- alloc, fill and free: 3 events each
        local b = dl.zeros({1}, "uint8", dev)
        b:delete()
      end
      collectgarbage()
      local f = io.open("/proc/self/status")
      local kib = f:read("a"):match("VmHWM:%s*(%d+) kB")
      f:close()
      io.write(kib)
    ]]
    local script = os.tmpname()
    local f = assert(io.open(script, "w"))
    f:write(code)
    f:close()
    -- Under AddressSanitizer, freed memory waits in a quarantine: none here.
    local env = {DLRUN_DEVICES = "sim:8",
                 ASAN_OPTIONS = (os.getenv("ASAN_OPTIONS") or "") .. ":quarantine_size_mb=0"}
    -- Peak RSS in KiB and trace size in bytes of a run of n iterations.
    local function measure(n, traced)
      local trace = os.tmpname()
      local args = traced and {"--trace", trace, script, tostring(n)} or {script, tostring(n)}
      local out, err, status = helpers.run(args, nil, env)
      assert.are.equal(0, status, err)
      local t = assert(io.open(trace))
      local size = t:seek("end")
      t:close()
      os.remove(trace)
      return tonumber(out), size
    end
    local plain = measure(50000, false)
    local traced, size = measure(50000, true)
    local _, small_size = measure(1000, true)
    os.remove(script)
    assert(size > 40 * small_size, ("trace sizes %d and %d"):format(small_size, size))
    assert(traced - plain < 4096,
           ("peak RSS %d KiB traced, %d KiB not traced"):format(traced, plain))
  end)

  it("needs a value", function()
    local _, err, status = helpers.run({"--trace"})
    assert.are.equal(1, status)
    assert.truthy(err:find("option '--trace' needs a value", 1, true), err)
  end)
end)

describe("dlrun --stats", function()
  -- What is alive at the end of the script, while its globals still hold it,
  -- then what closing the state released.
  it("prints memory, traffic and live exports per device at the end of the script", function()
    local code = [[
      local dl = require "dlrun"
      local mesh = dl.make_mesh({8}, {"x"})
      local x = dl.arange(0, 1024, 1, "float32", dl.NamedSharding(mesh, dl.P("x")))
      local y = dl.device_put(x, dl.devices()[1])
      leaked = y:__dlpack__{legacy_sharing = "share"} -- a global: still alive at exit
      keep = y
    ]]
    local _, err, status = helpers.run({"--stats", "-e", code}, nil,
                                       {DLRUN_DEVICES = "sim:8", DLRUN_WORKERS = "2"})
    assert.are.equal(0, status)
    local lines = {}
    for l in err:gmatch("[^\n]+") do lines[#lines + 1] = l end
    assert.are.equal("dlrun stats (sim:8,cpu:1)", lines[1])
    assert.are.equal("2 worker threads (DLRUN_WORKERS=2)", table.remove(lines, 2))
    assert.truthy(lines[2]:find("device%s+in use%s+peak%s+moved in%s+moved out%s+largest free%s+"
                                .. "frag%s+exports alive"))
    -- device 0 received 7 shards of 512 bytes; the others sent one each.
    -- The gathered 4 KiB and its export are alive (globals); the shards,
    -- held by locals only, are not: memory of one block in use, the rest free
    -- in one block, no fragmentation
    local free0, frag0 = lines[3]:match(
      "^SimDevice%(id=0%)%s+4%.00KiB%s+4%.50KiB%s+3%.50KiB%s+0B%s+(%S+)%s+(%S+)%s+1$")
    assert.truthy(free0, lines[3])
    assert.truthy(free0:match("^%d+%.%d%d[KMG]iB$"), free0)
    assert.are.equal("0.0%", frag0)
    assert.truthy(lines[4]:match("^SimDevice%(id=1%)%s+0B%s+512B%s+0B%s+512B%s+%S+%s+0%.0%%%s+0$"),
                  lines[4])
    -- title, header, 8 sim devices, 1 cpu device, then what the close released
    assert.are.equal(12, #lines)
    assert.are.equal("dlrun stats: released when the state closed: 4.00KiB on SimDevice(id=0); "
                     .. "1 export", lines[12])
  end)

  it("shows an export that is still alive", function()
    -- os.exit without closing the state: the capsule is never collected, so
    -- its export stays alive, as a leak in a consumer would
    local code = [[
      local dl = require "dlrun"
      local c = dl.arange(8, "float32"):__dlpack__()
      print(dl.live_exports())
      os.exit(0)
    ]]
    local out, err, status = helpers.run({"--stats", "-e", code}, nil, {DLRUN_DEVICES = "sim:8"})
    assert.are.equal(0, status)
    assert.are.equal("1\n", out)
    local row = err:match("SimDevice%(id=0%)[^\n]*")
    assert.truthy(row, err)
    assert.are.equal("1", row:match("(%d+)$"))
    assert.is_nil(err:find("released", 1, true), err) -- the state was not closed
    -- a global holds the capsule at the end of the script; closing the state
    -- collects it
    code = [[leaked = require("dlrun").arange(8, "float32"):__dlpack__()]]
    _, err, status = helpers.run({"--stats", "-e", code}, nil, {DLRUN_DEVICES = "sim:8"})
    assert.are.equal(0, status)
    row = err:match("SimDevice%(id=0%)[^\n]*")
    assert.truthy(row, err)
    assert.are.equal("1", row:match("(%d+)$"))
    assert.truthy(row:match("^SimDevice%(id=0%)%s+256B%s"), row)
    local released = "\ndlrun stats: released when the state closed: 256B on SimDevice(id=0); "
                     .. "1 export\n"
    assert.are.equal(released, err:sub(-#released))
  end)

  -- os.exit with and without closing the state, and an uncaught error: the
  -- table shows what the script left alive; a close says what it released.
  for _, case in ipairs {
    {ending = "os.exit(3, true)", status = 3, released = true},
    {ending = "os.exit(3)", status = 3, released = false},
    {ending = "error('stop here')", status = 1, released = true},
  } do
    it("reports what is alive when the script ends with " .. case.ending, function()
      local code = ([[
        local dl = require "dlrun"
        kept = dl.zeros({256}, "float32", dl.devices()[2])   -- 1 KiB
        capsule = dl.arange(8, "float32", dl.devices()[1]):__dlpack__()
        %s
      ]]):format(case.ending)
      local _, err, status = helpers.run({"--stats", "-e", code}, nil, {DLRUN_DEVICES = "sim:8"})
      assert.are.equal(case.status, status)
      local row0 = err:match("\nSimDevice%(id=0%)[^\n]*")
      local row1 = err:match("\nSimDevice%(id=1%)[^\n]*")
      assert.truthy(row0 and row0:match("^\nSimDevice%(id=0%)%s+256B%s.*%s1$"), err)
      assert.truthy(row1 and row1:match("^\nSimDevice%(id=1%)%s+1%.00KiB%s.*%s0$"), err)
      local released = "dlrun stats: released when the state closed: 256B on SimDevice(id=0), "
                       .. "1.00KiB on SimDevice(id=1); 1 export\n"
      if case.released then
        assert.are.equal(released, err:sub(-#released), err)
      else
        assert.is_nil(err:find("released", 1, true), err)
      end
      if status == 1 then assert.truthy(err:find("^dlrun: %(command line%):4: stop here"), err) end
    end)
  end

  it("says so when no device was used", function()
    local _, err, status = helpers.run({"--stats", "-e", "print(1)"})
    assert.are.equal(0, status)
    assert.are.equal("dlrun stats: no device was used\n", err)
  end)
end)

describe("progress on stderr", function()
  -- Under a pseudo-terminal (util-linux `script`), with transfers in flight
  -- for seconds, everything written to the terminal (by print, io.write,
  -- file:write, warn, and dlrun's own error report) starts on a clean line:
  -- the progress line ("...(99%)" ESC[K) is erased (CR ESC[K) first (issue
  -- 10, item 13).
  it("is erased before the script writes to the terminal", function()
    -- `script` comes with bsdutils, which scripts/deps.sh installs. 32 copies
    -- stay queued: enough that the time date(1) takes between rounds never
    -- drains them, which would restart the second the progress line waits for.
    local code = [[
      local dl = require "dlrun"
      local d = dl.devices()
      local x = dl.zeros({1024 * 1024}, "float32", d[1])
      local queue, n = {}, 0
      local function now()
        local p = io.popen("date +%s.%N")
        local t = tonumber(p:read("l"))
        p:close()
        return t
      end
      -- Keep a chain of copies in flight (32 queued) for `secs` seconds.
      local function busy(secs)
        local stop = now() + secs
        repeat
          for _ = 1, 20 do
            n = n + 1
            x = dl.device_put(x, d[n % 2 + 1])
            queue[#queue + 1] = x
            if #queue > 32 then table.remove(queue, 1):block_until_ready() end
          end
        until now() >= stop
      end
      busy(2)
      print("from print")
      busy(0.6)
      io.write("from io.write\n")
      busy(0.6)
      io.stderr:write("from io.stderr:write\n")
      busy(0.6)
      io.write("partial")
      busy(0.6)
      io.write(" line\n")
      warn("@on")
      busy(0.6)
      warn("from warn")
      busy(0.6)
      error("the end")
    ]]
    local script = os.tmpname()
    local f = assert(io.open(script, "w"))
    f:write(code)
    f:close()
    local out_file = os.tmpname()
    local cmd = ("DLRUN_DEVICES= script -qec %s /dev/null </dev/null >%s"):format(
      helpers.shell_quote(helpers.shell_quote(helpers.exe) .. " --devices sim:2 "
                          .. helpers.shell_quote(script)), out_file)
    local _, _, status = os.execute(cmd)
    f = assert(io.open(out_file, "rb"))
    local out = f:read("a")
    f:close()
    os.remove(script)
    os.remove(out_file)
    assert.are.equal(1, status, out)
    local drawn, erase = "%)\027[K", "\r\027[K"
    assert.truthy(out:find("\rdlrun: moving data: ", 1, true), out)
    -- the pty turns "\n" into "\r\n"
    for _, text in ipairs{"from print\r\n", "from io.write\r\n", "from io.stderr:write\r\n",
                          "partial line\r\n", "Lua warning: from warn\r\n",
                          "dlrun: " .. script .. ":37: the end\r\n"} do
      assert.truthy(out:find(drawn .. erase .. text, 1, true),
                    ("%q does not follow an erased progress line in %q"):format(text, out))
    end
  end)

  it("stays quiet when stderr is not a terminal", function()
    local code = [[
      local dl = require "dlrun"
      local x = dl.zeros({1024, 1024}, "float32")
      local y = dl.device_put(x, dl.devices()[2]):block_until_ready()
    ]]
    local _, err, status = helpers.run({"-e", code}, nil, {DLRUN_DEVICES = "sim:8"})
    assert.are.equal(0, status)
    assert.are.equal("", err)
  end)
end)

-- In a job of several processes (mpirun), each process traces and reports its own devices.
describe("--trace and --stats in a job", function()
  local JOB = [[
local x = dl.zeros({256}, "float32", dl.local_devices()[2]):block_until_ready()
dl.device_put(x, dl.local_devices()[1]):block_until_ready()
print(dl.process_index(), "done")]]

  for _, n in ipairs {2, 3, 4} do
    it("on " .. n .. " processes: each writes a valid trace of its own, its index before the "
       .. "extension", function()
      local base = os.tmpname()
      local out, err, status = helpers.mpirun(n, JOB, {args = "--devices sim:2 --trace "
                                                      .. helpers.shell_quote(base .. ".json")})
      assert.are.equal("", err)
      assert.are.equal(0, status)
      assert.are.equal(n, #helpers.sorted_lines(out))
      assert.is_nil(io.open(base .. ".json"))
      for p = 0, n - 1 do
        local trace = ("%s.%d.json"):format(base, p)
        local summary = python_summary(trace)
        os.remove(trace)
        assert.truthy(summary:find("name copy 1\n", 1, true), summary)
        assert.truthy(summary:find("copy_bytes 1024\n", 1, true), summary)
        assert.truthy(summary:find("track 1 SimDevice(id=" .. 2 * p + 1 .. ")\n", 1, true),
                      summary)
      end
      os.remove(base)
    end)

    it("on " .. n .. " processes: --stats shows this process's devices only, named as such",
       function()
      local _, err, status = helpers.mpirun(n, JOB,
                                            {args = "--devices sim:2 --device-memory 64MiB --stats",
                                             env = {DLRUN_WORKERS = "1"}})
      assert.are.equal(0, status)
      local want = {}
      local row = "%-18s %12s %12s %12s %12s %13s %6s %14s"
      for p = 0, n - 1 do
        want[#want + 1] = ("dlrun stats (sim:2,cpu:1), process %d of %d: this process's devices")
                          :format(p, n)
        want[#want + 1] = "1 worker thread (DLRUN_WORKERS=1)"
        want[#want + 1] = row:format("device", "in use", "peak", "moved in", "moved out",
                                     "largest free", "frag", "exports alive")
        want[#want + 1] = row:format("SimDevice(id=" .. 2 * p .. ")", "0B", "1.00KiB", "1.00KiB",
                                     "0B", "64.00MiB", "0.0%", "0")
        want[#want + 1] = row:format("SimDevice(id=" .. 2 * p + 1 .. ")", "0B", "1.00KiB", "0B",
                                     "1.00KiB", "64.00MiB", "0.0%", "0")
        want[#want + 1] = ("CpuDevice(id=%d) 0B 0B 0B 0B"):format(p)
      end
      local got = {}
      for line in err:gmatch("[^\n]+") do
        -- the host's free memory depends on the machine
        got[#got + 1] = line:match("^CpuDevice") and line:match("^(%S+%s+%S+%s+%S+%s+%S+%s+%S+)")
                                                       :gsub("%s+", " ")
                        or line
      end
      assert.are.same(want, got)
    end)
  end
end)

-- ---- tracing and stats from any Lua (docs/lua-api.md, "Tracing and stats") ----

-- Run lua5.4 with `args` and the suite's module paths, on sim:2 unless env
-- says otherwise. Returns stdout, stderr, status.
local function plain_lua_run(args, env)
  local full = {LUA_PATH = package.path, LUA_CPATH = package.cpath, LUA_INIT = "",
                LUA_INIT_5_4 = "", DLRUN_DEVICES = "sim:2"}
  local module = assert(package.searchpath("dlrun.core", package.cpath), "dlrun.core not built")
  for k, v in pairs(helpers.sanitizer_env(module)) do full[k] = v end
  for k, v in pairs(env or {}) do full[k] = v end
  local saved = helpers.exe
  helpers.exe = "lua5.4"
  local out, err, status = helpers.run(args, nil, full)
  helpers.exe = saved
  return out, err, status
end

-- The same for a chunk of code (-e).
local function plain_lua(code, env) return plain_lua_run({"-e", code}, env) end

-- 16 float32 (64 bytes) made on device 0 and put on device 1: one alloc
-- each, one arange, one copy of 64 bytes.
local WORK = [[
local x = dl.arange(16, "float32", dl.devices()[1])
local y = dl.device_put(x, dl.devices()[2]):block_until_ready()
]]

-- The trace at `path` has WORK's events, and is whole (python3 parses it).
local function assert_work_traced(path)
  local summary = python_summary(path)
  os.remove(path)
  for _, line in ipairs {"name arange 1", "name copy 1", "name alloc 2", "copy_bytes 64",
                         "copy_fields True"} do
    assert.truthy(summary:find(line .. "\n", 1, true), summary)
  end
end

-- The message of the dlrun error fn raises, as "Class: message".
local CAUGHT = [[
local function caught(fn, ...)
  local ok, e = pcall(fn, ...)
  return ok and "no error" or (e.name .. ": " .. e.message)
end
]]

describe("dl.trace_start and dl.trace_stop", function()
  it("trace under plain lua5.4, with JAX's errors for a second start and a stop when off",
     function()
    local trace = os.tmpname()
    local code = ('local dl = require "dlrun"\n' .. CAUGHT .. [[
print(dl.trace_start(%q))
print(caught(dl.trace_start, "other.json"))
]] .. WORK .. [[
dl.trace_stop()
print(caught(dl.trace_stop))
print(caught(dl.trace_start, "/nonexistent-dir/t.json"))
print(caught(dl.trace_start))
print(caught(dl.trace_stop, 1))
]]):format(trace)
    local out, err, status = plain_lua(code)
    assert.are.equal("", err)
    assert.are.equal(0, status)
    assert.are.same({
      trace,
      ('RuntimeError: trace_start: tracing is already on (writing "%s")'):format(trace),
      "RuntimeError: trace_stop: tracing is not on",
      'RuntimeError: trace_start: cannot write the trace file "/nonexistent-dir/t.json": '
        .. "No such file or directory",
      "TypeError: trace_start: argument 1 (path) must be a string, got no value",
      "TypeError: trace_stop: expected at most 0 arguments, got 1",
    }, helpers.lines(out))
    assert_work_traced(trace)
  end)

  it("a trace left on is completed when the dlrun command exits", function()
    local trace = os.tmpname()
    local code = ('local dl = require "dlrun"\ndl.trace_start(%q)\n'):format(trace) .. WORK
    local out, err, status = helpers.run({"-e", code}, nil, {DLRUN_DEVICES = "sim:2"})
    assert.are.equal("", err)
    assert.are.equal(0, status)
    assert_work_traced(trace)
  end)
end)

describe("DLRUN_TRACE", function()
  -- Every way out of plain lua5.4: the end of the script (the state
  -- closes), os.exit closing it, os.exit without closing it.
  for _, ending in ipairs {"", "os.exit(true, true)", "os.exit(true)"} do
    it("traces plain lua5.4 and completes the file at exit" .. (ending ~= "" and " (" .. ending
       .. ")" or ""), function()
      local trace = os.tmpname()
      local code = 'local dl = require "dlrun"\n' .. WORK .. ending
      local out, err, status = plain_lua(code, {DLRUN_TRACE = trace})
      assert.are.equal("", out)
      assert.are.equal("", err)
      assert.are.equal(0, status)
      assert_work_traced(trace)
    end)
  end

  it("under plain lua5.4: dl.trace_start meets the trace that is on; dl.trace_stop ends it",
     function()
    local trace = os.tmpname()
    local code = 'local dl = require "dlrun"\n' .. CAUGHT .. WORK .. [[
print(caught(dl.trace_start, "other.json"))
dl.trace_stop()
]]
    local out, err, status = plain_lua(code, {DLRUN_TRACE = trace})
    assert.are.equal(('RuntimeError: trace_start: tracing is already on (writing "%s")\n')
                     :format(trace), out)
    assert.are.equal("", err)
    assert.are.equal(0, status)
    assert_work_traced(trace)
  end)

  it("under plain lua5.4: an unwritable file fails require, naming the variable", function()
    local code = 'local ok, e = pcall(require, "dlrun")\nprint(e.name .. ": " .. e.message)'
    local out, err, status = plain_lua(code, {DLRUN_TRACE = "/nonexistent-dir/t.json"})
    assert.are.equal('RuntimeError: DLRUN_TRACE: cannot write the trace file '
                     .. '"/nonexistent-dir/t.json": No such file or directory\n', out)
    assert.are.equal("", err)
    assert.are.equal(0, status)
  end)

  it("traces the dlrun command as --trace does", function()
    local trace = os.tmpname()
    local out, err, status = helpers.run({"-e", 'local dl = require "dlrun"\n' .. WORK}, nil,
                                         {DLRUN_DEVICES = "sim:2", DLRUN_TRACE = trace})
    assert.are.equal("", out)
    assert.are.equal("", err)
    assert.are.equal(0, status)
    assert_work_traced(trace)
  end)

  it("is checked before the dlrun command runs the script; --trace comes first", function()
    local out, err, status = helpers.run({"-e", "print('ran')"}, nil,
                                         {DLRUN_TRACE = "/nonexistent-dir/t.json"})
    assert.are.equal("", out)
    assert.are.equal('dlrun: RuntimeError: DLRUN_TRACE: cannot write the trace file '
                     .. '"/nonexistent-dir/t.json": No such file or directory\n', err)
    assert.are.equal(1, status)
    local trace = os.tmpname()
    out, err, status = helpers.run({"--trace", trace, "-e", 'local dl = require "dlrun"\n' .. WORK},
                                   nil, {DLRUN_DEVICES = "sim:2",
                                         DLRUN_TRACE = "/nonexistent-dir/t.json"})
    assert.are.equal("", err)
    assert.are.equal(0, status)
    assert_work_traced(trace)
  end)
end)

describe("dl.stats", function()
  local CODE = [[
local dl = require "dlrun"
kept = dl.zeros({256}, "float32", dl.devices()[1])                -- 1 KiB on device 0
moved = dl.device_put(kept, dl.devices()[2]):block_until_ready()   -- 1 KiB moved to device 1
capsule = moved:__dlpack__()   -- a legacy tensor: a copy, 1 KiB more on device 1
local s = dl.stats()
local keys = {}
for k in pairs(s.devices[2]) do keys[#keys + 1] = k end
table.sort(keys)
print(s.spec, #s.devices, s.live_exports, table.concat(keys, " "))
for _, d in ipairs(s.devices) do
  print(tostring(d.device), d.bytes_in_use, d.peak_bytes_in_use, d.bytes_moved_in,
        d.bytes_moved_out, d.largest_free_block_bytes > 0, d.fragmentation, d.live_exports)
end
-- printed as the other records are (the free block depends on the host's memory)
print((tostring(s):gsub("largest_free_block_bytes=%d+", "largest_free_block_bytes=N")))
]]
  local WANT = table.concat({
    "sim:2,cpu:1\t3\t1\tbytes_in_use bytes_moved_in bytes_moved_out device fragmentation "
      .. "largest_free_block_bytes live_exports peak_bytes_in_use",
    "SimDevice(id=0)\t1024\t1024\t0\t1024\ttrue\t0.0\t0",
    "SimDevice(id=1)\t2048\t2048\t1024\t0\ttrue\t0.0\t1",
    "CpuDevice(id=0)\t0\t0\t0\t0\ttrue\t0.0\t0",
    "{devices=[{bytes_in_use=1024, bytes_moved_in=0, bytes_moved_out=1024, "
      .. "device=SimDevice(id=0), fragmentation=0.0, largest_free_block_bytes=N, live_exports=0, "
      .. "peak_bytes_in_use=1024}, {bytes_in_use=2048, bytes_moved_in=1024, bytes_moved_out=0, "
      .. "device=SimDevice(id=1), fragmentation=0.0, largest_free_block_bytes=N, live_exports=1, "
      .. "peak_bytes_in_use=2048}, {bytes_in_use=0, bytes_moved_in=0, bytes_moved_out=0, "
      .. "device=CpuDevice(id=0), fragmentation=0.0, largest_free_block_bytes=N, live_exports=0, "
      .. "peak_bytes_in_use=0}], live_exports=1, spec=\"sim:2,cpu:1\", workers=3, "
      .. "workers_note=\"3 worker threads (DLRUN_WORKERS=3)\"}",
  }, "\n") .. "\n"

  it("returns what --stats prints, per device of this process, under plain lua5.4", function()
    local out, err, status = plain_lua(CODE, {DLRUN_WORKERS = "3"})
    assert.are.equal("", err)
    assert.are.equal(0, status)
    assert.are.equal(WANT, out)
  end)

  it("agrees with the --stats table of the dlrun command", function()
    local out, err, status = helpers.run({"--stats", "-e", CODE}, nil,
                                         {DLRUN_DEVICES = "sim:2", DLRUN_WORKERS = "3"})
    assert.are.equal(0, status)
    assert.are.equal(WANT, out)
    assert.truthy(err:find("\n3 worker threads %(DLRUN_WORKERS=3%)\n"), err)
    assert.truthy(err:find("\nSimDevice%(id=0%)%s+1%.00KiB%s+1%.00KiB%s+0B%s+1%.00KiB%s.*%s0\n"), err)
    assert.truthy(err:find("\nSimDevice%(id=1%)%s+2%.00KiB%s+2%.00KiB%s+1%.00KiB%s+0B%s.*%s1\n"), err)
  end)
end)

describe("tracing and --stats in a job, from Lua and DLRUN_TRACE", function()
  for _, n in ipairs {2, 3, 4} do
    it("on " .. n .. " processes: DLRUN_TRACE and dl.trace_start name each process's file",
       function()
      local base = os.tmpname()
      local code = ([[
dl.trace_stop()   -- DLRUN_TRACE's trace, whole
print(dl.trace_start(%q))
]]):format(base .. ".lua.json") .. [[
local x = dl.zeros({256}, "float32", dl.local_devices()[2]):block_until_ready()
dl.device_put(x, dl.local_devices()[1]):block_until_ready()
]]
      local out, err, status = helpers.mpirun(n, code, {args = "--devices sim:2",
                                                        env = {DLRUN_TRACE = base .. ".json"}})
      assert.are.equal("", err)
      assert.are.equal(0, status)
      local want = {}
      for p = 0, n - 1 do want[#want + 1] = ("%s.lua.%d.json"):format(base, p) end
      assert.are.same(want, helpers.sorted_lines(out))
      for p = 0, n - 1 do
        local env_trace = ("%s.%d.json"):format(base, p)
        assert.truthy(python_summary(env_trace):find("durations True\n", 1, true))
        os.remove(env_trace)
        local trace = ("%s.lua.%d.json"):format(base, p)
        local summary = python_summary(trace)
        os.remove(trace)
        assert.truthy(summary:find("copy_bytes 1024\n", 1, true), summary)
      end
      os.remove(base)
    end)

    it("on " .. n .. " processes: --stats prints before an uncaught error leaves the job",
       function()
      local code = [[
kept = dl.zeros({256}, "float32", dl.local_devices()[2]):block_until_ready()
dl.sync_global_devices("allocated")
if dl.process_index() == 1 then error("stop here") end
]]
      local _, err, status = helpers.mpirun(n, code, {args = "--devices sim:2 --stats"})
      assert.are_not.equal(0, status)
      local title = ("dlrun stats (sim:2,cpu:1), process 1 of %d: this process's devices\n"):format(n)
      local at = err:find(title, 1, true)
      assert.truthy(at, err)
      assert.truthy(err:find("dlrun[1]: (command line):4: stop here", 1, true), err)
      assert.truthy(err:find("\nSimDevice%(id=3%)%s+1%.00KiB%s", at), err)
    end)
  end
end)

-- The running script is never the trace file: tracing truncates its file,
-- which used to empty the script before it was read (DLRUN_TRACE=victim.lua
-- dlrun victim.lua ran nothing and exited 0) or replace it with a trace
-- (dl.trace_start(arg[0])).
describe("a trace file that is the running script", function()
  local script, clean, made = helpers.scratch()
  after_each(clean)
  local read = helpers.read_file

  it("DLRUN_TRACE: the dlrun command refuses it with status 1, by inode, before writing",
     function()
    local text = "print('ran')\n"
    local path = script(text)
    local link = path .. ".link"
    made[#made + 1] = link
    assert(os.execute("ln " .. helpers.shell_quote(path) .. " " .. helpers.shell_quote(link)))
    local dir, name = path:match("^(.*)/([^/]+)$")
    for _, trace in ipairs {path, dir .. "/./" .. name, link} do
      local out, err, status = helpers.run({path}, nil, {DLRUN_TRACE = trace})
      assert.are.equal("", out)
      assert.are.equal(('dlrun: the trace file "%s" is the script itself; set DLRUN_TRACE to '
                        .. 'another file\n'):format(trace), err)
      assert.are.equal(1, status)
      assert.are.equal(text, read(path))
    end
  end)

  it("DLRUN_TRACE: require 'dlrun' under plain lua5.4 refuses it", function()
    local text = 'local ok, e = pcall(require, "dlrun")\nprint(e.name .. ": " .. e.message)\n'
    local path = script(text)
    local out, err, status = plain_lua_run({path}, {DLRUN_TRACE = path})
    assert.are.equal(('RuntimeError: DLRUN_TRACE: the trace file "%s" is the running script '
                      .. '"%s"; tracing would overwrite it: give another file\n')
                     :format(path, path), out)
    assert.are.equal("", err)
    assert.are.equal(0, status)
    assert.are.equal(text, read(path))
  end)

  for _, how in ipairs {"dlrun", "lua5.4"} do
    it("dl.trace_start(arg[0]) is a RuntimeError naming it (" .. how .. ")", function()
      local text = [[
local dl = require "dlrun"
local ok, e = pcall(dl.trace_start, arg[0])
print(e.name .. ": " .. e.message)
print(pcall(dl.trace_stop))
]]
      local path = script(text)
      local out, err, status
      if how == "dlrun" then out, err, status = helpers.run({path})
      else out, err, status = plain_lua_run({path}) end
      local stop = "RuntimeError: trace_stop: tracing is not on" -- nothing was started
      assert.are.equal(('RuntimeError: trace_start: the trace file "%s" is the running script '
                        .. '"%s"; tracing would overwrite it: give another file\nfalse\t%s\n')
                       :format(path, path, tostring(stop)), out)
      assert.are.equal("", err)
      assert.are.equal(0, status)
      assert.are.equal(text, read(path))
    end)
  end
end)
