/* Transfers from Lua: dl.device_put, dl.device_get, assembling sharded
 * arrays from pieces, and the transfer statistics. */
#include "binding.h"

/* A plain table (not an Array, Device or Sharding userdata) that holds at
 * least one Array at its top level: a tree to map over. */
static int has_metatable(lua_State *L, int idx) {
  if (!lua_getmetatable(L, idx)) return 0;
  lua_pop(L, 1);
  return 1;
}

static int is_array_tree(lua_State *L, int idx) {
  if (!lua_istable(L, idx) || has_metatable(L, idx)) return 0;
  lua_pushnil(L);
  while (lua_next(L, idx)) {
    int found = dlrun_lua_test_array(L, -1) != NULL || is_array_tree(L, lua_gettop(L));
    lua_pop(L, 1);
    if (found) {
      lua_pop(L, 1);
      return 1;
    }
  }
  return 0;
}

static dlrun_put_options check_put_options(lua_State *L, int idx) {
  dlrun_put_options o = {.may_alias = DLRUN_ALIAS_DEFAULT};
  if (lua_isnoneornil(L, idx)) return o;
  if (!lua_istable(L, idx))
    dlrun_lua_type_error(L, "device_put", idx, "options", "a table {donate=, may_alias=}");
  static const char *const keys[] = {"donate", "may_alias", NULL};
  dlrun_lua_check_option_keys(L, idx, "device_put", keys, "ValueError");
  lua_pushnil(L);
  while (lua_next(L, idx)) {
    const char *k = lua_tostring(L, -2); /* a known key, so a string */
    if (!lua_isboolean(L, -1))
      dlrun_lua_raise(L, "TypeError", "device_put: option %s must be a boolean, got %s", k,
                      dlrun_lua_typename(L, -1));
    if (k[0] == 'd') o.donate = lua_toboolean(L, -1);
    else o.may_alias = lua_toboolean(L, -1) ? DLRUN_ALIAS_ALLOW : DLRUN_ALIAS_NEVER;
    lua_pop(L, 1);
  }
  return o;
}

/* Push the result of putting array x (at idx) onto the Sharding userdata at
 * sharding_idx: x itself when nothing had to change, else a new Array.
 * Returns the pushed array (anchored by the pushed value). */
static dlrun_array *push_put(lua_State *L, int idx, dlrun_array *x, int sharding_idx,
                             const dlrun_put_options *o) {
  dlrun_array *out;
  dlrun_lua_check(L, dlrun_device_put(x, dlrun_lua_test_sharding(L, sharding_idx), o, &out));
  if (out == x) {
    dlrun_array_release(out);
    lua_pushvalue(L, idx);
  } else {
    dlrun_lua_push_array(L, out, sharding_idx);
  }
  return out;
}

/* Push a new table holding each(value) for every entry of the table at idx,
 * keys kept; each pushes one value. */
static void map_tree(lua_State *L, int idx, void (*each)(lua_State *L, int idx, void *ctx),
                     void *ctx) {
  luaL_checkstack(L, 4, "tree too deep");
  lua_newtable(L);
  lua_pushnil(L);
  while (lua_next(L, idx)) {
    lua_pushvalue(L, -2);
    lua_insert(L, -2);
    each(L, lua_gettop(L), ctx);
    lua_remove(L, -2);
    lua_rawset(L, -4);
  }
}

typedef struct put_args {
  int target_idx;
  const dlrun_put_options *o;
} put_args;

/* Put the value at idx onto the target Sharding userdata at target_idx
 * (0: no target: arrays stay where they are, data goes to the default
 * device); pushes the result. Arrays transfer, trees map, other values become
 * arrays. */
