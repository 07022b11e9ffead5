-- runs: once
-- ipc-off: no
-- devices: any
-- needs: none

-- Streaming stores (README, "Devices and memory"): a call that writes
-- DLRUN_STREAM_BYTES or more on a process copies its long rows with
-- non-temporal stores, around the caches. The bytes must come out as they do
-- without; a bad setting is refused before the script runs.
local helpers = require "helpers"

-- Reshards of raw bytes between rows, columns, replicas and one device, in
-- dtypes of 1 to 16 bytes (and packed int4), with rows of each destination
-- just under, at and over 256 bytes (the shortest that streams) and long:
-- prints one line per dtype, whether every result's bytes are the source's.
local RESHARDS = [[
local dl = require "dlrun"
local mesh = dl.make_mesh({4}, {"x"})
local rows = dl.NamedSharding(mesh, dl.P("x", nil))
local cols = dl.NamedSharding(mesh, dl.P(nil, "x"))
local all = dl.NamedSharding(mesh, dl.P())
local one = dl.local_devices()[1]
for _, t in ipairs {{"int8", 1}, {"bfloat16", 2}, {"float32", 4}, {"float64", 8},
                    {"complex128", 16}, {"int4", 0.5}} do
  local same = true
  for _, width in ipairs {255, 256, 257, 4099} do
    local cols_n = 4 * math.ceil(width / t[2] / 2) * 2 -- whole bytes per column shard
    local n = 12 * cols_n
    local parts = {}
    for i = 1, math.ceil(n * t[2]) do parts[i] = string.char((i * 131 + i // 7) % 256) end
    local s = table.concat(parts)
    local x = dl.frombytes(s, {12, cols_n}, t[1], rows)
    local y = dl.device_put(x, cols)
    for _, z in ipairs {y, dl.device_put(y, rows), dl.device_put(y, all), dl.device_put(x, one)} do
      same = same and z:tobytes() == s
    end
  end
  print(t[1], same)
end
]]

describe("DLRUN_STREAM_BYTES", function()
  it("refuses a bad value before the script runs, naming it", function()
    for _, bad in ipairs {"0", "lots", "-1", "16 MiBs", "1.5x", "0.5"} do
      local out, err, code = helpers.run_code('print("ran")', nil, {DLRUN_STREAM_BYTES = bad})
      assert.are.equal("", out)
      assert.are.equal(1, code)
      assert.are.equal(('dlrun: ValueError: DLRUN_STREAM_BYTES="%s" is not auto, off or a size '
                        .. '(a positive number with an optional unit: B, KiB, MiB, GiB, TiB, '
                        .. 'kB, MB, GB, TB; e.g. "16MiB")\n'):format(bad), err)
    end
  end)

  for _, setting in ipairs {"1", "1KiB", "off", "auto"} do
    it(("=%s: reshards move every dtype's bytes unchanged, rows of every width"):format(setting),
       function()
      for _, devices in ipairs {"sim:4", "cpu:4"} do
        local out, err, code = helpers.run_code(RESHARDS, {"--devices", devices},
                                                {DLRUN_STREAM_BYTES = setting})
        assert.are.equal("", err)
        assert.are.equal(0, code)
        assert.are.equal("int8\ttrue\nbfloat16\ttrue\nfloat32\ttrue\nfloat64\ttrue\n"
                         .. "complex128\ttrue\nint4\ttrue\n", out)
      end
    end)
  end
end)
