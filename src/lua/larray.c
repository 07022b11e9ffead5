/* Array userdata and the creation functions. The userdata is made valid
 * (empty) before the array is created, so a Lua memory error can never leave
 * a half-made object; __gc and __close share one idempotent release. */
#include <math.h>
#include <string.h>

#include "binding.h"

#define FORMAT_KEY "dlrun.format"

typedef struct array_ud {
  dlrun_array *a;
} array_ud;

/* Push an empty Array userdata whose sharding (uservalue 1) is the value at
 * sharding_idx (absolute), or nil. */
static array_ud *new_array_ud(lua_State *L, int sharding_idx) {
  array_ud *u = lua_newuserdatauv(L, sizeof *u, 1);
  u->a = NULL;
  luaL_setmetatable(L, DLRUN_ARRAY_MT);
  if (sharding_idx) {
    lua_pushvalue(L, sharding_idx);
    lua_setiuservalue(L, -2, 1);
  }
  return u;
}

void dlrun_lua_push_array_owned(lua_State *L, dlrun_array *a, int sharding_idx) {
  /* Take ownership only once the userdata exists. */
  if (sharding_idx) sharding_idx = lua_absindex(L, sharding_idx);
  array_ud *u = new_array_ud(L, sharding_idx);
  u->a = a;
}

/* The host keeps its reference: the userdata retains one of its own. */
void dlrun_lua_pusharray(lua_State *L, dlrun_array *a) {
  array_ud *u = new_array_ud(L, 0);
  dlrun_array_retain(a);
  u->a = a;
}

/* For the host application, never raising: a released Array is no array (NULL). */
dlrun_array *dlrun_lua_toarray(lua_State *L, int idx) {
  array_ud *u = luaL_testudata(L, idx, DLRUN_ARRAY_MT);
  return u ? u->a : NULL;
}

dlrun_array *dlrun_lua_test_array(lua_State *L, int idx) {
  array_ud *u = luaL_testudata(L, idx, DLRUN_ARRAY_MT);
  if (u && !u->a) dlrun_lua_released_error(L, idx);
  return u ? u->a : NULL;
}

dlrun_array *dlrun_lua_check_array(lua_State *L, int idx, const char *fn) {
  dlrun_array *a = dlrun_lua_test_array(L, idx);
  if (!a) dlrun_lua_type_error(L, fn, idx, "array", "an Array");
  return a;
}

dlrun_array *dlrun_lua_check_array_mt(lua_State *L, int idx, int mt_idx, const char *fn) {
  array_ud *u = lua_touserdata(L, idx);
  if (u && lua_getmetatable(L, idx)) {
    int same = lua_rawequal(L, -1, mt_idx);
    lua_pop(L, 1);
    if (same) {
      if (!u->a) dlrun_lua_released_error(L, idx);
      return u->a;
    }
  }
  return dlrun_lua_check_array(L, idx, fn); /* not an Array: its error */
}

/* self of a method taking at most `max` arguments, self included. */
static dlrun_array *check_self(lua_State *L, const char *fn, int max) {
  dlrun_array *a = dlrun_lua_check_array(L, 1, fn);
  dlrun_lua_check_nargs(L, fn, max);
  return a;
}

/* The same, for methods that need the array's data. */
static dlrun_array *check_live(lua_State *L, const char *fn, int max) {
  dlrun_array *a = check_self(L, fn, max);
  dlrun_lua_check(L, dlrun_array_check_live(a));
  return a;
}

/* ---- creation ---- */