static void put_value(lua_State *L, int idx, void *ctx) {
  const put_args *a = ctx;
  idx = lua_absindex(L, idx);
  dlrun_array *x = dlrun_lua_test_array(L, idx);
  if (x) {
    if (a->target_idx) {
      push_put(L, idx, x, a->target_idx, a->o);
    } else if (!a->o->donate && a->o->may_alias != DLRUN_ALIAS_NEVER) {
      dlrun_lua_check(L, dlrun_array_check_live(x));
      lua_pushvalue(L, idx);
    } else {
      lua_getfield(L, idx, "sharding"); /* stays where it is, as a copy */
      push_put(L, idx, x, lua_gettop(L), a->o);
      lua_remove(L, -2);
    }
    return;
  }
  if (is_array_tree(L, idx)) {
    map_tree(L, idx, put_value, ctx);
    return;
  }
  /* Lua data: dl.array(data, nil, target). */
  if (!dlrun_lua_is_data(L, idx))
    dlrun_lua_raise(L, "TypeError", "device_put: argument 1 (x) must be an Array or data, got %s",
                    dlrun_lua_typename(L, idx));
  lua_getfield(L, lua_upvalueindex(1), "array");
  lua_pushvalue(L, idx);
  lua_pushnil(L);
  if (a->target_idx) lua_pushvalue(L, a->target_idx);
  else lua_pushnil(L);
  lua_call(L, 3, 1);
}

/* dl.device_put(x [, target] [, {donate=, may_alias=}]) */
static int l_device_put(lua_State *L) {
  dlrun_lua_check_nargs(L, "device_put", 3);
  if (lua_gettop(L) < 1) return dlrun_lua_type_error(L, "device_put", 1, "x", "an Array or data");
  int opts_idx = 3;
  /* device_put(x, {options}): a plain table in place of the target. */
  if (lua_istable(L, 2) && !has_metatable(L, 2) && lua_isnoneornil(L, 3)) opts_idx = 2;
  dlrun_put_options o = check_put_options(L, opts_idx);
  if (o.donate && o.may_alias == DLRUN_ALIAS_ALLOW)
    return dlrun_lua_raise(L, "ValueError", "may_alias and donate cannot be True at the same time.");
  lua_settop(L, opts_idx);
  int target_idx = 0;
  if (opts_idx == 3 && !lua_isnil(L, 2)) {
    dlrun_lua_push_target(L, 2, "device_put");
    target_idx = lua_gettop(L);
  }
  put_args args = {.target_idx = target_idx, .o = &o};
  put_value(L, 1, &args);
  return 1;
}

/* dl.device_get(x): arrays materialised on the host cpu device (the
 * Sharding userdata at *host_idx); tables of arrays map element-wise;
 * anything else passes through. */
static void get_value(lua_State *L, int idx, void *ctx) {
  int host_idx = *(const int *)ctx;
  idx = lua_absindex(L, idx);
  dlrun_array *x = dlrun_lua_test_array(L, idx);
  if (x) {
    dlrun_lua_check(L, dlrun_array_block_until_ready(push_put(L, idx, x, host_idx, NULL)));
  } else if (is_array_tree(L, idx)) {
    map_tree(L, idx, get_value, ctx);
  } else {
    lua_pushvalue(L, idx);
  }
}

static int l_device_get(lua_State *L) {
  dlrun_lua_check_nargs(L, "device_get", 1);
  lua_settop(L, 1);
  dlrun_lua_push_device_sharding(L, dlrun_host_device(dlrun_lua_runtime(L)));
  int host_idx = 2;
  get_value(L, 1, &host_idx);
  return 1;
}

