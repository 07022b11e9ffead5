-- runs: once
-- ipc-off: no
-- devices: any
-- needs: build-deps, luarocks, pkg-config, man-db

-- make install / make uninstall and the rockspec, used the way a packager, a
-- C programmer and a Lua programmer would, from a temporary folder outside
-- the source tree: the installed files, one version everywhere, the exported
-- symbols, pkg-config (dlrun and dlrun-lua), static programs, the installed
-- dlrun (also moved elsewhere), plain lua5.4, the man page, the folders
-- uninstall leaves, and LuaRocks (lint, make, pack, test), offline.
--
-- Installs the build the suite tests (the folder of DLRUN_EXE, else build),
-- so under the sanitizers the installed programs are the instrumented ones.
local helpers = require "spec.helpers"
local q = helpers.shell_quote

local read_all, write_file = helpers.read_file, helpers.write_file

local capture = helpers.capture

local ROOT = capture("pwd"):gsub("\n$", "")
local BUILD = (os.getenv("DLRUN_EXE") or ""):match("^(.*)/[^/]*$") or "build"
local VERSION = read_all("include/dlrun/dlrun.h"):match('#define DLRUN_VERSION_STRING "([^"]*)"')
-- The soname's number, and the library's file: named after its soname, then the release.
local ABI = read_all("include/dlrun/dlrun.h"):match("#define DLRUN_ABI_VERSION (%d+)\n")
local SONAME = "libdlrun.so." .. tostring(ABI)
local LIB_FILE = SONAME .. "." .. tostring(VERSION)

-- Variables that would point a command back at the source tree or at the
-- caller's own setup, and make's from an enclosing `make test`.
local CLEAN = "unset DLRUN_LUA_DIR LUA_PATH LUA_PATH_5_4 LUA_CPATH LUA_CPATH_5_4 LUA_INIT " ..
              "LUA_INIT_5_4 PKG_CONFIG_PATH LD_LIBRARY_PATH MAKEFLAGS MAKELEVEL MFLAGS; "

-- sh(line [, cwd]) -> stdout, stderr, exit status; runs from `cwd` (the
-- temporary folder unless given) with CLEAN applied.
local tmp
local function sh(line, cwd)
  local out, err = os.tmpname(), os.tmpname()
  local _, how, code = os.execute(("%s cd %s && { %s; } >%s 2>%s"):format(
    CLEAN, q(cwd or tmp), line, q(out), q(err)))
  if how == "signal" then code = 128 + code end
  local o, e = read_all(out), read_all(err)
  os.remove(out)
  os.remove(err)
  return o, e, code
end

-- Run and expect success; returns stdout.
local function ok(line, cwd)
  local out, err, code = sh(line, cwd)
  assert(code == 0, ("`%s` exited %s:\n%s%s"):format(line, tostring(code), out, err))
  return out
end

local function sorted_lines(text)
  local t = {}
  for l in text:gmatch("[^\n]+") do t[#t + 1] = l end
  table.sort(t)
  return t
end

local function dir_list(dir) -- file names in a source folder, sorted
  return sorted_lines(ok("ls " .. q(dir), ROOT))
end

-- Installed files and symbolic links under `dir`, relative, sorted.
local function tree(dir)
  return sorted_lines(ok(("find . -type f -o -type l | sed 's|^\\./||'"), dir))
end

-- Every folder and file under `dir` (itself "."), relative, sorted; nil when
-- `dir` is gone.
local function everything(dir)
  local _, _, code = sh("test -d " .. q(dir))
  if code ~= 0 then return nil end
  return sorted_lines(ok("find . | sed 's|^\\./||'", dir))
end

-- The folders install creates under a new PREFIX: those of
-- $(pkgdatadir)/installed-dirs, relative to it.
local MADE = {".", "bin", "include", "include/dlrun", "lib", "lib/lua", "lib/lua/5.4",
              "lib/lua/5.4/dlrun", "lib/pkgconfig", "share", "share/dlrun", "share/doc",
              "share/doc/dlrun", "share/lua", "share/lua/5.4", "share/lua/5.4/dlrun", "share/man",
              "share/man/man1"}

-- The instrumented library's runtime for programs that load it (none for a
-- plain build): the environment prefix, and the link flag letting a plain
-- link accept the sanitizer symbols the runtime will provide.
local function sanitized(lib)
  local prefix = helpers.sanitizer_prefix(lib)
  return prefix, prefix ~= "" and " -Wl,--allow-shlib-undefined" or ""
end