static int l_array(lua_State *L) {
  if (!dlrun_lua_is_data(L, 1))
    return dlrun_lua_type_error(L, "array", 1, "data",
                                "a number, a boolean, {re, im} or nested tables of them");
  dlrun_dtype dtype = lua_isnoneornil(L, 2) ? DLRUN_DTYPE_COUNT
                                            : dlrun_lua_check_dtype(L, 2, "array");
  dlrun_lua_check_nargs(L, "array", 3);
  dlrun_sharding *target = dlrun_lua_push_target(L, 3, "array");
  int target_idx = lua_gettop(L);
  int ndim;
  int64_t dims[DLRUN_MAX_NDIM];
  uint64_t nbytes;
  void *data = dlrun_lua_nested_to_host(L, 1, "array", &dtype, &ndim, dims, &nbytes);
  array_ud *u = new_array_ud(L, target_idx);
  dlrun_lua_check(L, dlrun_array_from_host(target, dtype, ndim, dims, data, nbytes, &u->a));
  return 1;
}

static int l_frombytes(lua_State *L) {
  if (lua_type(L, 1) != LUA_TSTRING)
    return dlrun_lua_type_error(L, "frombytes", 1, "data", "a string");
  int64_t dims[DLRUN_MAX_NDIM];
  int ndim = dlrun_lua_check_shape(L, 2, "frombytes", "shape", dims);
  dlrun_dtype dtype = dlrun_lua_check_dtype(L, 3, "frombytes");
  dlrun_lua_check_nargs(L, "frombytes", 4);
  dlrun_sharding *target = dlrun_lua_push_target(L, 4, "frombytes");
  int target_idx = lua_gettop(L);
  size_t len;
  const char *s = lua_tolstring(L, 1, &len);
  uint64_t want;
  dlrun_lua_check_in(L, "frombytes", dlrun_shape_nbytes(ndim, dims, dtype, &want));
  if (want != len) {
    char shape[256];
    return dlrun_lua_raise(L, "ValueError", "frombytes: got %zu bytes but shape %s needs %llu",
                           len, dlrun_shape_string(dtype, ndim, dims, shape, sizeof shape),
                           (unsigned long long)want);
  }
  array_ud *u = new_array_ud(L, target_idx);
  dlrun_lua_check(L, dlrun_array_from_host(target, dtype, ndim, dims, s, len, &u->a));
  return 1;
}

static int fill(lua_State *L, const char *fn, int shape_idx, int value_idx, int dtype_idx,
                const dlrun_scalar *fixed) {
  int64_t dims[DLRUN_MAX_NDIM];
  int ndim = dlrun_lua_check_shape(L, shape_idx, fn, "shape", dims);
  dlrun_scalar value;
  if (fixed) value = *fixed;
  else if (!dlrun_lua_to_scalar(L, value_idx, &value))
    return dlrun_lua_type_error(L, fn, value_idx, "fill_value", "a number, a boolean or {re, im}");
  /* No dtype: float32 for zeros/ones, JAX's default for the value in full. */
  dlrun_dtype dtype = lua_isnoneornil(L, dtype_idx) ? dlrun_lua_default_dtype(&value)
                                                    : dlrun_lua_check_dtype(L, dtype_idx, fn);
  dlrun_lua_check_nargs(L, fn, dtype_idx + 1);
  dlrun_sharding *target = dlrun_lua_push_target(L, dtype_idx + 1, fn);
  unsigned char scratch[16] = {0};
  uint64_t nbytes;
  dlrun_lua_check_in(L, fn, dlrun_dtype_store_at(dtype, scratch, 0, &value));
  dlrun_lua_check_in(L, fn, dlrun_shape_nbytes(ndim, dims, dtype, &nbytes));
  array_ud *u = new_array_ud(L, lua_gettop(L));
  dlrun_lua_check(L, dlrun_array_full(target, dtype, ndim, dims, &value, &u->a));
  return 1;
}

static int l_zeros(lua_State *L) {
  dlrun_scalar zero = {.kind = DLRUN_SCALAR_FLOAT, .re = 0};
  return fill(L, "zeros", 1, 0, 2, &zero);
}

static int l_ones(lua_State *L) {
  dlrun_scalar one = {.kind = DLRUN_SCALAR_FLOAT, .re = 1};
  return fill(L, "ones", 1, 0, 2, &one);
}

static int l_full(lua_State *L) { return fill(L, "full", 1, 2, 3, NULL); }

