/* The one order in which trees' keys are walked.
 *
 * lua_next's order depends on a hash seed of each Lua state, so it differs
 * from process to process (and from run to run); a walk that puts global
 * arrays, each put a collective, must visit them in the same order
 * everywhere. JAX sorts a dict's keys; dlrun orders a table's keys as:
 * numbers by value, then strings byte-wise, then false and true, then
 * Devices by id. Keys of other types have no order that every process
 * shares. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "binding.h"

enum { RANK_NUMBER, RANK_STRING, RANK_BOOLEAN, RANK_DEVICE, RANK_NONE };

typedef struct tree_key {
  int rank;
  int is_int;
  lua_Integer i; /* an integer, a boolean, a Device's id */
  lua_Number x;  /* a float */
  const char *s; /* a string, anchored by the table that holds it; a type name */
  size_t len;
  lua_Integer slot; /* where the key is kept while sorting */
} tree_key;

static tree_key key_of(lua_State *L, int idx) {
  tree_key k = {.rank = RANK_NONE};
  dlrun_device *dev;
  switch (lua_type(L, idx)) {
  case LUA_TNUMBER:
    k.rank = RANK_NUMBER;
    k.is_int = lua_isinteger(L, idx);
    if (k.is_int) k.i = lua_tointeger(L, idx);
    else k.x = lua_tonumber(L, idx);
    break;
  case LUA_TSTRING:
    k.rank = RANK_STRING;
    k.s = lua_tolstring(L, idx, &k.len);
    break;
  case LUA_TBOOLEAN:
    k.rank = RANK_BOOLEAN;
    k.i = lua_toboolean(L, idx);
    break;
  case LUA_TUSERDATA:
    if ((dev = dlrun_lua_test_device(L, idx))) {
      k.rank = RANK_DEVICE;
      k.i = dlrun_device_id(dev);
    }
    break;
  default: break;
  }
  if (k.rank == RANK_NONE) { /* ordered by type name alone, for messages */
    k.s = luaL_typename(L, idx);
    k.len = strlen(k.s);
  }
  return k;
}

static int sign(lua_Integer a, lua_Integer b) { return (a > b) - (a < b); }

/* The sign of i - x, exactly. A float key is never integral within the
 * integers' range (Lua stores such keys as integers). */
static int compare_int_float(lua_Integer i, lua_Number x) {
  if (x >= 0x1p63) return -1;
  if (x < -0x1p63) return 1;
  lua_Number f = floor(x);
  int s = sign(i, (lua_Integer)f);
  return s ? s : (x > f ? -1 : 0);
}

static int compare_numbers(const tree_key *a, const tree_key *b) {
  if (a->is_int && b->is_int) return sign(a->i, b->i);
  if (a->is_int) return compare_int_float(a->i, b->x);
  if (b->is_int) return -compare_int_float(b->i, a->x);
  return (a->x > b->x) - (a->x < b->x);
}

static int compare_keys(const void *pa, const void *pb) {
  const tree_key *a = pa, *b = pb;
  if (a->rank != b->rank) return a->rank < b->rank ? -1 : 1;
  switch (a->rank) {
  case RANK_NUMBER: return compare_numbers(a, b);
  case RANK_STRING:
  case RANK_NONE: {
    int c = memcmp(a->s, b->s, a->len < b->len ? a->len : b->len);
    return c ? (c > 0) - (c < 0) : (a->len > b->len) - (a->len < b->len);
  }
  default: return sign(a->i, b->i);
  }
}

int dlrun_lua_key_less(lua_State *L, int a, int b) {
  tree_key ka = key_of(L, a), kb = key_of(L, b);
  return compare_keys(&ka, &kb) < 0;
}

const char *dlrun_lua_key_text(lua_State *L, int idx, char *buf, size_t n) {
  switch (lua_type(L, idx)) {
  case LUA_TSTRING: {
    size_t len;
    const char *s = lua_tolstring(L, idx, &len);
    snprintf(buf, n, "the key \"%.40s%s\"", s, len > 40 ? "..." : "");
    break;
  }
  case LUA_TNUMBER:
    if (lua_isinteger(L, idx)) snprintf(buf, n, "the key %lld", (long long)lua_tointeger(L, idx));
    else snprintf(buf, n, "the key %.14g", (double)lua_tonumber(L, idx));
    break;
  case LUA_TBOOLEAN:
    snprintf(buf, n, "the key %s", lua_toboolean(L, idx) ? "true" : "false");
    break;
  default: snprintf(buf, n, "a key of type %s", dlrun_lua_typename(L, idx)); break;
  }
  return buf;
}

lua_Integer dlrun_lua_count_keys(lua_State *L, int idx) {
  idx = lua_absindex(L, idx);
  lua_Integer n = 0;
  lua_pushnil(L);
  while (lua_next(L, idx)) {
    lua_pop(L, 1);
    n++;
  }
  return n;
}

lua_Integer dlrun_lua_push_tree_keys(lua_State *L, int idx, const char *fn) {
  idx = lua_absindex(L, idx);
  luaL_checkstack(L, 6, "no room on the Lua stack for a tree's keys");
  lua_Integer n = dlrun_lua_count_keys(L, idx);
  lua_createtable(L, n < (1 << 26) ? (int)n : 0, 0);
  int found = lua_gettop(L);
  tree_key *keys = lua_newuserdatauv(L, (size_t)n * sizeof *keys + 1, 0);
  lua_Integer i = 0;
  lua_pushnil(L);
  while (lua_next(L, idx)) {
    lua_pop(L, 1);
    keys[i] = key_of(L, -1);
    keys[i].slot = i + 1;
    lua_pushvalue(L, -1);
    lua_rawseti(L, found, ++i);
  }
  qsort(keys, (size_t)i, sizeof *keys, compare_keys);
  lua_Integer first_other = i;
  while (first_other > 0 && keys[first_other - 1].rank == RANK_NONE) first_other--;
  if (first_other < i) { /* the same message on every process: the least such key */
    char key[160];
    lua_rawgeti(L, found, keys[first_other].slot);
    dlrun_lua_raise(L, "TypeError",
                    "%s: a tree's keys must be numbers, strings, booleans or Devices (every "
                    "process walks a tree in one order), got %s",
                    fn, dlrun_lua_key_text(L, -1, key, sizeof key));
  }
  lua_createtable(L, (int)(i < (1 << 26) ? i : 0), 0);
  for (lua_Integer j = 0; j < i; j++) {
    lua_rawgeti(L, found, keys[j].slot);
    lua_rawseti(L, -2, j + 1);
  }
  lua_replace(L, found);
  lua_settop(L, found);
  return i;
}
