-- runs: once
-- ipc-off: no
-- devices: any
-- needs: python3-numpy

-- scripts/gpu-check.sh on the driver double, as it behaves on a GPU machine
-- as it comes (docs/cuda.md, "Verifying on a GPU"): the build it takes, the
-- spec files it does not run because what they need is not here (with why,
-- never a failure), the CUDA phases under compute-sanitizer's memcheck (a
-- stand-in that records its arguments), the parts run on one and on two
-- devices, and its last line; and scripts/spec-needs.sh, word by word.
-- About 25 s on 2 cores.
local helpers = require "helpers"
local python = require "python_side"
local q = helpers.shell_quote

local BUILD = helpers.exe:match("^(.*)/[^/]*$") or "build"
local PY = python.PYTHON
local DOUBLE = BUILD .. "/tests/cuda-double/libcuda.so.1"
local SMALL_SPEC = "spec/docs/help_spec.lua" -- needs nothing, any devices, a second
local NUMPY_SPEC = "spec/arrays/format_spec.lua" -- needs python3-numpy only
local PY_WHO = "the specs' Python: DLRUN_PYTHON, default /usr/bin/python3"
local LAST = "^gpu%-check: (%d+) passed, (%d+) failed, (%d+) skipped in %d+ s$"

-- An instrumented build (make check-asan, check-tsan) cannot be loaded into
-- python3 (the round trip); run-tests.sh leaves the check out there too.
local INSTRUMENTED = not helpers.capture("nm " .. q(BUILD .. "/libdlrun.a") ..
                                         " 2>/dev/null | grep -c ' U __[a-z]*san_'"):match("^0%s*$")

local tmp
setup(function()
  tmp = helpers.capture("mktemp -d"):gsub("\n$", "")
  -- The specs' Python without its site packages: no NumPy.
  helpers.write_file(tmp .. "/py", "#!/bin/sh\nexec " .. q(PY) .. ' -S "$@"\n')
  -- A stand-in for compute-sanitizer: records its arguments and runs the
  -- command, or (FAKE_SANITIZER_ERRORS set) runs nothing and reports an error.
  helpers.write_file(tmp .. "/compute-sanitizer", [[#!/bin/sh
printf '%s\n' "$*" >>"$FAKE_SANITIZER_LOG"
code=0
while [ $# -gt 0 ]; do
  case "$1" in
    --error-exitcode) code=$2; shift 2 ;;
    --*) shift 2 ;;
    *) break ;;
  esac
done
if [ -n "${FAKE_SANITIZER_ERRORS:-}" ]; then
  echo "========= Invalid __global__ write of size 4 bytes"
  echo "========= ERROR SUMMARY: 1 error"
  exit "$code"
fi
exec "$@"
]])
  assert(os.execute("chmod +x " .. q(tmp .. "/py") .. " " .. q(tmp .. "/compute-sanitizer")))
end)

teardown(function()
  if tmp then os.execute("rm -rf " .. q(tmp)) end
end)

