-- runs: every-platform
-- ipc-off: yes
-- devices: any
-- needs: mpi

-- Collective entry points check their arguments under the call's agreement: a check that
-- fails on one process (process 1 here) is its own error there and "<call> failed on
-- process 1: ..." on every other, and every process stays in step (a barrier and a further
-- collective then succeed). Runs on 2, 3 and 4 processes of 2 sim devices each.
local H = require "helpers"

-- Each case prints "<process>\t<case>\t<outcome>"; process 1 misuses the call.
local SCRIPT = [[
local p, n = dl.process_index(), dl.process_count()
local mesh = dl.make_mesh({n, 2}, {"x", "y"})
local function global()
  return dl.make_array_from_callback({2 * n, 2}, dl.NamedSharding(mesh, dl.P("x")),
                                     function(index)
                                       return dl.full({2, 2}, index[1][1], "int32")
                                     end)
end
local function try(case, f, ...)
  local ok, e = pcall(f, ...)
  print(p, case, ok and "ok" or tostring(e))
end
local x = global()
if p == 1 then x:delete() end
try("deleted", dl.export, x, {strategy = "gather"})
x = global()
try("option", dl.export, x, p == 1 and {strategy = "gather", bogus = 1} or {strategy = "gather"})
try("strategy", dl.export, x, {strategy = p == 1 and "gahter" or "allgather"})
try("mismatch", dl.export, x, {strategy = p == 1 and "allgather" or "gather"})
try("default strategy", dl.export, x, p == 1 and {copy = 1} or nil)
try("try_export", dl.try_export, x, p == 1 and {copy = 1} or nil)
-- Gathered onto process 1's first device, which must copy.
try("copy", dl.export, x, {strategy = "gather", copy = false, device = dl.devices()[3]})
local d = x:__partitioned__()
if p == 1 then d.shape = {2 * n + 1, 2} end
try("refused", dl.from_partitioned, d, x.sharding)
-- A replicated array on every process's first device but process 1's: process 1 holds
-- no partition and no data, and takes the dtype from the others.
local others = {}
for q = 0, n - 1 do if q ~= 1 then others[#others + 1] = dl.devices()[2 * q + 1] end end
local r = dl.make_array_from_callback({4}, dl.NamedSharding(dl.Mesh(others, {"r"}), dl.P()),
                                      function() return dl.arange(4, "int32") end, "int32")
local y = dl.from_partitioned(r:__partitioned__(), dl.NamedSharding(mesh, dl.P()))
print(p, "no partition", y.dtype, #y.addressable_shards,
      table.concat(y.addressable_shards[2].data:tolist(), ","))
try("device_put", dl.device_put, x, dl.NamedSharding(mesh, dl.P("y")),
    p == 1 and {bogus = true} or nil)
-- A tree holding global arrays: its options, and a tree of targets that is no prefix of
-- x's on process 1 alone, are checked before the first array moves.
local rows = dl.NamedSharding(mesh, dl.P("y"))
try("tree option", dl.device_put, {a = x, b = x}, rows, p == 1 and {bogus = true} or nil)
try("tree targets", dl.device_put, {a = x, b = x},
    p == 1 and {a = rows, c = rows} or {a = rows, b = rows})
try("allgather", dl.process_allgather, dl.array({p}), p == 1 and "yes" or true)
try("broadcast", dl.broadcast_one_to_all, p == 1 and {"a"} or dl.array({p}))
try("assert_equal", dl.assert_equal, dl.array({1}), p == 1 and 3 or "same")
try("sync", dl.sync_global_devices, p == 1 and 3 or "s")
dl.sync_global_devices("after")
print(p, "after", table.concat(dl.process_allgather(dl.array({p}), true):tolist(), ","))
local g = dl.export(x, {strategy = "gather"})
print(p, "gather", g.process_index, g.bytes_moved > 0 == (p == 0))]]

-- Process 1's own error for each case.
local function own_errors(n)
  local options = "strategy, device, max_version, dl_device, copy, stream, legacy_sharing, "
                  .. "legacy_knows_1_1"
  return {
    {"deleted", "export",
     ("RuntimeError: Array has been deleted with shape=int32[%d,2]."):format(2 * n)},
    {"option", "export",
     "TypeError: export: unexpected option 'bogus' (expected " .. options .. ")"},
    {"strategy", "export", 'ValueError: export: unknown strategy "gahter" (expected "auto", '
                           .. '"gather", "allgather", "replica", "host" or "shards")'},
    {"default strategy", "export",
     "TypeError: __dlpack__: copy must be a boolean or nil, got number"},
    {"try_export", "export", "TypeError: __dlpack__: copy must be a boolean or nil, got number"},
    {"copy", "export", ('ValueError: export: copy=false forbids copies, but strategy "gather" had '
                        .. 'to copy %dB to put the array on SimDevice(id=2); pass copy=nil, or use '
                        .. 'strategy "replica" or "shards"'):format(16 * n)},
    {"refused", "from_partitioned",
     ("ValueError: from_partitioned: dimension 0 (size %d) does not split into %d equal "
      .. "partitions: dlrun needs a regular grid of equal blocks"):format(2 * n + 1, n)},
    {"device_put", "device_put",
     "ValueError: device_put: unknown option 'bogus' (expected donate, may_alias)"},
    {"tree option", "device_put",
     "ValueError: device_put: unknown option 'bogus' (expected donate, may_alias)"},
    {"tree targets", "device_put",
     "ValueError: device_put: the targets must be a tree prefix of x, but the targets have x.c "
     .. "and x has no such key"},
    {"allgather", "process_allgather",
     "TypeError: process_allgather: argument 2 (tiled) must be a boolean, got string"},
    {"broadcast", "broadcast_one_to_all",
     "TypeError: broadcast_one_to_all: element [1] is a string, expected a number, a boolean "
     .. "or {re, im}"},
    {"assert_equal", "assert_equal",
     "TypeError: assert_equal: argument 2 (message) must be a string, got number"},
    {"sync", "sync_global_devices",
     "TypeError: sync_global_devices: argument 1 (name) must be a string, got number"},
  }
end

describe("a collective entry point's checks failing on one process", function()
  for _, n in ipairs {2, 3, 4} do
    it("on " .. n .. " processes: an error on every process, all of them still in step",
       function()
      local out, err, status = H.mpirun(n, SCRIPT, {args = "--devices sim:2", limit = 180,
                                                    env = {DLRUN_DISTRIBUTED_TIMEOUT = "60"}})
      assert.are.equal("", err)
      assert.are.equal(0, status)
      local want, all = {}, {}
      for p = 0, n - 1 do all[#all + 1] = tostring(p) end
      for p = 0, n - 1 do
        for _, c in ipairs(own_errors(n)) do
          local case, call, own = c[1], c[2], c[3]
          want[#want + 1] = ("%d\t%s\t%s"):format(p, case, p == 1 and own
            or ("RuntimeError: %s failed on process 1: %s"):format(call, own))
        end
        want[#want + 1] = ("%d\tmismatch\tRuntimeError: export mismatch: the strategy differs: "
                           .. "process %d has %s, process %d %s"):format(p, p,
                           p == 1 and "'allgather'" or "'gather onto SimDevice(id=0)'",
                           p == 1 and 0 or 1,
                           p == 1 and "'gather onto SimDevice(id=0)'" or "'allgather'")
        want[#want + 1] = ("%d\tno partition\tint32\t2\t0,1,2,3"):format(p)
        want[#want + 1] = ("%d\tafter\t%s"):format(p, table.concat(all, ","))
        want[#want + 1] = ("%d\tgather\t0\ttrue"):format(p)
      end
      table.sort(want)
      assert.are.same(want, H.sorted_lines(out))
    end)
  end
end)