/* Number of values of arange(start, stop, step), as NumPy: ceil((stop-start)/step). */
static int64_t arange_length(lua_State *L, const dlrun_scalar *a, const dlrun_scalar *b,
                             const dlrun_scalar *step) {
  if (a->kind == DLRUN_SCALAR_INT && b->kind == DLRUN_SCALAR_INT && step->kind == DLRUN_SCALAR_INT) {
    if (step->i == 0) dlrun_lua_raise(L, "ValueError", "arange: step must not be zero");
    /* 128-bit so that stop - start cannot overflow. */
    __int128 span = (__int128)b->i - a->i;
    __int128 s = step->i;
    __int128 n = (span > 0) == (s > 0) ? (span + s + (s > 0 ? -1 : 1)) / s : 0;
    if (n < 0) n = 0;
    if (n > INT64_MAX) dlrun_lua_raise(L, "ValueError", "arange: too many values");
    return (int64_t)n;
  }
  double x = a->kind == DLRUN_SCALAR_INT ? (double)a->i : a->re;
  double y = b->kind == DLRUN_SCALAR_INT ? (double)b->i : b->re;
  double d = step->kind == DLRUN_SCALAR_INT ? (double)step->i : step->re;
  if (d == 0) dlrun_lua_raise(L, "ValueError", "arange: step must not be zero");
  if (!isfinite(x) || !isfinite(y) || !isfinite(d))
    dlrun_lua_raise(L, "ValueError", "arange: start, stop and step must be finite");
  double n = ceil((y - x) / d);
  if (n < 0) n = 0;
  if (n >= 9.2e18) dlrun_lua_raise(L, "ValueError", "arange: too many values (%.17g)", n);
  return (int64_t)n;
}

/* arange(n | start, stop [, step] [, dtype] [, target]) */
static int l_arange(lua_State *L) {
  dlrun_scalar nums[3];
  int count = 0, i = 1;
  while (count < 3 && lua_type(L, i) == LUA_TNUMBER) {
    dlrun_lua_to_scalar(L, i, &nums[count++]);
    i++;
  }
  if (count == 0)
    return dlrun_lua_type_error(L, "arange", 1, "stop", "a number");
  dlrun_scalar start = {.kind = DLRUN_SCALAR_INT, .i = 0}, stop, step = {.kind = DLRUN_SCALAR_INT, .i = 1};
  if (count == 1) stop = nums[0];
  else {
    start = nums[0];
    stop = nums[1];
    if (count == 3) step = nums[2];
  }
  dlrun_dtype dtype;
  if (lua_isnoneornil(L, i)) {
    int all_int = start.kind == DLRUN_SCALAR_INT && stop.kind == DLRUN_SCALAR_INT &&
                  step.kind == DLRUN_SCALAR_INT;
    dtype = all_int ? DLRUN_INT32 : DLRUN_FLOAT32;
  } else {
    if (lua_type(L, i) != LUA_TSTRING)
      return dlrun_lua_type_error(L, "arange", i, "dtype", "a dtype name such as \"float32\"");
    dtype = dlrun_lua_check_dtype(L, i, "arange");
  }
  dlrun_lua_check_nargs(L, "arange", i + 1);
  int64_t n = arange_length(L, &start, &stop, &step);
  dlrun_sharding *target = dlrun_lua_push_target(L, i + 1, "arange");
  array_ud *u = new_array_ud(L, lua_gettop(L));
  /* Core's value checks come first and name arange; its size check does not. */
  dlrun_lua_check_in(L, "arange", dlrun_array_arange(target, dtype, &start, &step, n, &u->a));
  return 1;
}

/* ---- reading ---- */

void *dlrun_lua_read_all(lua_State *L, dlrun_array *a) {
  uint64_t n = dlrun_array_nbytes(a);
  void *host = lua_newuserdatauv(L, (size_t)n, 0);
  dlrun_lua_check(L, dlrun_array_read(a, 0, n, host));
  return host;
}