/* dl.make_array_from_single_device_arrays(shape, sharding, arrays) */
static int l_from_single_device_arrays(lua_State *L) {
  const char *fn = "make_array_from_single_device_arrays";
  dlrun_lua_check_nargs(L, fn, 3);
  int64_t dims[DLRUN_MAX_NDIM], size;
  int ndim = dlrun_lua_check_shape(L, 1, fn, "shape", dims);
  dlrun_lua_check_in(L, fn, dlrun_shape_size(ndim, dims, &size));
  dlrun_sharding *s = dlrun_lua_test_sharding(L, 2);
  if (!s) return dlrun_lua_type_error(L, fn, 2, "sharding", "a Sharding");
  if (!lua_istable(L, 3) || has_metatable(L, 3))
    return dlrun_lua_type_error(L, fn, 3, "arrays", "a list of Arrays");
  lua_Integer len = dlrun_lua_check_len(L, 3, fn, "arrays");
  /* One array per device: a longer list is refused before allocating for it. */
  if (len > DLRUN_LUA_MAX_DEVICES)
    return dlrun_lua_raise(L, "ValueError",
                           "%s: argument 3 (arrays) has %lld entries, more than the %d devices a "
                           "runtime can have",
                           fn, (long long)len, DLRUN_LUA_MAX_DEVICES);
  size_t n = (size_t)len;
  dlrun_array **arrays = lua_newuserdatauv(L, n * sizeof *arrays + 1, 0);
  for (size_t i = 0; i < n; i++) {
    lua_geti(L, 3, (lua_Integer)i + 1);
    arrays[i] = dlrun_lua_test_array(L, -1);
    lua_pop(L, 1); /* anchored by the list */
    if (!arrays[i])
      return dlrun_lua_raise(L, "TypeError", "%s: element %zu of arrays is not an Array", fn, i + 1);
  }
  dlrun_array *out;
  dlrun_lua_check(L, dlrun_array_from_single_device_arrays(s, ndim, dims, arrays, n, &out));
  dlrun_lua_push_array(L, out, 2);
  return 1;
}

/* dl.make_array_from_callback(shape, sharding, fn [, dtype]): fn(index)
 * gives each device's data (Lua data or an Array); as JAX, fn is called once
 * per device, or once in all for a fully replicated sharding. */
static int l_from_callback(lua_State *L) {
  const char *fn = "make_array_from_callback";
  dlrun_lua_check_nargs(L, fn, 4);
  int64_t dims[DLRUN_MAX_NDIM], lo[DLRUN_MAX_NDIM], hi[DLRUN_MAX_NDIM], size;
  int ndim = dlrun_lua_check_shape(L, 1, fn, "shape", dims);
  dlrun_lua_check_in(L, fn, dlrun_shape_size(ndim, dims, &size));
  dlrun_sharding *s = dlrun_lua_test_sharding(L, 2);
  if (!s) return dlrun_lua_type_error(L, fn, 2, "sharding", "a Sharding");
  if (!dlrun_lua_is_callable(L, 3))
    return dlrun_lua_type_error(L, fn, 3, "data_callback", "a function");
  lua_settop(L, 4);
  dlrun_dtype dtype = lua_isnil(L, 4) ? DLRUN_DTYPE_COUNT : dlrun_lua_check_dtype(L, 4, fn);
  dlrun_lua_check(L, dlrun_sharding_check_shape(s, ndim, dims));
  size_t n = dlrun_sharding_device_count(s);
  bool replicated = dlrun_sharding_is_fully_replicated(s);
  lua_createtable(L, (int)n, 0); /* 5: the per-device arrays */
  lua_pushnil(L);                /* 6: the one result of a replicated sharding */
  for (size_t i = 0; i < n; i++) {
    dlrun_device *dev = dlrun_sharding_device(s, i);
    int top = lua_gettop(L);
    if (!replicated || i == 0) {
      lua_pushvalue(L, 3);
      dlrun_sharding_shard_index(s, i, ndim, dims, lo, hi);
      dlrun_lua_push_index(L, ndim, lo, hi);
      lua_call(L, 1, 1);
      if (!dlrun_lua_test_array(L, -1) && !dlrun_lua_is_data(L, -1))
        return dlrun_lua_raise(L, "TypeError",
                               "%s: data_callback must return an Array or data, got %s", fn,
                               dlrun_lua_typename(L, -1));
      lua_copy(L, -1, 6);
    } else {
      lua_pushvalue(L, 6);
    }
    /* put the result on dev, in the sharding's memory kind */
    dlrun_sharding *single;
    dlrun_lua_check(L, dlrun_single_device_sharding_create(dev, dlrun_sharding_memory_kind(s), &single));
    dlrun_lua_push_sharding(L, single);
    int target = lua_gettop(L);
    if (dlrun_lua_test_array(L, target - 1)) {
      dlrun_dtype got = dlrun_array_dtype(dlrun_lua_test_array(L, target - 1));
      if (dtype != DLRUN_DTYPE_COUNT && got != dtype)
        return dlrun_lua_raise(L, "ValueError",
                               "If `dtype` is provided to `jax.make_array_from_callback`, it must "
                               "match the dtype of the addressable shards. Got dtype=%s and shard "
                               "dtype=%s`.",
                               dlrun_dtype_get(dtype)->name, dlrun_dtype_get(got)->name);
      dlrun_array *out;
      dlrun_lua_check(L, dlrun_device_put(dlrun_lua_test_array(L, target - 1), single, NULL, &out));
      dlrun_lua_push_array(L, out, target);
    } else {
      int shard_ndim;
      int64_t shard_dims[DLRUN_MAX_NDIM];
      uint64_t nbytes;
      dlrun_dtype dt = dtype;
      void *data = dlrun_lua_nested_to_host(L, target - 1, fn, &dt, &shard_ndim, shard_dims, &nbytes);
      if (dtype == DLRUN_DTYPE_COUNT) dtype = dt;
      dlrun_array *out;
      dlrun_lua_check(L, dlrun_array_from_host(single, dt, shard_ndim, shard_dims, data, nbytes, &out));
      dlrun_lua_push_array(L, out, target);
    }
    lua_rawseti(L, 5, (lua_Integer)i + 1);
    lua_settop(L, top);
  }
  dlrun_array **arrays = lua_newuserdatauv(L, n * sizeof *arrays + 1, 0);
  for (size_t i = 0; i < n; i++) {
    lua_geti(L, 5, (lua_Integer)i + 1);
    arrays[i] = dlrun_lua_test_array(L, -1);
    lua_pop(L, 1);
  }
  dlrun_array *out;
  dlrun_status st = dlrun_array_from_single_device_arrays(s, ndim, dims, arrays, n, &out);
  dlrun_lua_check(L, st);
  dlrun_lua_push_array(L, out, 2);
  return 1;
}

