/* Lua: this process's place in a job (dlrun/distributed.h) and the
 * collectives of dlrun/multihost.h, with JAX's names: process_index,
 * process_count, sync_global_devices, process_allgather,
 * broadcast_one_to_all, assert_equal; and make_array_from_process_local_data. */
#include "binding.h"
#include "dlrun/distributed.h"
#include "dlrun/multihost.h"

static int l_process_index(lua_State *L) {
  dlrun_lua_check_nargs(L, "process_index", 0);
  lua_pushinteger(L, dlrun_process_index());
  return 1;
}

static int l_process_count(lua_State *L) {
  dlrun_lua_check_nargs(L, "process_count", 0);
  lua_pushinteger(L, dlrun_process_count());
  return 1;
}

/* sync_global_devices(name): a barrier that every process calls with the
 * same name. */
static int sync_checks(lua_State *L) {
  dlrun_lua_check_nargs(L, "sync_global_devices", 1);
  if (lua_type(L, 1) != LUA_TSTRING)
    return dlrun_lua_type_error(L, "sync_global_devices", 1, "name", "a string");
  return 1;
}

static int l_sync_global_devices(lua_State *L) {
  dlrun_lua_collective_checks(L, "sync_global_devices", sync_checks, 1);
  size_t len;
  const char *name = lua_tolstring(L, -1, &len);
  dlrun_lua_check(L, dlrun_sync_global_n(name, len));
  return 0;
}

/* The Array at idx, or the Lua data there (what dl.array takes) as a new
 * Array on this process's host device, pushed and anchored on the stack. */
static dlrun_array *host_input(lua_State *L, int idx, const char *fn, const char *what) {
  dlrun_array *a = dlrun_lua_test_array(L, idx);
  if (a) return a;
  if (!dlrun_lua_is_data(L, idx))
    return dlrun_lua_type_error(L, fn, idx, what, "an Array or data dl.array takes"), NULL;
  dlrun_sharding *host = dlrun_lua_push_device_sharding(L, dlrun_host_device(dlrun_lua_runtime(L)));
  int sharding_idx = lua_gettop(L);
  dlrun_dtype dtype = DLRUN_DTYPE_COUNT;
  int ndim;
  int64_t dims[DLRUN_MAX_NDIM];
  uint64_t nbytes;
  void *data = dlrun_lua_nested_to_host(L, idx, fn, &dtype, &ndim, dims, &nbytes);
  dlrun_lua_check_in(L, fn, dlrun_array_from_host(host, dtype, ndim, dims, data, nbytes, &a));
  lua_pop(L, 1); /* the bytes */
  dlrun_lua_push_array_owned(L, a, sharding_idx);
  return a;
}

/* make_array_from_process_local_data(sharding, local_data [, global_shape]) */
static int l_from_process_local_data(lua_State *L) {
  const char *fn = "make_array_from_process_local_data";
  dlrun_lua_check_nargs(L, fn, 3);
  lua_settop(L, 3);
  dlrun_sharding *s = dlrun_lua_test_sharding(L, 1);
  if (!s) return dlrun_lua_type_error(L, fn, 1, "sharding", "a Sharding");
  int64_t dims[DLRUN_MAX_NDIM];
  int ndim = lua_isnil(L, 3) ? -1 : dlrun_lua_check_shape(L, 3, fn, "global_shape", dims);
  dlrun_array *local = host_input(L, 2, fn, "local_data");
  dlrun_array *out;
  dlrun_lua_check_in(L, fn, dlrun_array_from_process_local_data(s, local, ndim, ndim < 0 ? NULL : dims, &out));
  dlrun_lua_push_array_owned(L, out, 1);
  return 1;
}

/* Push a result (a host array the caller owns). */
static int push_result(lua_State *L, dlrun_array *out) {
  dlrun_lua_push_array_owned(L, out, 0);
  return 1;
}

/* Optional boolean argument 2: -1 when nil, else 0 or 1. */
static int check_flag(lua_State *L, const char *fn, const char *what) {
  dlrun_lua_check_nargs(L, fn, 2);
  if (lua_isnoneornil(L, 2)) return -1;
  if (!lua_isboolean(L, 2)) return dlrun_lua_type_error(L, fn, 2, what, "a boolean");
  return lua_toboolean(L, 2);
}

/* Push argument 1 as an Array: x itself, or x's data made one (which
 * host_input has pushed). */
static void push_x(lua_State *L, const char *fn) {
  int top = lua_gettop(L);
  if (host_input(L, 1, fn, "x") && lua_gettop(L) == top) lua_pushvalue(L, 1);
}

/* The checks of x [, flag]: pushes the Array and the flag. */
static int array_and_flag(lua_State *L, const char *fn, const char *what) {
  int flag = check_flag(L, fn, what);
  push_x(L, fn);
  lua_pushinteger(L, flag);
  return 2;
}

static int allgather_checks(lua_State *L) {
  return array_and_flag(L, "process_allgather", "tiled");
}

/* process_allgather(x [, tiled]): x's value on every process. */
static int l_process_allgather(lua_State *L) {
  dlrun_lua_collective_checks(L, "process_allgather", allgather_checks, 2);
  bool tiled = lua_tointeger(L, -1) == 1;
  dlrun_array *out;
  dlrun_lua_check(L, dlrun_process_allgather(dlrun_lua_test_array(L, -2), tiled, &out));
  return push_result(L, out);
}

static int broadcast_checks(lua_State *L) {
  return array_and_flag(L, "broadcast_one_to_all", "is_source");
}

/* broadcast_one_to_all(x [, is_source]): the source process's x on every
 * process (process 0's when is_source is nil). */
static int l_broadcast_one_to_all(lua_State *L) {
  dlrun_lua_collective_checks(L, "broadcast_one_to_all", broadcast_checks, 2);
  int is_source = (int)lua_tointeger(L, -1);
  dlrun_array *out;
  dlrun_lua_check(L, dlrun_broadcast_one_to_all(dlrun_lua_test_array(L, -2), is_source, &out));
  return push_result(L, out);
}

static int assert_equal_checks(lua_State *L) {
  dlrun_lua_check_nargs(L, "assert_equal", 2);
  lua_settop(L, 2);
  if (!lua_isnil(L, 2) && lua_type(L, 2) != LUA_TSTRING)
    return dlrun_lua_type_error(L, "assert_equal", 2, "message", "a string");
  push_x(L, "assert_equal");
  lua_pushvalue(L, 2);
  return 2;
}

/* assert_equal(x [, message]): AssertionError on every process unless all
 * hold the same value. */
static int l_assert_equal(lua_State *L) {
  dlrun_lua_collective_checks(L, "assert_equal", assert_equal_checks, 2);
  dlrun_lua_check(L, dlrun_assert_equal(dlrun_lua_test_array(L, -2), lua_tostring(L, -1)));
  return 0;
}

void dlrun_lua_distributed_open(lua_State *L) {
  static const luaL_Reg funcs[] = {
      {"process_index", l_process_index},
      {"process_count", l_process_count},
      {"sync_global_devices", l_sync_global_devices},
      {"process_allgather", l_process_allgather},
      {"broadcast_one_to_all", l_broadcast_one_to_all},
      {"assert_equal", l_assert_equal},
      {"make_array_from_process_local_data", l_from_process_local_data},
      {NULL, NULL},
  };
  luaL_setfuncs(L, funcs, 0);
}
