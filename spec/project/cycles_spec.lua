-- runs: once
-- ipc-off: no
-- devices: any
-- needs: none

-- scripts/check-cycles.sh finds circles among the C files of src/
-- (docs/architecture.md, "No circles"): none on the tree; a pair of files
-- each calling the other through the other's header is named, and fails.
local helpers = require "spec.helpers"
local q = helpers.shell_quote

local function run(src, pub)
  return helpers.capture_status("scripts/check-cycles.sh " .. q(src) .. " " .. q(pub))
end
local write = helpers.write_file

describe("scripts/check-cycles.sh", function()
  it("finds no circle on the project's tree", function()
    local out, status = run("src", "include/dlrun")
    assert.are.equal(0, status, out)
    assert.matches("\ncycles: %d+ files, %d+ dependencies, 0 circles %(0 accepted%)\n$", "\n" .. out)
  end)

  it("names two files that call each other, with the functions, and fails", function()
    local dir = os.tmpname()
    os.remove(dir)
    assert(os.execute("mkdir -p " .. q(dir) .. "/src/core " .. q(dir) .. "/pub"))
    write(dir .. "/src/core/ping.h", "int ping(int n);\n")
    write(dir .. "/src/core/pong.h", "int pong(int n);\n")
    write(dir .. "/src/core/ping.c", '#include "core/ping.h"\n#include "core/pong.h"\n'
          .. "int ping(int n) { return n ? pong(n - 1) : 0; }\n")
    write(dir .. "/src/core/pong.c", '#include "core/pong.h"\n#include "core/ping.h"\n'
          .. "/* ping() in a comment is no use */\nint pong(int n) { return n ? ping(n - 1) : 1; }\n")
    write(dir .. "/src/core/leaf.c", '#include "core/ping.h"\nint leaf(void) { return ping(2); }\n')
    local out, status = run(dir .. "/src", dir .. "/pub")
    os.execute("rm -rf " .. q(dir))
    assert.are.equal(1, status, out)
    local src = dir .. "/src/core/"
    assert.truthy(out:find("circle: " .. src .. "ping.c " .. src .. "pong.c\n", 1, true), out)
    assert.truthy(out:find(src .. "ping.c -> " .. src .. "pong.c:pong", 1, true), out)
    assert.truthy(out:find(src .. "pong.c -> " .. src .. "ping.c:ping", 1, true), out)
    assert.is_nil(out:find("leaf.c ", 1, true), out) -- it uses ping but nothing uses it
    assert.matches("1 circles %(0 accepted%)\n$", out)
  end)
end)
