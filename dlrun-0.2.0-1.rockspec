-- The dlrun Lua module for LuaRocks. From a checkout, with no network:
--   luarocks --lua-version 5.4 make --tree DIR
-- builds the module alone with the Makefile (its lua-module target, LuaRocks'
-- compiler flags, out of tree in build-rock/) and installs it into DIR.
-- The version is the one of include/dlrun/dlrun.h (spec/install_spec.lua checks).
rockspec_format = "3.0"
package = "dlrun"
version = "0.2.0-1"
source = {
  -- No archive is published: `luarocks make` builds the checkout it runs in.
  url = "git+file://.",
}
description = {
  summary = "Arrays spread over many devices, handed to other libraries through DLPack",
  detailed = [[
A Lua-scriptable runtime, written in C, for arrays spread over many devices
(host memory and simulated accelerators), with JAX's names: device_put,
NamedSharding, BufferError, and DLPack export and import.]],
}
dependencies = {
  "lua >= 5.4, < 5.5",
}
external_dependencies = {
  DLPACK = { header = "dlpack/dlpack.h" },
}
build = {
  type = "make",
  build_target = "lua-module",
  build_variables = {
    BUILD = "build-rock",
    CC = "$(CC)",
    CFLAGS = "$(CFLAGS)",
    OPT = "",
    LIBFLAG = "$(LIBFLAG)",
    LUA_INC = "$(LUA_INCDIR)",
    DLPACK_CFLAGS = "-I$(DLPACK_INCDIR)",
  },
  install_target = "install-lua-module",
  install_variables = {
    BUILD = "build-rock",
    LUADIR = "$(LUADIR)",
    LIBDIR = "$(LIBDIR)",
  },
}
