/* Mapping over trees of Lua tables (dl.device_put, dl.device_get).
 *
 * A tree is a plain table (no metatable) from which an Array can be reached
 * through plain tables, or, for device_put, one that is not array data (a
 * key other than 1..n: a dict, in JAX's words). The walk is iterative, so
 * any depth works, and it is faithful to the graph the user built: every
 * table and every leaf object maps once, so a subtree shared by two parents
 * stays shared and a cycle (`model.self = model`) stays a cycle in the
 * result. It maps leaves in one order on every process (lkeys.c), since
 * putting a global array is a collective. */
#include "binding.h"

static int is_plain_table(lua_State *L, int idx) { return dlrun_lua_is_plain_table(L, idx); }

/* Slots of the work tables, relative to the walk's base. */
enum {
  W_TABLES = 1, /* position -> table, in discovery order */
  W_NUMBER,     /* table -> position */
  W_PARENTS,    /* position -> the position (or a list of them) of tables holding it */
  W_MARKED,     /* position -> true once it is a tree (maps to a new table) */
  W_QUEUE,      /* positions still to propagate "is a tree" from, then to map */
  W_RESULT,     /* position -> the result table */
  W_MEMO,       /* leaf object (table or userdata) -> its mapped value */
  W_COUNT = W_MEMO
};

#define SLOT(base, w) ((base) + (w))

/* Record that the table at position `parent` holds the one at `child`. Most
 * tables have one parent, kept as a number; a list is made for a second. */
static void add_parent(lua_State *L, int parents, lua_Integer child, lua_Integer parent) {
  int t = lua_rawgeti(L, parents, child);
  if (t == LUA_TNIL) {
    lua_pushinteger(L, parent);
    lua_rawseti(L, parents, child);
  } else {
    if (t == LUA_TNUMBER) {
      lua_createtable(L, 2, 0);
      lua_insert(L, -2);
      lua_rawseti(L, -2, 1);
      lua_pushvalue(L, -1);
      lua_rawseti(L, parents, child);
    }
    lua_pushinteger(L, parent);
    lua_rawseti(L, -2, (lua_Integer)lua_rawlen(L, -2) + 1);
  }
  lua_pop(L, 1);
}

static void mark(lua_State *L, int base, lua_Integer pos, lua_Integer *queued) {
  lua_pushboolean(L, 1);
  lua_rawseti(L, SLOT(base, W_MARKED), pos);
  lua_pushinteger(L, pos);
  lua_rawseti(L, SLOT(base, W_QUEUE), ++*queued);
}

static int is_marked(lua_State *L, int base, lua_Integer pos) {
  int m = lua_rawgeti(L, SLOT(base, W_MARKED), pos) != LUA_TNIL;
  lua_pop(L, 1);
  return m;
}

/* The position of the table at idx, or 0 if the walk has not reached it. */
static lua_Integer position_of(lua_State *L, int base, int idx) {
  lua_pushvalue(L, idx);
  lua_Integer pos = lua_rawget(L, SLOT(base, W_NUMBER)) == LUA_TNUMBER ? lua_tointeger(L, -1) : 0;
  lua_pop(L, 1);
  return pos;
}

/* Whether the table on top holds a key that array data cannot (so it is a
 * tree of its own): array data has the keys 1..n, n being the number of its
 * keys (not #t, whose border is ambiguous where a list has holes). */
static int is_keyed(lua_State *L) {
  if (!dlrun_lua_find_stray_key(L, -1, dlrun_lua_count_keys(L, -1), 0)) return 0;
  lua_pop(L, 1);
  return 1;
}

/* Find every plain table reachable from the root (at position 1) and mark
 * the trees: those from which an Array is reachable, and with `keyed`, those
 * from which a table that is not array data is. The order of this walk
 * does not matter: it finds sets. */
static void discover(lua_State *L, int base, int keyed) {
  lua_Integer n = 1, queued = 0;
  for (lua_Integer i = 1; i <= n; i++) {
    lua_rawgeti(L, SLOT(base, W_TABLES), i);
    int t = lua_gettop(L);
    if (keyed && is_keyed(L)) mark(L, base, i, &queued);
    lua_pushnil(L);
    while (lua_next(L, t)) {
      if (dlrun_lua_test_array(L, -1)) {
        if (!is_marked(L, base, i)) mark(L, base, i, &queued);
      } else if (is_plain_table(L, -1)) {
        lua_Integer j = position_of(L, base, -1);
        if (!j) {
          j = ++n;
          lua_pushvalue(L, -1);
          lua_rawseti(L, SLOT(base, W_TABLES), j);
          lua_pushvalue(L, -1);
          lua_pushinteger(L, j);
          lua_rawset(L, SLOT(base, W_NUMBER));
        }
        add_parent(L, SLOT(base, W_PARENTS), j, i);
      }
      lua_pop(L, 1);
    }
    lua_pop(L, 1);
  }
  /* Breadth-first over parent links: each table is queued once. */
  for (lua_Integer q = 1; q <= queued; q++) {
    lua_rawgeti(L, SLOT(base, W_QUEUE), q);
    lua_Integer pos = lua_tointeger(L, -1);
    lua_pop(L, 1);
    int t = lua_rawgeti(L, SLOT(base, W_PARENTS), pos);
    lua_Integer np = t == LUA_TTABLE ? (lua_Integer)lua_rawlen(L, -1) : t == LUA_TNUMBER;
    for (lua_Integer k = 1; k <= np; k++) {
      lua_Integer p = lua_tointeger(L, -1);
      if (t == LUA_TTABLE) {
        lua_rawgeti(L, -1, k);
        p = lua_tointeger(L, -1);
        lua_pop(L, 1);
      }
      if (!is_marked(L, base, p)) mark(L, base, p, &queued);
    }
    lua_pop(L, 1);
  }
}

