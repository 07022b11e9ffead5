/* The one place where dlrun statuses become Lua error values. Error classes
 * live in lua/dlrun/errors.lua; its `new` is kept in the registry. */
#include <stdarg.h>
#include <stdio.h>

#include "binding.h"

#define ERRORS_KEY "dlrun.errors.new"

void dlrun_lua_errors_open(lua_State *L) {
  lua_getglobal(L, "require");
  lua_pushliteral(L, "dlrun.errors");
  lua_call(L, 1, 1);
  lua_getfield(L, -1, "new");
  lua_setfield(L, LUA_REGISTRYINDEX, ERRORS_KEY);
  lua_pop(L, 1);
}

static int raise_message(lua_State *L, const char *class_name, const char *message) {
  lua_getfield(L, LUA_REGISTRYINDEX, ERRORS_KEY);
  lua_pushstring(L, class_name);
  lua_pushstring(L, message);
  lua_call(L, 2, 1);
  return lua_error(L);
}

void dlrun_lua_check(lua_State *L, dlrun_status status) {
  if (status == DLRUN_OK) return;
  raise_message(L, dlrun_status_name(status), dlrun_last_error());
}

int dlrun_lua_raise(lua_State *L, const char *class_name, const char *fmt, ...) {
  char message[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(message, sizeof message, fmt, ap);
  va_end(ap);
  return raise_message(L, class_name, message);
}

int dlrun_lua_type_error(lua_State *L, const char *fn, int arg, const char *what,
                         const char *expected) {
  const char *got = luaL_typename(L, arg);
  if (luaL_getmetafield(L, arg, "__name") == LUA_TSTRING) got = lua_tostring(L, -1);
  return dlrun_lua_raise(L, "TypeError", "%s: argument %d (%s) must be %s, got %s", fn, arg,
                         what, expected, got);
}
