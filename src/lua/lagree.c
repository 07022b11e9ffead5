/* Collective entry points of the binding: their own checks of the
 * arguments join the agreement that precedes the call, so that a check
 * failing on one process is an error on every process (its own there,
 * "<call> failed on process N: ..." elsewhere) and none is left behind in a
 * collective the others skipped. */
#include <string.h>

#include "binding.h"
#include "dlrun/distributed.h"

/* The status of a dlrun error value's class ("ValueError"); RuntimeError
 * for anything else (a raw Lua error). */
static dlrun_status status_of(const char *class_name) {
  for (int s = DLRUN_OK + 1; class_name && s < DLRUN_STATUS_COUNT; s++)
    if (strcmp(dlrun_status_name((dlrun_status)s), class_name) == 0) return (dlrun_status)s;
  return DLRUN_ERR_RUNTIME;
}

/* A raw field of the table at idx, as a string, or NULL. */
static const char *raw_string(lua_State *L, int idx, const char *key) {
  lua_pushstring(L, key);
  lua_rawget(L, idx);
  const char *s = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : NULL;
  lua_pop(L, 1); /* the string stays alive in the table */
  return s;
}

int dlrun_lua_join_failed(lua_State *L, const char *call) {
  int err = lua_gettop(L);
  const char *name = NULL, *message = NULL;
  if (lua_istable(L, err)) {
    name = raw_string(L, err, "name");
    message = raw_string(L, err, "message");
  }
  if (!message) message = luaL_tolstring(L, err, NULL);
  dlrun_distributed_agree(call, NULL, NULL, status_of(name), message);
  lua_settop(L, err);
  return lua_error(L);
}

void dlrun_lua_collective_checks(lua_State *L, const char *call, lua_CFunction checks,
                                 int nresults) {
  int nargs = lua_gettop(L);
  luaL_checkstack(L, nargs + 2, "no room on the Lua stack");
  lua_pushcfunction(L, checks);
  for (int i = 1; i <= nargs; i++) lua_pushvalue(L, i);
  if (lua_pcall(L, nargs, nresults, 0) != LUA_OK) dlrun_lua_join_failed(L, call);
}

/* dl._agree(call, err [, what, value]): join the agreement of `call`; err
 * (an error value, or nil) is this process's failed check, raised here
 * after joining. Every process passes the same value (a string, compared;
 * `what` names it). */
static int l_agree(lua_State *L) {
  const char *call = luaL_checkstring(L, 1);
  if (!lua_isnoneornil(L, 2)) {
    lua_settop(L, 2);
    return dlrun_lua_join_failed(L, call);
  }
  const char *what = luaL_optstring(L, 3, NULL);
  const char *value = luaL_optstring(L, 4, NULL);
  dlrun_lua_check(L, dlrun_distributed_agree(call, what, value, DLRUN_OK, NULL));
  return 0;
}

void dlrun_lua_agree_open(lua_State *L) {
  lua_pushcfunction(L, l_agree);
  lua_setfield(L, -2, "_agree");
}
