/* Conversions between Lua values and dlrun data: shapes, dtypes, scalars and
 * nested tables. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "binding.h"

int dlrun_lua_to_integer(lua_State *L, int idx, lua_Integer *out) {
  if (lua_isinteger(L, idx)) {
    *out = lua_tointeger(L, idx);
    return 1;
  }
  if (lua_type(L, idx) != LUA_TNUMBER) return 0;
  lua_Number v = lua_tonumber(L, idx);
  return v == floor(v) && lua_numbertointeger(v, out);
}

/* Push #t of the table at idx (running its __len, which may give anything);
 * true when that is an integer, stored in *n. */
static int push_len(lua_State *L, int idx, lua_Integer *n) {
  int ok = 0;
  lua_len(L, idx);
  *n = lua_type(L, -1) == LUA_TNUMBER ? lua_tointegerx(L, -1, &ok) : 0;
  return ok;
}

/* #t for probing a value's shape: -1 when __len gives no integer. */
static lua_Integer probe_len(lua_State *L, int idx) {
  lua_Integer n;
  int ok = push_len(L, idx, &n);
  lua_pop(L, 1);
  return ok ? n : -1;
}

lua_Integer dlrun_lua_check_len(lua_State *L, int idx, const char *fn, const char *what) {
  lua_Integer n;
  if (!push_len(L, idx, &n))
    dlrun_lua_raise(L, "TypeError", "%s: the length of %s must be an integer, got %s", fn, what,
                    dlrun_lua_typename(L, -1));
  lua_pop(L, 1);
  if (n < 0)
    dlrun_lua_raise(L, "ValueError", "%s: the length of %s is negative (%lld)", fn, what,
                    (long long)n);
  return n;
}

int dlrun_lua_is_callable(lua_State *L, int idx) {
  if (lua_isfunction(L, idx)) return 1;
  if (luaL_getmetafield(L, idx, "__call") == LUA_TNIL) return 0;
  lua_pop(L, 1);
  return 1;
}

/* A shape may be one integer; other integer lists must be lists. */
static const char *list_expected(const char *what) {
  return strcmp(what, "shape") == 0 ? "an integer or a list of integers" : "a list of integers";
}

static int shape_entry(lua_State *L, int idx, const char *fn, const char *what, int arg, int pos,
                       int64_t *out) {
  lua_Integer v;
  if (lua_type(L, idx) != LUA_TNUMBER)
    return dlrun_lua_raise(L, "TypeError", "%s: argument %d (%s) must be %s, got %s at position %d",
                           fn, arg, what, list_expected(what), dlrun_lua_typename(L, idx), pos);
  if (!dlrun_lua_to_integer(L, idx, &v)) {
    lua_Number x = lua_tonumber(L, idx);
    if (x == floor(x) && !isinf(x))
      return dlrun_lua_raise(L, "ValueError", "%s: %s entry %d is too large (%.17g)", fn, what,
                             pos, x);
    return dlrun_lua_raise(L, "ValueError", "%s: %s entry %d must be an integer, got %s", fn,
                           what, pos, dlrun_lua_describe(L, idx));
  }
  if (v < 0)
    return dlrun_lua_raise(L, "ValueError", "%s: %s entry %d is negative (%lld)", fn, what, pos,
                           (long long)v);
  *out = (int64_t)v;
  return 0;
}

int dlrun_lua_check_shape(lua_State *L, int idx, const char *fn, const char *what, int64_t *dims) {
  if (lua_type(L, idx) == LUA_TNUMBER && strcmp(what, "shape") == 0) {
    shape_entry(L, idx, fn, what, idx, 1, &dims[0]);
    return 1;
  }
  if (!lua_istable(L, idx)) return dlrun_lua_type_error(L, fn, idx, what, list_expected(what));
  lua_Integer n = dlrun_lua_check_len(L, idx, fn, what);
  if (n > DLRUN_MAX_NDIM)
    return dlrun_lua_raise(L, "ValueError", "%s: %s has %lld dimensions (at most %d)", fn, what,
                           (long long)n, DLRUN_MAX_NDIM);
  for (lua_Integer i = 1; i <= n; i++) {
    lua_geti(L, idx, i);
    shape_entry(L, -1, fn, what, idx, (int)i, &dims[i - 1]);
    lua_pop(L, 1);
  }
  return (int)n;
}

