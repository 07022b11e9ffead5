/* Printed forms of dlrun's table results (lua/dlrun/printing.lua): each
 * result gets a metatable with __tostring and __name only (a Shard's also
 * refuses unknown fields), so code that indexes, counts or iterates the
 * table sees what it saw before. */
#include "binding.h"

#define PRINTING_KEY "dlrun.printing"
#define PRINTED_MARK "__dlrun_printed"

void dlrun_lua_printing_open(lua_State *L) {
  dlrun_lua_require(L, "dlrun.printing");
  lua_setfield(L, LUA_REGISTRYINDEX, PRINTING_KEY);
}

void dlrun_lua_set_printed(lua_State *L, const char *form) {
  lua_getfield(L, LUA_REGISTRYINDEX, PRINTING_KEY);
  lua_getfield(L, -1, form);
  lua_setmetatable(L, -3);
  lua_pop(L, 1);
}

void dlrun_lua_set_ordered(lua_State *L, int keys_idx) {
  keys_idx = lua_absindex(L, keys_idx);
  lua_getfield(L, LUA_REGISTRYINDEX, PRINTING_KEY);
  lua_getfield(L, -1, "ordered");
  lua_pushvalue(L, -3);
  lua_pushvalue(L, keys_idx);
  lua_call(L, 2, 0);
  lua_pop(L, 1);
}

int dlrun_lua_is_printed(lua_State *L, int idx) {
  if (!lua_getmetatable(L, idx)) return 0;
  lua_pushliteral(L, PRINTED_MARK);
  int is = lua_rawget(L, -2) == LUA_TBOOLEAN && lua_toboolean(L, -1);
  lua_pop(L, 2);
  return is;
}

/* A table whose metatable only gives it a printed form (x.shape, a
 * Shard) is plain too. */
int dlrun_lua_is_plain_table(lua_State *L, int idx) {
  if (!lua_istable(L, idx)) return 0;
  if (!lua_getmetatable(L, idx)) return 1;
  lua_pop(L, 1);
  return dlrun_lua_is_printed(L, idx);
}