static int l_tolist(lua_State *L) {
  dlrun_array *a = check_live(L, "tolist", 1);
  void *host = dlrun_lua_read_all(L, a);
  dlrun_lua_push_nested(L, dlrun_array_dtype(a), dlrun_array_ndim(a), dlrun_array_shape(a), host);
  return 1;
}

/* Two copies (device to a host buffer, buffer to the string) are the least
 * Lua 5.4 allows: it cannot fill a string in place (luaL_Buffer's result is
 * a copy of its box too, and measured slower here; lua_pushexternalstring
 * is Lua 5.5's). */
static int l_tobytes(lua_State *L) {
  dlrun_array *a = check_live(L, "tobytes", 1);
  void *host = dlrun_lua_read_all(L, a);
  lua_pushlstring(L, host, (size_t)dlrun_array_nbytes(a));
  return 1;
}

static int l_item(lua_State *L) {
  dlrun_array *a = check_live(L, "item", 1);
  if (dlrun_array_size(a) != 1)
    return dlrun_lua_raise(L, "ValueError",
                           "can only convert an array of size 1 to a Lua scalar (size is %lld)",
                           (long long)dlrun_array_size(a));
  unsigned char buf[16];
  dlrun_lua_check(L, dlrun_array_read(a, 0, dlrun_array_nbytes(a), buf));
  dlrun_scalar s;
  dlrun_dtype_load_at(dlrun_array_dtype(a), buf, 0, &s);
  dlrun_lua_push_scalar(L, &s);
  return 1;
}

/* _elements(first, count): `count` elements from 1-based flat index `first`
 * (used by the printer to fetch only what it shows; uint64 as raw bits). */
static int l_elements(lua_State *L) {
  dlrun_array *a = check_live(L, "_elements", 3);
  lua_Integer first = luaL_checkinteger(L, 2), count = luaL_checkinteger(L, 3);
  int64_t size = dlrun_array_size(a);
  if (first < 1 || count < 0 || count > size || first - 1 > size - count)
    return dlrun_lua_raise(L, "ValueError", "_elements: range %lld+%lld outside size %lld",
                           (long long)first, (long long)count, (long long)size);
  dlrun_dtype dt = dlrun_array_dtype(a);
  unsigned bits = dlrun_dtype_get(dt)->dl_bits;
  if (bits < 8) {
    /* Packed: from the first element of its byte group (8/gcd(bits, 8)
     * elements, a whole number of bytes) up to the byte holding the last. */
    int64_t group = bits == 6 ? 4 : 8 / bits;
    int64_t e0 = (first - 1) / group * group;
    uint64_t b0 = (uint64_t)e0 * bits / 8, b1 = ((uint64_t)(first - 1 + count) * bits + 7) / 8;
    unsigned char *packed = lua_newuserdatauv(L, b1 > b0 ? (size_t)(b1 - b0) : 1, 0);
    dlrun_lua_check(L, dlrun_array_read(a, b0, b1 - b0, packed));
    lua_createtable(L, count < (1 << 26) ? (int)count : 0, 0);
    for (lua_Integer i = 0; i < count; i++) {
      dlrun_scalar v;
      dlrun_dtype_load_at(dt, packed, first - 1 - e0 + i, &v);
      dlrun_lua_push_scalar(L, &v);
      lua_rawseti(L, -2, i + 1);
    }
    return 1;
  }
  size_t esize = dlrun_dtype_get(dt)->size;
  unsigned char *host = lua_newuserdatauv(L, (size_t)count * esize, 0);
  dlrun_lua_check(L, dlrun_array_read(a, (uint64_t)(first - 1) * esize, (uint64_t)count * esize, host));
  if (dt == DLRUN_UINT64) {
    /* The raw bits as integers (2^63 and up come out negative): the printer
     * reads them as unsigned, exactly, where a float would round. */
    lua_createtable(L, count < (1 << 26) ? (int)count : 0, 0);
    for (lua_Integer i = 0; i < count; i++) {
      int64_t v;
      memcpy(&v, host + i * 8, 8);
      lua_pushinteger(L, (lua_Integer)v);
      lua_rawseti(L, -2, i + 1);
    }
    return 1;
  }
  int64_t dims[1] = {count};
  dlrun_lua_push_nested(L, dt, 1, dims, host);
  return 1;
}

