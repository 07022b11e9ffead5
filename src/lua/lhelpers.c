/* Plumbing every area of the binding uses (lhelpers.h). */
#include "lhelpers.h"

void dlrun_lua_require(lua_State *L, const char *name) {
  lua_getglobal(L, "require");
  lua_pushstring(L, name);
  lua_call(L, 1, 1);
}

void dlrun_lua_new_metatable(lua_State *L, const char *tname, const char *shown,
                             const luaL_Reg *meta) {
  luaL_newmetatable(L, tname);
  luaL_setfuncs(L, meta, 0);
  lua_pushstring(L, shown);
  lua_setfield(L, -2, "__name");
}
