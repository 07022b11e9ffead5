-- dlrun --trace and --stats (issue 5, "The dlrun command, grown up").
local helpers = require "helpers"

local PIPELINE = [[
local dl = require "dlrun"
local mesh = dl.make_mesh({8}, {"x"})
local x = dl.arange(0, 1024, 1, "float32", dl.NamedSharding(mesh, dl.P("x")))
local y = dl.device_put(x, dl.devices()[1])
local c = y:__dlpack__()
local z = dl.from_dlpack(c)
c, z = nil, nil
collectgarbage()
print("done")
]]

-- Parse JSON with Debian's python3 (always present: the deps script installs
-- python3-numpy) and print "<name> <count>" lines plus track names.
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

local function python_summary(path)
  local script = os.tmpname()
  local f = assert(io.open(script, "w"))
  f:write(SUMMARY)
  f:close()
  local p = assert(io.popen("/usr/bin/python3 " .. helpers.shell_quote(script) .. " "
                            .. helpers.shell_quote(path) .. " 2>&1"))
  local out = p:read("a")
  p:close()
  os.remove(script)
  return out
end

describe("dlrun --trace", function()
  it("writes valid Chrome trace JSON with the pipeline's events and tracks", function()
    local trace = os.tmpname()
    local out, err, status = helpers.run({"--trace", trace, "-"}, PIPELINE, {DLRUN_DEVICES = ""})
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

  it("reports an unwritable trace file and exits 1", function()
    local _, err, status = helpers.run({"--trace", "/nonexistent-dir/t.json", "-e", "print(1)"})
    assert.are.equal(1, status)
    assert.truthy(err:find('dlrun: RuntimeError: cannot write the trace file "/nonexistent-dir/t.json"', 1, true), err)
  end)

  it("needs a value", function()
    local _, err, status = helpers.run({"--trace"})
    assert.are.equal(1, status)
    assert.truthy(err:find("option '--trace' needs a value", 1, true), err)
  end)
end)

describe("dlrun --stats", function()
  it("prints memory, traffic and live exports per device at exit", function()
    local code = [[
      local dl = require "dlrun"
      local mesh = dl.make_mesh({8}, {"x"})
      local x = dl.arange(0, 1024, 1, "float32", dl.NamedSharding(mesh, dl.P("x")))
      local y = dl.device_put(x, dl.devices()[1])
      leaked = y:__dlpack__()        -- a global: still alive at exit
      keep = y
    ]]
    local _, err, status = helpers.run({"--stats", "-e", code}, nil, {DLRUN_DEVICES = ""})
    assert.are.equal(0, status)
    local lines = {}
    for l in err:gmatch("[^\n]+") do lines[#lines + 1] = l end
    assert.are.equal("dlrun stats (sim:8,cpu:1)", lines[1])
    assert.truthy(lines[2]:find("device%s+in use%s+peak%s+moved in%s+moved out%s+exports alive"))
    -- device 0 received 7 shards of 512 bytes; the others sent one each
    assert.truthy(lines[3]:match("^SimDevice%(id=0%)%s+0B%s+4%.50KiB%s+3%.50KiB%s+0B%s+0$"), lines[3])
    assert.truthy(lines[4]:match("^SimDevice%(id=1%)%s+0B%s+512B%s+0B%s+512B%s+0$"), lines[4])
    assert.are.equal(11, #lines) -- title, header, 8 sim devices, 1 cpu device
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
    local out, err, status = helpers.run({"--stats", "-e", code}, nil, {DLRUN_DEVICES = ""})
    assert.are.equal(0, status)
    assert.are.equal("1\n", out)
    local row = err:match("SimDevice%(id=0%)[^\n]*")
    assert.truthy(row, err)
    assert.are.equal("1", row:match("(%d+)$"))
    -- closing the state collects the capsule: nothing is left alive
    code = [[leaked = require("dlrun").arange(8, "float32"):__dlpack__()]]
    _, err, status = helpers.run({"--stats", "-e", code}, nil, {DLRUN_DEVICES = ""})
    assert.are.equal(0, status)
    row = err:match("SimDevice%(id=0%)[^\n]*")
    assert.truthy(row, err)
    assert.are.equal("0", row:match("(%d+)$"))
  end)

  it("says so when no device was used", function()
    local _, err, status = helpers.run({"--stats", "-e", "print(1)"})
    assert.are.equal(0, status)
    assert.are.equal("dlrun stats: no device was used\n", err)
  end)
end)

describe("progress on stderr", function()
  it("stays quiet when stderr is not a terminal", function()
    local code = [[
      local dl = require "dlrun"
      local x = dl.zeros({1024, 1024}, "float32")
      local y = dl.device_put(x, dl.devices()[2]):block_until_ready()
    ]]
    local _, err, status = helpers.run({"-e", code}, nil, {DLRUN_DEVICES = ""})
    assert.are.equal(0, status)
    assert.are.equal("", err)
  end)
end)