static int l_devices(lua_State *L) {
  dlrun_array *a = check_live(L, "devices", 1);
  dlrun_lua_push_device_set(L, dlrun_array_sharding(a));
  return 1;
}

/* The sharding userdata of the array at idx (made and kept on first use for
 * arrays created without one). */
static void push_array_sharding(lua_State *L, int idx, dlrun_array *a) {
  if (lua_getiuservalue(L, idx, 1) != LUA_TNIL) return;
  lua_pop(L, 1);
  dlrun_sharding *s = dlrun_array_sharding(a);
  dlrun_sharding_retain(s);
  dlrun_lua_push_sharding(L, s);
  lua_pushvalue(L, -1);
  lua_setiuservalue(L, idx, 1);
}

/* A Shard: {device=, index=, replica_id=, data=}; data is nil for another
 * process's shard. */
static void push_shard(lua_State *L, dlrun_array *a, size_t i) {
  int ndim = dlrun_array_ndim(a);
  int64_t lo[DLRUN_MAX_NDIM], hi[DLRUN_MAX_NDIM], replica;
  dlrun_device *dev;
  dlrun_array_shard_index(a, i, &dev, lo, hi, &replica);
  lua_createtable(L, 0, 4);
  dlrun_lua_set_printed(L, "shard");
  dlrun_lua_push_device(L, dev);
  lua_setfield(L, -2, "device");
  dlrun_lua_push_index(L, ndim, dlrun_array_shape(a), lo, hi);
  lua_setfield(L, -2, "index");
  lua_pushinteger(L, replica);
  lua_setfield(L, -2, "replica_id");
  if (!dlrun_sharding_is_addressable(dlrun_array_sharding(a), i)) return;
  array_ud *u = new_array_ud(L, 0);
  dlrun_lua_check(L, dlrun_array_shard_data(a, i, &u->a));
  lua_setfield(L, -2, "data");
}

/* addressable_shards (this process's), or global_shards (all). */
static int push_shards(lua_State *L, dlrun_array *a, bool global) {
  size_t n = dlrun_array_shard_count(a);
  lua_createtable(L, (int)n, 0);
  dlrun_lua_set_printed(L, "list");
  lua_Integer k = 0;
  for (size_t i = 0; i < n; i++) {
    if (!global && !dlrun_sharding_is_addressable(dlrun_array_sharding(a), i)) continue;
    push_shard(L, a, i);
    lua_rawseti(L, -2, ++k);
  }
  return 1;
}

/* addressable_data(i): the data of this process's i-th shard (1-based);
 * any i gives a full replica of a fully replicated array. */
static int l_addressable_data(lua_State *L) {
  dlrun_array *a = check_live(L, "addressable_data", 2);
  dlrun_sharding *s = dlrun_array_sharding(a);
  lua_Integer i;
  size_t n = 0, total = dlrun_array_shard_count(a);
  for (size_t k = 0; k < total; k++) n += dlrun_sharding_is_addressable(s, k);
  if (!dlrun_lua_to_integer(L, 2, &i))
    return dlrun_lua_number_error(L, "addressable_data", 2, "i", "an integer");
  if (dlrun_sharding_is_fully_replicated(s)) i = 1;
  if (i < 1 || (size_t)i > n)
    return dlrun_lua_raise(L, "ValueError", "addressable_data: index %lld is out of range (1 to %zu)",
                           (long long)i, n);
  size_t k = 0;
  for (lua_Integer seen = 0; k < total; k++)
    if (dlrun_sharding_is_addressable(s, k) && ++seen == i) break;
  array_ud *u = new_array_ud(L, 0);
  dlrun_lua_check(L, dlrun_array_shard_data(a, k, &u->a));
  return 1;
}

