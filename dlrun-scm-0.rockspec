-- The dlrun Lua module for LuaRocks, from a checkout, with no network:
--   luarocks --lua-version 5.4 make --tree DIR   build the module, install it into DIR
--   luarocks --lua-version 5.4 test [-- ARGS]    the busted specs (scripts/busted.sh)
--   make rock                                    a source rock of this version
-- `luarocks make` builds the module alone with the Makefile (its lua-module
-- target, LuaRocks' compiler flags, out of tree in build-rock/). `make rock`
-- writes dlrun-VERSION-1.rockspec from this one (VERSION: the one of
-- include/dlrun/dlrun.h) with a release archive of the checkout as its
-- source, and packs both with `luarocks pack` (README, "Install").
rockspec_format = "3.0"
package = "dlrun"
version = "scm-0"
source = {
  -- This checkout: `luarocks make` builds the folder it runs in. (`luarocks
  -- pack` fetches the source from a temporary folder, where no relative
  -- path leads back here: `make rock` packs instead.)
  url = "git+file://.",
}
description = {
  summary = "Arrays spread over many devices, handed to other libraries through DLPack",
  detailed = [[
A Lua-scriptable runtime, written in C, for arrays spread over many devices
(host memory and simulated accelerators), with JAX's names: device_put,
NamedSharding, BufferError, and DLPack export and import.]],
  -- No project page is published yet: the README is the documentation.
  license = "MIT",
  labels = { "array", "dlpack", "jax", "mpi" },
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
-- The busted specs against the build (make all first), offline: busted as
-- the system has it (Debian: lua-busted), never a rock fetched for the test.
test = {
  type = "command",
  command = "scripts/busted.sh",
}
