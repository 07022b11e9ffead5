-- runs: once
-- ipc-off: no
-- devices: any
-- needs: python3

-- The dlrun command's prompt, as lua5.4's: on a terminal with no script, no
-- -e and no -v, or with -i after the script and the -e chunks. Lines are
-- typed through a pseudo-terminal (spec/data/type_at_prompt.py, python3's
-- pty module) after each prompt; every run ends within TIMEOUT seconds.
local helpers = require "helpers"

local TIMEOUT = 60
local PYTHON = require("python_side").PYTHON -- DLRUN_PYTHON, else Debian's /usr/bin/python3
local DRIVER = "spec/data/type_at_prompt.py"
local VERSION = helpers.capture(helpers.exe .. " --version"):match("^dlrun (%S+)")
local LUA = helpers.capture(helpers.exe .. " --version"):match("%((Lua [^)]+)%)")
local BANNER = ("dlrun %s (%s), dl = require \"dlrun\"\n"):format(VERSION, LUA)

local function quote(s) return "'" .. tostring(s):gsub("'", [['\'']]) .. "'" end

-- What the terminal showed, read as text: escape sequences (readline's
-- bracketed paste switches) and carriage returns left out.
local function as_text(shown)
  return (shown:gsub("\27%[[%d;?]*%a", ""):gsub("\r", ""))
end

-- Type `lines` at dlrun's prompt (args: its command line; env: variables,
-- TERM among them), then Ctrl-D. Returns what the terminal showed, as text,
-- and the exit status.
local function type_at_prompt(lines, args, env)
  local cmd = {"env"}
  for k, v in pairs(env) do cmd[#cmd + 1] = k .. "=" .. quote(v) end
  cmd[#cmd + 1] = quote(PYTHON)
  cmd[#cmd + 1] = DRIVER
  cmd[#cmd + 1] = tostring(TIMEOUT)
  cmd[#cmd + 1] = quote(helpers.exe)
  for _, a in ipairs(args or {}) do cmd[#cmd + 1] = quote(a) end
  local input = os.tmpname()
  helpers.write_file(input, table.concat(lines, "\n") .. "\n")
  local out = os.tmpname()
  local _, how, code = os.execute(table.concat(cmd, " ") .. " <" .. input .. " >" .. out)
  if how == "signal" then code = 128 + code end
  local shown = helpers.read_all(out)
  os.remove(input)
  os.remove(out)
  return as_text(shown), code
end

-- Plain reading: TERM=dumb leaves readline out, the terminal echoes.
local DUMB = {TERM = "dumb"}

describe("the prompt", function()
  it("starts on a terminal with no script: values, a dlrun error, a statement over lines", function()
    local shown, code = type_at_prompt({
      "x = 6 * 7",
      "x, x + 1",
      "for i = 1, 2 do",
      "print(i)",
      "end",
      "dl.make_mesh({3}, {'x'})",
      "error('plain')",
      "dl == require 'dlrun'",
    }, {"--devices", "sim:2"}, DUMB)
    -- Lua names the C function after the first loaded module it finds it in
    -- ("dlrun" or "dlrun.core"): a table's order.
    shown = shown:gsub("'dlrun%.core%.make_mesh'", "'dlrun.make_mesh'")
    assert.are.equal(BANNER ..
      "> x = 6 * 7\n" ..
      "> x, x + 1\n" ..
      "42\t43\n" ..
      "> for i = 1, 2 do\n" ..
      ">> print(i)\n" ..
      ">> end\n" ..
      "1\n2\n" ..
      "> dl.make_mesh({3}, {'x'})\n" ..
      "ValueError: Number of devices 2 must be >= the product of mesh_shape (3,)\n" ..
      "  at stdin:1\n" ..
      "stack traceback:\n" ..
      "\t[C]: in function 'dlrun.make_mesh'\n" ..
      "\tstdin:1: in main chunk\n" ..
      "\t[C]: in ?\n" ..
      "> error('plain')\n" ..
      "stdin:1: plain\n" ..
      "stack traceback:\n" ..
      "\t[C]: in function 'error'\n" ..
      "\tstdin:1: in main chunk\n" ..
      "\t[C]: in ?\n" ..
      "> dl == require 'dlrun'\n" ..
      "true\n" ..
      "> \n", shown)
    assert.are.equal(0, code)
  end)

  it("reports a statement cut short by Ctrl-D, then ends with status 0", function()
    local shown, code = type_at_prompt({"function f("}, {}, DUMB)
    assert.are.equal(BANNER .. "> function f(\n" ..
                     ">> stdin:1: <name> or '...' expected near <eof>\n" ..
                     "> \n", shown)
    assert.are.equal(0, code)
  end)

  it("-i starts it after the -e chunks, with their globals; _PROMPT is the prompt", function()
    local shown, code = type_at_prompt({"answer + 1", "dl"},
                                       {"-i", "-e", "answer = 41", "-e", "dl = 'mine'",
                                        "-e", "_PROMPT = 'dl> '"}, DUMB)
    assert.are.equal(BANNER .. "dl> answer + 1\n42\ndl> dl\nmine\ndl> \n", shown)
    assert.are.equal(0, code)
  end)

  it("-i starts it after the script, which set globals and got its arguments", function()
    local script = os.tmpname()
    helpers.write_file(script, "answer = 41\n")
    local shown, code = type_at_prompt({"answer + 1, arg[1], ..."}, {"-i", script, "a", "b"}, DUMB)
    os.remove(script)
    assert.are.equal(BANNER .. "> answer + 1, arg[1], ...\n42\ta\n> \n", shown)
    assert.are.equal(0, code)
  end)

  it("-i after a failing script or chunk does not start: status 1", function()
    local shown, code = type_at_prompt({}, {"-i", "-e", "error('boom', 0)"}, DUMB)
    assert.are.equal("dlrun: boom\nstack traceback:\n\t[C]: in function 'error'\n" ..
                     "\t(command line):1: in main chunk\n\t[C]: in ?\n", shown)
    assert.are.equal(1, code)
  end)

  it("edits lines with readline when the system has it: the up arrow recalls a line", function()
    local loads = quote(PYTHON) .. " -c 'import ctypes, sys\n" ..
                  "for name in sys.argv[1:]:\n  try: ctypes.CDLL(name); sys.exit(0)\n  except OSError: pass\n" ..
                  "sys.exit(1)' libreadline.so.8 libreadline.so.7 libedit.so.2"
    if os.execute(loads) ~= true then
      pending("no libreadline.so.8 or libedit.so.2 on this system")
      return
    end
    local shown, code = type_at_prompt({"x = 6 * 7", "x", "\27[A"}, {},
                                       {TERM = "xterm", INPUTRC = "/dev/null"})
    -- readline ends the line of the last prompt itself, then dlrun does.
    assert.are.equal(BANNER .. "> x = 6 * 7\n> x\n42\n> x\n42\n> \n\n", shown)
    assert.are.equal(0, code)
  end)

  it("-i reads lines from stdin that is not a terminal, printing the prompts", function()
    local out, err, code = helpers.run({"-i", "-e", "x = 1"}, "x + 1\n")
    assert.are.equal(BANNER .. "> 2\n> \n", out)
    assert.are.equal("", err)
    assert.are.equal(0, code)
  end)

  it("does not start when stdin is not a terminal: stdin is the script, as before", function()
    local out, err, code = helpers.run({}, "print(1 + 1)\n")
    assert.are.equal("2\n", out)
    assert.are.equal("", err)
    assert.are.equal(0, code)
  end)
end)
