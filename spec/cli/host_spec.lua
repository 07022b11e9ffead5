-- runs: every-platform
-- ipc-off: no
-- devices: any
-- needs: none

-- examples/host/embed.c: a host application that embeds Lua and dlrun, runs
-- examples/host/embed_pipeline.lua, consumes the tensors the script hands it
-- through DLPack (checking every value) and calls their deleters.
local helpers = require "helpers"

-- The build folder: DLRUN_EXE is <build>/dlrun when the suite runs.
local build = "build"
do
  local exe = os.getenv("DLRUN_EXE")
  if exe and exe ~= "" then build = exe:match("^(.*)/[^/]*$") or "." end
end
local embed = build .. "/examples/embed"

-- embed finds the pure-Lua files at <build>/../lua, which holds when the build
-- folder sits in the source tree; an out-of-tree build (make BUILD=/elsewhere)
-- points it at the tree's lua folder instead (busted runs from the root).
local env = ""
do
  local f = io.open((build:match("^(.*)/[^/]*$") or ".") .. "/lua/dlrun/init.lua")
  if f then f:close() else env = "DLRUN_LUA_DIR=lua " end
end

-- Run the host (with an optional script). Returns stdout, stderr, exit status.
local function run_embed(script)
  local out, err = os.tmpname(), os.tmpname()
  local cmd = env .. helpers.shell_quote(embed)
  if script then cmd = cmd .. " " .. helpers.shell_quote(script) end
  local _, _, status = os.execute(cmd .. " >" .. out .. " 2>" .. err)
  local function slurp(p)
    local f = assert(io.open(p)); local s = f:read("a"); f:close(); os.remove(p); return s
  end
  return slurp(out), slurp(err), status
end

-- Write a temporary script; returns its path (removed by the caller).
local function temp_script(code)
  local path = os.tmpname()
  local f = assert(io.open(path, "w")); f:write(code); f:close()
  return path
end

local function has(text, needle)
  return text:find(needle, 1, true) ~= nil
end

describe("examples/host/embed.c (a host application embedding Lua and dlrun)", function()
  it("runs the pipeline, checks every value it is handed and runs every deleter", function()
    local out, err, status = run_embed()
    assert.are.equal("", err)
    assert.are.equal(0, status, out)
    assert.truthy(has(out, "consumed gathered: 1024 values ok\n"), out)
    assert.truthy(has(out, "consumed host: 1024 values ok\n"), out)
    for i = 0, 7 do
      assert.truthy(has(out, ("consumed shard%d: 128 values ok\n"):format(i)), out)
    end
    assert.truthy(has(out, "consumed matrix: 2048 values ok\n"), out)
    assert.truthy(has(out, "consumed replica: 64 values ok\n"), out)
    assert.truthy(has(out, "host: 12 tensors, 5184 values checked, 12 deleters run, "
                        .. "0 exports alive\n"), out)
    -- The script says what it did, with the bytes it moved.
    assert.truthy(has(out, "Gathered x onto SimDevice(id=0): 3584 bytes moved"), out)
    assert.truthy(has(out, "dltensor_versioned on device {12, 0}"), out)
    assert.truthy(has(out, "dltensor on device {1, 0}"), out)
    assert.truthy(has(out, "1024 values checked, 0 bytes moved"), out)
  end)

  it("takes the pipeline script from its first argument", function()
    local path = temp_script([[
      local x = dl.arange(0, 12, 1, "float64", dl.devices()[3])
      assert(consume(x:__dlpack__{max_version = {1, 0}}, "small", 0, 1) == 12)
      local y = dl.arange(10, 30, 2, "int64", dl.devices()[4])
      assert(consume(y:__dlpack__{dl_device = {1, 0}}, "evens", 10, 2) == 10)
    ]])
    local out, err, status = run_embed(path)
    os.remove(path)
    assert.are.equal("", err)
    assert.are.equal(0, status, out)
    assert.are.equal("consumed small: 12 values ok\nconsumed evens: 10 values ok\n"
                     .. "host: 2 tensors, 22 values checked, 2 deleters run, 0 exports alive\n",
                     out)
  end)

  it("exits 1 and says which value was wrong when a tensor does not match", function()
    local path = temp_script([[
      local x = dl.arange(0, 16, 1, "int32", dl.devices()[2])
      consume(x:__dlpack__(), "wrong", 1, 1) -- the values start at 0, not 1
    ]])
    local out, err, status = run_embed(path)
    os.remove(path)
    assert.are.equal(1, status)
    assert.truthy(has(err, "embed: tensor wrong: 16 of 16 values are not first + i*step: "
                        .. "element 0 is 0, expected 1"), err)
    assert.truthy(has(out, "consumed wrong: 16 of 16 values wrong"), out)
    -- The deleter still ran.
    assert.truthy(has(out, "host: 1 tensors, 16 values checked, 1 deleters run, "
                        .. "0 exports alive\n"), out)
  end)

  it("prints a dlrun error raised by the script and exits 1", function()
    local path = temp_script([[
      local x = dl.arange(0, 16, 1, "float32", dl.devices()[1])
      consume(x:__dlpack__{dl_device = {1, 0}, copy = false}, "never", 0, 1)
    ]])
    local out, err, status = run_embed(path)
    os.remove(path)
    assert.are.equal(1, status)
    assert.truthy(err:match("^embed: ValueError: Specified device=CpuDevice%(id=0%) which "
                            .. "requires a copy"), err)
    assert.truthy(has(out, "host: 0 tensors, 0 values checked, 0 deleters run, "
                        .. "0 exports alive\n"), out)
  end)

  it("refuses a capsule consumed twice; unconsumed capsules are freed with the state", function()
    local path = temp_script([[
      local x = dl.arange(0, 8, 1, "float32", dl.devices()[1])
      local c = x:__dlpack__()
      consume(c, "once", 0, 1)
      local leftover = x:__dlpack__() -- never consumed: lua_close runs its deleter
      consume(c, "twice", 0, 1)
    ]])
    local out, err, status = run_embed(path)
    os.remove(path)
    assert.are.equal(1, status)
    assert.truthy(has(err, "consume: argument #1 must be an unconsumed Capsule, "
                        .. "got Capsule(used_dltensor)"), err)
    assert.truthy(has(out, "host: 1 tensors, 8 values checked, 1 deleters run, "
                        .. "0 exports alive\n"), out)
  end)

  it("owns the runtime: scripts cannot reconfigure it", function()
    local path = temp_script('dl.configure{devices = "sim:2"}\n')
    local _, err, status = run_embed(path)
    os.remove(path)
    assert.are.equal(1, status)
    assert.truthy(has(err, "embed: RuntimeError: configure: this Lua state uses its host "
                        .. "application's runtime (sim:8,cpu:1)"), err)
  end)
end)
