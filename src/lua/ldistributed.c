/* Lua: this process's place in a job (dlrun/distributed.h), with JAX's
 * names: process_index, process_count, sync_global_devices. */
#include "binding.h"
#include "dlrun/distributed.h"

static int l_process_index(lua_State *L) {
  dlrun_lua_check_nargs(L, "process_index", 0);
  lua_pushinteger(L, dlrun_process_index());
  return 1;
}

static int l_process_count(lua_State *L) {
  dlrun_lua_check_nargs(L, "process_count", 0);
  lua_pushinteger(L, dlrun_process_count());
  return 1;
}

/* sync_global_devices(name): a barrier that every process calls with the
 * same name. */
static int l_sync_global_devices(lua_State *L) {
  dlrun_lua_check_nargs(L, "sync_global_devices", 1);
  if (lua_type(L, 1) != LUA_TSTRING)
    return dlrun_lua_type_error(L, "sync_global_devices", 1, "name", "a string");
  dlrun_lua_check(L, dlrun_sync_global(lua_tostring(L, 1)));
  return 0;
}

void dlrun_lua_distributed_open(lua_State *L) {
  static const luaL_Reg funcs[] = {
      {"process_index", l_process_index},
      {"process_count", l_process_count},
      {"sync_global_devices", l_sync_global_devices},
      {NULL, NULL},
  };
  luaL_setfuncs(L, funcs, 0);
}
