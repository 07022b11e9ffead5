-- Memory over time: arrays come and go on one device, and the trace shows
-- the curve of its memory in use next to the allocations.
--
--   build/dlrun --trace memory.json examples/memory_timeline.lua
--
-- Open memory.json in Perfetto (ui.perfetto.dev): under "devices", the
-- counter "SimDevice(id=0) device memory" rises and falls with the arrays.
-- The example also prints a snapshot of the device's memory (every block
-- and the array that holds it) and gives the memory it no longer needs back
-- to the system.
local dl = require "dlrun"

-- Fixed before first use: 8 MiB on each sim device, grown on demand.
dl.configure{device_memory = "8MiB", device_preallocate = false}

local function say(fmt, ...) io.write(fmt:format(...), "\n") end
local function check(ok, what) if not ok then error("memory_timeline: " .. what, 2) end end

-- Sim devices give unused memory back to the system (cpu devices use the
-- host's memory, an OpenCL buffer has no pages to drop).
if dl.default_backend() ~= "sim" then
  io.stderr:write(("memory_timeline.lua: this example needs a sim device, whose unused memory "
                   .. "it gives back to the system, but found %s devices (devices %s); run it "
                   .. "with --devices sim:1\n"):format(dl.default_backend(), dl.device_spec()))
  os.exit(1, true)
end
local dev = dl.devices()[1]
local MiB = 1024 * 1024
local function in_use() return dev:memory_stats().bytes_in_use end

-- Up: 1, 2 and 3 MiB of float32 (a quarter of a million values per MiB).
local live = {}
for i, mib in ipairs {1, 2, 3} do
  live[i] = dl.zeros({mib * MiB // 4}, "float32", dev)
  live[i]:block_until_ready()
  say("step %d: allocated %d MiB, %d MiB in use", i, mib, in_use() // MiB)
end
check(in_use() == 6 * MiB, "6 MiB in use at the top")

-- Down in the middle: a hole of 2 MiB between the two others.
live[2]:delete()
say("step 4: deleted the 2 MiB array, %d MiB in use", in_use() // MiB)

local snap = dev:memory_snapshot()
say("snapshot of %s %s memory: %d of %d bytes in use, %d reserved", tostring(dev), snap.kind,
    snap.bytes_in_use, snap.bytes_limit, snap.bytes_reserved)
for _, b in ipairs(snap.segments[1].blocks) do
  local owner = b.owner and (" %s %s[%s] %s"):format(b.owner, b.dtype,
                                                   table.concat(b.shape, ","), b.sharding) or ""
  say("  offset %8d  size %8d  requested %8d  %-9s%s", b.offset, b.size, b.requested_size,
      b.state, owner)
end
check(#snap.segments[1].blocks == 4, "4 blocks: array, hole, array, free rest")

-- The hole is free memory the pool still holds from the system.
local back = dev:release_unused()
say("step 5: release_unused gave %d bytes back to the system", back)
check(back == 2 * MiB, "the hole's 2 MiB given back")

-- Down to nothing, then one last small array.
live[1]:delete()
live[3]:delete()
say("step 6: deleted the rest, %d MiB in use", in_use() // MiB)
local last = dl.ones({MiB // 4}, "float32", dev)
last:block_until_ready()
say("step 7: one 1 MiB array, %d MiB in use; peak %d MiB", in_use() // MiB,
    dev:memory_stats().peak_bytes_in_use // MiB)
last:delete()
say("step 8: all gone; dl.empty_cache() gave %d bytes back", dl.empty_cache())
check(in_use() == 0, "nothing in use at the end")
