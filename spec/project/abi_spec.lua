-- runs: once
-- ipc-off: no
-- devices: any
-- needs: abigail-tools

-- scripts/check-abi.sh (make check-abi, part of make test) holds libdlrun.so to
-- its committed baseline abi/libdlrun.abi. Here: the baseline agrees with
-- include/dlrun/dlrun.h and names no path of the machine it was made on, and
-- the check's verdicts, end to end (abidw, abidiff), on a small library built
-- like libdlrun (-fvisibility=hidden, -g) in each of the ways an ABI changes.
local helpers = require "spec.helpers"
local q = helpers.shell_quote
local read_all, write_file = helpers.read_file, helpers.write_file

local function shell(line)
  local out = os.tmpname()
  local _, how, code = os.execute("{ " .. line .. "; } >" .. q(out) .. " 2>&1")
  local text = read_all(out)
  os.remove(out)
  return text, how == "exit" and code or 128 + code
end

describe("abi/libdlrun.abi", function()
  local text = read_all("abi/libdlrun.abi")

  it("is the ABI of the soname that include/dlrun/dlrun.h declares", function()
    local abi = read_all("include/dlrun/dlrun.h"):match("#define DLRUN_ABI_VERSION (%d+)\n")
    assert.are.equal("libdlrun.so." .. abi, text:match("^<abi%-corpus [^>]*soname='([^']*)'"))
  end)

  it("holds the public structs and functions, and nothing of the machine or the build's path", function()
    assert.truthy(text:find("<class-decl name='dlrun_config' ", 1, true))
    assert.truthy(text:find("<elf-symbol name='dlrun_import' ", 1, true))
    assert.falsy(text:find("<elf-symbol name='dlrun_fail' ", 1, true)) -- internal
    assert.falsy(text:find("comp-dir-path=", 1, true))
    assert.falsy(text:find("architecture=", 1, true))
    assert.falsy(text:find("filepath=", 1, true))
    assert.falsy(text:find("elf-needed", 1, true))
    assert.falsy(text:find("path='/", 1, true))
  end)
end)

-- The small library: a public header (t.h) and its source, which a case
-- changes by plain replacements; built into its own folder under `root`.
local HEADER = [[
#define T_API __attribute__((visibility("default")))
typedef enum t_status { T_OK, T_ERR_VALUE } t_status;
typedef int t_flags;
typedef struct t_config { int devices; double fraction; } t_config;
T_API t_status t_create(const t_config *config, t_flags flags);
T_API const char *t_last_error(void);
]]
local SOURCE = [[
#include "t.h"
struct t_state { int created; };
static struct t_state state;
int t_internal(struct t_state *s) { return s->created; }
t_status t_create(const t_config *config, t_flags flags) {
  state.created += config->devices + (int)flags;
  return t_internal(&state) < 0 ? T_ERR_VALUE : T_OK;
}
#ifndef T_NO_LAST_ERROR
const char *t_last_error(void) { return ""; }
#endif
#ifdef T_EXTRA
T_API int t_extra(void) { return state.created; }
#endif
]]

local root
local built = 0

