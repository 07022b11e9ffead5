-- runs: once
-- ipc-off: no
-- devices: any
-- needs: mpi

-- Numbers that add up between processes (docs/lua-api.md, "Tracing and stats"): after
-- a reshard under mpirun, each device's bytes_moved_in and bytes_moved_out
-- (dl.stats(), --stats) count what it received from and sent to other
-- processes too, so that summed over the job each equals the processes'
-- transfer_stats().bytes_moved; and the trace names the source of a piece
-- from another process as that process's device, with "src_process". Every
-- job runs with the one-copy path on (a pull: a "copy" event) and off (an
-- MPI message: a "receive" event).
local H = require "helpers"
local mpirun, sorted_lines = H.mpirun, H.sorted_lines

local R, C = 8, 12 -- rows per device, columns (divisible by 4 and 6 devices)

-- x: float32 [2 n R, C] rows over every device, made in place (no moves);
-- the job then reshards it to columns.
local SETUP = ([[
local R, C = %d, %d
local p, n = dl.process_index(), dl.process_count()
local mesh = dl.make_mesh({2 * n}, {"x"})
local rows = dl.NamedSharding(mesh, dl.P("x", nil))
local cols = dl.NamedSharding(mesh, dl.P(nil, "x"))
local x = dl.zeros({2 * n * R, C}, "float32", rows):block_until_ready()
]]):format(R, C)

-- The bytes of one piece: a device's rows of another's columns.
local function piece(n) return R * (C // (2 * n)) * 4 end

local function run(n, devices, mode, code, args)
  return mpirun(n, SETUP .. code, {args = "--devices " .. devices .. (args or ""), limit = 120,
                                   env = {DLRUN_DISTRIBUTED_IPC = mode,
                                          DLRUN_DISTRIBUTED_TIMEOUT = "60"}})
end

local CLASS = {["sim:2"] = "SimDevice", ["cpu:2"] = "CpuDevice"}

-- The rows dl.stats() has on process p: its two mesh devices, and on sim
-- the host cpu device.
local function stat_rows(devices, p)
  local class = CLASS[devices]
  local t = {("%s(id=%d)"):format(class, 2 * p), ("%s(id=%d)"):format(class, 2 * p + 1)}
  if devices == "sim:2" then t[3] = ("CpuDevice(id=%d)"):format(p) end
  return t
end

describe("bytes moved between processes, per device", function()
  for _, n in ipairs {2, 3} do
    for _, devices in ipairs {"sim:2", "cpu:2"} do
      for _, mode in ipairs {"auto", "off"} do
        it(("on %d processes on %s (DLRUN_DISTRIBUTED_IPC=%s): every device counts the bytes it "
            .. "received and sent; summed over the job they equal bytes_moved"):format(n, devices,
                                                                                      mode),
           function()
          local out, err, status = run(n, devices, mode, [[
local function counts()
  local t = {}
  for _, d in ipairs(dl.stats().devices) do
    t[#t + 1] = {tostring(d.device), d.bytes_moved_in, d.bytes_moved_out}
  end
  return t
end
local before = counts()
dl.transfer_stats{reset = true}
dl.device_put(x, cols):block_until_ready()
for i, row in ipairs(counts()) do
  print(p, row[1], row[2] - before[i][2], row[3] - before[i][3])
end
print(p, "bytes_moved", dl.transfer_stats().bytes_moved)]])
          assert.are.equal("", err)
          assert.are.equal(0, status)
          -- Each device keeps its own piece (no move) and receives, and
          -- sends, one piece from, and to, each of the 2 n - 1 others.
          local b = (2 * n - 1) * piece(n)
          local want = {}
          for p = 0, n - 1 do
            for k, name in ipairs(stat_rows(devices, p)) do
              local moved = k <= 2 and b or 0
              want[#want + 1] = ("%d\t%s\t%d\t%d"):format(p, name, moved, moved)
            end
            want[#want + 1] = ("%d\tbytes_moved\t%d"):format(p, 2 * b)
          end
          table.sort(want)
          local got = sorted_lines(out)
          assert.are.same(want, got)
          local ins, outs, moved = 0, 0, 0
          for _, line in ipairs(got) do
            local i, o = line:match("^%d+\t%S+\t(%d+)\t(%d+)$")
            if i then ins, outs = ins + i, outs + o end
            moved = moved + (tonumber(line:match("\tbytes_moved\t(%d+)$")) or 0)
          end
          assert.are.same({2 * n * b, 2 * n * b}, {ins, outs})
          assert.are.equal(moved, ins)
        end)
      end
    end
  end

  for _, mode in ipairs {"auto", "off"} do
    it(("--stats shows the same counts on every process (DLRUN_DISTRIBUTED_IPC=%s)"):format(mode),
       function()
      local _, err, status = run(2, "sim:2", mode, "dl.device_put(x, cols):block_until_ready()",
                                 " --stats")
      assert.are.equal(0, status)
      local got = {}
      -- name, in use, peak, moved in, moved out, ...
      local row = "\n(SimDevice%(id=%d%))%s+%S+%s+%S+%s+(%S+)%s+(%S+)"
      for name, moved_in, moved_out in err:gmatch(row) do
        got[#got + 1] = table.concat({name, moved_in, moved_out}, " ")
      end
      local b = ("%dB"):format(3 * piece(2)) -- 288 bytes
      assert.are.same({"SimDevice(id=0) " .. b .. " " .. b, "SimDevice(id=1) " .. b .. " " .. b,
                       "SimDevice(id=2) " .. b .. " " .. b, "SimDevice(id=3) " .. b .. " " .. b},
                      got, err)
    end)
  end
end)

describe("the trace of a reshard between processes", function()
  for _, n in ipairs {2, 3} do
    for _, devices in ipairs {"sim:2", "cpu:2"} do
      for _, mode in ipairs {"auto", "off"} do
        local how = mode == "auto" and "copy" or "receive"
        it(("on %d processes on %s (DLRUN_DISTRIBUTED_IPC=%s): a piece from another process is "
            .. "a %q event naming that process's device and its process"):format(n, devices,
                                                                                mode, how),
           function()
          local base = os.tmpname()
          local _, err, status = run(n, devices, mode, ([[
dl.trace_start(%q)
dl.device_put(x, cols):block_until_ready()
dl.trace_stop()]]):format(base .. ".json"))
          assert.are.equal("", err)
          assert.are.equal(0, status)
          local class, b = CLASS[devices], piece(n)
          local function dev(id) return ("%s(id=%d)"):format(class, id) end
          for p = 0, n - 1 do
            local want = {}
            for d = 2 * p, 2 * p + 1 do
              -- its own piece (a layout change), its neighbour's, then the
              -- other processes' devices'
              want[#want + 1] = ("copy %s - %s %d"):format(dev(d), dev(d), b)
              want[#want + 1] = ("copy %s - %s %d"):format(dev(d ~ 1), dev(d), b)
              for s = 0, 2 * n - 1 do
                if s // 2 ~= p then
                  want[#want + 1] = ("%s %s %d %s %d"):format(how, dev(s), s // 2, dev(d), b)
                end
              end
            end
            table.sort(want)
            local path = ("%s.%d.json"):format(base, p)
            local got = H.trace_transfers(path)
            os.remove(path)
            assert.are.same(want, got)
          end
          os.remove(base)
        end)
      end
    end
  end
end)
