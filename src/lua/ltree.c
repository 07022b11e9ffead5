/* Mapping over trees of Lua tables (dl.device_put, dl.device_get).
 *
 * A tree is a plain table (no metatable) from which an Array can be reached
 * through plain tables. The walk is iterative, so any depth works, and it
 * is faithful to the graph the user built: every table and every leaf object
 * maps once, so a subtree shared by two parents stays shared and a cycle
 * (`model.self = model`) stays a cycle in the result. */
#include "binding.h"

static int is_plain_table(lua_State *L, int idx) {
  if (!lua_istable(L, idx)) return 0;
  if (!lua_getmetatable(L, idx)) return 1;
  lua_pop(L, 1);
  return 0;
}

int dlrun_lua_is_plain_table(lua_State *L, int idx) { return is_plain_table(L, idx); }

/* Slots of the work tables, relative to the walk's base. */
enum {
  W_TABLES = 1, /* position -> table, in discovery order */
  W_NUMBER,     /* table -> position */
  W_PARENTS,    /* position -> the position (or a list of them) of tables holding it */
  W_MARKED,     /* position -> true once an Array is reachable from it */
  W_QUEUE,      /* positions still to propagate "reaches an Array" from */
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

/* Find every plain table reachable from the root (at position 1) and mark
 * those from which an Array is reachable. Returns the number of tables. */
static lua_Integer discover(lua_State *L, int base) {
  lua_Integer n = 1, queued = 0;
  for (lua_Integer i = 1; i <= n; i++) {
    lua_rawgeti(L, SLOT(base, W_TABLES), i);
    int t = lua_gettop(L);
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
  return n;
}

/* Push the mapped value of the value on top of the stack (left in place). */
static void map_value(lua_State *L, int base, dlrun_lua_leaf_fn leaf, void *ctx) {
  int v = lua_gettop(L);
  if (is_plain_table(L, v)) {
    lua_Integer j = position_of(L, base, v);
    if (j && is_marked(L, base, j)) {
      lua_rawgeti(L, SLOT(base, W_RESULT), j);
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

void dlrun_lua_map_tree(lua_State *L, int idx, dlrun_lua_leaf_fn leaf, void *ctx) {
  idx = lua_absindex(L, idx);
  if (!is_plain_table(L, idx)) {
    leaf(L, idx, ctx);
    return;
  }
  luaL_checkstack(L, W_COUNT + 16, "device_put: no room on the Lua stack");
  int base = lua_gettop(L);
  for (int w = 1; w <= W_COUNT; w++) lua_newtable(L);
  lua_pushvalue(L, idx);
  lua_rawseti(L, SLOT(base, W_TABLES), 1);
  lua_pushvalue(L, idx);
  lua_pushinteger(L, 1);
  lua_rawset(L, SLOT(base, W_NUMBER));
  lua_Integer n = discover(L, base);
  if (!is_marked(L, base, 1)) { /* no Array anywhere: the root is a leaf */
    lua_settop(L, base);
    leaf(L, idx, ctx);
    return;
  }
  for (lua_Integer i = 1; i <= n; i++) {
    if (!is_marked(L, base, i)) continue;
    lua_newtable(L);
    lua_rawseti(L, SLOT(base, W_RESULT), i);
  }
  for (lua_Integer i = 1; i <= n; i++) {
    if (!is_marked(L, base, i)) continue;
    lua_rawgeti(L, SLOT(base, W_TABLES), i);
    int t = lua_gettop(L);
    lua_rawgeti(L, SLOT(base, W_RESULT), i);
    int r = t + 1;
    lua_pushnil(L);
    while (lua_next(L, t)) {
      map_value(L, base, leaf, ctx); /* key, value, mapped */
      lua_pushvalue(L, -3);
      lua_insert(L, -2);
      lua_rawset(L, r);
      lua_pop(L, 1);
    }
    lua_settop(L, base + W_COUNT);
  }
  lua_rawgeti(L, SLOT(base, W_RESULT), 1);
  lua_replace(L, base + 1);
  lua_settop(L, base + 1);
}
