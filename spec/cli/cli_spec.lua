-- runs: every-platform
-- ipc-off: no
-- devices: any
-- needs: none

-- The `dlrun` command: a Lua 5.4 interpreter with dlrun built in.
-- Runs the executable (DLRUN_EXE, else build/dlrun from the repository root)
-- through the shell and checks its stdout, stderr and exit status.

local EXE = os.getenv("DLRUN_EXE") or "build/dlrun"

local function quote(s)
  return "'" .. tostring(s):gsub("'", [['\'']]) .. "'"
end

local read_all = require("helpers").read_all

local function write_file(path, text)
  local f = assert(io.open(path, "wb"))
  f:write(text)
  f:close()
  return path
end

-- Files made by a test, removed after it.
local made = {}

local function temp_file(text)
  local path = os.tmpname()
  made[#made + 1] = path
  return write_file(path, text or "")
end

-- An absolute path for `path` (relative paths are taken from the cwd).
local function absolute(path)
  if path:sub(1, 1) == "/" then return path end
  local p = assert(io.popen("pwd"))
  local cwd = p:read("l")
  p:close()
  return cwd .. "/" .. path
end

-- run{args...; stdin = text, env = {NAME = value or false}, cwd = dir,
--     exe = path} -> { out = stdout, err = stderr, code = exit status }
-- env: false unsets the variable. stdin is empty unless given.
local function run(opts)
  local exe = opts.exe or (opts.cwd and absolute(EXE) or EXE)
  local cmd = {}
  for name, value in pairs(opts.env or {}) do
    if value == false then cmd[#cmd + 1] = "unset " .. name .. ";" end
  end
  if opts.cwd then cmd[#cmd + 1] = "cd " .. quote(opts.cwd) .. " &&" end
  for name, value in pairs(opts.env or {}) do
    if value ~= false then cmd[#cmd + 1] = name .. "=" .. quote(value) end
  end
  cmd[#cmd + 1] = quote(exe)
  for _, a in ipairs(opts) do cmd[#cmd + 1] = quote(a) end
  cmd[#cmd + 1] = "<" .. quote(temp_file(opts.stdin or ""))
  local errfile = temp_file()
  cmd[#cmd + 1] = "2>" .. quote(errfile)
  local p = assert(io.popen(table.concat(cmd, " "), "r"))
  local out = p:read("a")
  local _, how, code = p:close()
  if how == "signal" then code = 128 + code end
  return { out = out, err = read_all(errfile), code = code }
end

-- Asserts that `text` contains `part` literally, showing both on failure.
local function assert_has(text, part)
  assert(text:find(part, 1, true),
         ("expected to find %q in:\n%s"):format(part, text))
end

local function assert_starts(text, prefix)
  assert(text:sub(1, #prefix) == prefix,
         ("expected to start with %q:\n%s"):format(prefix, text))
end

describe("dlrun command", function()
  after_each(function()
    for i = #made, 1, -1 do
      os.remove(made[i])
      made[i] = nil
    end
  end)

  describe("informational options", function()
    it("--version prints the dlrun and Lua versions and exits 0", function()
      local r = run{ "--version" }
      assert.are.equal(0, r.code)
      assert.truthy(r.out:match("^dlrun %d+%.%d+%.%d+"), r.out)
      assert_has(r.out, "Lua 5.4")
      assert.are.equal(1, select(2, r.out:gsub("\n", "\n")))
    end)

    it("--help prints usage with the options to stdout and exits 0", function()
      local r = run{ "--help" }
      assert.are.equal(0, r.code)
      assert_has(r.out, "usage: dlrun")
      assert_has(r.out, "--devices")
      assert_has(r.out, "--device-memory")
      assert_has(r.out, "-e ")
      assert.are.equal("", r.err)
    end)

    it("--help says how sizes are read and rounded, and what stdin and --trace do", function()
      local r = run{ "--help" }
      assert.are.equal(0, r.code)
      assert_has(r.out, "at least 4KiB, rounded down to a multiple of 256 bytes.")
      assert_has(r.out, "Default: the memories of all devices together fit in\n"
                        .. "                        host RAM")
      assert_has(r.out, "With no script, no -e and no -v,\n"
                        .. "the script is read from stdin when stdin is not a terminal; on a terminal\n"
                        .. "dlrun starts its prompt, as lua5.4 does.\n")
      assert_has(r.out, "complete at exit, os.exit too")
    end)

    it("-h is --help", function()
      local r = run{ "-h" }
      assert.are.equal(0, r.code)
      assert.are.equal(run{ "--help" }.out, r.out)
    end)

    it("an unknown option fails with a message and a hint", function()
      local r = run{ "--x" }
      assert.are.equal(1, r.code)
      assert_starts(r.err, "dlrun: unknown option '--x'")
      assert_has(r.err, "--help")
      assert.are.equal("", r.out)
    end)

    it("an option missing its value fails", function()
      local r = run{ "-e" }
      assert.are.equal(1, r.code)
      assert_starts(r.err, "dlrun: option '-e' needs an argument")
      r = run{ "--devices" }
      assert.are.equal(1, r.code)
      assert_starts(r.err, "dlrun: option '--devices' needs a value")
    end)
  end)

  describe("-e", function()
    it("runs each chunk in order", function()
      local r = run{ "-e", "print(1 + 1)", "-e", "x = 'second'", "-e", "print(x)" }
      assert.are.equal(0, r.code)
      assert.are.equal("2\nsecond\n", r.out)
      assert.are.equal("", r.err)
    end)

    it("accepts the code attached to the option", function()
      local r = run{ "-eprint(40 + 2)" }
      assert.are.equal(0, r.code)
      assert.are.equal("42\n", r.out)
    end)

    it("without a script, arg[0] is the interpreter and arg[1] the option", function()
      local r = run{ "-e", "print(arg[0], arg[1], arg[2], arg[-1])" }
      assert.are.equal(0, r.code)
      assert.are.equal(EXE .. "\t-e\tprint(arg[0], arg[1], arg[2], arg[-1])\tnil\n", r.out)
    end)

    it("opens the standard libraries", function()
      local r = run{ "-e", "print(string.rep('a', 3), math.max(1, 5), type(io.write), type(os.time), type(utf8.char), type(coroutine.wrap), type(debug.traceback), type(table.concat))" }
      assert.are.equal(0, r.code)
      assert.are.equal("aaa\t5\tfunction\tfunction\tfunction\tfunction\tfunction\tfunction\n", r.out)
    end)
  end)

  describe("scripts", function()
    it("get their arguments in arg and in ...", function()
      local script = temp_file([[
print(arg[0], arg[1], arg[2], #arg)
print(select("#", ...), ...)
print(arg[-1], arg[-2], arg[-3], arg[-4])
]])
      local r = run{ "-e", "x = 1", script, "one", "two words" }
      assert.are.equal(0, r.code, r.err)
      assert.are.equal(script .. "\tone\ttwo words\t2\n" ..
                       "2\tone\ttwo words\n" ..
                       "x = 1\t-e\t" .. EXE .. "\tnil\n", r.out)
    end)

    it("get every argument after the script name, options included", function()
      local script = temp_file("print(#arg, ...)")
      local r = run{ script, "--devices", "-e", "--version", "-" }
      assert.are.equal(0, r.code, r.err)
      assert.are.equal("4\t--devices\t-e\t--version\t-\n", r.out)
    end)

    it("-- ends the options", function()
      local script = temp_file("print(arg[0] == ..., arg[-1])")
      local r = run{ "--", script, script }
      assert.are.equal(0, r.code, r.err)
      assert.are.equal("true\t--\n", r.out)
    end)

    it("skip a first line starting with #", function()
      local script = temp_file("#! dlrun\nprint('after shebang', ...)\n")
      local r = run{ script, "x" }
      assert.are.equal(0, r.code, r.err)
      assert.are.equal("after shebang\tx\n", r.out)
    end)

    -- As lua5.4 does: `echo 'print(1)' | dlrun`.
    it("with no script, no -e and no -v, come from stdin when it is not a terminal", function()
      local r = run{ stdin = "print('from stdin', arg[0], select('#', ...))\n" }
      assert.are.equal(0, r.code, r.err)
      assert.are.equal("from stdin\t" .. EXE .. "\t0\n", r.out)
      assert.are.equal("", r.err)
    end)

    it("come from stdin after -l and the options, but not after -e or -v", function()
      local r = run{ "-l", "g=string", "--devices", "sim:2", stdin = "print(g == string)" }
      assert.are.equal(0, r.code, r.err)
      assert.are.equal("true\n", r.out)
      r = run{ "-e", "print('e')", stdin = "print('stdin')" }
      assert.are.equal(0, r.code, r.err)
      assert.are.equal("e\n", r.out)
      r = run{ "-v", stdin = "print('stdin')" }
      assert.are.equal(0, r.code, r.err)
      assert_starts(r.out, "dlrun ")
      assert.is_nil(r.out:find("stdin", 1, true))
    end)

    it("an empty stdin is an empty script", function()
      local r = run{}
      assert.are.equal(0, r.code, r.err)
      assert.are.equal("", r.out)
      assert.are.equal("", r.err)
    end)

    it("a failing stdin script reports its error as a script would", function()
      local r = run{ stdin = "error('boom')" }
      assert.are.equal(1, r.code)
      assert_starts(r.err, "dlrun: stdin:1: boom\n")
    end)

    it("'-' reads the script from stdin", function()
      local r = run{ "-", "a", "b"; stdin = "print('from stdin', arg[0], ...)\n" }
      assert.are.equal(0, r.code, r.err)
      assert.are.equal("from stdin\t-\ta\tb\n", r.out)
    end)

    it("run after the -e chunks", function()
      local script = temp_file("print(x)")
      local r = run{ "-e", "x = 'set by -e'", script }
      assert.are.equal(0, r.code, r.err)
      assert.are.equal("set by -e\n", r.out)
    end)
  end)

  describe("-l", function()
    it("requires a module into a global", function()
      local r = run{ "-l", "g=string", "-e", "print(g == string)" }
      assert.are.equal(0, r.code, r.err)
      assert.are.equal("true\n", r.out)
    end)

    it("fails with status 1 for a missing module", function()
      local r = run{ "-l", "dlrun_no_such_module_x" }
      assert.are.equal(1, r.code)
      assert_starts(r.err, "dlrun: module 'dlrun_no_such_module_x' not found")
    end)
  end)

  describe("errors", function()
    it("a string error prints dlrun: message and a traceback, status 1", function()
      local script = temp_file("local function f() error('boom') end\nf()\n")
      local r = run{ script }
      assert.are.equal(1, r.code)
      assert_starts(r.err, "dlrun: " .. script .. ":1: boom")
      assert_has(r.err, "stack traceback")
      assert.are.equal("", r.out)
    end)

    it("an error object with __tostring prints through it", function()
      local script = temp_file(
        'error(setmetatable({}, {__tostring = function() return "ValueError: boom" end}))')
      local r = run{ script }
      assert.are.equal(1, r.code)
      assert_starts(r.err, "dlrun: ValueError: boom\n")
      assert_has(r.err, "stack traceback")
    end)

    it("another error object prints its type", function()
      local r = run{ "-e", "error({})" }
      assert.are.equal(1, r.code)
      assert_starts(r.err, "dlrun: (error object is a table value)")
    end)

    it("an error in -e names the command line", function()
      local r = run{ "-e", "error('bad')" }
      assert.are.equal(1, r.code)
      assert_starts(r.err, "dlrun: (command line):1: bad")
    end)

    it("an error stops the chunks that follow", function()
      local r = run{ "-e", "error('first')", "-e", "print('not reached')" }
      assert.are.equal(1, r.code)
      assert.are.equal("", r.out)
    end)

    it("a syntax error fails with status 1", function()
      local script = temp_file("local x = = 1\n")
      local r = run{ script }
      assert.are.equal(1, r.code)
      assert_starts(r.err, "dlrun: " .. script .. ":1:")
      assert_has(r.err, "near '='")
      assert.are.equal("", r.out)
    end)

    it("a missing script fails with status 1", function()
      local missing = os.tmpname()
      os.remove(missing)
      local r = run{ missing }
      assert.are.equal(1, r.code)
      assert_starts(r.err, "dlrun: cannot open " .. missing)
    end)
  end)

  describe("exit", function()
    it("os.exit(n) gives status n", function()
      assert.are.equal(3, run{ "-e", "os.exit(3)" }.code)
      assert.are.equal(0, run{ "-e", "os.exit(true)" }.code)
      assert.are.equal(1, run{ "-e", "os.exit(false)" }.code)
    end)

    it("os.exit(code, true) closes the state", function()
      local r = run{ "-e", "setmetatable({}, {__gc = function() print('gc ran') end}) os.exit(5, true)" }
      assert.are.equal(5, r.code)
      assert.are.equal("gc ran\n", r.out)
    end)

    it("os.exit with a code that is not one raises os.exit's own error", function()
      local r = run{ "-e", "os.exit('x')" }
      assert.are.equal(1, r.code)
      assert_starts(r.err, "dlrun: (command line):1: bad argument #1 to 'exit' (number "
                           .. "expected, got string)\n")
    end)

    it("a normal end closes the state: __close and __gc run", function()
      local r = run{ "-e", "G = setmetatable({}, {__gc = function() print('gc ran') end})",
                     "-e", "local c <close> = setmetatable({}, {__close = function() print('closed') end})" }
      assert.are.equal(0, r.code, r.err)
      assert.are.equal("closed\ngc ran\n", r.out)
    end)
  end)

  describe("device options", function()
    it("--devices with a bad spec fails with a ValueError", function()
      local r = run{ "--devices", "sim:0", "-e", "print('ran')" }
      assert.are.equal(1, r.code)
      assert_starts(r.err, "dlrun: ValueError:")
      assert.are.equal("", r.out)
    end)

    it("--devices=SPEC is checked the same way", function()
      local r = run{ "--devices=sim:0", "-e", "print('ran')" }
      assert.are.equal(1, r.code)
      assert_starts(r.err, "dlrun: ValueError:")
    end)

    it("--device-memory with a bad size fails with a ValueError", function()
      local r = run{ "--device-memory", "2XB", "-e", "print('ran')" }
      assert.are.equal(1, r.code)
      assert_starts(r.err, "dlrun: ValueError:")
      assert.are.equal("", r.out)
      r = run{ "--device-memory=2XB", "-e", "print('ran')" }
      assert.are.equal(1, r.code)
      assert_starts(r.err, "dlrun: ValueError:")
    end)

    it("good values are accepted", function()
      local r = run{ "--devices", "auto", "--device-memory=64MiB", "-e", "print('ran')" }
      assert.are.equal(0, r.code, r.err)
      assert.are.equal("ran\n", r.out)
    end)
  end)

  describe("the trace file", function()
    -- Tracing truncates its file: the script itself is refused before anything is written,
    -- whatever the path names it (itself, another spelling, a hard link).
    it("is refused with status 1 when it is the script", function()
      local text = "print('ran')\n"
      local script = temp_file(text)
      local link = script .. ".link"
      made[#made + 1] = link
      assert(os.execute("ln " .. quote(script) .. " " .. quote(link)))
      local dir, name = script:match("^(.*)/([^/]+)$")
      for _, trace in ipairs { script, dir .. "/./" .. name, link } do
        local r = run{ "--trace", trace, script }
        assert.are.equal(1, r.code)
        assert.are.equal("", r.out)
        assert.are.equal('dlrun: the trace file "' .. trace .. '" is the script itself; give '
                         .. "--trace another file\n", r.err)
        assert.are.equal(text, read_all(script))
      end
    end)
  end)

  describe("the dlrun module", function()
    it("require 'dlrun' works", function()
      local r = run{ "-e", 'local dl = require "dlrun"; print(type(dl))' }
      assert.are.equal(0, r.code, r.err)
      assert.are.equal("table\n", r.out)
    end)

    it("dlrun.core is preloaded from the executable", function()
      local r = run{ "-e", 'print(type(package.preload["dlrun.core"]))' }
      assert.are.equal(0, r.code, r.err)
      assert.are.equal("function\n", r.out)
    end)

    it("is found beside the executable without DLRUN_LUA_DIR", function()
      local r = run{ "-e", 'print(package.searchpath("dlrun", package.path)); print(type(require "dlrun"))';
                     env = { DLRUN_LUA_DIR = false } }
      assert.are.equal(0, r.code, r.err)
      local found = r.out:match("^([^\n]*)\n")
      assert.truthy(found:match("/lua/dlrun/init%.lua$"), r.out)
      assert.truthy(found:sub(1, 1) == "/", r.out)
      assert_has(r.out, "\ntable\n")
    end)

    it("DLRUN_LUA_DIR comes first in package.path", function()
      local dir = os.tmpname()
      os.remove(dir)
      local r = run{ "-e", "print(package.path)"; env = { DLRUN_LUA_DIR = dir } }
      assert.are.equal(0, r.code, r.err)
      assert_starts(r.out, dir .. "/?.lua;" .. dir .. "/?/init.lua;")
    end)
  end)

  describe("LUA_INIT", function()
    it("runs before the script, unless -E", function()
      local env = { LUA_INIT_5_4 = false, LUA_INIT = "INIT_RAN = true" }
      local r = run{ "-e", "print(INIT_RAN)"; env = env }
      assert.are.equal(0, r.code, r.err)
      assert.are.equal("true\n", r.out)
      r = run{ "-E", "-e", "print(INIT_RAN)"; env = env }
      assert.are.equal(0, r.code, r.err)
      assert.are.equal("nil\n", r.out)
    end)
  end)

  -- busted itself runs inside dlrun (a Lua file whose first line is "#!",
  -- e.g. /usr/bin/busted), so the spec suite can run with dlrun built in.
  local busted_path
  do
    local p = io.popen("command -v busted")
    busted_path = p and p:read("l")
    if p then p:close() end
    if busted_path and busted_path ~= "" and loadfile(busted_path) then
      busted_path = absolute(busted_path)
    else
      busted_path = nil
    end
  end

  describe("running busted", function()
    if not busted_path then
      pending("busted is not installed as a Lua script")
      return
    end

    local dir
    before_each(function()
      dir = os.tmpname()
      os.remove(dir)
      assert(os.execute("mkdir " .. quote(dir)))
    end)
    after_each(function()
      os.execute("rm -rf " .. quote(dir))
    end)

    it("busted --version", function()
      local r = run{ busted_path, "--version"; cwd = dir }
      assert.are.equal(0, r.code, r.err)
      assert.truthy(r.out:match("^%d+%.%d+"), r.out)
    end)

    it("runs a spec that requires dlrun", function()
      write_file(dir .. "/inner_spec.lua", [[
describe("inside dlrun", function()
  it("has the module", function()
    assert.are.equal("table", type(require "dlrun"))
  end)
end)
]])
      local r = run{ busted_path, "-o", "TAP", "inner_spec.lua"; cwd = dir }
      assert.are.equal(0, r.code, r.out .. r.err)
      assert_has(r.out, "ok 1 - inside dlrun has the module")
    end)

    it("reports a failing spec with a nonzero status", function()
      write_file(dir .. "/failing_spec.lua", [[
describe("inside dlrun", function()
  it("fails", function() assert.are.equal(1, 2) end)
end)
]])
      local r = run{ busted_path, "-o", "TAP", "failing_spec.lua"; cwd = dir }
      assert.are_not.equal(0, r.code)
      assert_has(r.out, "not ok 1 - inside dlrun fails")
    end)
  end)
end)

-- Precompiled chunks: Lua does not check bytecode, so a corrupt one crashed
-- dlrun as it crashes lua5.4. Scripts, -e code and LUA_INIT load as text
-- unless --allow-binary-chunks says otherwise.
describe("dlrun and precompiled chunks", function()
  local chunk_file, clean = require("helpers").scratch()
  after_each(clean)
  local good = string.dump(load("print('binary ran')"))
  -- The same chunk with its code overwritten: a valid header, garbage
  -- instructions (lua5.4 runs into them).
  local corrupt = good:sub(1, 40) .. string.rep("\255", #good - 60) .. good:sub(-20)
  local function refusal(name)
    return "dlrun: " .. name .. " is a precompiled (binary) Lua chunk, which dlrun does not run "
      .. "by default: Lua does not check bytecode, and a corrupt chunk can crash the process; "
      .. "run it with --allow-binary-chunks if you trust it\n"
  end

  it("refuses them by default, as the script, from stdin, in -e and in LUA_INIT", function()
    local path = chunk_file(good)
    local corrupt_path = chunk_file(corrupt)
    for _, case in ipairs {
      {{path}, {}, nil, path},
      {{corrupt_path}, {}, nil, corrupt_path},
      {{"-"}, {}, good, "stdin"},
      {{"-e", "\27Lua"}, {}, nil, "(command line)"}, -- an argument holds no NUL
      {{"-e", "print('script')"}, {LUA_INIT = "@" .. path}, nil, path},
    } do
      local env = {LUA_INIT_5_4 = false}
      for k, v in pairs(case[2]) do env[k] = v end
      local r = run{env = env, stdin = case[3], table.unpack(case[1])}
      assert.are.equal(1, r.code)
      assert.are.equal("", r.out)
      assert.are.equal(refusal(case[4]), r.err)
    end
  end)

  it("runs them with --allow-binary-chunks", function()
    local r = run{"--allow-binary-chunks", chunk_file(good)}
    assert.are.equal(0, r.code, r.err)
    assert.are.equal("binary ran\n", r.out)
    r = run{"--allow-binary-chunks", "-", stdin = good}
    assert.are.equal(0, r.code, r.err)
    assert.are.equal("binary ran\n", r.out)
  end)

  it("text scripts run as before; --help says what the option risks", function()
    local r = run{chunk_file("print('text ran')")}
    assert.are.equal(0, r.code, r.err)
    assert.are.equal("text ran\n", r.out)
    r = run{"--help"}
    assert_has(r.out:gsub("%s+", " "), "--allow-binary-chunks also run precompiled (luac) "
               .. "chunks as the script, -e code and LUA_INIT; by default they are text only. "
               .. "Risk: Lua does not check bytecode, so a corrupt or crafted chunk can crash "
               .. "the process or corrupt its memory; allow only chunks you trust")
  end)
end)