-- Whether the build under test is instrumented (make check-asan): its static
-- libraries then need their sanitizer runtime linked into the program.
local INSTRUMENTED = not capture("nm " .. q(BUILD .. "/libdlrun.a") ..
                                 " 2>/dev/null | grep -c ' U __[a-z]*san_'"):match("^0%s*$")

local stage, prefix -- PREFIX=/usr/local under DESTDIR=stage; PREFIX=prefix
local S             -- stage/usr/local: the staged prefix, as if moved there

setup(function()
  tmp = capture("mktemp -d"):gsub("\n$", "")
  stage, prefix = tmp .. "/stage", tmp .. "/prefix"
  S = stage .. "/usr/local"
  local make = "make --no-print-directory BUILD=" .. q(BUILD)
  local out = ok(make .. " PREFIX=/usr/local DESTDIR=" .. q(stage) .. " install", ROOT)
  -- Nothing rebuilt: what is installed is the build under test.
  assert.are.equal("  INSTALL " .. S .. "\n", out)
  out = ok(make .. " PREFIX=" .. q(prefix) .. " install", ROOT)
  assert.are.equal("  INSTALL " .. prefix .. "\n", out)
end)

teardown(function()
  if tmp then os.execute("rm -rf " .. q(tmp)) end
end)

describe("make install", function()
  it("installs the program, the libraries, the headers, pkg-config, the Lua module and the man page", function()
    local want = {"bin/dlrun", "lib/libdlrun.a", "lib/libdlrun.so", "lib/" .. SONAME,
                  "lib/" .. LIB_FILE, "lib/libdlrun_lua.a", "lib/lua/5.4/dlrun/core.so",
                  "lib/pkgconfig/dlrun.pc", "lib/pkgconfig/dlrun-lua.pc", "share/man/man1/dlrun.1",
                  "share/doc/dlrun/LICENSE", "share/dlrun/installed-dirs"}
    -- The MPI transport, where it is built (MPI installed).
    if io.open(BUILD .. "/libdlrun_mpi.so") then want[#want + 1] = "lib/libdlrun_mpi.so" end
    -- The OpenCL platform, where it is built (OpenCL headers and ICD loader installed).
    if io.open(BUILD .. "/libdlrun_opencl.so") then want[#want + 1] = "lib/libdlrun_opencl.so" end
    -- The CUDA platform, built everywhere (no CUDA toolkit needed).
    want[#want + 1] = "lib/libdlrun_cuda.so"
    for _, h in ipairs(dir_list("include/dlrun")) do want[#want + 1] = "include/dlrun/" .. h end
    for _, l in ipairs(dir_list("lua/dlrun")) do want[#want + 1] = "share/lua/5.4/dlrun/" .. l end
    for _, d in ipairs(dir_list("docs")) do
      if d:match("%.md$") then want[#want + 1] = "share/doc/dlrun/" .. d end
    end
    table.sort(want)
    assert.are.same(want, tree(S))
    assert.are.same(want, tree(prefix))
    assert.are.equal(LIB_FILE .. "\n", ok("readlink " .. q(S .. "/lib/libdlrun.so")))
    assert.are.equal(LIB_FILE .. "\n", ok("readlink " .. q(S .. "/lib/" .. SONAME)))
  end)

  it("puts the Lua module where plain lua5.4 looks under /usr/local", function()
    local out = ok("lua5.4 -e 'print(package.path); print(package.cpath)'")
    assert.truthy(out:find("/usr/local/share/lua/5.4/?.lua;/usr/local/share/lua/5.4/?/init.lua;", 1, true), out)
    assert.truthy(out:find("/usr/local/lib/lua/5.4/?.so;", 1, true), out)
  end)

  it("writes the version and the ABI number of include/dlrun/dlrun.h everywhere", function()
    assert.truthy(VERSION and VERSION:match("^%d+%.%d+%.%d+$"), VERSION)
    assert.truthy(ABI and tonumber(ABI) >= 1, ABI)
    local lib = S .. "/lib/" .. LIB_FILE
    assert.truthy(ok("readelf -d " .. q(lib)):find("Library soname: [" .. SONAME .. "]\n", 1, true))
    assert.are.equal(VERSION .. "\n",
                     ok("PKG_CONFIG_PATH=" .. q(S .. "/lib/pkgconfig") .. " pkg-config --modversion dlrun"))
    assert.truthy(ok(q(S .. "/bin/dlrun") .. " --version"):match("^dlrun " .. VERSION:gsub("%.", "%%.") ..
                                                               " %(Lua 5%.4%.%d+%)\n$"))
    assert.truthy(read_all(S .. "/share/man/man1/dlrun.1"):find('\n.TH DLRUN 1 "" "dlrun ' .. VERSION .. '"', 1, true))
    assert.are.equal(VERSION .. "\n", ok("PKG_CONFIG_PATH=" .. q(S .. "/lib/pkgconfig") ..
                                        " pkg-config --modversion dlrun-lua"))
  end)

  it("lists the folders it created, and only those", function()
    for _, p in ipairs({prefix, S}) do
      local listed = sorted_lines(read_all(p .. "/share/dlrun/installed-dirs"))
      local want = {}
      for _, d in ipairs(MADE) do want[#want + 1] = d == "." and p or p .. "/" .. d end
      -- Under DESTDIR, without it; and /usr, which the stage did not have.
      if p == S then
        for i, d in ipairs(want) do want[i] = d:sub(#stage + 1) end
        want[#want + 1] = "/usr"
      end
      table.sort(want)
      assert.are.same(want, listed)
    end
  end)

  it("exports from libdlrun.so exactly the DLRUN_API functions of its headers", function()
    local want = {}
    for _, h in ipairs(dir_list("include/dlrun")) do
      if h ~= "lua.h" and h ~= "export.h" then -- the Lua binding is not in libdlrun
        for decl in read_all("include/dlrun/" .. h):gmatch("DLRUN_API([^;{]-)%(") do
          want[#want + 1] = decl:match("([%w_]+)%s*$")
        end
      end
    end
    table.sort(want)
    local got = {}
    for line in ok("nm -D --defined-only " .. q(S .. "/lib/" .. LIB_FILE)):gmatch("[^\n]+") do
      got[#got + 1] = line:match("(%S+)$")
    end
    table.sort(got)
    assert.truthy(#want > 100, #want)
    assert.are.same(want, got)
  end)

  it("writes dlrun.pc for its PREFIX, with the link flags of a static link", function()
    local pc = read_all(S .. "/lib/pkgconfig/dlrun.pc"):gsub("#[^\n]*\n", "")
    assert.are.equal("prefix=/usr/local\nexec_prefix=${prefix}\nlibdir=${prefix}/lib\n" ..
                     "includedir=${prefix}/include\n\nName: dlrun\n" ..
                     "Description: Arrays spread over many devices, handed to other libraries through DLPack\n" ..
                     "Version: " .. VERSION .. "\nCflags: -I${includedir}\nLibs: -L${libdir} -ldlrun\n" ..
                     "Libs.private: -pthread -lm\n", pc)
    local pkg = "PKG_CONFIG_PATH=" .. q(prefix .. "/lib/pkgconfig") .. " pkg-config "
    assert.are.equal("-I" .. prefix .. "/include -L" .. prefix .. "/lib -ldlrun",
                     ok(pkg .. "--cflags --libs dlrun"):match("^(.-)%s*$"))
    assert.are.equal("-L" .. prefix .. "/lib -ldlrun -pthread -lm",
                     ok(pkg .. "--static --libs dlrun"):match("^(.-)%s*$"))
    -- A moved prefix: the .pc says everything relative to ${prefix}.
    assert.are.equal("-I" .. S .. "/include",
                     ok("PKG_CONFIG_PATH=" .. q(S .. "/lib/pkgconfig") .. " pkg-config --define-variable=prefix=" ..
                        q(S) .. " --cflags dlrun"):match("^(.-)%s*$"))
  end)

  it("builds examples/host/minimal.c with pkg-config against the shared library, and runs it", function()
    ok("cp " .. q(ROOT .. "/examples/host/minimal.c") .. " minimal.c")
    local env, link = sanitized(prefix .. "/lib/libdlrun.so")
    ok("cc -std=c11 -o minimal minimal.c $(PKG_CONFIG_PATH=" .. q(prefix .. "/lib/pkgconfig") ..
       " pkg-config --cflags --libs dlrun)" .. link)
    assert.truthy(ok("readelf -d minimal"):find("Shared library: [" .. SONAME .. "]", 1, true))
    local out, err, code = sh(env .. "LD_LIBRARY_PATH=" .. q(prefix .. "/lib") .. " ./minimal")
    assert.are.equal("", err)
    assert.are.equal(0, code)
    assert.are.equal("gathered 4 shards: 0 ... 15, 48 bytes moved between devices\n", out)
  end)

  it("writes dlrun-lua.pc for the Lua binding: dlrun and lua5.4 required, the Lua files' folder", function()
    local pc = read_all(S .. "/lib/pkgconfig/dlrun-lua.pc"):gsub("#[^\n]*\n", "")
    assert.are.equal("prefix=/usr/local\nexec_prefix=${prefix}\nlibdir=${prefix}/lib\n" ..
                     "includedir=${prefix}/include\nluadir=${prefix}/share/lua/5.4\n\nName: dlrun-lua\n" ..
                     "Description: dlrun's Lua binding, for host applications that embed Lua 5.4\n" ..
                     "Version: " .. VERSION .. "\nRequires: dlrun = " .. VERSION .. ", lua5.4\n" ..
                     "Cflags: -I${includedir}\nLibs: -L${libdir} -l:libdlrun_lua.a\n", pc)
    local pkg = "PKG_CONFIG_PATH=" .. q(prefix .. "/lib/pkgconfig") .. " pkg-config "
    local lua_cflags = ok("pkg-config --cflags lua5.4"):match("^(.-)%s*$")
    assert.are.equal("-I" .. prefix .. "/include " .. lua_cflags .. " -L" .. prefix ..
                     "/lib -l:libdlrun_lua.a -ldlrun -llua5.4",
                     ok(pkg .. "--cflags --libs dlrun-lua"):match("^(.-)%s*$"))
    assert.are.equal(prefix .. "/share/lua/5.4\n", ok(pkg .. "--variable=luadir dlrun-lua"))
  end)

  it("builds examples/host/embed.c with pkg-config dlrun-lua, and runs it on the installed Lua files", function()
    ok("cp " .. q(ROOT .. "/examples/host/embed.c") .. " " .. q(ROOT .. "/examples/host/embed_pipeline.lua") .. " .")
    -- libdlrun_lua.a of an instrumented build brings its runtime's calls:
    -- the program is linked with that runtime (the compiler of make check-asan).
    local cc = INSTRUMENTED and "clang-14 -fsanitize=address,undefined" or "cc"
    local pkg = "PKG_CONFIG_PATH=" .. q(prefix .. "/lib/pkgconfig") .. " pkg-config "
    ok(cc .. " -std=c11 -o embed embed.c $(" .. pkg .. "--cflags --libs dlrun-lua)")
    assert.truthy(ok("readelf -d embed"):find("Shared library: [" .. SONAME .. "]", 1, true))
    local out, err, code = sh("LD_LIBRARY_PATH=" .. q(prefix .. "/lib") ..
                              " DLRUN_LUA_DIR=$(" .. pkg .. "--variable=luadir dlrun-lua) ./embed embed_pipeline.lua")
    assert.are.equal("", err)
    assert.are.equal(0, code, out)
    assert.truthy(out:find("host: 12 tensors, 5184 values checked, 12 deleters run, 0 exports alive\n", 1, true), out)
  end)

  -- A fully static program: no sanitizer runtime can be linked so, hence
  -- an uninstrumented build only.
  local static_it = INSTRUMENTED and pending or it
  static_it("builds examples/host/minimal.c fully static with pkg-config --static, and runs it", function()
    ok("cp " .. q(ROOT .. "/examples/host/minimal.c") .. " minimal.c")
    ok("cc -static -std=c11 -o minimal_static minimal.c $(PKG_CONFIG_PATH=" .. q(prefix .. "/lib/pkgconfig") ..
       " pkg-config --static --cflags --libs dlrun) 2>/dev/null")
    assert.falsy(ok("readelf -d minimal_static"):find("NEEDED", 1, true))
    local out, err, code = sh("./minimal_static")
    assert.are.equal("", err)
    assert.are.equal(0, code)
    assert.are.equal("gathered 4 shards: 0 ... 15, 48 bytes moved between devices\n", out)
  end)

  static_it("a static program loads no modules, says why, and keeps sim and cpu", function()
    write_file(tmp .. "/static_probe.c", [[
#include <stdio.h>
#include <dlrun/distributed.h>
#include <dlrun/dlrun.h>
#include <dlrun/platform.h>
static void try_devices(const char *spec) {
  dlrun_config cfg = {.devices = spec};
  dlrun_runtime *rt;
  if (dlrun_runtime_create(&cfg, &rt) != DLRUN_OK) {
    printf("%s: %s\n", spec, dlrun_last_error());
    return;
  }
  printf("%s: %zu sim and %zu cpu devices\n", spec, dlrun_device_count(rt, "sim"),
         dlrun_device_count(rt, "cpu"));
  dlrun_runtime_release(rt);
}
int main(void) {
  dlrun_platform_status st[8];
  size_t n = dlrun_platforms_list(st, 8);
  for (size_t i = 0; i < n && i < 8; i++)
    printf("%s: %s\n", st[i].name, st[i].available ? "available" : st[i].why);
  try_devices("opencl:2");
  try_devices("sim:2,cpu:2");
  dlrun_distributed_options o = {.mode = DLRUN_DISTRIBUTED_MPI};
  if (dlrun_distributed_init(&o) != DLRUN_OK) printf("mpi: %s\n", dlrun_last_error());
  return 0;
}
]])
    ok("cc -static -std=c11 -o static_probe static_probe.c $(PKG_CONFIG_PATH=" .. q(prefix .. "/lib/pkgconfig") ..
       " pkg-config --static --cflags --libs dlrun) 2>/dev/null")
    -- In the prefix's bin: the modules are beside it, as for an installed host.
    ok("cp static_probe " .. q(prefix .. "/bin/static_probe"))
    local out, err, code = sh("POCL_DEVICES='pthread pthread' " .. q(prefix .. "/bin/static_probe"))
    ok("rm -f " .. q(prefix .. "/bin/static_probe"))
    local why = "not loaded: a statically linked program loads no modules (link with libdlrun.so: " ..
                "pkg-config --libs dlrun, without --static)"
    assert.are.equal("", err)
    assert.are.equal(0, code)
    assert.are.equal("sim: available\ncpu: available\ncuda: libdlrun_cuda.so: " .. why .. "\n" ..
                     "opencl: libdlrun_opencl.so: " .. why .. "\n" ..
                     "opencl:2: platform opencl in device spec \"opencl:2\" is not available on this " ..
                     "machine: libdlrun_opencl.so: " .. why .. "\n" ..
                     "sim:2,cpu:2: 2 sim and 2 cpu devices\n" ..
                     "mpi: cannot join the job: libdlrun_mpi.so: " .. why .. "; or run with --distributed off\n",
                     out)
  end)

  it("lets plain lua5.4 require dlrun with that prefix's standard paths", function()
    local env = sanitized(prefix .. "/lib/lua/5.4/dlrun/core.so")
    local code = [[
local dl = require "dlrun"
print(package.searchpath("dlrun", package.path))
print(package.searchpath("dlrun.core", package.cpath))
local x = dl.array({{1, 2}, {3, 4}}, "float32")
print(dl.__version__, x.shape[1], x:tolist()[2][1], x.dtype)]]
    write_file(tmp .. "/plain.lua", code)
    local out, err, status = sh(env .. "LUA_PATH=" .. q(prefix .. "/share/lua/5.4/?.lua;" .. prefix ..
                                "/share/lua/5.4/?/init.lua;;") .. " LUA_CPATH=" ..
                                q(prefix .. "/lib/lua/5.4/?.so;;") .. " lua5.4 plain.lua")
    assert.are.equal("", err)
    assert.are.equal(0, status)
    assert.are.equal(prefix .. "/share/lua/5.4/dlrun/init.lua\n" .. prefix .. "/lib/lua/5.4/dlrun/core.so\n" ..
                     VERSION .. "\t2\t3.0\tfloat32\n", out)
  end)

  describe("the installed dlrun", function()
    local script = [[
local dl = require "dlrun"
print(package.searchpath("dlrun", package.path))
print(package.path:find(arg[1], 1, true) == nil)
local x = dl.arange(0, 8, 1, "float32", dl.NamedSharding(dl.make_mesh({4}, {"x"}), dl.P("x")))
print(#x.addressable_shards, dl.device_get(x):tolist()[8])]]

    for _, where in ipairs({"prefix", "moved prefix"}) do
      it("finds its Lua files in its own " .. where .. ", not in the source tree", function()
        local p = where == "prefix" and prefix or S
        write_file(tmp .. "/script.lua", script)
        local out, err, code = sh(q(p .. "/bin/dlrun") .. " --devices sim:4 script.lua " .. q(ROOT))
        assert.are.equal("", err)
        assert.are.equal(0, code)
        assert.are.equal(p .. "/share/lua/5.4/dlrun/init.lua\ntrue\n4\t7.0\n", out)
        out = ok(q(p .. "/bin/dlrun") .. " -e 'print(package.path)'")
        assert.are.equal(p .. "/share/lua/5.4/?.lua;" .. p .. "/share/lua/5.4/?/init.lua;",
                         out:match("^[^;]*;[^;]*;"))
      end)
    end

    it("run through a symbolic link from elsewhere, finds the prefix the link points into", function()
      ok("mkdir -p links && ln -sf " .. q(prefix .. "/bin/dlrun") .. " links/dlrun")
      assert.are.equal(prefix .. "/share/lua/5.4/dlrun/init.lua\n",
                       ok("links/dlrun -e 'print(package.searchpath(\"dlrun\", package.path))'"))
    end)

    it("joins a job through the MPI transport installed beside it", function()
      if not io.open(BUILD .. "/libdlrun_mpi.so") then
        -- Not built (no MPI): joining must then say so.
        local _, err = sh("DLRUN_DISTRIBUTED=mpi " .. q(S .. "/bin/dlrun") .. " -e 'print(1)'")
        assert.truthy(err:find("the MPI transport module could not be loaded", 1, true), err)
        return
      end
      local env = ""
      for k, v in pairs(helpers.mpi_env()) do env = env .. k .. "=" .. q(v) .. " " end
      for _, p in ipairs({prefix, S}) do
        local out = ok(env .. "DLRUN_DISTRIBUTED=mpi " .. q(p .. "/bin/dlrun") ..
                       " -e 'local dl = require \"dlrun\" print(dl.process_index(), dl.process_count())'")
        assert.are.equal("0\t1\n", out)
      end
    end)

    it("still takes DLRUN_LUA_DIR first", function()
      local out = ok("DLRUN_LUA_DIR=" .. q(ROOT .. "/lua") .. " " .. q(S .. "/bin/dlrun") ..
                     " -e 'print(package.searchpath(\"dlrun\", package.path))'")
      assert.are.equal(ROOT .. "/lua/dlrun/init.lua\n", out)
    end)
  end)

  describe("the man page", function()
    local function page() return S .. "/share/man/man1/dlrun.1" end
    local function render() return ok("LC_ALL=C MANWIDTH=80 man -l " .. q(page())) end

    it("renders without warnings", function()
      local out, err, code = sh("LC_ALL=C MANWIDTH=80 man --warnings -l " .. q(page()) .. " 2>&1 >/dev/null")
      assert.are.equal(0, code)
      assert.are.equal("", out .. err)
    end)

    it("has every section, every option of --help and every variable dlrun reads", function()
      local text = render()
      for _, s in ipairs({"NAME", "SYNOPSIS", "DESCRIPTION", "OPTIONS", "ENVIRONMENT", "EXIT STATUS",
                          "EXAMPLES", "FILES", "SEE ALSO"}) do
        assert.truthy(text:find("\n" .. s .. "\n", 1, true), s)
      end
      local help = ok(q(S .. "/bin/dlrun") .. " --help")
      local names = {}
      for line in help:gmatch("[^\n]+") do -- "  -e STAT   ...", "  -h, --help   ..."
        local head = line:match("^  (%-.-)%s%s") or ""
        for o in head:gmatch("%-[%w-]*") do names[#names + 1] = o end
      end
      for v in help:gmatch("[A-Z][A-Z0-9]*_[A-Z0-9_]+") do names[#names + 1] = v end
      for v in ok("grep -rhoE '\"DLRUN_[A-Z0-9_]+\"' src", ROOT):gmatch('"([^"]+)"') do
        names[#names + 1] = v
      end
      assert.truthy(#names > 20, #names)
      for _, n in ipairs(names) do
        assert.truthy(text:find("%f[%w_-]" .. n:gsub("%-", "%%-") .. "%f[^%w_-]"), n)
      end
    end)

    it("is found by man through PATH, else through the MANPATH line of the README", function()
      local line = read_all(ROOT .. "/README.md"):match("\n  export (MANPATH=\"%$HOME/%.local/share/man:\")\n")
      assert.truthy(line)
      local want = S .. "/share/man/man1/dlrun.1\n"
      local unset = "unset MANPATH; PATH=/usr/bin:/bin "
      assert.are.equal(want, ok(unset .. "MANPATH=" .. q(S .. "/share/man:") .. " man -w dlrun"))
      -- The final colon keeps the system's pages.
      assert.truthy(ok(unset .. "MANPATH=" .. q(S .. "/share/man:") .. " manpath"):find(":/usr/share/man", 1, true))
      assert.are.equal(want, ok("unset MANPATH; PATH=" .. q(S .. "/bin") .. ":/usr/bin:/bin man -w dlrun"))
    end)

    it("shows an example that runs as shown", function()
      local text = render()
      local code, shown = text:match("%$ cat sum%.lua\n(.-)\n%s*%$ dlrun %-%-devices sim:4 sum%.lua\n%s*([^\n]*)\n")
      assert.truthy(code, text)
      write_file(tmp .. "/sum.lua", code .. "\n")
      local out = ok(q(S .. "/bin/dlrun") .. " --devices sim:4 sum.lua")
      assert.are.equal(shown:gsub("%s+", " "), out:gsub("\n$", ""):gsub("%s+", " "))
    end)
  end)

  it("make uninstall removes every file it installed and every folder it created", function()
    local make = "make --no-print-directory BUILD=" .. q(BUILD)
    assert.are.equal("  UNINSTALL " .. S .. "\n",
                     ok(make .. " PREFIX=/usr/local DESTDIR=" .. q(stage) .. " uninstall", ROOT))
    ok(make .. " PREFIX=" .. q(prefix) .. " uninstall", ROOT)
    assert.are.same({"."}, everything(stage)) -- DESTDIR itself stays
    assert.is_nil(everything(prefix))
  end)

  it("make uninstall keeps the folders that were there before and those another package uses", function()
    local p = tmp .. "/shared"
    -- A prefix in use: lib with another package's library, share/man empty.
    ok("mkdir -p shared/lib shared/share/man && echo x >shared/lib/libother.so")
    local make = "make --no-print-directory BUILD=" .. q(BUILD) .. " PREFIX=" .. q(p)
    ok(make .. " install", ROOT)
    -- Another package installs into a folder dlrun created.
    ok("echo x >shared/lib/pkgconfig/other.pc")
    ok(make .. " install", ROOT) -- installing again keeps the record of what the first made
    ok(make .. " uninstall", ROOT)
    assert.are.same({".", "lib", "lib/libother.so", "lib/pkgconfig", "lib/pkgconfig/other.pc", "share",
                     "share/man"}, everything(p))
  end)
end)

describe("the licence", function()
  it("is MIT, in LICENSE, the README and the rockspec", function()
    local licence = read_all(ROOT .. "/LICENSE")
    assert.are.equal("MIT License\n\nCopyright (c) 2026 the dlrun authors\n\n", licence:sub(1, 51))
    assert.truthy(licence:find("THE SOFTWARE IS PROVIDED \"AS IS\", WITHOUT WARRANTY OF ANY KIND", 1, true))
    local readme = read_all(ROOT .. "/README.md")
    assert.truthy(readme:find("\n## Licence\n\nMIT: see [LICENSE](LICENSE).", 1, true))
    local rock = {}
    assert(loadfile(ROOT .. "/dlrun-scm-0.rockspec", "t", rock))()
    assert.are.equal("MIT", rock.description.license)
  end)
end)

describe("the rockspec", function()
  -- A home of its own; there, as on any Debian machine (whose luarocks
  -- defaults to Lua 5.1), the Lua version is set once. Fetches would go
  -- through an unreachable proxy: nothing is downloaded.
  local env
  local function luarocks_env()
    if not env then
      ok("mkdir -p home")
      env = "export HOME=" .. q(tmp .. "/home") .. " http_proxy=http://127.0.0.1:9 https_proxy=http://127.0.0.1:9; "
      ok(env .. "luarocks config --scope user lua_version 5.4")
    end
    return env
  end

  local function load_rockspec(path)
    local rock = {}
    assert(loadfile(path, "t", rock))()
    return rock
  end

  -- lua5.4 with a tree's paths: where it finds dlrun, and what dlrun says.
  local function require_from(rocks)
    -- The rock's module has sim and cpu only (no platform modules beside it):
    -- it runs on the default devices, whatever platform the suite runs on.
    local out, err, code = sh(luarocks_env() .. 'eval "$(luarocks --tree ' .. q(rocks) .. ' path)" && ' ..
                              'DLRUN_DEVICES= lua5.4 -e ' ..
                              q('local dl = require "dlrun"; print(package.searchpath("dlrun", package.path)); ' ..
                                'print(package.searchpath("dlrun.core", package.cpath)); ' ..
                                'print(dl.__version__, dl.full({2}, 7, "int32"):tolist()[2])'))
    assert.are.equal("", err)
    assert.are.equal(0, code)
    assert.are.equal(rocks .. "/share/lua/5.4/dlrun/init.lua\n" .. rocks .. "/lib/lua/5.4/dlrun/core.so\n" ..
                     VERSION .. "\t7\n", out)
  end

  it("is dlrun-scm-0.rockspec, the checkout's only one, and luarocks lint passes", function()
    assert.are.same({"dlrun-scm-0.rockspec"}, sorted_lines(ok("ls *.rockspec", ROOT)))
    local rock = load_rockspec(ROOT .. "/dlrun-scm-0.rockspec")
    assert.are.equal("dlrun", rock.package)
    assert.are.equal("scm-0", rock.version)
    assert.are.equal("Arrays spread over many devices, handed to other libraries through DLPack",
                     rock.description.summary)
    assert.are.equal("", ok(luarocks_env() .. "luarocks lint dlrun-scm-0.rockspec", ROOT))
  end)

  it("luarocks make builds and installs the module from a checkout, offline, and lua5.4 requires it", function()
    local src, rocks = tmp .. "/checkout", tmp .. "/rocks"
    ok("mkdir -p checkout && cp -R " .. table.concat({q(ROOT .. "/Makefile"), q(ROOT .. "/include"),
       q(ROOT .. "/src"), q(ROOT .. "/lua"), q(ROOT .. "/dlrun-scm-0.rockspec")}, " ") .. " checkout/")
    ok(luarocks_env() .. "MAKEFLAGS=-j2 luarocks make --tree " .. q(rocks), src)
    require_from(rocks)
  end)

  it("make rock packs a source rock of this version with luarocks pack, offline, that builds anywhere", function()
    local dir = tmp .. "/rock"
    local name = "dlrun-" .. VERSION .. "-1"
    assert.are.equal("  ROCK    " .. dir .. "/" .. name .. ".src.rock\n",
                     ok(luarocks_env() .. "make --no-print-directory rock ROCK_DIR=" .. q(dir), ROOT))
    -- The rockspec of this version: the scm one with the release archive as its source.
    local scm, rock = load_rockspec(ROOT .. "/dlrun-scm-0.rockspec"), load_rockspec(dir .. "/" .. name .. ".rockspec")
    assert.are.equal(VERSION .. "-1", rock.version)
    assert.are.same({url = "file://" .. dir .. "/dlrun-" .. VERSION .. ".tar.gz", dir = "dlrun-" .. VERSION},
                    rock.source)
    rock.version, rock.source, scm.version, scm.source = nil, nil, nil, nil
    assert.are.same(scm, rock)
    assert.are.equal("", ok(luarocks_env() .. "luarocks lint " .. q(name .. ".rockspec"), dir))
    -- The rock: that rockspec and the archive of the checkout (no build folder).
    assert.are.same({name .. ".rockspec", "dlrun-" .. VERSION .. ".tar.gz"},
                    sorted_lines(ok("unzip -Z1 " .. q(name .. ".src.rock"), dir)))
    local files = ok("tar -tzf " .. q("dlrun-" .. VERSION .. ".tar.gz"), dir)
    for _, f in ipairs({"LICENSE", "Makefile", "dlrun-scm-0.rockspec", "include/dlrun/dlrun.h", "lua/dlrun/init.lua"}) do
      assert.truthy(files:find("\ndlrun-" .. VERSION .. "/" .. f .. "\n", 1, true), f)
    end
    assert.falsy(files:find("\ndlrun-" .. VERSION .. "/build", 1, true), files)
    -- Built elsewhere, the archive gone: a source rock carries its own.
    ok("mkdir elsewhere && mv " .. q(dir .. "/" .. name .. ".src.rock") .. " elsewhere/ && rm -r " .. q(dir))
    ok(luarocks_env() .. "MAKEFLAGS=-j2 luarocks build " .. q(name .. ".src.rock") .. " --tree " ..
       q(tmp .. "/rock-tree"), tmp .. "/elsewhere")
    require_from(tmp .. "/rock-tree")
  end)

  it("luarocks test runs busted on the build through scripts/busted.sh, offline", function()
    local rock = load_rockspec(ROOT .. "/dlrun-scm-0.rockspec")
    assert.are.same({type = "command", command = "scripts/busted.sh"}, rock.test)
    write_file(tmp .. "/rock_test_spec.lua", [[
describe("luarocks test", function()
  it("runs busted on the build", function()
    assert.are.equal(os.getenv("WANT_EXE"), os.getenv("DLRUN_EXE"))
    assert.truthy(package.cpath:find(os.getenv("WANT_CPATH"), 1, true))
  end)
end)
]])
    local out, err, code = sh(luarocks_env() .. "BUILD=" .. q(BUILD) .. " WANT_EXE=" .. q(BUILD .. "/dlrun") ..
                              " WANT_CPATH=" .. q(BUILD .. "/lua/?.so") .. " luarocks test dlrun-scm-0.rockspec -- " ..
                              "-o TAP " .. q(tmp .. "/rock_test_spec.lua"), ROOT)
    assert.are.equal(0, code, out .. err)
    assert.are.equal("ok 1 - luarocks test runs busted on the build\n1..1\n", out)
  end)
end)
