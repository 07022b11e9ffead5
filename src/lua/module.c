/* The module's entries: luaopen_dlrun_core, the C half of `require "dlrun"`
 * (areas open in a fixed order: errors first, every other area raises
 * through them), and dlrun_lua_open, a host's way in with its runtime. */
#include <limits.h>
#include <stdlib.h>

#include "binding.h"

int luaopen_dlrun_core(lua_State *L) {
  dlrun_lua_errors_open(L);
  dlrun_lua_printing_open(L);
  /* DLRUN_TRACE: plain lua5.4 and hosts trace as `dlrun` does, never
   * into the script that is running. */
  const char *env = getenv("DLRUN_TRACE");
  char path[PATH_MAX];
  if (env && *env && !dlrun_trace_is_on() &&
      dlrun_trace_process_path(env, path, sizeof path) == DLRUN_OK)
    dlrun_lua_check_trace_path(L, "DLRUN_TRACE", path);
  dlrun_lua_check(L, dlrun_trace_start_from_env());
  lua_newtable(L);
  dlrun_lua_runtime_open(L);
  dlrun_lua_device_open(L);
  dlrun_lua_sharding_open(L);
  dlrun_lua_array_open(L);
  dlrun_lua_transfer_open(L);
  dlrun_lua_dlpack_open(L);
  dlrun_lua_partitioned_open(L);
  dlrun_lua_debug_open(L);
  dlrun_lua_profile_open(L);
  dlrun_lua_distributed_open(L);
  dlrun_lua_agree_open(L);
  lua_pushliteral(L, DLRUN_VERSION_STRING);
  lua_setfield(L, -2, "_version");
  return 1;
}

int dlrun_lua_open(lua_State *L, dlrun_runtime *rt) {
  dlrun_lua_bind_host_runtime(L, rt);
  luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_PRELOAD_TABLE);
  lua_pushcfunction(L, luaopen_dlrun_core);
  lua_setfield(L, -2, "dlrun.core");
  lua_pop(L, 1);
  dlrun_lua_require(L, "dlrun");
  return 1;
}
