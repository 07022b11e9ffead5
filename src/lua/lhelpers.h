/* Internal: plumbing every area of the Lua binding uses (lhelpers.c), apart
 * from the module's entry (module.c), which opens the areas. */
#ifndef DLRUN_LUA_HELPERS_H
#define DLRUN_LUA_HELPERS_H

#include <lauxlib.h>
#include <lua.h>

/* Push require(name): a Lua module of dlrun. */
void dlrun_lua_require(lua_State *L, const char *name);

/* Create the metatable `tname` with the metamethods `meta` and __name
 * `shown` (what messages call the type); leaves it on the stack. */
void dlrun_lua_new_metatable(lua_State *L, const char *tname, const char *shown,
                             const luaL_Reg *meta);

#endif
