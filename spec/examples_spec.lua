-- Every example runs under the dlrun command and says what it checked.
local helpers = require "helpers"

describe("examples/pipeline.lua (make demo)", function()
  it("runs on the default simulated devices and checks its data", function()
    local out, err, status = helpers.run({"examples/pipeline.lua"}, nil, {DLRUN_DEVICES = ""})
    assert.are.equal("", err)
    assert.is_true(status == 0)
    assert.truthy(out:find("on sim:8,cpu:1: 8 sim devices, host CpuDevice(id=0)", 1, true))
    assert.truthy(out:find("SimDevice(id=7)  holds 12 float32 values", 1, true))
    assert.truthy(out:find("checked 96 values: all correct", 1, true))
    assert.truthy(out:find("after delete: 0 bytes in use on the sim devices", 1, true))
    assert.truthy(out:find("RuntimeError: Array has been deleted with shape=float32[12].", 1, true))
  end)

  it("honours --devices", function()
    local out, _, status = helpers.run({"--devices", "sim:2", "examples/pipeline.lua"})
    assert.is_true(status == 0)
    assert.truthy(out:find("checked 24 values: all correct", 1, true))
  end)
end)
