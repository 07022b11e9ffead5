/* luaopen_dlrun_core: the C half of `require "dlrun"`. Areas open in a fixed
 * order: errors first (every other area raises through them). */
#include "binding.h"

int luaopen_dlrun_core(lua_State *L) {
  dlrun_lua_errors_open(L);
  lua_newtable(L);
  dlrun_lua_runtime_open(L);
  dlrun_lua_device_open(L);
  dlrun_lua_sharding_open(L);
  dlrun_lua_array_open(L);
  dlrun_lua_transfer_open(L);
  dlrun_lua_dlpack_open(L);
  dlrun_lua_debug_open(L);
  lua_pushliteral(L, DLRUN_VERSION_STRING);
  lua_setfield(L, -2, "_version");
  return 1;
}
