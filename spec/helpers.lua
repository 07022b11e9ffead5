-- Shared helpers for the busted specs.
local assert = require "luassert"
local M = {}

M.exe = os.getenv("DLRUN_EXE") or "build/dlrun"

-- Call fn(...) and check it raises a dlrun error of class `name` whose message
-- equals `message` exactly (a string) or matches `{pattern = "..."}` or
-- contains `{contains = "..."}`. Returns the error value.
function M.expect_error(name, message, fn, ...)
  local ok, err = pcall(fn, ...)
  assert(not ok, "expected " .. name .. " but the call succeeded")
  assert(type(err) == "table" and err.name,
         "expected a dlrun error value, got " .. tostring(err))
  assert.are.equal(name, err.name)
  if type(message) == "string" then
    assert.are.equal(message, err.message)
  elseif type(message) == "table" and message.pattern then
    assert(err.message:match(message.pattern),
           ("message %q does not match %q"):format(err.message, message.pattern))
  elseif type(message) == "table" and message.contains then
    assert(err.message:find(message.contains, 1, true),
           ("message %q does not contain %q"):format(err.message, message.contains))
  end
  return err
end

-- The platforms dlrun knows, as the unknown-platform error lists them
-- ("opencl, sim, cpu, cuda": registered ones first, then modules that did
-- not load): they depend on which modules this build has.
local known_platforms
function M.known_platforms()
  if not known_platforms then
    local names = {}
    for _, p in ipairs(require("dlrun").platforms()) do names[#names + 1] = p.name end
    known_platforms = table.concat(names, ", ")
  end
  return known_platforms
end

local function shell_quote(s)
  return "'" .. tostring(s):gsub("'", "'\\''") .. "'"
end
M.shell_quote = shell_quote

-- A library built with sanitizers (make SAN=-fsanitize=address...) can only
-- be loaded into another program (Python, plain lua5.4) with its runtimes
-- preloaded; that program's own allocations would then read as leaks, so
-- leak checking is turned off last (later options win). Returns the
-- environment to set, {} for an uninstrumented library.
function M.sanitizer_env(lib)
  if os.getenv("LD_PRELOAD") then return {} end
  local p = io.popen("ldd " .. shell_quote(lib) .. " 2>/dev/null")
  if not p then return {} end
  local deps = p:read("a") or ""
  p:close()
  local preload = {}
  for path in deps:gmatch("lib[a-z]*san%.so[%w.]*%s*=>%s*(%S+)") do
    preload[#preload + 1] = path
  end
  if #preload == 0 then
    -- clang links its sanitizer runtime into executables, not into shared
    -- libraries: a library built with clang's ASan needs clang's shared
    -- runtime preloaded.
    local nm = io.popen("nm -D " .. shell_quote(lib) .. " 2>/dev/null")
    local symbols = nm and nm:read("a") or ""
    if nm then nm:close() end
    if symbols:find(" U __asan_", 1, true) then
      local q = io.popen("clang-14 -print-file-name=libclang_rt.asan-x86_64.so 2>/dev/null")
      local runtime = q and (q:read("l") or "") or ""
      if q then q:close() end
      if runtime:find("/", 1, true) then preload[1] = runtime end
    end
  end
  if #preload == 0 then return {} end
  return {LD_PRELOAD = table.concat(preload, " "),
          ASAN_OPTIONS = (os.getenv("ASAN_OPTIONS") or "") .. ":detect_leaks=0"}
end

-- The environment of a dlrun that joins an MPI job (under mpirun, or alone
-- with DLRUN_DISTRIBUTED=mpi): Open MPI allowed to run as root, and, for an
-- instrumented dlrun, Open MPI's own allocations at exit (not dlrun's)
-- suppressed from the leak check, by the names of its libraries; its plugins
-- stay loaded and stacks are unwound without frame pointers, so that every
-- frame has its library's name.
local mpi_suppressions
function M.mpi_env()
  if not mpi_suppressions then
    mpi_suppressions = os.tmpname()
    local f = assert(io.open(mpi_suppressions, "w"))
    for _, lib in ipairs {"libmpi.so", "libopen-pal.so", "libopen-rte.so", "libpmix.so",
                          "libhwloc.so", "libevent", "mca_"} do
      f:write("leak:", lib, "\n")
    end
    f:close()
  end
  return {
    OMPI_ALLOW_RUN_AS_ROOT = "1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM = "1",
    OMPI_MCA_mca_base_component_disable_dlclose = "1",
    -- use_tls=0: under load, LeakSanitizer's scan at exit met a garbage entry
    -- in the dynamic TLS it records for MPI's libraries (loaded with the
    -- transport module) and crashed ("Tracer caught signal 11", "DTLS 5 at
    -- 0x6526-..."): their thread-local blocks are not scanned. dlrun's own
    -- thread-locals hold no heap memory only they point to.
    LSAN_OPTIONS = "suppressions=" .. mpi_suppressions .. ":print_suppressions=0:use_tls=0",
    ASAN_OPTIONS = (os.getenv("ASAN_OPTIONS") or "") .. ":fast_unwind_on_malloc=0",
  }
end

-- The same as a shell prefix ("LD_PRELOAD=... ASAN_OPTIONS=... "), or "".
function M.sanitizer_prefix(lib)
  local env, words = M.sanitizer_env(lib), {}
  for _, k in ipairs({"LD_PRELOAD", "ASAN_OPTIONS"}) do
    if env[k] then words[#words + 1] = k .. "=" .. shell_quote(env[k]) .. " " end
  end
  return table.concat(words)
end

-- Run the dlrun command with a list of arguments (and optional stdin text and
-- environment assignments such as {DLRUN_DEVICES = "sim:2"}). Returns
-- stdout, stderr, exit status.
function M.run(args, stdin, env)
  local out, err = os.tmpname(), os.tmpname()
  local cmd = {}
  for k, v in pairs(env or {}) do cmd[#cmd + 1] = k .. "=" .. shell_quote(v) end
  cmd[#cmd + 1] = shell_quote(M.exe)
  for _, a in ipairs(args) do cmd[#cmd + 1] = shell_quote(a) end
  local line = table.concat(cmd, " ") .. " >" .. out .. " 2>" .. err
  if stdin then
    local inp = os.tmpname()
    local f = assert(io.open(inp, "w")); f:write(stdin); f:close()
    line = line .. " <" .. inp
  end
  local _, _, status = os.execute(line)
  local function slurp(p)
    local f = assert(io.open(p)); local s = f:read("a"); f:close(); os.remove(p); return s
  end
  return slurp(out), slurp(err), status
end

-- Run a Lua chunk in a fresh dlrun process (its own runtime, so configure and
-- device options can differ from the suite's). Returns stdout, stderr, status.
function M.run_code(code, options, env)
  local args = {}
  for _, o in ipairs(options or {}) do args[#args + 1] = o end
  args[#args + 1] = "-e"
  args[#args + 1] = code
  return M.run(args, nil, env)
end

-- ---- jobs of many processes (mpirun) ----

M.MCA_SHM = "--mca btl self,vader"
M.MCA_TCP = "--mca btl self,tcp --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo "
            .. "--mca pml ob1"
-- Processes on hosts simulated on this machine (opts.hosts of M.mpirun): shared
-- memory within a host, TCP on the loopback between hosts.
M.MCA_HOSTS = "--mca btl self,vader,tcp --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo"

-- mpirun's options for n processes over the hosts named in the list `hosts`
-- (n / #hosts each, in process order): names that are not this machine's, each
-- host's daemon started by scripts/two-hosts-agent.sh (standing in for ssh)
-- in a UTS namespace of that name, so that MPI sees as many nodes.
local function hosts_options(n, hosts)
  assert(#hosts > 0 and n % #hosts == 0,
         n .. " processes do not split evenly over " .. #hosts .. " hosts")
  local slots = {}
  for i, h in ipairs(hosts) do slots[i] = h .. ":" .. n // #hosts end
  local agent = M.capture("pwd"):gsub("\n$", "") .. "/scripts/two-hosts-agent.sh"
  return "--host " .. table.concat(slots, ",") .. " --mca plm_rsh_agent " .. shell_quote(agent)
end

-- Run `code` (with dl = require "dlrun") under mpirun -n n, for at most
-- opts.limit seconds (120); opts.env, opts.args (dlrun's) and opts.mca (the
-- transport; shared memory by default, M.MCA_HOSTS with opts.hosts);
-- opts.hosts, a list of host names to simulate on this machine (n / #hosts
-- processes each, in process order: hosts_options); opts.per_rank, shell
-- code each process runs first (with $OMPI_COMM_WORLD_RANK: an environment
-- per rank). Returns stdout, stderr, exit status
-- and the seconds it took. Each process writes to files
-- of its own (mpirun's forwarding may cut one process's line by another's);
-- the outputs are mpirun's own, then each process's in process order.
function M.mpirun(n, code, opts)
  opts = opts or {}
  local out, err, base = os.tmpname(), os.tmpname(), os.tmpname()
  local env = {}
  local q = shell_quote
  for k, v in pairs(M.mpi_env()) do env[#env + 1] = k .. "=" .. q(v) end
  for k, v in pairs(opts.env or {}) do env[#env + 1] = k .. "=" .. q(v) end
  local own = (opts.per_rank and opts.per_rank .. "; " or "")
              .. 'exec "$@" >"$0.out.$OMPI_COMM_WORLD_RANK" 2>"$0.err.$OMPI_COMM_WORLD_RANK"'
  -- Bounded: a job that hangs is killed (exit 124) instead of stalling the suite.
  local line = table.concat(env, " ") .. " timeout -k 10 " .. (opts.limit or 120)
               .. " mpirun -n " .. n
               .. " --oversubscribe --mca mpi_yield_when_idle 1 "
               .. (opts.hosts and hosts_options(n, opts.hosts) .. " " or "")
               .. (opts.mca or opts.hosts and M.MCA_HOSTS or M.MCA_SHM) .. " "
               .. "sh -c " .. q(own) .. " " .. q(base) .. " "
               .. q(M.exe) .. " " .. (opts.args or "") .. " -e "
               .. q('local dl = require "dlrun"\n' .. code) .. " >" .. out .. " 2>" .. err
  local t0 = os.time()
  local _, _, status = os.execute(line)
  local function slurp(p)
    local f = io.open(p)
    if not f then return "" end
    local s = f:read("a"); f:close(); os.remove(p); return s
  end
  local o, e = slurp(out), slurp(err)
  for r = 0, n - 1 do
    o = o .. slurp(base .. ".out." .. r)
    e = e .. slurp(base .. ".err." .. r)
  end
  os.remove(base)
  return o, e, status, os.time() - t0
end

-- The non-empty lines of s, in order.
function M.lines(s)
  local t = {}
  for line in s:gmatch("[^\n]+") do t[#t + 1] = line end
  return t
end

-- The lines of s, sorted (processes print in any order).
function M.sorted_lines(s)
  local t = M.lines(s)
  table.sort(t)
  return t
end

-- A shard's values as "id=v,v;v,v" (rows of a 2-d shard joined by ";").
M.SHOW_SHARDS = [[
local function show(x)
  local v = x:tolist()
  if x.ndim == 2 then
    local rows = {}
    for _, row in ipairs(v) do rows[#rows + 1] = table.concat(row, ",") end
    return table.concat(rows, ";")
  end
  return x.ndim == 0 and tostring(v) or table.concat(v, ",")
end
local function shards(x)
  local t = {}
  for _, s in ipairs(x.addressable_shards) do t[#t + 1] = s.device.id .. "=" .. show(s.data) end
  return table.concat(t, " ")
end
]]

-- For the reshard specs, after code that defines C: right(a), whether a has
-- addressable shards and each holds, at its index, the values of a 2-d array
-- whose element (i, j) (from 0) is i * C + j; stats(), this process's
-- "bytes_sent bytes_received ipc_bytes" since the last call.
M.RESHARD_CHECKS = [[
local function right(a)
  for _, s in ipairs(a.addressable_shards) do
    local r0, c0 = s.index[1][1] - 1, s.index[2][1] - 1 -- {first, last}, from 1
    for i, row in ipairs(s.data:tolist()) do
      for j, v in ipairs(row) do
        if v ~= (r0 + i - 1) * C + c0 + j - 1 then return false end
      end
    end
  end
  return #a.addressable_shards > 0
end
local function stats()
  local s = dl.transfer_stats()
  dl.transfer_stats{reset = true}
  return ("%d %d %d"):format(s.bytes_sent, s.bytes_received, s.ipc_bytes)
end
]]

-- The transfer events of a trace file (dl.trace_start's, of one process),
-- summed: "name src src_process dst bytes" lines, sorted (src_process "-"
-- when the event has none: a piece from this process), each checked to be
-- on its destination's track.
function M.trace_transfers(path)
  local tracks, sums = {}, {}
  for line in io.lines(path) do
    local tid, track = line:match('"name": "thread_name", "pid": 1, "tid": (%d+), '
                                  .. '"args": {"name": "([^"]+)"}')
    if tid then tracks[tid] = track end
    local name, etid, args = line:match('"ph": "X", "cat": "transfer", "name": "(%w+)", '
                                        .. '"pid": 1, "tid": (%d+),.*"args": {(.*)}}')
    if name then
      local bytes, src, rest = args:match('^"bytes": (%d+), "src": "([^"]+)", (.*)$')
      local proc = rest:match('^"src_process": (%d+), ') or "-"
      local dst = rest:match('"dst": "([^"]+)"$')
      assert.are.equal(dst, tracks[etid], line)
      local key = table.concat({name, src, proc, dst}, " ")
      sums[key] = (sums[key] or 0) + tonumber(bytes)
    end
  end
  local t = {}
  for key, bytes in pairs(sums) do t[#t + 1] = key .. " " .. bytes end
  table.sort(t)
  return t
end

-- ---- files and shell lines ----

-- A whole file's bytes: read_file raises when it cannot be read, read_all
-- gives "" (the output a failed command may not have written).
local function read_whole(path, missing)
  local f = io.open(path, "rb")
  if not f then return assert(missing, "cannot read " .. path) end
  local text = f:read("a")
  f:close()
  return text
end
function M.read_file(path) return read_whole(path, nil) end
function M.read_all(path) return read_whole(path, "") end

function M.write_file(path, text)
  local f = assert(io.open(path, "wb"))
  f:write(text)
  f:close()
end

-- Temporary files for a describe block: file(text) writes text (any bytes)
-- to a new one and returns its path; clean() removes every one made, and
-- every path added to `made` (for after_each).
function M.scratch()
  local made = {}
  local function file(text)
    local path = os.tmpname()
    made[#made + 1] = path
    M.write_file(path, text)
    return path
  end
  local function clean()
    for i = #made, 1, -1 do os.remove(made[i]); made[i] = nil end
  end
  return file, clean, made
end

-- What a shell command line prints on stdout.
function M.capture(line)
  local p = assert(io.popen(line))
  local text = p:read("a")
  p:close()
  return text
end

-- What a shell command line prints on stdout and stderr together, and its
-- exit status.
function M.capture_status(line)
  local out = os.tmpname()
  local _, _, status = os.execute(line .. " >" .. shell_quote(out) .. " 2>&1")
  local text = M.read_all(out)
  os.remove(out)
  return text, status
end

-- ---- the platform the suite runs on ----
-- The busted process runs on the default runtime: DLRUN_DEVICES, unset in
-- plain runs ("auto": 8 sim devices and the host cpu device);
-- scripts/run-tests.sh runs the suite again with DLRUN_DEVICES=opencl:8.
-- Children (M.run, M.mpirun) inherit DLRUN_DEVICES unless a spec sets
-- devices itself. What a spec says about the default devices comes from the
-- library, read on first use:
--   M.platform  the default platform's name ("sim", "opencl")
--   M.class     its device class ("SimDevice", "OpenclDevice")
--   M.dl_type   the DLPack device type its device memory exports as
--               (12 kDLExtDev for sim, 4 kDLOpenCL)
--   M.spec      the running device spec ("sim:8,cpu:1", "opencl:8,cpu:1")
-- and M.dev(id) is tostring of the default platform's device `id`.
local platform_fields = {platform = true, class = true, dl_type = true, spec = true}
local platform_info
local function platform()
  if not platform_info then
    local dl = require "dlrun"
    local d0 = dl.devices()[1]
    local names = {}
    for _, p in ipairs(d0.platform == "cpu" and {"cpu"} or {d0.platform, "cpu"}) do
      names[#names + 1] = p .. ":" .. dl.device_count(p)
    end
    platform_info = {platform = d0.platform, class = tostring(d0):match("^(%w+)%("),
                     spec = table.concat(names, ",")}
  end
  return platform_info
end
-- The DLPack type, from __dlpack_device__ of a one-byte array: asked for apart, so
-- that reading the names allocates nothing (specs count allocations).
local function dl_type()
  local info = platform()
  if not info.dl_type then
    local dl = require "dlrun"
    local x = dl.zeros({1}, "uint8", dl.devices()[1])
    info.dl_type = (x:__dlpack_device__())
    x:delete()
  end
  return info.dl_type
end
setmetatable(M, {__index = function(_, k)
  if k == "dl_type" then return dl_type() end
  if platform_fields[k] then return platform()[k] end
end})
function M.dev(id) return ("%s(id=%d)"):format(platform().class, id) end

-- How dlrun's messages show a DLPack device type of its platforms: "12 (kDLExtDev)".
local DL_TYPE_NAMES = {[1] = "kDLCPU", [2] = "kDLCUDA", [3] = "kDLCUDAHost", [4] = "kDLOpenCL",
                       [12] = "kDLExtDev"}
function M.dl_type_text(t) return ("%d (%s)"):format(t, DL_TYPE_NAMES[t]) end

-- What a device array of the default platform takes as __dlpack__'s stream,
-- as the BufferError refusing another says: sim has no queues a consumer can
-- name, opencl also takes one of its command queues, cuda its streams.
local STREAMS = {
  sim = "nil (wait for the array) or -1 (do not wait)",
  opencl = "nil (wait for the array), -1 (do not wait) or the cl_command_queue of an OpenCL "
           .. "device of dlrun",
  cuda = "nil (wait for the array), -1 (do not wait), 1 (the legacy default stream), 2 (the "
         .. "per-thread default stream) or a CUstream (a pointer, 4096 or more: 3 to 4095 cannot "
         .. "be one)",
}
function M.streams() return STREAMS[platform().platform] end

-- The DLPack type of the default platform's pinned_host memory: kDLCPU (1)
-- where it is plain host memory, kDLCUDAHost (3) for cuda's cuMemHostAlloc
-- memory (docs/cuda.md).
local PINNED_DL_TYPE = {sim = 1, opencl = 1, cuda = 3}
function M.pinned_dl_type() return PINNED_DL_TYPE[platform().platform] end

-- What the default platform's memory_stats().bytes_reserved reads once the
-- blocks used reach `bytes` from the start of a pool of `capacity` bytes:
-- the pool's own figure, or on cuda what the driver holds, whole chunks of
-- 32 MiB, the last cut at the pool's end in granules of 2 MiB (the double's
-- and a GPU's; docs/cuda.md), 0 for none.
function M.reserved(bytes, capacity)
  if platform().platform ~= "cuda" then return bytes end
  local function up(v, unit) return (v + unit - 1) // unit * unit end
  return math.min(up(bytes, 32 * 1024 * 1024), up(capacity, 2 * 1024 * 1024))
end

-- What "auto" gives a child of this suite (an empty DLRUN_DEVICES): every
-- CUDA device when the CUDA platform has one (the cuda pass's children
-- inherit DLRUN_CUDA_LIBRARY, as on a CUDA machine), else sim:8 and the
-- host (docs/cuda.md; pocl's CPU devices are no GPUs, which auto would take).
-- {platform =, class =, n =, spec = "cuda:8,cpu:1"}; M.auto_dev(id) names
-- its device `id`.
local auto_info
function M.auto()
  if not auto_info then
    auto_info = {platform = "sim", class = "SimDevice", n = 8}
    for _, p in ipairs(require("dlrun").platforms()) do
      if p.name == "cuda" and p.available and p.devices > 0 then
        auto_info = {platform = "cuda", class = p.class_name, n = p.devices}
      end
    end
    auto_info.spec = ("%s:%d,cpu:1"):format(auto_info.platform, auto_info.n)
  end
  return auto_info
end
function M.auto_dev(id) return ("%s(id=%d)"):format(M.auto().class, id) end

-- Cases about one platform (its memory modes, its capacities, its names)
-- say so: on another default platform they are pending with the reason,
-- never silently left out. it_on and describe_on take the platform, why
-- the cases are that platform's own, then what `it` / `describe` take.
local function on(kind, name, why, title, fn)
  local busted = require "busted"
  if platform().platform == name then return busted[kind](title, fn) end
  -- tail calls, so that busted reports the spec's line
  return busted.pending(("%s [%s only: %s]"):format(title, name, why))
end
function M.it_on(name, why, title, fn) return on("it", name, why, title, fn) end
function M.describe_on(name, why, title, fn) return on("describe", name, why, title, fn) end

return M