dlrun_dtype dlrun_lua_check_dtype(lua_State *L, int idx, const char *fn) {
  if (lua_type(L, idx) != LUA_TSTRING)
    dlrun_lua_type_error(L, fn, idx, "dtype", "a dtype name such as \"float32\"");
  dlrun_dtype dt;
  dlrun_lua_check_in(L, fn, dlrun_dtype_from_name(dlrun_lua_check_cstring(L, idx, fn, "dtype"), &dt));
  return dt;
}

/* {re, im} or {re = , im = } with numbers. */
static int to_complex(lua_State *L, int idx, dlrun_scalar *out) {
  idx = lua_absindex(L, idx);
  int ok = 0;
  /* probed: a table object without them (a Shard) is no complex value */
  if (dlrun_lua_probe_field(L, idx, "re") == LUA_TNUMBER) {
    ok = dlrun_lua_probe_field(L, idx, "im") == LUA_TNUMBER || lua_isnil(L, -1);
    if (ok) *out = (dlrun_scalar){.kind = DLRUN_SCALAR_COMPLEX, .re = lua_tonumber(L, -2),
                                  .im = lua_tonumber(L, -1)};
    lua_pop(L, 2);
    return ok;
  }
  lua_pop(L, 1);
  if (probe_len(L, idx) != 2) return 0;
  int top = lua_gettop(L);
  ok = lua_geti(L, idx, 1) == LUA_TNUMBER && lua_geti(L, idx, 2) == LUA_TNUMBER;
  if (ok) *out = (dlrun_scalar){.kind = DLRUN_SCALAR_COMPLEX, .re = lua_tonumber(L, -2),
                                .im = lua_tonumber(L, -1)};
  lua_settop(L, top);
  return ok;
}

int dlrun_lua_is_data(lua_State *L, int idx) {
  int t = lua_type(L, idx);
  return t == LUA_TNUMBER || t == LUA_TBOOLEAN || t == LUA_TTABLE;
}

int dlrun_lua_to_scalar(lua_State *L, int idx, dlrun_scalar *out) {
  switch (lua_type(L, idx)) {
  case LUA_TBOOLEAN:
    *out = (dlrun_scalar){.kind = DLRUN_SCALAR_BOOL, .b = lua_toboolean(L, idx)};
    return 1;
  case LUA_TNUMBER:
    if (lua_isinteger(L, idx)) *out = (dlrun_scalar){.kind = DLRUN_SCALAR_INT, .i = lua_tointeger(L, idx)};
    else *out = (dlrun_scalar){.kind = DLRUN_SCALAR_FLOAT, .re = lua_tonumber(L, idx)};
    return 1;
  case LUA_TTABLE: {
    int top = lua_gettop(L);
    int ok = to_complex(L, idx, out);
    lua_settop(L, top);
    return ok;
  }
  default: return 0;
  }
}

void dlrun_lua_push_scalar(lua_State *L, const dlrun_scalar *s) {
  switch (s->kind) {
  case DLRUN_SCALAR_BOOL: lua_pushboolean(L, s->b); break;
  case DLRUN_SCALAR_INT: lua_pushinteger(L, (lua_Integer)s->i); break;
  case DLRUN_SCALAR_FLOAT: lua_pushnumber(L, s->re); break;
  case DLRUN_SCALAR_COMPLEX:
    lua_createtable(L, 2, 0);
    lua_pushnumber(L, s->re);
    lua_rawseti(L, -2, 1);
    lua_pushnumber(L, s->im);
    lua_rawseti(L, -2, 2);
    break;
  }
}

/* ---- tables to host data ---- */

/* A table that is one complex element rather than a level of nesting: one
 * with an `re` field, or (for complex dtypes) a pair of numbers. */
static int is_complex_leaf(lua_State *L, int idx, int complex_dtype) {
  if (!lua_istable(L, idx)) return 0;
  idx = lua_absindex(L, idx);
  int t = dlrun_lua_probe_field(L, idx, "re");
  lua_pop(L, 1);
  if (t != LUA_TNIL) return 1;
  if (!complex_dtype || probe_len(L, idx) != 2) return 0;
  int top = lua_gettop(L);
  int ok = lua_geti(L, idx, 1) == LUA_TNUMBER && lua_geti(L, idx, 2) == LUA_TNUMBER;
  lua_settop(L, top);
  return ok;
}