static int l_block_until_ready(lua_State *L) {
  dlrun_array *a = check_self(L, "block_until_ready", 1);
  dlrun_lua_check(L, dlrun_array_block_until_ready(a));
  lua_settop(L, 1);
  return 1;
}

static int l_delete(lua_State *L) {
  dlrun_array_delete(check_self(L, "delete", 1));
  return 0;
}

static int l_is_deleted(lua_State *L) {
  lua_pushboolean(L, dlrun_array_is_deleted(check_self(L, "is_deleted", 1)));
  return 1;
}

/* __close and __gc share this release, both idempotent: __close deletes
 * the array (its device memory is freed at once; it then reads as deleted,
 * as after delete()); __gc drops this value's reference only, so an array
 * the host or another Lua state also holds lives on. */
static int array_release(lua_State *L) {
  array_ud *u = luaL_testudata(L, 1, DLRUN_ARRAY_MT);
  if (!u || !u->a) return 0;
  if (lua_toboolean(L, lua_upvalueindex(1))) {
    dlrun_array_release(u->a);
    u->a = NULL;
  } else {
    dlrun_array_delete(u->a);
  }
  return 0;
}

static void push_shape(lua_State *L, dlrun_array *a) {
  int ndim = dlrun_array_ndim(a);
  const int64_t *dims = dlrun_array_shape(a);
  lua_createtable(L, ndim, 0);
  dlrun_lua_set_printed(L, "tuple");
  for (int i = 0; i < ndim; i++) {
    lua_pushinteger(L, dims[i]);
    lua_rawseti(L, -2, i + 1);
  }
}

/* What an Array has besides its methods (for the AttributeError's suggestion). */
static const char *const ARRAY_FIELDS[] = {
    "shape", "dtype", "ndim", "size", "itemsize", "nbytes", "sharding", "is_fully_addressable",
    "is_fully_replicated", "imported", "addressable_shards", "global_shards", NULL,
};

/* Metadata stays readable after delete(), as in JAX. */
static int array_index(lua_State *L) {
  dlrun_array *a = dlrun_lua_check_array(L, 1, "Array.__index");
  if (lua_type(L, 2) != LUA_TSTRING) return 0; /* x[1]: no such indexing, nil */
  const char *key = dlrun_lua_field_name(L, 2);
  lua_pushvalue(L, 2);
  if (lua_rawget(L, lua_upvalueindex(1)) != LUA_TNIL) return 1; /* a method */
  const dlrun_dtype_info *info = dlrun_dtype_get(dlrun_array_dtype(a));
  if (strcmp(key, "shape") == 0) push_shape(L, a);
  else if (strcmp(key, "dtype") == 0) lua_pushstring(L, info->name);
  else if (strcmp(key, "ndim") == 0) lua_pushinteger(L, dlrun_array_ndim(a));
  else if (strcmp(key, "size") == 0) lua_pushinteger(L, dlrun_array_size(a));
  else if (strcmp(key, "itemsize") == 0) lua_pushinteger(L, (lua_Integer)info->size);
  else if (strcmp(key, "nbytes") == 0) lua_pushinteger(L, (lua_Integer)dlrun_array_nbytes(a));
  else if (strcmp(key, "sharding") == 0) push_array_sharding(L, 1, a);
  else if (strcmp(key, "is_fully_addressable") == 0)
    lua_pushboolean(L, dlrun_sharding_is_fully_addressable(dlrun_array_sharding(a)));
  else if (strcmp(key, "is_fully_replicated") == 0)
    lua_pushboolean(L, dlrun_sharding_is_fully_replicated(dlrun_array_sharding(a)));
  else if (strcmp(key, "imported") == 0) { /* what from_dlpack did: nil for other arrays */
    dlrun_import_outcome how = dlrun_array_import_outcome(a);
    if (how != DLRUN_IMPORT_WRAPPED && how != DLRUN_IMPORT_COPIED) return 0;
    lua_pushstring(L, how == DLRUN_IMPORT_WRAPPED ? "wrapped" : "copied");
  } else if (strcmp(key, "addressable_shards") == 0 || strcmp(key, "global_shards") == 0) {
    dlrun_lua_check(L, dlrun_array_check_live(a));
    push_shards(L, a, key[0] == 'g');
  } else return dlrun_lua_attribute_error(L, "Array", 2, ARRAY_FIELDS, lua_upvalueindex(1));
  return 1;
}

