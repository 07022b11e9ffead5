/* Test hooks from Lua: dl._debug.fail_alloc("host" | "pool", k),
 * dl._debug.alloc_count(kind), dl._debug.alloc_failed(kind),
 * dl._debug.inject_failure(device, "copy" | "fill", count). For dlrun's own
 * failure tests; see include/dlrun/debug.h. */
#include <stdint.h>
#include <string.h>

#include "binding.h"

static dlrun_alloc_kind check_kind(lua_State *L, const char *fn) {
  const char *k = lua_tostring(L, 1);
  if (k && strcmp(k, "host") == 0) return DLRUN_ALLOC_HOST;
  if (k && strcmp(k, "pool") == 0) return DLRUN_ALLOC_POOL;
  dlrun_lua_type_error(L, fn, 1, "kind", "\"host\" or \"pool\"");
  return DLRUN_ALLOC_HOST;
}

static int l_fail_alloc(lua_State *L) {
  dlrun_alloc_kind kind = check_kind(L, "fail_alloc");
  if (!lua_isinteger(L, 2)) return dlrun_lua_type_error(L, "fail_alloc", 2, "k", "an integer");
  dlrun_debug_fail_alloc(kind, lua_tointeger(L, 2));
  return 0;
}

static int l_alloc_count(lua_State *L) {
  lua_pushinteger(L, dlrun_debug_alloc_count(check_kind(L, "alloc_count")));
  return 1;
}

static int l_alloc_failed(lua_State *L) {
  lua_pushboolean(L, dlrun_debug_alloc_failed(check_kind(L, "alloc_failed")));
  return 1;
}

static int l_inject_failure(lua_State *L) {
  dlrun_device *dev = dlrun_lua_test_device(L, 1);
  if (!dev) return dlrun_lua_type_error(L, "inject_failure", 1, "device", "a Device");
  if (lua_type(L, 2) != LUA_TSTRING)
    return dlrun_lua_type_error(L, "inject_failure", 2, "what", "a string");
  const char *what = dlrun_lua_check_cstring(L, 2, "inject_failure", "what");
  if (!lua_isinteger(L, 3) || lua_tointeger(L, 3) < 0 || lua_tointeger(L, 3) > UINT32_MAX)
    return dlrun_lua_type_error(L, "inject_failure", 3, "count", "a non-negative integer");
  dlrun_lua_check(L, dlrun_debug_inject_failure(dev, what, (unsigned)lua_tointeger(L, 3)));
  return 0;
}

void dlrun_lua_debug_open(lua_State *L) {
  static const luaL_Reg funcs[] = {
      {"fail_alloc", l_fail_alloc},
      {"alloc_count", l_alloc_count},
      {"alloc_failed", l_alloc_failed},
      {"inject_failure", l_inject_failure},
      {NULL, NULL},
  };
  luaL_newlib(L, funcs);
  lua_setfield(L, -2, "_debug");
}