-- Builds the library with `case` = {header = {{from, to}, ...}, source = ...,
-- cflags = "...", soname = "..."}; returns the check's arguments for it.
local function build(case)
  built = built + 1
  local dir = ("%s/lib%d"):format(root, built)
  assert(os.execute("mkdir -p " .. q(dir .. "/include")))
  local function edit(text, changes)
    for _, c in ipairs(changes or {}) do
      local at = assert(text:find(c[1], 1, true), c[1])
      text = text:sub(1, at - 1) .. c[2] .. text:sub(at + #c[1])
    end
    return text
  end
  write_file(dir .. "/include/t.h", edit(HEADER, case.header))
  write_file(dir .. "/t.c", edit(SOURCE, case.source))
  local out, code = shell(("cd %s && cc -std=c11 -O2 %s -fPIC -fvisibility=hidden -shared -Iinclude " ..
                           "-Wl,-soname,%s -o libt.so t.c"):format(q(dir), case.cflags or "-g",
                                                                   case.soname or "libt.so.1"))
  assert(code == 0, out)
  return ("--lib %s --headers %s --out %s"):format(q(dir .. "/libt.so"), q(dir .. "/include"),
                                                  q(dir .. "/current.abi")), dir
end

-- env: assignments before the command ("NAME=value ...").
local function check(args, update, env)
  return shell((env or "") .. " scripts/check-abi.sh " .. (update and "--update " or "") .. args ..
               " --baseline " .. q(root .. "/base.abi"))
end

-- The end of every message asking for a new baseline.
local function record()
  return "record it with `make abi-baseline` and commit " .. root .. "/base.abi with the change\n"
end
local function matches(soname)
  return ("check-abi: %s matches %s/base.abi\n"):format(soname, root)
end
local function recorded(soname, was)
  return ("check-abi: recorded the ABI of %s in %s/base.abi%s\n"):format(soname, root,
                                                                      was and " (was " .. was .. ")" or "")
end

-- A check's exit status and last line, then its output (check's results).
local function expect(status, last, out, code)
  assert.are.equal(last, out:match("[^\n]*\n$"))
  assert.are.equal(status, code)
  return out
end

local BREAK = "check-abi: the ABI of libt.so.1 changed incompatibly (above, against %s/base.abi): " ..
              "a binary built against the previous headers would misread dlrun's structs or calls.\n" ..
              "check-abi: keep the old declarations as they were (new functions are compatible), or, " ..
              "when the break is deliberate, raise DLRUN_ABI_VERSION in include/dlrun/dlrun.h (and the " ..
              "release, DLRUN_VERSION_STRING), rebuild, then "

-- The check of a case against the baseline of the unchanged library: exit
-- status and output.
local function verdict(case)
  return check((build(case)))
end

