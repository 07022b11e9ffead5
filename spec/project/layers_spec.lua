-- runs: once
-- ipc-off: no
-- devices: any
-- needs: none

-- scripts/check-layers.sh holds the layers of src/: it passes on the tree
-- and fails, naming file and edge, on each kind of wrong edge.
local helpers = require "spec.helpers"
local q = helpers.shell_quote

-- Run the checker on SRC and PUB; returns its output and exit status.
local function check(src, pub)
  return helpers.capture_status("scripts/check-layers.sh " .. q(src) .. " " .. q(pub))
end

-- A copy of src/ and include/dlrun in a fresh directory.
local function copy_tree()
  local dir = os.tmpname()
  os.remove(dir)
  assert(os.execute("mkdir -p " .. q(dir) .. "/pub && cp -r src " .. q(dir) .. "/src && cp "
                    .. "include/dlrun/*.h " .. q(dir) .. "/pub"))
  return dir
end

local function append(path, text)
  local f = assert(io.open(path, "a"))
  f:write(text)
  f:close()
end

describe("scripts/check-layers.sh", function()
  it("passes on the project's tree", function()
    local out, status = check("src", "include/dlrun")
    assert.are.equal(0, status)
    assert.truthy(out:match("^layers: %d+ files, %d+ includes, 0 violations\n$"), out)
  end)

  it("names each wrong edge and fails", function()
    local dir = copy_tree()
    finally(function() os.execute("rm -rf " .. q(dir)) end)
    append(dir .. "/src/core/dtype.c", '#include "device/device_impl.h"\n')
    append(dir .. "/src/shard/mesh.c", '#include "device/device_impl.h"\n')
    append(dir .. "/src/lua/lconvert.c", '#include "core/text.h"\n')
    append(dir .. "/src/mem/pool.h", '#include "dlrun/array.h"\n')
    append(dir .. "/pub/trace.h", '#include "device.h"\n')
    append(dir .. "/src/array/read.c", 'static const char *p = "sim";\n')
    local out, status = check(dir .. "/src", dir .. "/pub")
    assert.are.equal(1, status)
    local want = {
      dir .. '/src/core/dtype.c: includes "device/device_impl.h" (core -> device is not allowed)',
      dir .. '/src/shard/mesh.c: includes "device/device_impl.h" (shard -> device is not allowed)',
      dir .. '/src/lua/lconvert.c: includes "core/text.h" (lua -> core is not allowed)',
      dir .. '/src/mem/pool.h: includes "dlrun/array.h" (mem -> array is not allowed: public '
        .. 'header of a higher layer)',
      dir .. '/pub/trace.h: includes "dlrun/device.h" (core -> device is not allowed: public '
        .. 'header of a higher layer)',
    }
    for _, line in ipairs(want) do
      assert.truthy(out:find(line, 1, true), "missing: " .. line .. "\nin:\n" .. out)
    end
    assert.truthy(out:find('/src/array/read.c:%d+: names a platform %("sim"/"cpu"%) above the '
                           .. 'device layer'), out)
    assert.truthy(out:match("6 violations\n$"), out)
  end)

  it("checks subfolders, <...> spellings and paths through ..", function()
    local dir = copy_tree()
    finally(function() os.execute("rm -rf " .. q(dir)) end)
    assert(os.execute("mkdir " .. q(dir .. "/src/core/sub")))
    append(dir .. "/src/core/sub/x.h", '#include "device/device_impl.h"\n')
    append(dir .. "/src/core/sub/y.h", '#include "x.h"\n')
    append(dir .. "/src/core/shape.c", '#include "sub/y.h"\n')
    append(dir .. "/src/shard/mesh.c", '#include <device/device_impl.h>\n#include <stdio.h>\n')
    append(dir .. "/src/lua/lconvert.c", '#include <dlrun/array.h>\n')
    append(dir .. "/src/mem/pool.c", '#include "../array/array_impl.h"\n')
    local out, status = check(dir .. "/src", dir .. "/pub")
    assert.are.equal(1, status)
    local want = {
      dir .. '/src/core/sub/x.h: includes "device/device_impl.h" (core -> device is not allowed)\n',
      dir .. '/src/shard/mesh.c: includes <device/device_impl.h> (shard -> device is not '
        .. 'allowed)\n',
      dir .. '/src/mem/pool.c: includes "../array/array_impl.h" (a path through .. leaves the '
        .. 'folder: name the header by its layer)\n',
    }
    for _, line in ipairs(want) do
      assert.truthy(out:find(line, 1, true), "missing: " .. line .. "\nin:\n" .. out)
    end
    -- the subfolder's own headers, a system header and a public one the binding may use pass
    assert.falsy(out:find("y.h", 1, true), out)
    assert.falsy(out:find("stdio", 1, true), out)
    assert.falsy(out:find("lconvert", 1, true), out)
    assert.truthy(out:match(", 3 violations\n$"), out)
  end)

  it("holds a platform to the public headers, its own folder and those it shares", function()
    local dir = copy_tree()
    finally(function() os.execute("rm -rf " .. q(dir)) end)
    append(dir .. "/src/platforms/sim/sim.c", '#include "device/buffer.h"\n')
    append(dir .. "/src/platforms/host/work_queue.c", '#include <core/alloc.h>\n')
    append(dir .. "/src/platforms/cuda/copy.c", '#include "platforms/opencl/ocl.h"\n')
    append(dir .. "/src/platforms/opencl/copy.c", '#include "platforms/host/work_queue.h"\n')
    append(dir .. "/src/platforms/cpu/cpu.c", '#include "platforms/host/work_queue.h"\n'
           .. '#include "platforms/common/box_plan.h"\n#include "dlrun/array.h"\n')
    local out, status = check(dir .. "/src", dir .. "/pub")
    assert.are.equal(1, status)
    local want = {
      dir .. '/src/platforms/sim/sim.c: includes "device/buffer.h" (platforms -> device is not '
        .. 'allowed)\n',
      dir .. '/src/platforms/host/work_queue.c: includes <core/alloc.h> (platforms -> core is not '
        .. 'allowed)\n',
      dir .. '/src/platforms/cuda/copy.c: includes "platforms/opencl/ocl.h" (platforms/cuda -> '
        .. 'platforms/opencl is not allowed)\n',
      dir .. '/src/platforms/opencl/copy.c: includes "platforms/host/work_queue.h" (platforms/opencl '
        .. '-> platforms/host is not allowed)\n',
    }
    for _, line in ipairs(want) do
      assert.truthy(out:find(line, 1, true), "missing: " .. line .. "\nin:\n" .. out)
    end
    -- host execution and common for a built-in platform, and a public header, pass
    assert.falsy(out:find("cpu.c", 1, true), out)
    assert.truthy(out:match(", 4 violations\n$"), out)
  end)

  it("refuses a folder that is no layer and a header no layer owns", function()
    local dir = copy_tree()
    finally(function() os.execute("rm -rf " .. q(dir)) end)
    assert(os.execute("mkdir " .. q(dir .. "/src/extra")))
    append(dir .. "/pub/extra.h", "/* new */\n")
    local out, status = check(dir .. "/src", dir .. "/pub")
    assert.are.equal(1, status)
    assert.truthy(out:find("/src/extra/: folder is not a known layer", 1, true), out)
    assert.truthy(out:find("/pub/extra.h: no layer owns this public header", 1, true), out)
  end)
end)