/* A key that a table of array data may hold: an integer in 1..n, or, in a
 * complex element {re=, im=} (one holding re), re or im. */
static int is_data_key(lua_State *L, int key, lua_Integer n, int complex) {
  if (lua_type(L, key) == LUA_TSTRING) {
    size_t len;
    const char *s = lua_tolstring(L, key, &len);
    return complex && len == 2 && (!memcmp(s, "re", 2) || !memcmp(s, "im", 2));
  }
  if (!lua_isinteger(L, key) || complex) return 0;
  lua_Integer i = lua_tointeger(L, key);
  return i >= 1 && i <= n;
}

int dlrun_lua_find_stray_key(lua_State *L, int idx, lua_Integer n, int least) {
  idx = lua_absindex(L, idx);
  luaL_checkstack(L, 4, "no room on the Lua stack for a table's keys");
  lua_pushliteral(L, "re");
  int complex = lua_rawget(L, idx) != LUA_TNIL;
  int slot = lua_gettop(L), found = 0; /* the stray key found, once there is one */
  lua_pushnil(L);
  while (lua_next(L, idx)) {
    lua_pop(L, 1);
    if (is_data_key(L, -1, n, complex)) continue;
    if (!least) {
      lua_replace(L, slot);
      return 1;
    }
    if (!found++ || dlrun_lua_key_less(L, -1, slot)) lua_copy(L, -1, slot);
  }
  if (!found) lua_pop(L, 1);
  return !found ? 0 : complex ? 2 : 1;
}

typedef struct walk {
  lua_State *L;
  const char *fn;
  int complex_dtype;
  int ndim;
  int64_t dims[DLRUN_MAX_NDIM];
  int64_t index[DLRUN_MAX_NDIM]; /* position of the element being visited */
  int keys_checked; /* once a visit has checked every table's keys */
  /* inference: what kinds of leaves were seen */
  int seen_bool, seen_int, seen_float, seen_complex;
  dlrun_dtype first_dtype; /* JAX's default for the first leaf */
  /* storing */
  dlrun_dtype dtype;
  unsigned char *out;
  int64_t count;
} walk;

const char *dlrun_lua_position(const int64_t *index, int depth, char *buf, size_t n) {
  size_t used = 0;
  buf[0] = 0;
  for (int i = 0; i < depth && used < n; i++)
    used += (size_t)snprintf(buf + used, n - used, "[%lld]", (long long)index[i] + 1);
  return buf;
}

static const char *position(walk *w, int depth, char *buf, size_t n) {
  return dlrun_lua_position(w->index, depth, buf, n);
}

/* The length of the level at depth (on top of the stack). */
static lua_Integer level_len(walk *w, int depth) {
  char pos[256], what[300];
  snprintf(what, sizeof what, depth ? "element %s" : "data", position(w, depth, pos, sizeof pos));
  return dlrun_lua_check_len(w->L, -1, w->fn, what);
}

/* The shape, following first elements, and the first leaf's dtype. */
static void infer_shape(walk *w, int idx) {
  lua_State *L = w->L;
  lua_pushvalue(L, idx);
  while (lua_istable(L, -1) && !is_complex_leaf(L, -1, w->complex_dtype)) {
    if (w->ndim == DLRUN_MAX_NDIM)
      dlrun_lua_raise(L, "ValueError", "%s: data is nested deeper than %d levels", w->fn,
                      DLRUN_MAX_NDIM);
    lua_Integer n = level_len(w, w->ndim);
    w->dims[w->ndim++] = n;
    if (n == 0) break;
    lua_geti(L, -1, 1);
    lua_remove(L, -2);
  }
  dlrun_scalar s;
  w->first_dtype = dlrun_lua_to_scalar(L, -1, &s) ? dlrun_lua_default_dtype(&s) : DLRUN_FLOAT32;
  lua_pop(L, 1);
}

/* A table holds fewer than 2^31 entries, so more elements can only be
 * claimed by __len (or many shared rows) and would take hours to visit:
 * such data is refused before it is read. */
#define MAX_DATA_ELEMENTS ((uint64_t)1 << 31)