static int array_len(lua_State *L) {
  dlrun_array *a = dlrun_lua_check_array(L, 1, "#");
  if (dlrun_array_ndim(a) == 0)
    return dlrun_lua_raise(L, "TypeError", "len() of unsized object (a 0-d array)");
  lua_pushinteger(L, dlrun_array_shape(a)[0]);
  return 1;
}

static int array_tostring(lua_State *L) {
  dlrun_array *a = dlrun_lua_check_array(L, 1, "tostring");
  lua_getfield(L, LUA_REGISTRYINDEX, FORMAT_KEY);
  /* An array this process does not hold whole prints without values, as
   * JAX prints one that spans processes. */
  const char *how = dlrun_array_is_deleted(a)         ? "deleted_repr"
                    : !dlrun_array_has_full_value(a) ? "global_repr"
                                                      : "repr";
  lua_getfield(L, -1, how);
  lua_pushvalue(L, 1);
  lua_call(L, 1, 1);
  return 1;
}

/* core._is_array(x): whether x is a dlrun Array (deleted and released ones
 * too: using those raises their own errors). For visualize_sharding. */
static int l_is_array(lua_State *L) {
  lua_pushboolean(L, luaL_testudata(L, 1, DLRUN_ARRAY_MT) != NULL);
  return 1;
}

void dlrun_lua_array_open(lua_State *L) {
  static const luaL_Reg creators[] = {
      {"array", l_array}, {"frombytes", l_frombytes}, {"zeros", l_zeros}, {"ones", l_ones},
      {"full", l_full},   {"arange", l_arange},       {"_is_array", l_is_array},
      {NULL, NULL},
  };
  luaL_setfuncs(L, creators, 0);

  dlrun_lua_require(L, "dlrun.format");
  lua_setfield(L, LUA_REGISTRYINDEX, FORMAT_KEY);

  static const luaL_Reg meta[] = {
      {"__len", array_len}, {"__tostring", array_tostring}, {NULL, NULL},
  };
  dlrun_lua_new_metatable(L, DLRUN_ARRAY_MT, "Array", meta);
  lua_pushboolean(L, 1);
  lua_pushcclosure(L, array_release, 1);
  lua_setfield(L, -2, "__gc");
  lua_pushboolean(L, 0);
  lua_pushcclosure(L, array_release, 1);
  lua_setfield(L, -2, "__close");
  static const luaL_Reg methods[] = {
      {"tolist", l_tolist},   {"tobytes", l_tobytes},       {"item", l_item},
      {"devices", l_devices}, {"delete", l_delete},         {"is_deleted", l_is_deleted},
      {"block_until_ready", l_block_until_ready},           {"_elements", l_elements},
      {"addressable_data", l_addressable_data},
      {NULL, NULL},
  };
  luaL_newlib(L, methods);
  lua_pushcclosure(L, array_index, 1);
  lua_setfield(L, -2, "__index");
  lua_pop(L, 1);
}

void dlrun_lua_add_array_methods(lua_State *L, const luaL_Reg *methods, int nup) {
  luaL_getmetatable(L, DLRUN_ARRAY_MT);
  lua_getfield(L, -1, "__index");
  lua_getupvalue(L, -1, 1); /* the methods table */
  lua_rotate(L, -(nup + 3), 3); /* the upvalues back on top */
  luaL_setfuncs(L, methods, nup);
  lua_pop(L, 3);
}