/* Push the result table of the tree at position j, made (and queued to be
 * filled) when first reached. */
static void push_result(lua_State *L, int base, lua_Integer j, lua_Integer *queued) {
  if (lua_rawgeti(L, SLOT(base, W_RESULT), j) != LUA_TNIL) return;
  lua_pop(L, 1);
  lua_newtable(L);
  lua_pushvalue(L, -1);
  lua_rawseti(L, SLOT(base, W_RESULT), j);
  lua_pushinteger(L, j);
  lua_rawseti(L, SLOT(base, W_QUEUE), ++*queued);
}

/* Push the mapped value of the value on top of the stack (left in place). */
static void map_value(lua_State *L, int base, lua_Integer *queued, dlrun_lua_leaf_fn leaf,
                      void *ctx) {
  int v = lua_gettop(L);
  if (is_plain_table(L, v)) {
    lua_Integer j = position_of(L, base, v);
    if (j && is_marked(L, base, j)) {
      push_result(L, base, j, queued);
      return;
    }
  }
  int memo = lua_istable(L, v) || lua_isuserdata(L, v);
  if (memo) {
    lua_pushvalue(L, v);
    if (lua_rawget(L, SLOT(base, W_MEMO)) != LUA_TNIL) return;
    lua_pop(L, 1);
  }
  leaf(L, v, ctx);
  if (memo) {
    lua_pushvalue(L, v);
    lua_pushvalue(L, -2);
    lua_rawset(L, SLOT(base, W_MEMO));
  }
}

/* Fill the result of the tree at position pos, its keys in tree order. */
static void map_table(lua_State *L, int base, lua_Integer pos, lua_Integer *queued,
                      const char *fn, dlrun_lua_leaf_fn leaf, void *ctx) {
  lua_rawgeti(L, SLOT(base, W_TABLES), pos);
  int t = lua_gettop(L);
  lua_rawgeti(L, SLOT(base, W_RESULT), pos);
  lua_Integer nkeys = dlrun_lua_push_tree_keys(L, t, fn);
  for (lua_Integer k = 1; k <= nkeys; k++) {
    lua_rawgeti(L, t + 2, k);
    lua_pushvalue(L, -1);
    if (lua_rawget(L, t) != LUA_TNIL) { /* nil: a leaf's metamethod took it away */
      map_value(L, base, queued, leaf, ctx); /* key, value, mapped */
      lua_pushvalue(L, -3);
      lua_insert(L, -2);
      lua_rawset(L, t + 1);
    }
    lua_settop(L, t + 2);
  }
  lua_settop(L, t - 1);
}

void dlrun_lua_map_tree(lua_State *L, int idx, const char *fn, int keyed, dlrun_lua_leaf_fn leaf,
                        void *ctx) {
  idx = lua_absindex(L, idx);
  if (!is_plain_table(L, idx)) {
    leaf(L, idx, ctx);
    return;
  }
  luaL_checkstack(L, W_COUNT + 16, "no room on the Lua stack for a tree");
  int base = lua_gettop(L);
  for (int w = 1; w <= W_COUNT; w++) lua_newtable(L);
  lua_pushvalue(L, idx);
  lua_rawseti(L, SLOT(base, W_TABLES), 1);
  lua_pushvalue(L, idx);
  lua_pushinteger(L, 1);
  lua_rawset(L, SLOT(base, W_NUMBER));
  discover(L, base, keyed);
  if (!is_marked(L, base, 1)) { /* no tree: the root is a leaf */
    lua_settop(L, base);
    leaf(L, idx, ctx);
    return;
  }
  /* Breadth-first from the root through the trees, keys in tree order:
   * every process maps the same leaves in the same order. */
  lua_newtable(L);
  lua_replace(L, SLOT(base, W_QUEUE));
  lua_Integer queued = 0;
  push_result(L, base, 1, &queued);
  lua_pop(L, 1);
  for (lua_Integer q = 1; q <= queued; q++) {
    lua_rawgeti(L, SLOT(base, W_QUEUE), q);
    lua_Integer pos = lua_tointeger(L, -1);
    lua_pop(L, 1);
    map_table(L, base, pos, &queued, fn, leaf, ctx);
  }
  lua_rawgeti(L, SLOT(base, W_RESULT), 1);
  lua_replace(L, base + 1);
  lua_settop(L, base + 1);
}