/* Check the inferred shape's size, in `dtype` (or the first leaf's). */
static void check_size(walk *w, dlrun_dtype dtype) {
  if (dtype == DLRUN_DTYPE_COUNT) dtype = w->first_dtype;
  uint64_t nbytes;
  dlrun_lua_check_in(w->L, w->fn, dlrun_shape_nbytes(w->ndim, w->dims, dtype, &nbytes));
  const dlrun_dtype_info *info = dlrun_dtype_get(dtype);
  int64_t count; /* elements: a packed dtype's bytes hold several */
  dlrun_shape_size(w->ndim, w->dims, &count);
  if ((uint64_t)count > MAX_DATA_ELEMENTS) {
    char shape[256];
    dlrun_lua_raise(w->L, "ResourceExhaustedError",
                    "%s: nested data of shape %s would need %llu bytes as %s; Lua data gives at "
                    "most %llu elements",
                    w->fn, dlrun_tuple_string(w->dims, w->ndim, shape, sizeof shape),
                    (unsigned long long)nbytes, info->name,
                    (unsigned long long)MAX_DATA_ELEMENTS);
  }
}

/* Refuse the table on top (at depth, holding n elements) when it has a key
 * that array data cannot have, naming the least such key. */
static void check_keys(walk *w, int depth, lua_Integer n) {
  lua_State *L = w->L;
  int stray = w->keys_checked ? 0 : dlrun_lua_find_stray_key(L, -1, n, 1);
  if (!stray) return;
  char pos[256], key[160];
  int complex = stray == 2;
  dlrun_lua_raise(L, "TypeError", "%s: %s%s has %s, but %s", w->fn, depth ? "element " : "data",
                  position(w, depth, pos, sizeof pos), dlrun_lua_key_text(L, -1, key, sizeof key),
                  complex ? "a complex element {re=, im=} has only the keys re and im"
                          : "a table of array data has only the keys 1..n (a table with other "
                            "keys is a tree, which dl.device_put maps key by key)");
}

/* Visit every leaf in row-major order, checking the shape; `leaf` is called
 * with the leaf on top of the stack. */
static void visit(walk *w, int depth, void (*leaf)(walk *, int depth)) {
  lua_State *L = w->L;
  char pos[256];
  luaL_checkstack(L, 4, "nested data too deep");
  if (depth == w->ndim) {
    if (lua_istable(L, -1) && !is_complex_leaf(L, -1, w->complex_dtype))
      dlrun_lua_raise(L, "ValueError",
                      "%s: ragged nested data: element %s is a table but the shape %s",
                      w->fn, position(w, depth, pos, sizeof pos),
                      depth ? "ends at this depth" : "is 0-d");
    if (lua_istable(L, -1)) check_keys(w, depth, 2); /* a complex element */
    leaf(w, depth);
    return;
  }
  if (!lua_istable(L, -1) || is_complex_leaf(L, -1, w->complex_dtype))
    dlrun_lua_raise(L, "ValueError",
                    "%s: ragged nested data: element %s should be a list of length %lld, got %s",
                    w->fn, position(w, depth, pos, sizeof pos), (long long)w->dims[depth],
                    dlrun_lua_typename(L, -1));
  lua_Integer n = level_len(w, depth);
  if (n != w->dims[depth])
    dlrun_lua_raise(L, "ValueError",
                    "%s: ragged nested data: element %s has length %lld, expected %lld", w->fn,
                    position(w, depth, pos, sizeof pos), (long long)n,
                    (long long)w->dims[depth]);
  check_keys(w, depth, n);
  for (lua_Integer i = 1; i <= n; i++) {
    w->index[depth] = i - 1;
    lua_geti(L, -1, i);
    visit(w, depth + 1, leaf);
    lua_pop(L, 1);
  }
}

static dlrun_scalar leaf_scalar(walk *w, int depth) {
  dlrun_scalar s;
  char pos[256];
  if (!dlrun_lua_to_scalar(w->L, -1, &s))
    dlrun_lua_raise(w->L, "TypeError",
                    "%s: element %s is a %s, expected a number, a boolean or {re, im}", w->fn,
                    position(w, depth, pos, sizeof pos), dlrun_lua_typename(w->L, -1));
  return s;
}

static void infer_leaf(walk *w, int depth) {
  dlrun_scalar s = leaf_scalar(w, depth);
  switch (s.kind) {
  case DLRUN_SCALAR_BOOL: w->seen_bool = 1; break;
  case DLRUN_SCALAR_INT: w->seen_int = 1; break;
  case DLRUN_SCALAR_FLOAT: w->seen_float = 1; break;
  case DLRUN_SCALAR_COMPLEX: w->seen_complex = 1; break;
  }
}