static void push_stats(lua_State *L, const dlrun_transfer_stats *s) {
  lua_createtable(L, 0, 4);
  lua_pushinteger(L, (lua_Integer)s->bytes_moved);
  lua_setfield(L, -2, "bytes_moved");
  lua_pushinteger(L, (lua_Integer)s->local_bytes);
  lua_setfield(L, -2, "local_bytes");
  lua_pushinteger(L, (lua_Integer)s->copies);
  lua_setfield(L, -2, "copies");
  lua_pushinteger(L, (lua_Integer)s->shares);
  lua_setfield(L, -2, "shares");
}

/* dl.transfer_stats([{reset = true}]): counts since start or the last reset. */
static int l_transfer_stats(lua_State *L) {
  dlrun_lua_check_nargs(L, "transfer_stats", 1);
  dlrun_runtime *rt = dlrun_lua_runtime(L);
  bool reset = false;
  if (!lua_isnoneornil(L, 1)) {
    if (!lua_istable(L, 1)) return dlrun_lua_type_error(L, "transfer_stats", 1, "options", "a table {reset=}");
    static const char *const keys[] = {"reset", NULL};
    dlrun_lua_check_option_keys(L, 1, "transfer_stats", keys, "TypeError");
    lua_getfield(L, 1, "reset");
    reset = lua_toboolean(L, -1);
  }
  dlrun_transfer_stats s;
  dlrun_transfer_stats_get(rt, &s);
  if (reset) dlrun_transfer_stats_reset(rt);
  push_stats(L, &s);
  return 1;
}

static int l_reset_transfer_stats(lua_State *L) {
  dlrun_lua_check_nargs(L, "reset_transfer_stats", 0);
  dlrun_transfer_stats_reset(dlrun_lua_runtime(L));
  return 0;
}

void dlrun_lua_transfer_open(lua_State *L) {
  lua_pushvalue(L, -1); /* the module table, for device_put's dl.array */
  lua_pushcclosure(L, l_device_put, 1);
  lua_setfield(L, -2, "device_put");
  static const luaL_Reg funcs[] = {
      {"device_get", l_device_get},
      {"make_array_from_single_device_arrays", l_from_single_device_arrays},
      {"make_array_from_callback", l_from_callback},
      {"transfer_stats", l_transfer_stats},
      {"reset_transfer_stats", l_reset_transfer_stats},
      {NULL, NULL},
  };
  luaL_setfuncs(L, funcs, 0);
}
