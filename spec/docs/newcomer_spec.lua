-- runs: once
-- ipc-off: no
-- devices: any
-- needs: none

-- The README's two commands as a newcomer runs them on a machine missing
-- every package: `make all` (and so `make test`) installs first, then builds
-- in a make that sees what was installed (the MPI module); `make demo`
-- installs and builds only what the pipeline needs.
--
-- The machine is faked on PATH: dpkg-query knows no package, apt-get logs
-- its arguments and "installs" (after which pkg-config knows Open MPI and
-- OpenCL), and the compiler writes each output as a program that exits 0
-- (a run without -o, the preprocessor check of a header, succeeds).
local helpers = require "helpers"
local q = helpers.shell_quote

local FAKES = {
  ["dpkg-query"] = "exit 1",
  ["apt-get"] = 'echo "$*" >>"$FAKE/apt.log"; : >"$FAKE/installed"',
  ["sudo"] = 'exec "$@"',
  ["update-alternatives"] = "exit 0",
  ["pkg-config"] = '[ "$1" != --exists ] && exit 0\n' ..
                   '[ -e "$FAKE/installed" ] && { [ "$2" = ompi-c ] || [ "$2" = OpenCL ]; }',
  ["cc"] = 'out=\nwhile [ $# -gt 1 ]; do [ "$1" = -o ] && out=$2; shift; done\n' ..
           '[ -n "$out" ] || exit 0\n' ..
           'printf "#!/bin/sh\\nexit 0\\n" >"$out" && chmod +x "$out"',
}

local read_all, capture = helpers.read_all, helpers.capture

-- Runs `make <target>` on the faked machine; returns its output, its exit
-- status, apt-get's log and the files the build wrote (relative, sorted).
local function newcomer_make(target)
  local fake = capture("mktemp -d"):gsub("\n$", "")
  os.execute("mkdir " .. q(fake .. "/bin"))
  for name, body in pairs(FAKES) do
    local path = fake .. "/bin/" .. name
    local f = assert(io.open(path, "w"))
    f:write("#!/bin/sh\n", body, "\n")
    f:close()
    os.execute("chmod +x " .. q(path))
  end
  local out = fake .. "/make.out"
  local _, _, status = os.execute(("unset MAKEFLAGS MAKELEVEL MFLAGS; FAKE=%s PATH=%s:$PATH " ..
    "make --no-print-directory BUILD=%s CC=%s %s >%s 2>&1"):format(
    q(fake), q(fake .. "/bin"), q(fake .. "/build"), q(fake .. "/bin/cc"), target, q(out)))
  local files = {}
  for l in capture("cd " .. q(fake .. "/build") .. " && find . -type f -o -type l | sed 's|^\\./||' | sort")
             :gmatch("[^\n]+") do
    files[#files + 1] = l
  end
  local result = {output = read_all(out), status = status, apt = read_all(fake .. "/apt.log"),
                  files = files, build = fake .. "/build"}
  os.execute("rm -rf " .. q(fake))
  return result
end

local function package_set(option)
  return capture("scripts/deps.sh " .. option .. " --list"):gsub("\n$", "")
end

describe("a newcomer's first make", function()
  it("make all installs the packages, then builds the MPI and OpenCL modules pkg-config knows only since", function()
    local r = newcomer_make("all")
    assert.are.equal(0, r.status, r.output)
    assert.are.equal("update -qq\ninstall -y -qq --no-install-recommends " .. package_set("") .. "\n", r.apt)
    local built = {}
    for _, f in ipairs(r.files) do built[f] = true end
    assert.is_true(built["libdlrun_mpi.so"], "no libdlrun_mpi.so among:\n" .. table.concat(r.files, "\n"))
    assert.is_true(built["libdlrun_opencl.so"], "no libdlrun_opencl.so among:\n" .. table.concat(r.files, "\n"))
    assert.is_true(built["tests/test_catalogue"])
    assert.is_true(built["dlrun.1"])
  end)

  it("make demo installs only a compiler, Lua 5.4 and DLPack's header", function()
    assert.are.equal("gcc make libc6-dev liblua5.4-dev libdlpack-dev", package_set("--demo"))
    local full = " " .. package_set("") .. " "
    for _, p in ipairs({"python3-torch", "openmpi-bin", "libopenmpi-dev", "luarocks", "man-db",
                        "opencl-headers", "ocl-icd-opencl-dev", "pocl-opencl-icd", "clinfo"}) do
      assert.truthy(full:find(" " .. p .. " ", 1, true), p)
    end
    local r = newcomer_make("demo")
    assert.are.equal(0, r.status, r.output)
    assert.are.equal("update -qq\ninstall -y -qq --no-install-recommends " .. package_set("--demo") .. "\n",
                     r.apt)
  end)

  it("make demo builds only the dlrun command, then runs the pipeline with it", function()
    local r = newcomer_make("demo")
    assert.are.equal(0, r.status, r.output)
    local others = {}
    for _, f in ipairs(r.files) do
      local folder = f:match("^obj/src/([^/]+)/.+%.[od]$")
      local needed = {core = true, mem = true, distributed = true, device = true, shard = true, array = true,
                      dlpack = true, lua = true, cli = true}
      needed.platforms = true -- the built-in ones: sim, cpu, host execution
      if not (folder and needed[folder]) then others[#others + 1] = f end
    end
    assert.are.same({"dlrun", "libdlrun.a"}, others)
    assert.truthy(r.output:find("\n" .. r.build .. "/dlrun examples/pipeline.lua\n", 1, true), r.output)
  end)

  it("make check-fresh takes the Debian mirrors this machine's apt sources name, in either format", function()
    local dir = capture("mktemp -d"):gsub("\n$", "")
    os.execute("mkdir " .. q(dir .. "/sources.list.d"))
    local function put(name, text)
      local f = assert(io.open(dir .. "/" .. name, "w"))
      f:write(text)
      f:close()
    end
    put("sources.list", "# deb http://old.example/debian bookworm main\n" ..
        "deb-src http://src.example/debian bookworm main\n" ..
        "deb [signed-by=/k.gpg] https://mirror.example/debian bookworm-updates main contrib\n")
    put("sources.list.d/debian.sources", "Types: deb deb-src\nURIs: https://mirror.example/debian\n" ..
        "Suites: bookworm bookworm-updates\nComponents: main\n\n" ..
        "Types: deb\nURIs: http://off.example/debian\nSuites: bookworm\nEnabled: no\n\n" ..
        "# security\nTypes: deb\nURIs: http://security.example/debian-security\n" ..
        "Suites: bookworm-security\nComponents: main\n")
    put("sources.list.d/other.sources", "Types: deb\nURIs: https://vendor.example/apt\nSuites: nodistro\n")
    put("sources.list.d/old.list.disabled", "deb http://disabled.example/debian bookworm main\n")
    local out = capture("FRESH_APT_DIR=" .. q(dir) .. " scripts/check-fresh.sh --sources 2>&1")
    os.execute("rm -rf " .. q(dir))
    assert.are.equal("deb https://mirror.example/debian bookworm main\n" ..
                     "deb https://mirror.example/debian bookworm-updates main\n" ..
                     "deb http://security.example/debian-security bookworm-security main\n", out)
  end)
end)
