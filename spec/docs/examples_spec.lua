-- runs: once
-- ipc-off: no
-- devices: 8
-- needs: mpi

-- Every example runs under the dlrun command and says what it checked. Each
-- example stops with an error (exit status 1) when one of its own checks fails,
-- so status 0 with empty stderr means every check passed; the key lines below
-- pin what it reports: the exact BufferError, the strategies chosen and the
-- bytes each step moved.
--
-- The examples run on the default devices of a machine without a GPU (sim:8
-- plus the host cpu: what their output shows), whatever the environment of
-- the suite says; "examples on other device specs" runs them with --devices
-- too, and pipeline.lua also runs on what "auto" gives in this pass
-- (helpers.auto: every CUDA device in the cuda pass).
local helpers = require "helpers"

local DEFAULT_ENV = {DLRUN_DEVICES = "sim:8", DLRUN_DEVICE_MEMORY = ""}

-- The environment of a run on n OpenCL devices: pocl's CPU driver gives one
-- device per "pthread" in POCL_DEVICES (a vendor's driver ignores it).
local function opencl_env(n)
  local names = {}
  for i = 1, n do names[i] = "pthread" end
  return {DLRUN_DEVICES = "", DLRUN_DEVICE_MEMORY = "", POCL_DEVICES = table.concat(names, " ")}
end

-- Why n OpenCL devices are not here (the OpenCL module not built, no driver,
-- too few devices), from dlrun --list-devices; nil when they are.
local opencl_missing_cache = {}
local function opencl_missing(n)
  if opencl_missing_cache[n] == nil then
    local out = helpers.run({"--list-devices"}, nil, opencl_env(n))
    local line = ("\n" .. out):match("\nopencl +([^\n]*)") or "not listed"
    local have = tonumber(line:match("^available: (%d+) devices?$"))
    if have and have >= n then
      opencl_missing_cache[n] = false
    else
      opencl_missing_cache[n] = ("needs %d OpenCL device(s): opencl %s"):format(n, line)
    end
  end
  return opencl_missing_cache[n] or nil
end

local function run_example(name, options, env)
  local args = {}
  for _, o in ipairs(options or {}) do args[#args + 1] = o end
  args[#args + 1] = "examples/" .. name
  return helpers.run(args, nil, env or DEFAULT_ENV)
end

-- Runs the example and checks it succeeded quietly; returns its output.
local function run_ok(name, options, env)
  local out, err, status = run_example(name, options, env)
  assert.are.equal("", err)
  assert.are.equal(0, status, out)
  return out
end

local function has_line(out, line)
  assert(("\n" .. out):find("\n" .. line .. "\n", 1, true),
         ("missing the line %q in:\n%s"):format(line, out))
end

local function count(out, text)
  local n, at = 0, 1
  while true do
    local i = out:find(text, at, true)
    if not i then return n end
    n, at = n + 1, i + #text
  end
end

local SHARDED8 = "BufferError: to_dlpack can only pack a dlpack tensor from an array on a "
                 .. "singular device, but an array with a Sharding over 8 devices was provided."

describe("examples/buffer_error.lua", function()
  local out
  setup(function() out = run_ok("buffer_error.lua") end)

  it("shows the 8-way sharding and the BufferError exactly as JAX prints it", function()
    has_line(out, "A 16x4 float32 array (256 bytes), sharded by rows over 8 devices (32 bytes each):")
    has_line(out, "│           SIM 7            │")
    has_line(out, "  " .. SHARDED8)
  end)

  it("takes each way out with its cost, and the consumer checks every one", function()
    has_line(out, '  strategy "gather": 256 bytes copied (224 between devices, 32 within one device)')
    has_line(out, "  making the replicated copy first cost 1792 bytes between devices (each device")
    has_line(out, "│    SIM 0,1,2,3,4,5,6,7     │")
    has_line(out, '  strategy "replica": 0 bytes copied (0 between devices, 0 within one device)')
    has_line(out, '  ValueError: export: strategy "replica" needs a fully replicated array, but the '
              .. "array is sharded as NamedSharding(mesh=Mesh('x': 8), spec=PartitionSpec('x',), "
              .. "memory_kind=device)")
    has_line(out, '  strategy "host": 256 bytes copied (256 between devices, 0 within one device)')
    has_line(out, "  the tensor lives on CpuDevice(id=0) (DLPack device kDLCPU, 0)")
    has_line(out, '  strategy "shards": 8 tensors, 0 bytes copied')
    has_line(out, "  the consumer checked all 64 values, shard by shard: correct")
    has_line(out, "  auto chose: gathered onto SimDevice(id=0), which has room")
    has_line(out, "  on the replicated copy, auto chose: fully replicated: exported one replica"
              .. ", gathering nothing")
    has_line(out, "  __dlpack__ raised BufferError, so it fell back")
    has_line(out, '  strategy "direct": 0 bytes copied (0 between devices, 0 within one device)')
    -- gather, replica, host, auto twice, try_export twice
    assert.are.equal(7, count(out, "  the consumer checked all 64 values: correct\n"))
  end)

  it("ends with the bill and no export left alive", function()
    has_line(out, "  gather                   gather             256  SimDevice(id=0)")
    has_line(out, "  replica                  replica              0  SimDevice(id=0)")
    has_line(out, "  host                     host               256  CpuDevice(id=0)")
    has_line(out, "  shards                   shards               0  8 devices, one shard each")
    has_line(out, "  auto                     gather             256  SimDevice(id=0)")
    has_line(out, "  auto (replicated)        replica              0  SimDevice(id=0)")
    has_line(out, "  try_export               gather             256  SimDevice(id=0)")
    has_line(out, "  try_export (one device)  direct               0  SimDevice(id=0)")
    has_line(out, "  (the replicated copy they export cost 1792 bytes to make, once)")
    assert.are.equal("All ways out checked; 0 exports alive.\n", out:sub(-#"All ways out checked; 0 exports alive.\n"))
  end)
end)

describe("examples/data_parallel.lua", function()
  it("hands a batch over shard by shard with no byte moved", function()
    local out = run_ok("data_parallel.lua")
    has_line(out, "A batch of 64 samples x 16 features (float32, 4096 bytes), split along the")
    has_line(out, "`data` axis: each of the 8 devices holds 8 samples (512 bytes).")
    has_line(out, "│           SIM 7            │")
    has_line(out, "  shard 1: samples  0- 7 on SimDevice(id=0), imported there, 8 rows checked")
    has_line(out, "  shard 8: samples 56-63 on SimDevice(id=7), imported there, 8 rows checked")
    assert.are.equal(8, count(out, "imported there, 8 rows checked\n"))
    has_line(out, "The consumer ran 8 steps and checked all 64 samples: correct.")
    has_line(out, 'Bytes moved: 0 (strategy "shards" exports each shard where it is; nothing was gathered).')
    has_line(out, "For comparison, gathering it onto SimDevice(id=0) first moves 3584 bytes.")
    has_line(out, "Exports alive after the consumer let go: 0.")
  end)
end)

describe("examples/model_parallel.lua", function()
  it("reshards rows to columns on a 2-D mesh, then gathers, with the bytes of each step", function()
    local out = run_ok("model_parallel.lua")
    has_line(out, "The mesh Mesh('data': 2, 'model': 4):")
    has_line(out, "  data=1: SimDevice(id=4)  SimDevice(id=5)  SimDevice(id=6)  SimDevice(id=7)")
    has_line(out, "PartitionSpec(('data', 'model'),):")
    has_line(out, "Resharding to columns, PartitionSpec(None, ('data', 'model')) (device_put to the new sharding):")
    -- the pictures: rows before, columns after, one device at the end
    has_line(out, "│           SIM 7            │")
    has_line(out, "│ SIM 0 │ SIM 1 │ SIM 2 │ SIM 3 │ SIM 4 │ SIM 5 │ SIM 6 │ SIM 7 │")
    has_line(out, "│           SIM 0            │")
    has_line(out, "moved 896 bytes between devices (7/8 of the matrix) and copied 128 within devices.")
    has_line(out, "moved 896 bytes between devices and copied 128 within SimDevice(id=0).")
    assert.are.equal(3, count(out, "\nchecked 256 values: correct\n"))
    has_line(out, "It now exports through DLPack without a copy: checked 256 values on the consumer side.")
    has_line(out, "In all: 1792 bytes moved between devices, 256 copied within devices, in 2 steps.")
  end)
end)

describe("examples/memory_pressure.lua", function()
  local function check(out)
    has_line(out, "Each device has 1048576 bytes (1 MiB) of memory. The array: 524288 float32 values,")
    has_line(out, "│ SIM 0 │ SIM 1 │ SIM 2 │ SIM 3 │ SIM 4 │ SIM 5 │ SIM 6 │ SIM 7 │")
    has_line(out, "  SimDevice(id=0): 262144 of 1048576 bytes in use")
    has_line(out, "  ResourceExhaustedError: Out of memory on SimDevice(id=0) while allocating 2097152 "
              .. "bytes (2.00MiB): 262144 bytes in use of a 1048576 byte limit (256.00KiB of "
              .. "1.00MiB); the largest free block is 786432 bytes (768.00KiB) and 0 bytes (0B) are "
              .. "reserved but unallocated; raise device_memory (dl.configure, --device-memory, "
              .. "DLRUN_DEVICE_MEMORY) to at least 3145728 bytes (3.00MiB).")
    has_line(out, "  strategy: host")
    has_line(out, "  reason: SimDevice(id=0) cannot hold 2.00MiB (largest free block 768.00KiB): "
              .. "gathered into host memory")
    has_line(out, "  auto fell back to the host: 2097152 bytes moved from the 8 devices into host memory,")
    has_line(out, "  and the tensor lives on CpuDevice(id=0) (DLPack device kDLCPU, 0).")
    has_line(out, "│                         CPU 0                          │")
    has_line(out, "The consumer checked all 524288 values: correct.")
    has_line(out, "Exports alive after the consumer let go: 0.")
  end

  it("falls back to the host when no device can hold the array, and says so", function()
    check(run_ok("memory_pressure.lua"))
  end)

  it("sets its own small device memory, whatever the environment says", function()
    check(run_ok("memory_pressure.lua", nil, {DLRUN_DEVICES = "sim:8", DLRUN_DEVICE_MEMORY = "64MiB"}))
  end)
end)

describe("examples/pipeline.lua (make demo)", function()
  it("runs end to end on the default simulated devices and checks every tensor", function()
    local out = run_ok("pipeline.lua")
    assert.truthy(out:find("^dlrun [^\n]* on sim:8,cpu:1: 8 sim devices, host CpuDevice%(id=0%)\n"))
    has_line(out, "1. A 16x16 float32 matrix (1024 bytes), split by rows over 8 devices:")
    has_line(out, "│ SIM 0 │ SIM 1 │ SIM 2 │ SIM 3 │ SIM 4 │ SIM 5 │ SIM 6 │ SIM 7 │")
    has_line(out, "   reshard: 896 bytes moved between devices, 128 copied within a device")
    has_line(out, "   " .. SHARDED8)
    has_line(out, '   strategy "shards": 8 tensors, one per device, checked by the consumer')
    has_line(out, "   shards: 0 bytes moved between devices, 0 copied within a device")
    has_line(out, '   try_export: strategy "gather" (gathered onto SimDevice(id=0), which has room), checked')
    has_line(out, "   try_export: 896 bytes moved between devices, 128 copied within a device")
    has_line(out, "4. device_get: the whole matrix on CpuDevice(id=0), exportable: true")
    has_line(out, "   device_get: 1024 bytes moved between devices, 0 copied within a device")
    local last = "\npipeline: 10 tensors handed over, all values checked, 2816 bytes moved, 0 exports alive\n"
    assert.are.equal(last, out:sub(-#last))
  end)

  it("runs on what auto gives (helpers.auto) and checks every tensor", function()
    local a = helpers.auto()
    local out = run_ok("pipeline.lua", nil, {DLRUN_DEVICES = "", DLRUN_DEVICE_MEMORY = ""})
    assert.truthy(out:find(("on %s: %d %s devices, host CpuDevice(id=0)\n"):format(a.spec, a.n, a.platform),
                           1, true), out)
    has_line(out, '   try_export: strategy "gather" (gathered onto ' .. helpers.auto_dev(0)
                  .. ", which has room), checked")
    local last = "\npipeline: 10 tensors handed over, all values checked, 2816 bytes moved, 0 exports alive\n"
    assert.are.equal(last, out:sub(-#last))
  end)

  it("adapts to the number of devices (--devices sim:2)", function()
    local out = run_ok("pipeline.lua", {"--devices", "sim:2"})
    assert.truthy(out:find("on sim:2,cpu:1: 2 sim devices, host CpuDevice(id=0)", 1, true))
    has_line(out, "   BufferError: to_dlpack can only pack a dlpack tensor from an array on a singular "
              .. "device, but an array with a Sharding over 2 devices was provided.")
    local last = "\npipeline: 4 tensors handed over, all values checked, 128 bytes moved, 0 exports alive\n"
    assert.are.equal(last, out:sub(-#last))
  end)

  it("runs on a single device, where nothing is refused", function()
    local out = run_ok("pipeline.lua", {"--devices", "sim:1"})
    has_line(out, "   on one device, __dlpack__ takes it as it is")
    local last = "\npipeline: 4 tensors handed over, all values checked, 16 bytes moved, 0 exports alive\n"
    assert.are.equal(last, out:sub(-#last))
  end)
end)

-- Each example on each of these device specs either runs every check (status
-- 0, empty stderr) or refuses at the top with one line naming what it needs and
-- what it found (status 1, nothing on stdout). `class` is the class of the
-- devices the examples use (the default backend's).
--
-- The OpenCL specs run on pocl's CPU devices here (any vendor's elsewhere)
-- and are pending, with the reason, where there are not enough OpenCL
-- devices. They give the same outputs as sim with as many devices (the bytes
-- moved too), but for the device class and DLPack's device type.
describe("examples on other device specs", function()
  local SPECS = {
    {spec = "sim:8", canonical = "sim:8,cpu:1", count = 8, class = "SimDevice", dlpack = "kDLExtDev"},
    {spec = "cpu:8", canonical = "cpu:8", count = 8, class = "CpuDevice", dlpack = "kDLCPU"},
    {spec = "sim:4", canonical = "sim:4,cpu:1", count = 4, class = "SimDevice", dlpack = "kDLExtDev"},
    {spec = "cpu:1", canonical = "cpu:1", count = 1, class = "CpuDevice", dlpack = "kDLCPU"},
    {spec = "sim:8,cpu:2", canonical = "sim:8,cpu:2", count = 8, class = "SimDevice",
     dlpack = "kDLExtDev"},
    {spec = "sim:16", canonical = "sim:16,cpu:1", count = 16, class = "SimDevice",
     dlpack = "kDLExtDev"},
    {spec = "opencl:4", canonical = "opencl:4,cpu:1", count = 4, class = "OpenclDevice",
     dlpack = "kDLOpenCL", opencl = true},
    {spec = "opencl:8", canonical = "opencl:8,cpu:1", count = 8, class = "OpenclDevice",
     dlpack = "kDLOpenCL", opencl = true},
  }
  for _, d in ipairs(SPECS) do d.env = d.opencl and opencl_env(d.count) or DEFAULT_ENV end

  -- A case on spec d: pending, with the reason, where its devices are missing.
  local function it_on(d, title, fn)
    it(title, function()
      local why = d.opencl and opencl_missing(d.count)
      if why then
        pending(why)
        return
      end
      fn()
    end)
  end

  local function run_on(name, d) return run_ok(name, {"--devices", d.spec}, d.env) end

  -- `hint`: the devices the refusal suggests (sim:8 unless given).
  local function refused(name, d, why, hint)
    local out, err, status = run_example(name, {"--devices", d.spec}, d.env)
    assert.are.equal("", out)
    assert.are.equal(name .. ": " .. why .. (" (devices %s); run it with --devices %s\n")
                     :format(d.canonical, hint or "sim:8"), err)
    assert.are.equal(1, status)
  end

  -- The examples that need 8 devices of the default backend, sim or cpu.
  local EIGHT = {
    {"buffer_error.lua", function(out, c, d)
      has_line(out, '  strategy "shards": 8 tensors, 0 bytes copied')
      has_line(out, ("  the tensor lives on %s(id=0) (DLPack device %s, 0)"):format(c, d.dlpack))
      has_line(out, "  gather                   gather             256  " .. c .. "(id=0)")
      has_line(out, "  shards                   shards               0  8 devices, one shard each")
      assert.are.equal(7, count(out, "  the consumer checked all 64 values: correct\n"))
      local last = "\nAll ways out checked; 0 exports alive.\n"
      assert.are.equal(last, out:sub(-#last))
    end},
    {"data_parallel.lua", function(out, c)
      has_line(out, "  shard 1: samples  0- 7 on " .. c .. "(id=0), imported there, 8 rows checked")
      has_line(out, "  shard 8: samples 56-63 on " .. c .. "(id=7), imported there, 8 rows checked")
      assert.are.equal(8, count(out, "imported there, 8 rows checked\n"))
      has_line(out, "The consumer ran 8 steps and checked all 64 samples: correct.")
      has_line(out, 'Bytes moved: 0 (strategy "shards" exports each shard where it is; nothing was gathered).')
      has_line(out, "For comparison, gathering it onto " .. c .. "(id=0) first moves 3584 bytes.")
      has_line(out, "Exports alive after the consumer let go: 0.")
    end},
    {"model_parallel.lua", function(out, c)
      has_line(out, ("  data=1: %s(id=4)  %s(id=5)  %s(id=6)  %s(id=7)"):format(c, c, c, c))
      assert.are.equal(3, count(out, "\nchecked 256 values: correct\n"))
      has_line(out, "In all: 1792 bytes moved between devices, 256 copied within devices, in 2 steps.")
    end},
  }

  for _, example in ipairs(EIGHT) do
    local name, check = example[1], example[2]
    for _, d in ipairs(SPECS) do
      if d.count >= 8 then
        it_on(d, ("%s runs on %s"):format(name, d.spec), function()
          check(run_on(name, d), d.class, d)
        end)
      else
        it_on(d, ("%s refuses %s: it needs 8 devices"):format(name, d.spec), function()
          refused(name, d, ("this example needs 8 devices, found %d"):format(d.count))
        end)
      end
    end
  end

  -- memory_pressure sets the memory of sim and OpenCL devices: cpu devices
  -- use the host's.
  for _, d in ipairs(SPECS) do
    local c = d.class
    if c ~= "CpuDevice" and d.count >= 8 then
      it_on(d, "memory_pressure.lua runs on " .. d.spec, function()
        local out = run_on("memory_pressure.lua", d)
        has_line(out, "  " .. c .. "(id=7): 262144 of 1048576 bytes in use")
        has_line(out, "  ResourceExhaustedError: Out of memory on " .. c .. "(id=0) while allocating "
                  .. "2097152 bytes (2.00MiB): 262144 bytes in use of a 1048576 byte limit "
                  .. "(256.00KiB of 1.00MiB); the largest free block is 786432 bytes (768.00KiB) "
                  .. "and 0 bytes (0B) are reserved but unallocated; raise device_memory "
                  .. "(dl.configure, --device-memory, DLRUN_DEVICE_MEMORY) to at least 3145728 "
                  .. "bytes (3.00MiB).")
        has_line(out, "  strategy: host")
        has_line(out, "  reason: " .. c .. "(id=0) cannot hold 2.00MiB (largest free block "
                  .. "768.00KiB): gathered into host memory")
        has_line(out, "  auto fell back to the host: 2097152 bytes moved from the 8 devices into host memory,")
        has_line(out, "The consumer checked all 524288 values: correct.")
        has_line(out, "Exports alive after the consumer let go: 0.")
      end)
    else
      it_on(d, "memory_pressure.lua refuses " .. d.spec, function()
        local found = c == "CpuDevice" and "cpu devices, which use the host's memory"
                      or tostring(d.count)
        refused("memory_pressure.lua", d, "this example needs 8 devices whose memory it can "
                .. "set, but found " .. found)
      end)
    end
  end

  -- memory_timeline gives sim memory back to the system.
  for _, d in ipairs(SPECS) do
    if d.class == "SimDevice" then
      it_on(d, "memory_timeline.lua runs on " .. d.spec, function()
        local out = run_on("memory_timeline.lua", d)
        has_line(out, "step 5: release_unused gave 2097152 bytes back to the system")
        has_line(out, "step 8: all gone; dl.empty_cache() gave 4194304 bytes back")
      end)
    else
      it_on(d, "memory_timeline.lua refuses " .. d.spec, function()
        refused("memory_timeline.lua", d, ("this example needs a sim device, whose unused memory "
                .. "it gives back to the system, but found %s devices")
                :format(d.class:match("^(%u%l+)Device$"):lower()), "sim:1")
      end)
    end
  end

  -- multiprocess, alone, uses however many devices there are (opencl:8 would
  -- add nothing to opencl:4 but a second of pocl's start).
  for _, d in ipairs(SPECS) do
    if d.spec ~= "opencl:8" then
      it_on(d, "multiprocess.lua runs alone on " .. d.spec, function()
        local out = run_on("multiprocess.lua", d)
        local n = d.count
        has_line(out, ("[0] batch %dx%d over %d devices of 1 process(es); this process holds "
                       .. "rows 0..%d on %d device(s)"):format(2 * n, 2 * n, n, 2 * n - 1, n))
        has_line(out, ('[0] export "gather" -> "gather": a tensor on %s(id=0), %d bytes copied '
                       .. "here"):format(d.class, n == 1 and 0 or 16 * n * n))
        has_line(out, "[0] all checks passed")
      end)
    end
  end

  -- pipeline uses however many devices there are.
  local PIPELINE = {
    ["sim:8"] = {"8 sim devices", 10, 2816},
    ["cpu:8"] = {"8 cpu devices", 10, 2688},
    ["sim:4"] = {"4 sim devices", 6, 640},
    ["cpu:1"] = {"1 cpu device", 4, 0},
    ["sim:8,cpu:2"] = {"8 sim devices", 10, 2816},
    ["sim:16"] = {"16 sim devices", 18, 11776},
    ["opencl:4"] = {"4 opencl devices", 6, 640},
    ["opencl:8"] = {"8 opencl devices", 10, 2816},
  }
  for _, d in ipairs(SPECS) do
    it_on(d, "pipeline.lua runs on " .. d.spec, function()
      local want = PIPELINE[d.spec]
      local out = run_on("pipeline.lua", d)
      assert.are.equal(("%s: %s, host CpuDevice(id=0)"):format(d.canonical, want[1]),
                       out:match("^dlrun [^ ]+ on ([^\n]*)\n"))
      local last = ("\npipeline: %d tensors handed over, all values checked, %d bytes moved, "
                    .. "0 exports alive\n"):format(want[2], want[3])
      assert.are.equal(last, out:sub(-#last))
    end)
  end
end)

-- A host example's path beside the dlrun command (build/examples/NAME).
local function host_example(name) return (helpers.exe:gsub("dlrun$", "examples/" .. name)) end

-- Runs a host example with environment assignments; its output (stdout and
-- stderr) after checking it exited 0.
local function run_host_ok(exe, env)
  local words = {}
  for k, v in pairs(env or {}) do words[#words + 1] = k .. "=" .. helpers.shell_quote(v) .. " " end
  local p = assert(io.popen(table.concat(words) .. helpers.shell_quote(exe) .. " 2>&1"))
  local out = p:read("a")
  local ok, _, status = p:close()
  assert.is_true(ok, out)
  assert.are.equal(0, status)
  return out
end

describe("examples/host/minimal.c (a host application on the C API)", function()
  it("shards, gathers and reads back through the public headers only", function()
    assert.are.equal("gathered 4 shards: 0 ... 15, 48 bytes moved between devices\n",
                     run_host_ok(host_example("minimal")))
  end)

  -- Its comment and the README say `make examples` builds it: the target
  -- exists, builds every host example, and `make` left nothing for it to do.
  it("is built by make examples, which make all has already run", function()
    local build = helpers.exe:match("^(.*)/[^/]*$") or "."
    local make = "env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make --no-print-directory BUILD="
                 .. helpers.shell_quote(build) .. " "
    local plan = helpers.capture(make .. "-n -B examples 2>&1")
    for _, name in ipairs {"minimal", "embed", "exchange"} do
      assert(plan:find(" -o " .. build .. "/examples/" .. name .. " ", 1, true),
             ("make -n -B examples does not build %s/examples/%s:\n%s"):format(build, name, plan))
    end
    local _, _, status = os.execute(make .. "-q examples")
    assert.are.equal(0, status, "make -q examples: not up to date after make")
  end)
end)

describe("examples/host/exchange.c (a DLPack 1.3 library allocating in dlrun's memory)", function()
  it("allocates through the exchange table, takes the output back without a copy, and says why "
     .. "a device it lacks is refused", function()
    assert.are.equal(
      "library: float32[4, 3] allocated on kDLCPU:0 by the host, work stream NULL (host memory), "
        .. "12 values written\n"
        .. "host: imported without a copy onto CpuDevice(id=0); moved to SimDevice(id=1): "
        .. "0 1 4 9 16 25 36 49 64 81 100 121\n"
        .. "library: BufferError: dlrun_exchange_allocator: this runtime has no memory for device "
        .. "kDLCUDA:0; it has kDLExtDev:0..1, kDLCPU:0\n"
        .. "host: 0 exports alive, 0 bytes in use on CpuDevice(id=0)\n",
      run_host_ok(host_example("exchange")))
  end)
end)

describe("examples/host/opencl_interop.c (OpenCL work on an exported buffer)", function()
  it("runs a kernel of its own on the exported cl_mem, on dlrun's queue, and checks it", function()
    local exe = host_example("opencl_interop")
    local f = io.open(exe)
    if not f then
      pending("not built: the OpenCL headers and ICD loader are not installed")
      return
    end
    f:close()
    local why = opencl_missing(1)
    if why then
      pending(why)
      return
    end
    assert.are.equal("a kernel of the application read the exported buffer on dlrun's queue: "
                     .. "y = 2x + 1 = 1, 3, ..., 2047, all 1024 correct\n",
                     run_host_ok(exe, opencl_env(1)))
  end)
end)

describe("examples/multiprocess.lua (many processes)", function()
  it("runs alone: one process holds the whole batch and nothing is sent", function()
    local out = run_ok("multiprocess.lua")
    has_line(out, "[0] batch 16x16 over 8 devices of 1 process(es); this process holds rows 0..15 "
                  .. "on 8 device(s)")
    has_line(out, "[0] reshard rows -> features: sent 0 bytes, received 0 bytes")
    has_line(out, '[0] export "auto" -> "gather": a tensor on SimDevice(id=0), 1024 bytes copied here')
    has_line(out, "[0] all checks passed")
  end)

  for _, n in ipairs {2, 4} do
    it("runs under mpirun -n " .. n .. ": every process checks its part and every way out",
       function()
      -- helpers.mpirun runs `timeout -k 10 <limit> mpirun ...`: a hung job fails here.
      local out, err, status = helpers.mpirun(n, 'dofile("examples/multiprocess.lua")',
                                              {args = "--devices sim:2", limit = 120})
      assert.are.equal("", err)
      assert.are.equal(0, status, out)
      local rows, sent = 4, (n == 2 and 64 or 192)
      for p = 0, n - 1 do
        has_line(out, ("[%d] batch %dx%d over %d devices of %d process(es); this process holds "
                       .. "rows %d..%d on 2 device(s)")
                      :format(p, 4 * n, 4 * n, 2 * n, n, p * rows, p * rows + rows - 1))
        has_line(out, ("[%d] reshard rows -> features: sent %d bytes, received %d bytes")
                      :format(p, sent, sent))
        has_line(out, ("[%d] batch:tolist(): RuntimeError: Fetching value for an Array that spans "
                       .. "non-addressable (non process loca..."):format(p))
        has_line(out, ('[%d] export "auto" -> "allgather": a tensor on SimDevice(id=%d), %d bytes '
                       .. "copied here"):format(p, 2 * p, 64 * n * n))
        has_line(out, ('[%d] export "shards": 2 tensors in place, 0 bytes copied'):format(p))
        has_line(out, ("[%d] all checks passed"):format(p))
      end
      for p = 1, n - 1 do
        has_line(out, ('[%d] export "gather": no tensor here; process 0 holds it on '
                       .. "SimDevice(id=0)"):format(p))
      end
    end)
  end
end)

describe("examples/memory_timeline.lua", function()
  local MiB = 1024 * 1024
  local out, trace_text
  setup(function()
    local trace = os.tmpname()
    out = run_ok("memory_timeline.lua", {"--trace", trace})
    local f = assert(io.open(trace))
    trace_text = f:read("a")
    f:close()
    os.remove(trace)
  end)

  it("draws the device's memory curve as counter events, ending at its final value", function()
    local values = {}
    for line in trace_text:gmatch("[^\n]+") do
      if line:find('"ph": "C"', 1, true) and line:find('"name": "SimDevice(id=0) device memory"',
                                                       1, true) then
        values[#values + 1] = tonumber(line:match('"bytes_in_use": (%d+)'))
      end
    end
    -- up 1, 2, 3 MiB; the 2 MiB one goes; the others go; one more comes and goes
    assert.are.same({1 * MiB, 3 * MiB, 6 * MiB, 4 * MiB, 3 * MiB, 0, 1 * MiB, 0}, values)
    assert.truthy(trace_text:find('"ph": "X", "cat": "memory", "name": "alloc"', 1, true))
    assert.truthy(trace_text:find("\n]}\n$"), "the trace is complete")
  end)

  it("prints a snapshot of the blocks and the arrays holding them", function()
    has_line(out, "snapshot of SimDevice(id=0) device memory: 4194304 of 8388608 bytes in use, "
                  .. "6291456 reserved")
    has_line(out, "  offset        0  size  1048576  requested  1048576  allocated array "
                  .. "float32[262144] SingleDeviceSharding(device=SimDevice(id=0), "
                  .. "memory_kind=device)")
    has_line(out, "  offset  1048576  size  2097152  requested        0  free     ")
    has_line(out, "  offset  3145728  size  3145728  requested  3145728  allocated array "
                  .. "float32[786432] SingleDeviceSharding(device=SimDevice(id=0), "
                  .. "memory_kind=device)")
  end)

  it("gives unused memory back and says how much", function()
    has_line(out, "step 5: release_unused gave 2097152 bytes back to the system")
    has_line(out, "step 7: one 1 MiB array, 1 MiB in use; peak 6 MiB")
    has_line(out, "step 8: all gone; dl.empty_cache() gave 4194304 bytes back")
  end)
end)