static void store_leaf(walk *w, int depth) {
  dlrun_scalar s = leaf_scalar(w, depth);
  dlrun_status st = dlrun_dtype_store_at(w->dtype, w->out, w->count, &s);
  if (st) {
    char pos[256];
    if (depth) dlrun_lua_raise(w->L, "ValueError", "%s: element %s: %s", w->fn,
                               position(w, depth, pos, sizeof pos), dlrun_last_error());
    dlrun_lua_raise(w->L, "ValueError", "%s: %s", w->fn, dlrun_last_error());
  }
  w->count++;
}

/* JAX's defaults: complex64 if any complex, else float32 if any float, else
 * int32 if any integer, else bool if any boolean; float32 when empty. */
static dlrun_dtype default_dtype(int complex, int floating, int integer, int boolean) {
  if (complex) return DLRUN_COMPLEX64;
  if (floating) return DLRUN_FLOAT32;
  if (integer) return DLRUN_INT32;
  if (boolean) return DLRUN_BOOL;
  return DLRUN_FLOAT32;
}

static dlrun_dtype inferred_dtype(const walk *w) {
  return default_dtype(w->seen_complex, w->seen_float, w->seen_int, w->seen_bool);
}

dlrun_dtype dlrun_lua_default_dtype(const dlrun_scalar *s) {
  return default_dtype(s->kind == DLRUN_SCALAR_COMPLEX, s->kind == DLRUN_SCALAR_FLOAT,
                       s->kind == DLRUN_SCALAR_INT, s->kind == DLRUN_SCALAR_BOOL);
}

void *dlrun_lua_nested_to_host(lua_State *L, int idx, const char *fn, dlrun_dtype *dtype,
                               int *ndim, int64_t *dims, uint64_t *nbytes) {
  idx = lua_absindex(L, idx);
  walk w = {.L = L, .fn = fn};
  w.complex_dtype = *dtype != DLRUN_DTYPE_COUNT &&
                    dlrun_dtype_get(*dtype)->kind == DLRUN_KIND_COMPLEX;
  infer_shape(&w, idx);
  check_size(&w, *dtype);
  if (*dtype == DLRUN_DTYPE_COUNT) {
    lua_pushvalue(L, idx);
    visit(&w, 0, infer_leaf);
    lua_pop(L, 1);
    *dtype = inferred_dtype(&w);
    w.keys_checked = 1;
  }
  dlrun_lua_check_in(L, fn, dlrun_shape_nbytes(w.ndim, w.dims, *dtype, nbytes));
  w.dtype = *dtype;
  w.out = lua_newuserdatauv(L, (size_t)*nbytes, 0);
  /* Packed elements are written bit by bit: start from zero padding. */
  if (dlrun_dtype_get(*dtype)->dl_bits < 8) memset(w.out, 0, (size_t)*nbytes);
  lua_pushvalue(L, idx);
  visit(&w, 0, store_leaf);
  lua_pop(L, 1);
  *ndim = w.ndim;
  memcpy(dims, w.dims, sizeof(int64_t) * (size_t)w.ndim);
  return w.out;
}

/* ---- host data to tables ---- */

/* Elements by flat index (*next), so that packed dtypes read as any other. */
static void push_level(lua_State *L, dlrun_dtype dtype, int ndim, const int64_t *dims,
                       const void *data, int64_t *next) {
  if (ndim == 0) {
    dlrun_scalar s;
    dlrun_dtype_load_at(dtype, data, (*next)++, &s);
    dlrun_lua_push_scalar(L, &s);
    return;
  }
  luaL_checkstack(L, 3, "array too deep");
  lua_createtable(L, dims[0] < (1 << 26) ? (int)dims[0] : 0, 0);
  for (int64_t i = 0; i < dims[0]; i++) {
    push_level(L, dtype, ndim - 1, dims + 1, data, next);
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
}

void dlrun_lua_push_nested(lua_State *L, dlrun_dtype dtype, int ndim, const int64_t *dims,
                           const void *data) {
  int64_t next = 0;
  push_level(L, dtype, ndim, dims, data, &next);
}
