-- runs: every-platform
-- ipc-off: no
-- devices: 8
-- needs: none

-- Allocation-failure injection (README.md, "Development"): a full pipeline
-- run with the k-th host allocation, then the k-th pool allocation, made to
-- fail, for k = 1, 2, ... until a run completes with no failure injected.
-- Every run must end with a clean dlrun error, leave every pool as it was,
-- and leave no export alive. Under `make check-asan` the same runs also prove
-- there is no leak.
local dl = require "dlrun"

local function pipeline()
  local mesh = dl.make_mesh({8}, {"x"})
  local x = dl.arange(0, 4096, 1, "float32", dl.NamedSharding(mesh, dl.P("x")))
  local y = dl.device_put(x, dl.NamedSharding(mesh, dl.P()))          -- replicate
  local r = dl.device_put(y, dl.NamedSharding(mesh, dl.P("x")), {may_alias = false})
  local g = dl.device_put(r, dl.devices()[1])                           -- gather
  local c = g:__dlpack__{max_version = {1, 0}}
  local z = dl.from_dlpack(c)
  local parts = dl.export(x, {strategy = "shards"})
  for _, p in ipairs(parts.shards) do dl.from_dlpack(p.capsule):delete() end
  assert(z:tolist()[4096] == 4095)
  for _, a in ipairs {x, y, r, g, z} do a:delete() end
end

local function settle()
  collectgarbage()
  collectgarbage()
  for _, d in ipairs(dl.devices()) do d:synchronize() end
end

local function pool_usage()
  local used = {}
  for _, d in ipairs(dl.devices()) do used[#used + 1] = d:memory_stats().bytes_in_use end
  for _, d in ipairs(dl.devices("cpu")) do used[#used + 1] = d:memory_stats().bytes_in_use end
  return table.concat(used, ",")
end

local function sweep(kind)
  pipeline()
  settle()
  local before, exports = pool_usage(), dl.live_exports()
  local k, failures = 1, 0
  while true do
    dl._debug.fail_alloc(kind, k)
    local ok, err = pcall(pipeline)
    local injected = dl._debug.alloc_failed(kind)
    dl._debug.fail_alloc(kind, 0)
    settle()
    assert.are.equal(before, pool_usage(), kind .. " k=" .. k .. ": pools changed")
    assert.are.equal(exports, dl.live_exports(), kind .. " k=" .. k .. ": exports alive")
    if not injected then
      assert(ok, kind .. " k=" .. k .. ": " .. tostring(err))
      return k, failures
    end
    assert(not ok, kind .. " k=" .. k .. ": a failure was injected but the pipeline succeeded")
    assert(dl.ResourceExhaustedError:is_instance(err) or dl.RuntimeError:is_instance(err),
           kind .. " k=" .. k .. ": not a clean dlrun error: " .. tostring(err))
    assert.truthy(#err.message > 0)
    failures = failures + 1
    k = k + 1
  end
end

describe("allocation-failure injection", function()
  it("every host allocation of a pipeline can fail cleanly", function()
    local k, failures = sweep("host")
    assert.is_true(failures >= 50)        -- the pipeline makes that many host allocations
    assert.are.equal(k - 1, failures)
  end)

  it("every pool allocation of a pipeline can fail cleanly", function()
    local k, failures = sweep("pool")
    assert.is_true(failures >= 16)
    assert.are.equal(k - 1, failures)
  end)

  it("the hook is off again afterwards and counts only while set", function()
    assert.is_false(dl._debug.alloc_failed("host"))
    dl._debug.fail_alloc("pool", 1000000)
    dl.zeros({4}, "float32")
    assert.are.equal(1, dl._debug.alloc_count("pool"))
    dl._debug.fail_alloc("pool", 0)
    dl.zeros({4}, "float32")
    assert.are.equal(0, dl._debug.alloc_count("pool"))
  end)

  it("the environment variables set the hook in a fresh process", function()
    local helpers = require "helpers"
    local _, err, status = helpers.run_code('require("dlrun").zeros({4})', nil,
                                           {DLRUN_FAIL_POOL_ALLOC = "1", DLRUN_DEVICES = ""})
    assert.are.equal(1, status)
    assert.truthy(err:find("dlrun: ResourceExhaustedError: Out of memory on " .. helpers.auto_dev(0)
                           .. " while allocating 16 bytes (injected failure)", 1, true), err)
  end)
end)