-- Runs `line` with `env` (nil values unset); returns stdout and stderr
-- together, and the exit status.
local function run(line, env)
  local words = {"env"}
  for _, k in ipairs({"DLRUN_DEVICES", "DLRUN_CUDA_LIBRARY", "DLRUN_CUDA_MODULE", "CUDA_DOUBLE_DEVICES",
                      "GPU_CHECK_BYTES", "GPU_CHECK_SPECS", "COMPUTE_SANITIZER", "PYTHON",
                      "DLRUN_PYTHON", "OCL_ICD_VENDORS", "FAKE_SANITIZER_ERRORS"}) do
    if env[k] == nil then words[#words + 1] = "-u " .. k end
  end
  for k, v in pairs(env) do words[#words + 1] = k .. "=" .. q(v) end
  local out = os.tmpname()
  local _, how, code = os.execute(table.concat(words, " ") .. " " .. line .. " >" .. q(out) .. " 2>&1")
  local text = helpers.read_file(out)
  os.remove(out)
  return text, how == "exit" and code or 128 + code
end

-- Whether `text` has `line`, whole.
local function has_line(text, line)
  return ("\n" .. text .. "\n"):find("\n" .. line .. "\n", 1, true) ~= nil
end

local function expect_lines(text, lines)
  for _, l in ipairs(lines) do
    assert(has_line(text, l), ("no line %q in:\n%s"):format(l, text))
  end
end

-- The lines of `text` that match `pattern`.
local function matching(text, pattern)
  local t = {}
  for _, l in ipairs(helpers.lines(text)) do
    if l:match(pattern) then t[#t + 1] = l end
  end
  return t
end

-- The counts of the last line, which must be the summary.
local function last_counts(text)
  local lines = helpers.lines(text)
  local p, f, s = lines[#lines]:match(LAST)
  assert(p, "the last line is not the summary: " .. lines[#lines])
  return {tonumber(p), tonumber(f), tonumber(s)}
end

local function gpu_check(env, args)
  env.BUILD = BUILD
  env.PYTHON = env.PYTHON or PY
  return run("scripts/gpu-check.sh " .. (args or "--double"), env)
end

local function check_it(name, fn)
  if INSTRUMENTED then
    return pending(name .. " (an instrumented build: the round trip loads libdlrun.so into python3)")
  end
  it(name, function()
    assert(python.exists(DOUBLE), DOUBLE .. " is missing: make all builds the driver double")
    fn()
  end)
end

local CUDA_PARTS = {
  "N-d box copies between two devices of the platform [cuda]",
  "a copy of several pieces, one from another device of the platform [cuda]",
  "event order: a copy to the platform's other device waits for the first's [cuda]",
}

describe("scripts/gpu-check.sh --double", function()
  check_it("on one device: lists a spec file whose needs are unmet as not run, with why, and ends with 0 failed",
           function()
    -- The round trip takes the first of PYTHON with NumPy.
    local out, code = gpu_check({CUDA_DOUBLE_DEVICES = "1", DLRUN_PYTHON = tmp .. "/py", PYTHON = tmp .. "/py " .. PY,
                                 GPU_CHECK_SPECS = NUMPY_SPEC, COMPUTE_SANITIZER = ""})
    assert.are.equal(0, code, out)
    local lines = {
      "gpu-check: build: taken as made in " .. BUILD .. " (--double): nothing built here",
      "SKIP: --double: the build in " .. BUILD .. ", as it was made",
      "gpu-check: CUDA available, 1 device(s) used",
      "peer (device 0 to 1), 1 MiB: skipped: one CUDA device",
      "PASS: every case's values read back right; peer copies skipped: one CUDA device " ..
        "(ratios on the double mean nothing)",
      "gpu-check: Python: " .. PY .. " (" .. tmp .. "/py: no NumPy)",
      "SKIP: --double: compute-sanitizer cannot watch the driver double (COMPUTE_SANITIZER names " ..
        "one to try the wiring)",
      "Lua suite on cuda:1: 0 successes / 0 failures / 0 errors / 0 pending in 0 files",
      "not run, what they need is not here (scripts/spec-needs.sh):",
      "  " .. NUMPY_SPEC .. ": python3-numpy: no NumPy for " .. tmp .. "/py (" .. PY_WHO ..
        "; Debian: python3-numpy)",
      "SKIP: 1 spec files need what this machine lacks (listed above)",
    }
    for _, part in ipairs(CUDA_PARTS) do lines[#lines + 1] = "ok - " .. part .. " # SKIP 1 device, 2 needed" end
    expect_lines(out, lines)
    assert.are.equal(1, #matching(out, "^PASS: %d+ cuda cases, 3 parts that need 2 devices skipped " ..
                                       "%(listed above%) %(C conformance: %d+ passed, 0 failed%)$"), out)
    assert.are.same({}, matching(out, "^# ran on 2 devices"))
    -- Each consumer of the round trip is a skip on the double.
    assert.are.equal(3, #matching(out, "^SKIP: dlrun <%-> [a-z]+: .* %(PYTHON= names an interpreter with it%)$"), out)
    assert.are.same({}, matching(out, "^FAIL"))
    -- build, 3 consumers, memcheck, the spec file; conformance, bandwidth, round trip
    assert.are.same({3, 0, 6}, last_counts(out))
  end)

  check_it("on two devices: runs the CUDA phases under memcheck, every process, and lists the parts on 2 devices",
           function()
    local log = tmp .. "/args"
    local out, code = gpu_check({CUDA_DOUBLE_DEVICES = "2", DLRUN_PYTHON = PY, GPU_CHECK_SPECS = SMALL_SPEC,
                                 COMPUTE_SANITIZER = tmp .. "/compute-sanitizer", FAKE_SANITIZER_LOG = log})
    assert.are.equal(0, code, out)
    local flags = "--tool memcheck --target-processes all --error-exitcode 86 "
    assert.are.equal(flags .. BUILD .. "/tests/test_conformance\n" ..
                     flags .. BUILD .. "/bench/gpu_bandwidth --bytes 1MiB --runs 1 --latency-runs 20\n" ..
                     flags .. PY .. " -B scripts/gpu-dlpack-check.py " .. BUILD .. "/libdlrun.so\n",
                     helpers.read_file(log))
    local lines = {
      "gpu-check: CUDA available, 2 device(s) used",
      "PASS: every case's values read back right; peer copies from device 0 to 1 measured " ..
        "(ratios on the double mean nothing)",
      "gpu-check: " .. tmp .. "/compute-sanitizer " .. flags:gsub(" $", ""),
      "memcheck the conformance suite: no errors",
      "memcheck gpu_bandwidth: no errors",
      "memcheck the DLPack round trip: no errors",
      "PASS: no memory errors in the conformance suite, gpu_bandwidth, the DLPack round trip",
      "PASS: every file run passed on cuda:2 (1 files)",
    }
    for _, part in ipairs(CUDA_PARTS) do
      lines[#lines + 1] = "# ran on 2 devices: " .. part .. ", in the case above"
    end
    expect_lines(out, lines)
    assert.are.equal(1, #matching(out, "^PASS: %d+ cuda cases, 3 parts on 2 devices run %(listed above%)"), out)
    assert.are.same({}, matching(out, "SKIP 1 device, 2 needed"))
    assert.are.equal(1, #matching(out, "^peer %(device 0 to 1%), 1 MiB: dlrun [%d.]+ GB/s, driver [%d.]+ GB/s"), out)
    -- the PTX kernels' fills and sequences, and the small operations' latency
    assert.are.equal(6, #matching(out, "^[a-z]+ [a-z0-9]+ .*kernel%) vs cuMemsetD32, 1 MiB: dlrun [%d.]+ GB/s"), out)
    assert.are.equal(4, #matching(out, "^latency 4 KiB [a-z0-9 ()]+: dlrun [%d.]+ us, driver [%d.]+ us, " ..
                                       "ratio [%d.]+$"), out)
    assert.are.equal(1, #matching(out, "^Lua suite on cuda:2: 4 successes / 0 failures / 0 errors / " ..
                                       "0 pending in 1 files$"), out)
    -- build, 3 consumers; conformance, bandwidth, round trip, memcheck, Lua
    assert.are.same({5, 0, 4}, last_counts(out))
  end)

  check_it("fails the memcheck phase, naming each step, when compute-sanitizer reports an error", function()
    local out, code = gpu_check({CUDA_DOUBLE_DEVICES = "2", DLRUN_PYTHON = tmp .. "/py", GPU_CHECK_SPECS = NUMPY_SPEC,
                                 COMPUTE_SANITIZER = tmp .. "/compute-sanitizer",
                                 FAKE_SANITIZER_LOG = tmp .. "/args-errors", FAKE_SANITIZER_ERRORS = "1"})
    assert.are.equal(1, code, out)
    expect_lines(out, {
      "========= ERROR SUMMARY: 1 error",
      "memcheck the conformance suite: memory errors (compute-sanitizer exit 86)",
      "memcheck gpu_bandwidth: memory errors (compute-sanitizer exit 86)",
      "memcheck the DLPack round trip: memory errors (compute-sanitizer exit 86)",
      "FAIL: compute-sanitizer memcheck: the conformance suite (memory errors), gpu_bandwidth " ..
        "(memory errors), the DLPack round trip (memory errors)",
    })
    assert.are.equal(1, #matching(out, "^FAIL"), out)
    assert.are.same({3, 1, 5}, last_counts(out))
  end)

  check_it("fails the memcheck phase when COMPUTE_SANITIZER names no program", function()
    local out, code = gpu_check({CUDA_DOUBLE_DEVICES = "2", DLRUN_PYTHON = tmp .. "/py", GPU_CHECK_SPECS = NUMPY_SPEC,
                                 COMPUTE_SANITIZER = tmp .. "/no-such-sanitizer"})
    assert.are.equal(1, code, out)
    expect_lines(out, {"FAIL: COMPUTE_SANITIZER=" .. tmp .. "/no-such-sanitizer: not found"})
    assert.are.same({3, 1, 5}, last_counts(out))
  end)
end)

describe("scripts/gpu-check.sh --prebuilt", function()
  check_it("takes the build as made, says so, and exits 2 without a CUDA driver", function()
    local out, code = gpu_check({DLRUN_CUDA_LIBRARY = "/nonexistent/libcuda.so.1"}, "--prebuilt")
    assert.are.equal(2, code, out)
    local why = "/nonexistent/libcuda.so.1: cannot open shared object file: No such file or directory"
    expect_lines(out, {
      "gpu-check: build: taken as made in " .. BUILD .. " (--prebuilt): nothing built here",
      "SKIP: --prebuilt: the build in " .. BUILD .. ", as it was made",
      "gpu-check: CUDA not available: " .. why,
    })
    assert.are.equal(5, #matching(out, "^SKIP: CUDA not available: " .. why:gsub("%p", "%%%0") .. "$"), out)
    assert.are.same({0, 0, 6}, last_counts(out))
  end)

  check_it("fails the build phase, naming what is missing, for a folder with no build", function()
    local empty = tmp .. "/empty-build"
    assert(os.execute("mkdir -p " .. q(empty)))
    local out, code = run("scripts/gpu-check.sh --prebuilt",
                          {BUILD = empty, DLRUN_CUDA_LIBRARY = "/nonexistent/libcuda.so.1"})
    assert.are.equal(2, code, out)
    local missing = {}
    for _, f in ipairs({"dlrun", "libdlrun.so", "libdlrun_cuda.so", "lua/dlrun/core.so", "tests/test_conformance",
                        "bench/gpu_bandwidth"}) do
      missing[#missing + 1] = empty .. "/" .. f
    end
    expect_lines(out, {"FAIL: --prebuilt: the build lacks " .. table.concat(missing, " ") ..
                       " (make _all makes them)"})
    assert.are.same({0, 1, 5}, last_counts(out))
  end)

  it("refuses an unknown option with its usage", function()
    local out, code = run("scripts/gpu-check.sh --fast", {})
    assert.are.equal(2, code)
    assert.are.equal("usage: scripts/gpu-check.sh [--double] [--prebuilt]\n", out)
  end)
end)

describe("scripts/spec-needs.sh", function()
  local function needs(files, env)
    return run("scripts/spec-needs.sh " .. files, env)
  end

  it("prints nothing and exits 0 for files whose needs are met", function()
    assert.are.same({"", 0}, {needs("spec/arrays/array_spec.lua spec/docs/help_spec.lua", {BUILD = BUILD})})
  end)

  it("judges the Python words with the specs' interpreter (DLRUN_PYTHON)", function()
    local nopy = tmp .. "/py"
    assert.are.same({NUMPY_SPEC .. ": python3-numpy: no NumPy for " .. nopy .. " (" .. PY_WHO ..
                     "; Debian: python3-numpy)\n" ..
                     "spec/dlpack/interop_spec.lua: python3-numpy: no NumPy for " .. nopy .. " (" .. PY_WHO ..
                     "; Debian: python3-numpy)\n" ..
                     "spec/dlpack/interop_spec.lua: python3-torch: no PyTorch for " .. nopy .. " (" .. PY_WHO ..
                     "; Debian: python3-torch)\n", 1},
                    {needs(NUMPY_SPEC .. " spec/dlpack/interop_spec.lua", {BUILD = BUILD, DLRUN_PYTHON = nopy})})
    assert.are.same({"spec/cli/prompt_spec.lua: python3: no Python at /nonexistent/python3 (" .. PY_WHO .. ")\n", 1},
                    {needs("spec/cli/prompt_spec.lua", {BUILD = BUILD, DLRUN_PYTHON = "/nonexistent/python3"})})
  end)

  it("judges the OpenCL words with the build's dlrun and the ICD vendors folder", function()
    local vendors = tmp .. "/vendors"
    assert(os.execute("mkdir -p " .. q(vendors)))
    assert.are.same({"spec/devices/opencl_spec.lua: opencl: /nonexistent/dlrun is not built: cannot ask it for " ..
                     "the OpenCL platform\n" ..
                     "spec/devices/opencl_spec.lua: pocl: no pocl ICD in " .. vendors .. " (pocl-opencl-icd): " ..
                     "the files assume pocl's CPU devices (POCL_DEVICES)\n" ..
                     "spec/devices/platforms_spec.lua: ocl-icd: /nonexistent/libdlrun_opencl.so is not built: " ..
                     "no OpenCL ICD loader to ask\n", 1},
                    {needs("spec/devices/opencl_spec.lua spec/devices/platforms_spec.lua",
                           {BUILD = "/nonexistent", OCL_ICD_VENDORS = vendors})})
    -- A build whose dlrun lists what it is told, whatever OCL_ICD_VENDORS says:
    -- as where the ICD loader ignores it.
    local fake, pocl = tmp .. "/fake-build", tmp .. "/pocl-vendors"
    assert(os.execute("mkdir -p " .. q(fake) .. " " .. q(pocl) .. " && : >" .. q(fake .. "/libdlrun_opencl.so") ..
                      " && echo libpocl.so.2 >" .. q(pocl .. "/pocl.icd")))
    local function lists(line)
      helpers.write_file(fake .. "/dlrun", "#!/bin/sh\necho " .. q(line) .. "\n")
      assert(os.execute("chmod +x " .. q(fake .. "/dlrun")))
    end
    lists("opencl  available: 1 device")
    assert.are.same({"spec/devices/platforms_spec.lua: ocl-icd: the OpenCL ICD loader ignores OCL_ICD_VENDORS: " ..
                     "with OCL_ICD_VENDORS=/nonexistent, " .. fake .. "/dlrun --list-devices still lists opencl " ..
                     "available: 1 device (ocl-icd's loader reads it: ocl-icd-libopencl1)\n", 1},
                    {needs("spec/devices/opencl_spec.lua spec/devices/platforms_spec.lua",
                           {BUILD = fake, OCL_ICD_VENDORS = pocl})})
    lists("opencl  not available: no OpenCL driver (ICD) is installed (clGetPlatformIDs: -1001)")
    assert.are.same({"spec/devices/opencl_spec.lua: opencl: the OpenCL platform is not available: no OpenCL " ..
                     "driver (ICD) is installed (clGetPlatformIDs: -1001)\n", 1},
                    {needs("spec/devices/opencl_spec.lua spec/devices/platforms_spec.lua",
                           {BUILD = fake, OCL_ICD_VENDORS = pocl})})
  end)

  it("names the programs that are not on PATH", function()
    -- A PATH with only what the script itself uses.
    local bin = tmp .. "/bin"
    assert(os.execute("mkdir -p " .. q(bin) .. " && for c in sh awk grep sed tr timeout ldd dirname cat; do " ..
                      "ln -sf \"$(command -v $c)\" " .. q(bin) .. "/$c; done"))
    assert.are.same({"spec/project/abi_spec.lua: abigail-tools: abidiff not found (abigail-tools)\n" ..
                     "spec/project/install_spec.lua: build-deps: cc not found (scripts/deps.sh --demo installs " ..
                     "the build's packages)\n" ..
                     "spec/project/install_spec.lua: luarocks: luarocks not found (luarocks)\n" ..
                     "spec/project/install_spec.lua: pkg-config: pkg-config not found (pkg-config)\n" ..
                     "spec/project/install_spec.lua: man-db: man not found (man-db)\n" ..
                     "spec/arrays/printing_spec.lua: mpi: mpirun not found (Open MPI: openmpi-bin)\n", 1},
                    {run(q(bin .. "/sh") .. " scripts/spec-needs.sh spec/project/abi_spec.lua " ..
                         "spec/project/install_spec.lua spec/arrays/printing_spec.lua", {BUILD = BUILD, PATH = bin})})
  end)

  it("knows every word of scripts/spec-list.sh, and names an unknown one", function()
    local words = helpers.read_file("scripts/spec-list.sh"):match('\nNEEDS="([^"]*)"')
    local spec = tmp .. "/all_words_spec.lua"
    helpers.write_file(spec, "-- runs: once\n-- ipc-off: no\n-- devices: any\n-- needs: " ..
                       words:gsub(" ", ", ") .. ", gpu\n")
    local out = needs(q(spec), {BUILD = BUILD})
    assert.are.same({spec .. ": gpu: unknown word (scripts/spec-list.sh, NEEDS)"},
                    matching(out, "unknown word"))
  end)

  it("exits 2 for a file that is not there", function()
    assert.are.same({"scripts/spec-needs.sh: spec/none_spec.lua: no such spec file\n", 2},
                    {needs("spec/none_spec.lua", {})})
  end)
end)