describe("scripts/check-abi.sh", function()
  setup(function()
    root = os.tmpname()
    os.remove(root)
    assert(os.execute("mkdir -p " .. q(root)))
    expect(0, recorded("libt.so.1"), check(build({}), true))
  end)

  teardown(function()
    if root then os.execute("rm -rf " .. q(root)) end
  end)

  it("passes an unchanged library, built elsewhere, with the same ABI text", function()
    local args, dir = build({})
    assert.are.equal(matches("libt.so.1"), expect(0, matches("libt.so.1"), check(args)))
    assert.are.equal(read_all(root .. "/base.abi"), read_all(dir .. "/current.abi"))
  end)

  it("passes changes to what is not exported, and an enumerator added at the end", function()
    local out = expect(0, matches("libt.so.1"),
                       verdict({header = {{"T_ERR_VALUE }", "T_ERR_VALUE, T_ERR_TYPE }"}},
                                source = {{"int created; }", "long created; char more[64]; }"}}}))
    assert.are.equal(matches("libt.so.1"), out)
  end)

  it("passes an added function, saying the baseline can record it, and records it", function()
    local args = build({header = {{"T_API const", "T_API int t_extra(void);\nT_API const"}},
                        cflags = "-g -DT_EXTRA"})
    local out = expect(0, "check-abi: libt.so.1 gained functions, a compatible change (above); " .. record(),
                       check(args))
    assert.truthy(out:find("[A] 'function int t_extra()'", 1, true), out)
    local before = read_all(root .. "/base.abi")
    expect(0, recorded("libt.so.1"), check(args, true))
    assert.are.equal(matches("libt.so.1"), expect(0, matches("libt.so.1"), check(args)))
    -- Removing it again is now a break; back to the first baseline.
    out = expect(1, (BREAK:format(root) .. record()):match("[^\n]*\n$"), check(build({})))
    assert.truthy(out:find("[D] 'function int t_extra()'", 1, true), out)
    write_file(root .. "/base.abi", before)
  end)

  local breaks = {
    {"a field added to a public struct", {header = {{"double fraction;", "double fraction; int streams;"}}},
     "1 data member insertion"},
    {"an argument's type widened", {header = {{"typedef int t_flags", "typedef long t_flags"}}},
     "type size changed from 32 to 64 (in bits)"},
    {"enumerators renumbered", {header = {{"T_OK, T_ERR_VALUE", "T_ERR_VALUE, T_OK"}}},
     "'t_status::T_OK' from value '0' to '1'"},
    {"a function removed", {header = {{"T_API const char *t_last_error(void);\n", ""}},
                            cflags = "-g -DT_NO_LAST_ERROR"},
     "[D] 'function const char* t_last_error()'"},
  }
  for _, b in ipairs(breaks) do
    it("fails " .. b[1] .. " under the same soname, saying what changed and how to bump", function()
      local out, code = verdict(b[2])
      assert.are.equal(1, code)
      assert.truthy(out:find(b[3], 1, true), out)
      assert.are.equal(BREAK:format(root) .. record(), out:sub(-#(BREAK:format(root) .. record())))
    end)
  end

  it("refuses to record a break under the same soname, unless that soname was never released", function()
    local before = read_all(root .. "/base.abi")
    local args = build({header = {{"double fraction;", "double fraction; int streams;"}}})
    local out, code = check(args, true)
    assert.are.equal(1, code)
    assert.truthy(out:find("check-abi: not recorded: the soname must change first (unless libt.so.1 was never " ..
                           "released: then make abi-baseline ABI_UNRELEASED=1)\n", 1, true), out)
    assert.are.equal(before, read_all(root .. "/base.abi"))
    out = expect(0, "check-abi: recorded the ABI of libt.so.1 in " .. root .. "/base.abi, a break joining " ..
                    "the bump to libt.so.1 (not released)\n", check(args, true, "ABI_UNRELEASED=1"))
    assert.truthy(out:find("1 data member insertion", 1, true), out)
    expect(0, matches("libt.so.1"), check(args))
    write_file(root .. "/base.abi", before)
  end)

  it("fails a new soname until the baseline is recorded for it, then passes", function()
    local args = build({header = {{"double fraction;", "double fraction; int streams;"}}, soname = "libt.so.2"})
    local out = expect(1, "check-abi: the soname is now libt.so.2 but " .. root .. "/base.abi records the ABI of " ..
                          "libt.so.1; " .. record(), check(args))
    assert.truthy(out:find("SONAME changed from 'libt.so.1' to 'libt.so.2'", 1, true), out)
    expect(0, recorded("libt.so.2", "libt.so.1"), check(args, true))
    assert.are.equal(matches("libt.so.2"), expect(0, matches("libt.so.2"), check(args)))
    -- Back to the first library for the other cases.
    expect(0, recorded("libt.so.1", "libt.so.2"), check(build({}), true))
    assert.truthy(read_all(root .. "/base.abi"):find("soname='libt.so.1'", 1, true))
  end)

  it("fails a library without debug information, a missing baseline and one it cannot read", function()
    local args, dir = build({cflags = ""})
    local out, code = check(args)
    assert.are.equal(1, code)
    assert.are.equal("check-abi: " .. dir .. "/libt.so has no debug information: build it with -g " ..
                     "(OPT=\"-O2 -g\")\n", out)
    args = build({})
    local out2, code2 = shell("scripts/check-abi.sh " .. args .. " --baseline " .. q(root .. "/missing.abi"))
    assert.are.equal(1, code2)
    assert.are.equal("check-abi: no baseline " .. root .. "/missing.abi for libt.so.1: " ..
                     record():gsub("base%.abi", "missing.abi"), out2)
    -- A merge's conflict markers: abidiff alone would see no change.
    local base = read_all(root .. "/base.abi")
    write_file(root .. "/broken.abi", (base:gsub("</abi%-instr>", "<<<<<<< HEAD\n</abi-instr>", 1)))
    out, code = shell("scripts/check-abi.sh " .. args .. " --baseline " .. q(root .. "/broken.abi"))
    assert.are.equal(1, code)
    assert.are.equal("check-abi: " .. root .. "/broken.abi cannot be read: " .. root .. "/broken.abi:N: " ..
                     "parser error : StartTag: invalid element name; " .. record():gsub("base%.abi", "broken.abi"),
                     (out:gsub("broken%.abi:%d+:", "broken.abi:N:")))
  end)
end)
