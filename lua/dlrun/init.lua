-- `local dl = require "dlrun"`: the dlrun Lua API (see README and docs/).
-- The C module provides the core; this facade adds the error classes.
local core = require "dlrun.core"
local errors = require "dlrun.errors"
local spec = require "dlrun.spec"

local dl = {}
for k, v in pairs(core) do dl[k] = v end
for _, name in ipairs {"Error", "BufferError", "ValueError", "IndivisibleError",
                       "DuplicateSpecError", "TypeError", "RuntimeError",
                       "ResourceExhaustedError", "AssertionError", "AttributeError"} do
  dl[name] = errors[name]
end
dl.__version__ = core._version

local visualize = require "dlrun.visualize"
visualize.stdout_is_terminal = core._stdout_is_terminal
visualize.is_array = core._is_array
dl.visualize_sharding = visualize.visualize_sharding
dl.P = spec.P -- the C module prints them and tells them apart by their metatable
dl.PartitionSpec = spec.P
require("dlrun.export")(dl) -- ensure_single_device, is_dlpack_exportable, export, try_export
require("dlrun.partitioned")(dl) -- from_partitioned
dl._is_array = nil
dl._stdout_is_terminal = nil

return dl
