/* Transfers from Lua: dl.device_put, dl.device_get, assembling sharded
 * arrays from pieces, and the transfer statistics. */
#include <ctype.h>
#include <string.h>

#include "binding.h"

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

dlrun_array *dlrun_lua_push_put(lua_State *L, int idx, dlrun_array *x, int sharding_idx,
                                const dlrun_put_options *o) {
  dlrun_array *out;
  dlrun_lua_check(L, dlrun_device_put(x, dlrun_lua_test_sharding(L, sharding_idx), o, &out));
  if (out == x) {
    dlrun_array_release(out);
    lua_pushvalue(L, idx);
  } else {
    dlrun_lua_push_array_owned(L, out, sharding_idx);
  }
  return out;
}

typedef struct put_args {
  int target_idx;
  const dlrun_put_options *o;
} put_args;

/* Put the leaf at idx onto the target Sharding userdata at target_idx (0: no
 * target: arrays stay where they are, data goes to the default device);
 * pushes the result. Arrays transfer, other values become arrays. */
static void put_leaf(lua_State *L, int idx, void *ctx) {
  const put_args *a = ctx;
  luaL_checkstack(L, 6, "device_put: no room on the Lua stack");
  dlrun_array *x = dlrun_lua_test_array(L, idx);
  if (x) {
    if (a->target_idx) {
      dlrun_lua_push_put(L, idx, x, a->target_idx, a->o);
    } else if (!a->o->donate && a->o->may_alias != DLRUN_ALIAS_NEVER) {
      dlrun_lua_check(L, dlrun_array_check_live(x));
      lua_pushvalue(L, idx);
    } else {
      lua_getfield(L, idx, "sharding"); /* stays where it is, as a copy */
      dlrun_lua_push_put(L, idx, x, lua_gettop(L), a->o);
      lua_remove(L, -2);
    }
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

/* ---- device_put(x, targets): a tree of targets, a prefix of x's tree ---- */

/* Deeper trees of targets are refused: the walk below recurses on them. */
#define MAX_TARGET_DEPTH 100

typedef struct prefix_walk {
  const dlrun_put_options *o;
  bool dry; /* only check the targets' tree against x's: put nothing */
  int on_path; /* stack index of a table: target tables being walked -> true */
  char path[256]; /* where the walk is, for messages; "..." ends a long one */
} prefix_walk;

static int is_identifier(const char *s) {
  if (!isalpha((unsigned char)s[0]) && s[0] != '_') return 0;
  for (; *s; s++)
    if (!isalnum((unsigned char)*s) && *s != '_') return 0;
  return 1;
}

/* Append the key at idx to the path ("x.w", "x[2]", "x[\"a b\"]"); returns
 * the old length, to restore. */
static size_t path_push(lua_State *L, prefix_walk *w, int idx) {
  size_t len = strlen(w->path), room = sizeof w->path - len;
  if (len >= 3 && strcmp(w->path + len - 3, "...") == 0) return len;
  int n;
  if (lua_type(L, idx) == LUA_TSTRING) {
    const char *s = lua_tostring(L, idx);
    if (is_identifier(s)) n = snprintf(w->path + len, room, ".%s", s);
    else n = snprintf(w->path + len, room, "[\"%.40s\"]", s);
  } else if (lua_isinteger(L, idx)) {
    n = snprintf(w->path + len, room, "[%lld]", (long long)lua_tointeger(L, idx));
  } else {
    n = snprintf(w->path + len, room, "[<%s>]", dlrun_lua_typename(L, idx));
  }
  if ((size_t)n >= room - 3) strcpy(w->path + (len < sizeof w->path - 4 ? len : sizeof w->path - 4), "...");
  return len;
}

static const char *describe(lua_State *L, int idx) {
  if (dlrun_lua_test_array(L, idx)) return "an Array";
  if (dlrun_lua_is_plain_table(L, idx)) return "a table";
  return dlrun_lua_typename(L, idx);
}

static void check_prefix_keys(lua_State *L, int xi, int ti, prefix_walk *w) {
  lua_Integer n = dlrun_lua_push_tree_keys(L, ti, "device_put");
  for (lua_Integer k = 1; k <= n; k++) {
    lua_rawgeti(L, -1, k);
    lua_pushvalue(L, -1);
    if (lua_rawget(L, xi) == LUA_TNIL) {
      path_push(L, w, -2);
      dlrun_lua_raise(L, "ValueError",
                      "device_put: the targets must be a tree prefix of x, but the targets have "
                      "%s and x has no such key",
                      w->path);
    }
    lua_pop(L, 2);
  }
  lua_pop(L, 1);
}

/* Push x (at xi) put onto the targets at ti. */
static void put_prefix(lua_State *L, int xi, int ti, prefix_walk *w, int depth) {
  luaL_checkstack(L, 8, "device_put: no room on the Lua stack");
  if (!dlrun_lua_is_plain_table(L, ti)) { /* one target for the whole subtree */
    if (!dlrun_lua_test_device(L, ti) && !dlrun_lua_test_sharding(L, ti))
      dlrun_lua_raise(L, "TypeError",
                      "device_put: the target for %s must be a Device, a Sharding or a table of "
                      "them, got %s",
                      w->path, dlrun_lua_typename(L, ti));
    if (w->dry) {
      lua_pushnil(L);
      return;
    }
    dlrun_lua_push_target(L, ti, "device_put");
    put_args a = {.target_idx = lua_gettop(L), .o = w->o};
    dlrun_lua_map_tree(L, xi, "device_put", 1, put_leaf, &a);
    lua_remove(L, -2);
    return;
  }
  lua_pushvalue(L, ti);
  int cyclic = lua_rawget(L, w->on_path) != LUA_TNIL;
  lua_pop(L, 1);
  if (cyclic)
    dlrun_lua_raise(L, "ValueError",
                    "device_put: the tree of targets is cyclic at %s; it must be a tree prefix of x",
                    w->path);
  if (depth >= MAX_TARGET_DEPTH)
    dlrun_lua_raise(L, "ValueError",
                    "device_put: the tree of targets is nested deeper than %d levels at %s",
                    MAX_TARGET_DEPTH, w->path);
  if (!dlrun_lua_is_plain_table(L, xi))
    dlrun_lua_raise(L, "ValueError",
                    "device_put: the targets must be a tree prefix of x, but at %s the targets "
                    "have a table and x has %s",
                    w->path, describe(L, xi));
  check_prefix_keys(L, xi, ti, w);
  lua_pushvalue(L, ti);
  lua_pushboolean(L, 1);
  lua_rawset(L, w->on_path);
  lua_newtable(L);
  int result = lua_gettop(L);
  lua_Integer n = dlrun_lua_push_tree_keys(L, xi, "device_put");
  for (lua_Integer k = 1; k <= n; k++) { /* in tree order: puts are collectives */
    lua_rawgeti(L, result + 1, k);
    lua_pushvalue(L, -1);
    lua_rawget(L, xi); /* key, x */
    size_t len = path_push(L, w, -2);
    lua_pushvalue(L, -2);
    if (lua_rawget(L, ti) == LUA_TNIL) /* key, x, t */
      dlrun_lua_raise(L, "ValueError",
                      "device_put: the targets must be a tree prefix of x, but x has %s and the "
                      "targets have no target for it",
                      w->path);
    put_prefix(L, lua_gettop(L) - 1, lua_gettop(L), w, depth + 1); /* key, x, t, put */
    lua_pushvalue(L, -4);
    lua_insert(L, -2);
    lua_rawset(L, result); /* key, x, t */
    lua_pop(L, 3);
    w->path[len] = 0;
  }
  lua_settop(L, result);
  lua_pushvalue(L, ti);
  lua_pushnil(L);
  lua_rawset(L, w->on_path);
}

/* A plain table in place of the target with nothing after it is the
 * options when it looks like them: boolean values only (a tree of targets
 * holds Devices, Shardings and tables). */
static int looks_like_options(lua_State *L, int idx) {
  lua_pushnil(L);
  while (lua_next(L, idx)) {
    int ok = lua_isboolean(L, -1);
    lua_pop(L, 1);
    if (!ok) {
      lua_pop(L, 1);
      return 0;
    }
  }
  return 1;
}

/* device_put's own checks of its arguments: the options (at 2 or 3), and
 * whether the target is a tree. */
static dlrun_put_options put_arguments(lua_State *L, int *opts_idx, bool *target_tree) {
  dlrun_lua_check_nargs(L, "device_put", 3);
  if (lua_gettop(L) < 1) dlrun_lua_type_error(L, "device_put", 1, "x", "an Array or data");
  *opts_idx = 3;
  *target_tree = dlrun_lua_is_plain_table(L, 2);
  /* device_put(x, {options}): a plain table in place of the target. */
  if (*target_tree && lua_isnoneornil(L, 3) && looks_like_options(L, 2)) {
    *opts_idx = 2;
    *target_tree = false;
  }
  dlrun_put_options o = check_put_options(L, *opts_idx);
  if (o.donate && o.may_alias == DLRUN_ALIAS_ALLOW)
    dlrun_lua_raise(L, "ValueError", "may_alias and donate cannot be True at the same time.");
  return o;
}

/* The checks a put between processes makes before its first collective:
 * the arguments, and a tree of targets against x's tree. */
static int put_checks(lua_State *L) {
  int opts_idx;
  bool target_tree;
  dlrun_put_options o = put_arguments(L, &opts_idx, &target_tree);
  if (target_tree) {
    lua_settop(L, opts_idx);
    lua_newtable(L);
    prefix_walk w = {.o = &o, .dry = true, .on_path = lua_gettop(L), .path = "x"};
    put_prefix(L, 1, 2, &w, 0);
  }
  return 0;
}

static bool sharding_within(const dlrun_sharding *s, int process) {
  for (size_t i = 0; i < dlrun_sharding_device_count(s); i++)
    if (dlrun_device_process_index(dlrun_sharding_device(s, i)) != process) return false;
  return true;
}

/* Whether the Array, Device or Sharding at v lies on process *p (the
 * first one met sets it); a plain table not seen before is queued in todo. */
static bool value_within(lua_State *L, int v, int *p, int seen, int todo, lua_Integer *ntodo) {
  dlrun_array *x = dlrun_lua_test_array(L, v);
  dlrun_device *d = dlrun_lua_test_device(L, v);
  dlrun_sharding *s = x ? dlrun_array_sharding(x) : dlrun_lua_test_sharding(L, v);
  if (d || s) {
    if (*p < 0) *p = dlrun_device_process_index(d ? d : dlrun_sharding_device(s, 0));
    return d ? dlrun_device_process_index(d) == *p : sharding_within(s, *p);
  }
  if (dlrun_lua_is_plain_table(L, v)) {
    lua_pushvalue(L, v);
    if (lua_rawget(L, seen) == LUA_TNIL) {
      lua_pushvalue(L, v);
      lua_pushboolean(L, 1);
      lua_rawset(L, seen);
      lua_pushvalue(L, v);
      lua_rawseti(L, todo, ++*ntodo);
    }
    lua_pop(L, 1);
  }
  return true;
}

/* Whether every Array, Device and Sharding reached from the value at idx
 * (through plain tables, each walked once: cycles end) lies on process *p
 * (-1: the first one met). */
static bool within_one_process(lua_State *L, int idx, int *p) {
  luaL_checkstack(L, 8, "device_put: no room on the Lua stack");
  int top = lua_gettop(L), seen = top + 1, todo = top + 2;
  lua_newtable(L);
  lua_newtable(L);
  lua_Integer ntodo = 0;
  bool one = value_within(L, idx, p, seen, todo, &ntodo);
  while (one && ntodo > 0) {
    lua_rawgeti(L, todo, ntodo); /* the table to walk, at todo + 1 */
    lua_pushnil(L);
    lua_rawseti(L, todo, ntodo--);
    lua_pushnil(L);
    while (one && lua_next(L, todo + 1)) {
      one = value_within(L, lua_gettop(L), p, seen, todo, &ntodo);
      lua_pop(L, 1);
    }
    lua_settop(L, todo);
  }
  lua_settop(L, top);
  return one;
}

/* Whether the put is collective as the arguments stand, before any check:
 * the Arrays of x and the targets (a Device, a Sharding, a tree of them;
 * the Arrays' own shardings without one) spanning processes. */
static bool put_spans(lua_State *L) {
  if (dlrun_process_count() < 2) return false;
  int p = -1;
  return !within_one_process(L, 1, &p) || (lua_gettop(L) >= 2 && !within_one_process(L, 2, &p));
}

/* dl.device_put(x [, target] [, {donate=, may_alias=}]): target is a
 * Device, a Sharding, or a tree of them that is a prefix of x's tree. A
 * put of one Array between processes checks its arguments under the
 * agreement, so that a bad one on one process fails it on every process. */
static int l_device_put(lua_State *L) {
  if (put_spans(L)) dlrun_lua_collective_checks(L, "device_put", put_checks, 0);
  int opts_idx;
  bool target_tree;
  dlrun_put_options o = put_arguments(L, &opts_idx, &target_tree);
  lua_settop(L, opts_idx);
  if (target_tree) {
    lua_newtable(L);
    prefix_walk w = {.o = &o, .on_path = lua_gettop(L), .path = "x"};
    put_prefix(L, 1, 2, &w, 0);
    return 1;
  }
  int target_idx = 0;
  if (opts_idx == 3 && !lua_isnil(L, 2)) {
    dlrun_lua_push_target(L, 2, "device_put");
    target_idx = lua_gettop(L);
  }
  put_args args = {.target_idx = target_idx, .o = &o};
  dlrun_lua_map_tree(L, 1, "device_put", 1, put_leaf, &args);
  return 1;
}

/* An array that spans processes, read from this process's shards (a
 * replica here; else the fetch error) into a new array on the host device
 * (the Sharding userdata at host_idx): no collective, as JAX reads it. */
static void get_global(lua_State *L, dlrun_array *x, int host_idx) {
  void *data = dlrun_lua_read_all(L, x);
  dlrun_array *out;
  dlrun_lua_check(L, dlrun_array_from_host(dlrun_lua_test_sharding(L, host_idx),
                                           dlrun_array_dtype(x), dlrun_array_ndim(x),
                                           dlrun_array_shape(x), data, dlrun_array_nbytes(x),
                                           &out));
  lua_pop(L, 1); /* the bytes */
  dlrun_lua_push_array_owned(L, out, host_idx);
}

/* dl.device_get(x): arrays materialised on the host cpu device (the
 * Sharding userdata at *host_idx); tables of arrays map element-wise;
 * anything else passes through. */
static void get_leaf(lua_State *L, int idx, void *ctx) {
  int host_idx = *(const int *)ctx;
  luaL_checkstack(L, 4, "device_get: no room on the Lua stack");
  dlrun_array *x = dlrun_lua_test_array(L, idx);
  if (!x) lua_pushvalue(L, idx);
  else if (!dlrun_sharding_is_fully_addressable(dlrun_array_sharding(x))) get_global(L, x, host_idx);
  else dlrun_lua_check(L, dlrun_array_block_until_ready(dlrun_lua_push_put(L, idx, x, host_idx, NULL)));
}

static int l_device_get(lua_State *L) {
  dlrun_lua_check_nargs(L, "device_get", 1);
  lua_settop(L, 1);
  dlrun_lua_push_device_sharding(L, dlrun_host_device(dlrun_lua_runtime(L)));
  int host_idx = 2;
  dlrun_lua_map_tree(L, 1, "device_get", 0, get_leaf, &host_idx);
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
  if (!dlrun_lua_is_plain_table(L, 3))
    return dlrun_lua_type_error(L, fn, 3, "arrays", "a list of Arrays");
  lua_Integer len = dlrun_lua_check_len(L, 3, fn, "arrays");
  /* One array per device: a longer list is refused before allocating for it. */
  if (len > DLRUN_MAX_DEVICES)
    return dlrun_lua_raise(L, "ValueError",
                           "%s: argument 3 (arrays) has %lld entries, more than the %d devices a "
                           "runtime can have",
                           fn, (long long)len, DLRUN_MAX_DEVICES);
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
  dlrun_lua_push_array_owned(L, out, 2);
  return 1;
}

/* dl.make_array_from_callback(shape, sharding, fn [, dtype]): fn(index)
 * gives each device's data (Lua data or an Array); as JAX, fn is called once
 * per addressable device (this process's, in a job), or once in all for a
 * fully replicated sharding. */
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
  size_t total = dlrun_sharding_device_count(s), n = 0;
  bool replicated = dlrun_sharding_is_fully_replicated(s);
  lua_createtable(L, (int)total, 0); /* 5: the per-device arrays */
  lua_pushnil(L);                    /* 6: the one result of a replicated sharding */
  for (size_t i = 0; i < total; i++) {
    if (!dlrun_sharding_is_addressable(s, i)) continue; /* another process calls back */
    dlrun_device *dev = dlrun_sharding_device(s, i);
    int top = lua_gettop(L);
    if (!replicated || n == 0) {
      lua_pushvalue(L, 3);
      dlrun_sharding_shard_index(s, i, ndim, dims, lo, hi);
      dlrun_lua_push_index(L, ndim, dims, lo, hi);
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
    single = dlrun_lua_push_sharding(L, single);
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
      dlrun_lua_push_array_owned(L, out, target);
    } else {
      int shard_ndim;
      int64_t shard_dims[DLRUN_MAX_NDIM];
      uint64_t nbytes;
      /* Without a dtype each result keeps its own, as JAX: a mismatch is
       * the assembly's error, not a silent conversion. */
      dlrun_dtype dt = dtype;
      void *data = dlrun_lua_nested_to_host(L, target - 1, fn, &dt, &shard_ndim, shard_dims, &nbytes);
      dlrun_array *out;
      dlrun_lua_check(L, dlrun_array_from_host(single, dt, shard_ndim, shard_dims, data, nbytes, &out));
      dlrun_lua_push_array_owned(L, out, target);
    }
    lua_rawseti(L, 5, (lua_Integer)++n);
    lua_settop(L, top);
  }
  dlrun_array *out;
  if (n == 0 && dtype == DLRUN_DTYPE_COUNT)
    return dlrun_lua_raise(L, "ValueError",
                           "%s: this process holds none of the sharding's devices, so no data "
                           "gives the dtype; pass dtype",
                           fn);
  if (n == 0) {
    /* None of the devices is this process's: the array holds no shard. */
    dlrun_scalar zero = {.kind = DLRUN_SCALAR_INT};
    dlrun_lua_check(L, dlrun_array_full(s, dtype, ndim, dims, &zero, &out));
    dlrun_lua_push_array_owned(L, out, 2);
    return 1;
  }
  dlrun_array **arrays = lua_newuserdatauv(L, n * sizeof *arrays + 1, 0);
  for (size_t i = 0; i < n; i++) {
    lua_geti(L, 5, (lua_Integer)i + 1);
    arrays[i] = dlrun_lua_test_array(L, -1);
    lua_pop(L, 1);
  }
  dlrun_status st = dlrun_array_from_single_device_arrays(s, ndim, dims, arrays, n, &out);
  dlrun_lua_check(L, st);
  dlrun_lua_push_array_owned(L, out, 2);
  return 1;
}

static void push_stats(lua_State *L, const dlrun_transfer_stats *s) {
  lua_createtable(L, 0, 7);
  dlrun_lua_set_printed(L, "record");
  lua_pushinteger(L, (lua_Integer)s->bytes_moved);
  lua_setfield(L, -2, "bytes_moved");
  lua_pushinteger(L, (lua_Integer)s->local_bytes);
  lua_setfield(L, -2, "local_bytes");
  lua_pushinteger(L, (lua_Integer)s->copies);
  lua_setfield(L, -2, "copies");
  lua_pushinteger(L, (lua_Integer)s->shares);
  lua_setfield(L, -2, "shares");
  lua_pushinteger(L, (lua_Integer)s->bytes_sent);
  lua_setfield(L, -2, "bytes_sent");
  lua_pushinteger(L, (lua_Integer)s->bytes_received);
  lua_setfield(L, -2, "bytes_received");
  lua_pushinteger(L, (lua_Integer)s->ipc_bytes);
  lua_setfield(L, -2, "ipc_bytes");
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
