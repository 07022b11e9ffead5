-- The pipeline that examples/host/embed.c runs: shard arrays over the host's
-- eight simulated devices, move them around, and hand them to the host
-- through DLPack. The host sets two globals: `dl` (dlrun, bound to the
-- host's own runtime) and `consume(capsule, name, first, step)`, which takes
-- the tensor out of the capsule, checks that element i (row-major) is
-- first + i*step, calls the tensor's deleter and returns how many values it
-- checked.
local dl = assert(rawget(_G, "dl"), "run this script with build/examples/embed")
local consume = assert(rawget(_G, "consume"), "run this script with build/examples/embed")

local function say(fmt, ...) io.write(fmt:format(...), "\n") end

-- Transfer statistics since the last call: bytes moved between devices,
-- bytes copied within one device.
local function stats() return dl.transfer_stats{reset = true} end
local function moved() return stats().bytes_moved end

local function where(capsule)
  local d = capsule.device
  return ("device {%d, %d}"):format(d[1], d[2])
end

say("The host gave us %s: %d simulated devices and a host cpu.", dl.device_spec(),
    dl.device_count("sim"))
dl.reset_transfer_stats()

local mesh = dl.make_mesh({8}, {"x"})
local x = dl.arange(0, 1024, 1, "float32", dl.NamedSharding(mesh, dl.P("x")))
say("Made x = arange(1024) as %s, split into %d shards of %d values, one per device "
    .. "(%d bytes moved: each device filled its own shard).", x.dtype, #x.addressable_shards,
    x.addressable_shards[1].data.size, moved())

-- (a) Gather x onto one device and hand over a versioned tensor.
local sim0 = dl.devices("sim")[1]
local gathered = dl.device_put(x, sim0)
say("(a) Gathered x onto %s: %d bytes moved (the other 7 shards came over).", tostring(sim0),
    moved())
local capsule = gathered:__dlpack__{max_version = {1, 0}}
say("    Exported it as a %s on %s (kDLExtDev: sim memory).", capsule.name, where(capsule))
local n = consume(capsule, "gathered", 0, 1)
say("    The host checked %d values; the capsule is now %s.", n, capsule.name)

-- (b) Hand the gathered array to the host's cpu: the export makes a host copy.
capsule = gathered:__dlpack__{dl_device = {1, 0}}
say("(b) Exported the gathered array to the host as a %s on %s.", capsule.name, where(capsule))
n = consume(capsule, "host", 0, 1)
say("    The host checked %d values (%d bytes moved to the host).", n, moved())

-- (c) No gather at all: each shard goes over as it is, without a copy.
local total = 0
for i, shard in ipairs(x.addressable_shards) do
  local first = shard.index[1][1] - 1 -- indices are 1-based, values 0-based
  capsule = shard.data:__dlpack__()
  total = total + consume(capsule, ("shard%d"):format(i - 1), first, 1)
end
say("(c) Handed over the %d shards one by one from their own devices: %d values checked, "
    .. "%d bytes moved.", #x.addressable_shards, total, moved())

-- (d) A 2-D array: rows sharded, then resharded to columns, then gathered.
local rows, cols = 64, 32
local bytes = {}
for i = 0, rows * cols - 1 do bytes[#bytes + 1] = string.pack("<i4", 5 + 3 * i) end
local m = dl.frombytes(table.concat(bytes), {rows, cols}, "int32",
                       dl.NamedSharding(mesh, dl.P("x", nil)))
moved()
local by_cols = dl.device_put(m, dl.NamedSharding(mesh, dl.P(nil, "x")))
local s = stats()
say("(d) Made a %dx%d int32 matrix sharded by rows and resharded it by columns: "
    .. "%d bytes moved between devices, %d of %d bytes stayed on their device.", rows, cols,
    s.bytes_moved, s.local_bytes, m.nbytes)
local m0 = dl.device_put(by_cols, sim0)
say("    Gathered the columns onto %s: %d bytes moved.", tostring(sim0), moved())
n = consume(m0:__dlpack__{max_version = {1, 1}}, "matrix", 5, 3)
say("    The host checked %d values, row by row.", n)

-- (e) A replicated float64 array: any replica will do.
local r = dl.arange(0, 32, 0.5, "float64", dl.NamedSharding(mesh, dl.P()))
local last = r.addressable_shards[#r.addressable_shards]
n = consume(last.data:__dlpack__(), "replica", 0, 0.5)
say("(e) Handed over the replica of a float64 array held by %s: %d values checked.",
    tostring(last.device), n)

say("Exports still alive in the script: %d.", dl.live_exports())
