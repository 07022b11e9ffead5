/* Meshes and shardings as Lua values: dl.Mesh, dl.make_mesh,
 * dl.NamedSharding, dl.SingleDeviceSharding, and the spec helpers. */
#include <string.h>

#include "binding.h"

#define SINGLE_CACHE_KEY "dlrun.single_device_shardings"
#define SPEC_MT_KEY "dlrun.PartitionSpec"

typedef struct mesh_ud {
  dlrun_mesh *m;
} mesh_ud;

typedef struct sharding_ud {
  dlrun_sharding *s;
} sharding_ud;

/* ---- specs ---- */

/* Whether the value at idx is a table made by dl.P (its metatable is the
 * PartitionSpec one, kept in the registry at open). */
static int is_partition_spec(lua_State *L, int idx) {
  if (!lua_istable(L, idx) || !lua_getmetatable(L, idx)) return 0;
  lua_getfield(L, LUA_REGISTRYINDEX, SPEC_MT_KEY);
  int is = lua_rawequal(L, -1, -2);
  lua_pop(L, 2);
  return is;
}

/* Read entry i of the P at idx (pushed by the caller) into e, checking it
 * again as dl.P does: a P is a table its owner can still change. */
static void check_spec_entry(lua_State *L, const char *fn, lua_Integer i, dlrun_spec_entry *e) {
  int t = lua_type(L, -1);
  if (t == LUA_TNIL || (t == LUA_TBOOLEAN && !lua_toboolean(L, -1))) return;
  if (t == LUA_TSTRING) {
    e->naxes = 1;
    e->axes[0] = dlrun_lua_check_cstring(L, -1, fn, "axis name");
    return;
  }
  if (!dlrun_lua_is_plain_table(L, -1)) /* a printed list (mesh.axis_names) is plain */
    dlrun_lua_raise(L, "TypeError",
                    "%s: PartitionSpec entry %lld must be nil, an axis name or a list of axis "
                    "names, got %s",
                    fn, (long long)i, dlrun_lua_typename(L, -1));
  char what[64];
  snprintf(what, sizeof what, "PartitionSpec entry %lld", (long long)i);
  lua_Integer k = dlrun_lua_check_len(L, -1, fn, what);
  if (k > DLRUN_MAX_MESH_AXES)
    dlrun_lua_raise(L, "ValueError", "%s: PartitionSpec entry %lld names more than %d axes", fn,
                    (long long)i, DLRUN_MAX_MESH_AXES);
  for (lua_Integer a = 1; a <= k; a++) {
    if (lua_rawgeti(L, -1, a) != LUA_TSTRING)
      dlrun_lua_raise(L, "TypeError",
                      "%s: PartitionSpec entry %lld lists a %s where an axis name was expected",
                      fn, (long long)i, dlrun_lua_typename(L, -1));
    e->axes[a - 1] = dlrun_lua_check_cstring(L, -1, fn, "axis name"); /* anchored by the list */
    lua_pop(L, 1);
  }
  e->naxes = (int)k;
}

/* Read a P (entries 1..n, count in field n) into spec; axis names are
 * borrowed from the table, which the caller keeps on the stack. */
void dlrun_lua_check_spec(lua_State *L, int idx, const char *fn, dlrun_partition_spec *spec) {
  idx = lua_absindex(L, idx);
  if (!is_partition_spec(L, idx))
    dlrun_lua_type_error(L, fn, idx, "spec", "a PartitionSpec made by dl.P(...)");
  lua_Integer n;
  lua_pushliteral(L, "n");
  lua_rawget(L, idx);
  if (!dlrun_lua_to_integer(L, -1, &n) || n < 0)
    dlrun_lua_raise(L, "TypeError", "%s: the PartitionSpec's n must be a count of entries, got %s",
                    fn, dlrun_lua_describe(L, -1));
  lua_pop(L, 1);
  if (n > DLRUN_MAX_NDIM)
    dlrun_lua_raise(L, "ValueError", "%s: a PartitionSpec has at most %d entries", fn, DLRUN_MAX_NDIM);
  memset(spec, 0, sizeof *spec);
  spec->nentries = (int)n;
  for (lua_Integer i = 1; i <= n; i++) {
    lua_rawgeti(L, idx, i);
    check_spec_entry(L, fn, i, &spec->entries[i - 1]);
    lua_pop(L, 1);
  }
}

/* PartitionSpec's __tostring. */
static int l_spec_string(lua_State *L) {
  dlrun_partition_spec spec;
  dlrun_lua_check_spec(L, 1, "tostring", &spec);
  char buf[1024];
  lua_pushstring(L, dlrun_partition_spec_describe(&spec, buf, sizeof buf));
  return 1;
}

/* ---- interning ----
 * Equal meshes and equal shardings are one Lua value per state (as Devices
 * are), so they work as one table key and compare with rawequal. A weak
 * table per type maps a hash to the userdata; on the rare hash collision of
 * two unequal objects the newer one is simply not interned (== still holds
 * through __eq). */
#define INTERNED_MESHES "dlrun.interned_meshes"
#define INTERNED_SHARDINGS "dlrun.interned_shardings"

typedef struct interning {
  const char *key;
  bool (*equal)(void *a, void *b);
  void (*release)(void *obj);
} interning;

static bool meshes_equal(void *a, void *b) { return dlrun_mesh_equal(a, b); }
static bool shardings_equal(void *a, void *b) { return dlrun_sharding_equal(a, b); }
static void mesh_release(void *m) { dlrun_mesh_release(m); }
static void sharding_release(void *s) { dlrun_sharding_release(s); }
static const interning MESHES = {INTERNED_MESHES, meshes_equal, mesh_release};
static const interning SHARDINGS = {INTERNED_SHARDINGS, shardings_equal, sharding_release};

static void push_weak_table(lua_State *L, const char *key) {
  if (lua_getfield(L, LUA_REGISTRYINDEX, key) == LUA_TTABLE) return;
  lua_pop(L, 1);
  lua_newtable(L);
  lua_createtable(L, 0, 1);
  lua_pushliteral(L, "v");
  lua_setfield(L, -2, "__mode");
  lua_setmetatable(L, -2);
  lua_pushvalue(L, -1);
  lua_setfield(L, LUA_REGISTRYINDEX, key);
}

/* The userdata on top holds one object pointer (mesh_ud, sharding_ud), just
 * made. Leave on top the state's userdata for an equal object: an earlier
 * one (the new object is released at once), or this one, remembered.
 * Returns the object of the userdata left on top. */
static void *intern_top(lua_State *L, const interning *how, uint64_t hash) {
  void **mine = lua_touserdata(L, -1);
  luaL_checkstack(L, 4, "no room to intern");
  push_weak_table(L, how->key);
  void **other = lua_rawgeti(L, -1, (lua_Integer)hash) == LUA_TUSERDATA ? lua_touserdata(L, -1) : NULL;
  if (other && *other && how->equal(*other, *mine)) {
    how->release(*mine);
    *mine = NULL;
    lua_replace(L, -3);
    lua_pop(L, 1);
    return *other;
  }
  if (!other || !*other) { /* free slot, or one whose __gc was called by hand */
    lua_pushvalue(L, -3);
    lua_rawseti(L, -3, (lua_Integer)hash);
  }
  lua_pop(L, 2);
  return *mine;
}

/* ---- meshes ---- */

static dlrun_mesh *check_mesh(lua_State *L, int idx, const char *fn) {
  mesh_ud *u = luaL_testudata(L, idx, DLRUN_MESH_MT);
  if (!u) dlrun_lua_type_error(L, fn, idx, "mesh", "a Mesh");
  if (!u->m) dlrun_lua_released_error(L, idx);
  return u->m;
}

/* Push a new Mesh userdata, valid (empty) before the mesh exists. */
static mesh_ud *new_mesh_ud(lua_State *L) {
  mesh_ud *u = lua_newuserdatauv(L, sizeof *u, 0);
  u->m = NULL;
  luaL_setmetatable(L, DLRUN_MESH_MT);
  return u;
}

/* Flatten the nested device table at idx (depth = naxes) into devs;
 * index[] is where the walk is, for messages. */
static void collect_devices(lua_State *L, int idx, int depth, int naxes, const int64_t *sizes,
                            int64_t *index, dlrun_device **devs, size_t *count, size_t cap) {
  if (depth == naxes) {
    dlrun_device *d = dlrun_lua_test_device(L, idx);
    char pos[256];
    if (!d)
      dlrun_lua_raise(L, "TypeError", "Mesh: element %s of devices must be a Device, got %s",
                      dlrun_lua_position(index, depth, pos, sizeof pos), dlrun_lua_typename(L, idx));
    if (*count == cap) dlrun_lua_raise(L, "ValueError", "Mesh: too many devices");
    devs[(*count)++] = d;
    return;
  }
  if (!lua_istable(L, idx) || dlrun_lua_test_device(L, idx))
    dlrun_lua_raise(L, "ValueError", "Mesh: the devices table is ragged (expected depth %d)", naxes);
  lua_Integer n = dlrun_lua_check_len(L, idx, "Mesh", "devices");
  if (n != sizes[depth])
    dlrun_lua_raise(L, "ValueError",
                    "Mesh: the devices table is ragged: a level has %lld entries, expected %lld",
                    (long long)n, (long long)sizes[depth]);
  luaL_checkstack(L, 2, "mesh too deep");
  for (lua_Integer i = 1; i <= n; i++) {
    index[depth] = i - 1;
    lua_geti(L, idx, i);
    collect_devices(L, lua_gettop(L), depth + 1, naxes, sizes, index, devs, count, cap);
    lua_pop(L, 1);
  }
}

static int check_axis_names(lua_State *L, int idx, const char *fn, const char **names) {
  if (lua_type(L, idx) == LUA_TSTRING) {
    names[0] = dlrun_lua_check_cstring(L, idx, fn, "axis name");
    return 1;
  }
  if (!lua_istable(L, idx))
    dlrun_lua_type_error(L, fn, idx, "axis_names", "a list of axis names");
  lua_Integer n = dlrun_lua_check_len(L, idx, fn, "axis_names");
  if (n > DLRUN_MAX_MESH_AXES)
    dlrun_lua_raise(L, "ValueError", "%s: at most %d mesh axes, got %lld", fn, DLRUN_MAX_MESH_AXES,
                    (long long)n);
  for (lua_Integer i = 1; i <= n; i++) {
    if (lua_geti(L, idx, i) != LUA_TSTRING)
      dlrun_lua_raise(L, "TypeError", "%s: axis name %lld must be a string, got %s", fn,
                      (long long)i, dlrun_lua_typename(L, -1));
    names[i - 1] = dlrun_lua_check_cstring(L, -1, fn, "axis name");
    lua_pop(L, 1); /* anchored by the table */
  }
  return (int)n;
}

/* dl.Mesh(devices, axis_names) */
static int l_mesh(lua_State *L) {
  dlrun_lua_check_nargs(L, "Mesh", 2);
  lua_settop(L, 2);
  const char *names[DLRUN_MAX_MESH_AXES];
  int naxes = check_axis_names(L, 2, "Mesh", names);
  if (!lua_istable(L, 1) || dlrun_lua_test_device(L, 1))
    return dlrun_lua_type_error(L, "Mesh", 1, "devices", "a nested table of Devices");
  /* ndim of the devices table: follow first elements. */
  int64_t sizes[DLRUN_MAX_MESH_AXES + 1];
  int depth = 0;
  lua_pushvalue(L, 1);
  while (lua_istable(L, -1) && !dlrun_lua_test_device(L, -1) && depth <= DLRUN_MAX_MESH_AXES) {
    sizes[depth++] = dlrun_lua_check_len(L, -1, "Mesh", "devices");
    lua_geti(L, -1, 1);
    lua_remove(L, -2);
  }
  lua_pop(L, 1);
  if (depth != naxes)
    return dlrun_lua_raise(L, "ValueError",
                           "Mesh requires the ndim of its first argument (`devices`) to equal the "
                           "length of its second argument (`axis_names`), but got devices.ndim == "
                           "%d and len(axis_names) == %d.",
                           depth, naxes);
  /* Refuse sizes that no runtime could fill before allocating for them. */
  int64_t cap;
  if (dlrun_shape_size(naxes, sizes, &cap) || cap > DLRUN_MAX_DEVICES) {
    char shape[256];
    return dlrun_lua_raise(L, "ValueError",
                           "Mesh: a devices table of shape %s holds more than %d devices",
                           dlrun_tuple_string(sizes, naxes, shape, sizeof shape),
                           DLRUN_MAX_DEVICES);
  }
  dlrun_device **devs = lua_newuserdatauv(L, (size_t)cap * sizeof *devs + 1, 0);
  size_t count = 0;
  int64_t index[DLRUN_MAX_MESH_AXES];
  collect_devices(L, 1, 0, naxes, sizes, index, devs, &count, (size_t)cap);
  mesh_ud *u = new_mesh_ud(L);
  dlrun_lua_check(L, dlrun_mesh_create(devs, count, naxes, names, sizes, &u->m));
  intern_top(L, &MESHES, dlrun_mesh_hash(u->m));
  return 1;
}

/* dl.make_mesh(axis_sizes, axis_names [, devices]) over the default devices. */
static int l_make_mesh(lua_State *L) {
  const char *fn = "make_mesh";
  dlrun_lua_check_nargs(L, fn, 3);
  lua_settop(L, 3);
  int64_t sizes[DLRUN_MAX_NDIM];
  int nsizes = dlrun_lua_check_shape(L, 1, fn, "axis_sizes", sizes);
  const char *names[DLRUN_MAX_MESH_AXES];
  int naxes = check_axis_names(L, 2, fn, names);
  if (nsizes != naxes)
    return dlrun_lua_raise(L, "ValueError", "%s: %d axis sizes but %d axis names were given", fn,
                           nsizes, naxes);
  dlrun_runtime *rt = dlrun_lua_runtime(L);
  if (!lua_isnil(L, 3) && (!lua_istable(L, 3) || dlrun_lua_test_device(L, 3)))
    return dlrun_lua_type_error(L, fn, 3, "devices", "a list of Devices");
  lua_Integer given = lua_isnil(L, 3) ? (lua_Integer)dlrun_device_count(rt, NULL)
                                      : dlrun_lua_check_len(L, 3, fn, "devices");
  /* A list no runtime could fill is refused before allocating for it. */
  if (given > DLRUN_MAX_DEVICES)
    return dlrun_lua_raise(L, "ValueError",
                           "%s: argument 3 (devices) has %lld entries, more than the %d devices "
                           "a runtime can have",
                           fn, (long long)given, DLRUN_MAX_DEVICES);
  size_t available = (size_t)given;
  int64_t product;
  char shape[256];
  for (int a = 0; a < naxes; a++)
    if (sizes[a] < 1)
      return dlrun_lua_raise(L, "ValueError", "%s: every axis size must be at least 1, got mesh_shape %s",
                             fn, dlrun_tuple_string(sizes, naxes, shape, sizeof shape));
  /* As jax.make_mesh: the first prod(axis_sizes) devices, never fewer. */
  if (dlrun_shape_size(naxes, sizes, &product) || (uint64_t)product > available)
    return dlrun_lua_raise(L, "ValueError",
                           "Number of devices %zu must be >= the product of mesh_shape %s",
                           available, dlrun_tuple_string(sizes, naxes, shape, sizeof shape));
  available = (size_t)product;
  dlrun_device **devs = lua_newuserdatauv(L, available * sizeof *devs + 1, 0);
  for (size_t i = 0; i < available; i++) {
    if (lua_isnil(L, 3)) {
      devs[i] = dlrun_device_get(rt, NULL, i);
    } else {
      lua_geti(L, 3, (lua_Integer)i + 1);
      devs[i] = dlrun_lua_test_device(L, -1);
      if (!devs[i])
        return dlrun_lua_raise(L, "TypeError", "%s: element %zu of devices must be a Device, got %s",
                               fn, i + 1, dlrun_lua_typename(L, -1));
      lua_pop(L, 1);
    }
  }
  mesh_ud *u = new_mesh_ud(L);
  dlrun_lua_check(L, dlrun_mesh_create(devs, available, naxes, names, sizes, &u->m));
  intern_top(L, &MESHES, dlrun_mesh_hash(u->m));
  return 1;
}

static void push_mesh_devices(lua_State *L, dlrun_mesh *m, int axis, size_t *next) {
  if (axis == dlrun_mesh_naxes(m)) {
    dlrun_lua_push_device(L, dlrun_mesh_device(m, (*next)++));
    return;
  }
  int64_t n = dlrun_mesh_axis_size(m, axis);
  lua_createtable(L, (int)n, 0);
  dlrun_lua_set_printed(L, "mesh_devices");
  for (int64_t i = 0; i < n; i++) {
    push_mesh_devices(L, m, axis + 1, next);
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
}

static const char *const MESH_FIELDS[] = {"axis_names", "axis_sizes", "shape", "size", "devices",
                                          NULL};

static void push_axis_names(lua_State *L, dlrun_mesh *m) {
  int naxes = dlrun_mesh_naxes(m);
  lua_createtable(L, naxes, 0);
  dlrun_lua_set_printed(L, "tuple");
  for (int a = 0; a < naxes; a++) {
    lua_pushstring(L, dlrun_mesh_axis_name(m, a));
    lua_rawseti(L, -2, a + 1);
  }
}

static int mesh_index(lua_State *L) {
  dlrun_mesh *m = check_mesh(L, 1, "Mesh.__index");
  if (lua_type(L, 2) != LUA_TSTRING) return 0;
  const char *key = dlrun_lua_field_name(L, 2);
  int naxes = dlrun_mesh_naxes(m);
  if (strcmp(key, "axis_names") == 0) {
    push_axis_names(L, m);
  } else if (strcmp(key, "axis_sizes") == 0) {
    lua_createtable(L, naxes, 0);
    dlrun_lua_set_printed(L, "tuple");
    for (int a = 0; a < naxes; a++) {
      lua_pushinteger(L, dlrun_mesh_axis_size(m, a));
      lua_rawseti(L, -2, a + 1);
    }
  } else if (strcmp(key, "shape") == 0) {
    push_axis_names(L, m);
    lua_createtable(L, 0, naxes);
    for (int a = 0; a < naxes; a++) {
      lua_pushinteger(L, dlrun_mesh_axis_size(m, a));
      lua_setfield(L, -2, dlrun_mesh_axis_name(m, a));
    }
    dlrun_lua_set_ordered(L, -2);
    lua_remove(L, -2);
  } else if (strcmp(key, "size") == 0) {
    lua_pushinteger(L, (lua_Integer)dlrun_mesh_device_count(m));
  } else if (strcmp(key, "devices") == 0) {
    size_t next = 0;
    if (naxes == 0) {
      lua_createtable(L, 1, 0);
      dlrun_lua_set_printed(L, "mesh_devices");
      dlrun_lua_push_device(L, dlrun_mesh_device(m, 0));
      lua_rawseti(L, -2, 1);
    } else {
      push_mesh_devices(L, m, 0, &next);
    }
  } else {
    return dlrun_lua_attribute_error(L, "Mesh", 2, MESH_FIELDS, 0);
  }
  return 1;
}

static int mesh_tostring(lua_State *L) {
  char buf[1024];
  lua_pushstring(L, dlrun_mesh_describe(check_mesh(L, 1, "tostring"), buf, sizeof buf));
  return 1;
}

static int mesh_gc(lua_State *L) {
  mesh_ud *u = luaL_testudata(L, 1, DLRUN_MESH_MT);
  if (!u) return 0;
  dlrun_mesh_release(u->m);
  u->m = NULL;
  return 0;
}

/* == never raises: a released Mesh equals nothing. */
static int mesh_eq(lua_State *L) {
  mesh_ud *a = luaL_testudata(L, 1, DLRUN_MESH_MT);
  mesh_ud *b = luaL_testudata(L, 2, DLRUN_MESH_MT);
  lua_pushboolean(L, a && b && a->m && b->m && dlrun_mesh_equal(a->m, b->m));
  return 1;
}

/* ---- shardings ---- */

/* Push a Sharding userdata owning `s` (one reference is taken over); its
 * mesh and spec userdata/tables are given at uservalue slots 1 and 2 when
 * known (nil otherwise). */
static sharding_ud *new_sharding_ud(lua_State *L) {
  sharding_ud *u = lua_newuserdatauv(L, sizeof *u, 2);
  u->s = NULL;
  luaL_setmetatable(L, DLRUN_SHARDING_MT);
  return u;
}

dlrun_sharding *dlrun_lua_test_sharding(lua_State *L, int idx) {
  sharding_ud *u = luaL_testudata(L, idx, DLRUN_SHARDING_MT);
  if (u && !u->s) dlrun_lua_released_error(L, idx);
  return u ? u->s : NULL;
}

static dlrun_sharding *check_sharding(lua_State *L, int idx, const char *fn) {
  dlrun_sharding *s = dlrun_lua_test_sharding(L, idx);
  if (!s) dlrun_lua_type_error(L, fn, idx, "sharding", "a Sharding");
  return s;
}

/* self of a method taking at most `max` arguments, self included. */
static dlrun_sharding *check_self(lua_State *L, const char *fn, int max) {
  dlrun_sharding *s = check_sharding(L, 1, fn);
  dlrun_lua_check_nargs(L, fn, max);
  return s;
}

static dlrun_sharding *intern_sharding(lua_State *L) {
  sharding_ud *u = lua_touserdata(L, -1);
  return intern_top(L, &SHARDINGS, dlrun_sharding_hash(u->s));
}

dlrun_sharding *dlrun_lua_push_sharding(lua_State *L, dlrun_sharding *s) {
  sharding_ud *u = new_sharding_ud(L);
  u->s = s;
  return intern_sharding(L);
}

static dlrun_memory_kind opt_memory_kind(lua_State *L, int idx, const char *fn) {
  if (lua_istable(L, idx)) {
    static const char *const keys[] = {"memory_kind", NULL};
    dlrun_lua_check_option_keys(L, idx, fn, keys, "TypeError");
    lua_getfield(L, idx, "memory_kind");
    lua_replace(L, idx);
  }
  return dlrun_lua_check_memory_kind(L, idx, fn);
}

/* dl.NamedSharding(mesh, spec [, memory_kind | {memory_kind=}]) */
static int l_named_sharding(lua_State *L) {
  dlrun_lua_check_nargs(L, "NamedSharding", 3);
  dlrun_mesh *m = check_mesh(L, 1, "NamedSharding");
  dlrun_partition_spec spec;
  dlrun_lua_check_spec(L, 2, "NamedSharding", &spec);
  dlrun_memory_kind kind = opt_memory_kind(L, 3, "NamedSharding");
  sharding_ud *u = new_sharding_ud(L);
  dlrun_lua_check(L, dlrun_named_sharding_create(m, &spec, kind, &u->s));
  lua_pushvalue(L, 1);
  lua_setiuservalue(L, -2, 1);
  lua_pushvalue(L, 2);
  lua_setiuservalue(L, -2, 2);
  intern_sharding(L);
  return 1;
}

/* dl.SingleDeviceSharding(device [, memory_kind | {memory_kind=}]) */
static int l_single_device_sharding(lua_State *L) {
  dlrun_lua_check_nargs(L, "SingleDeviceSharding", 2);
  dlrun_device *dev = dlrun_lua_test_device(L, 1);
  if (!dev) return dlrun_lua_type_error(L, "SingleDeviceSharding", 1, "device", "a Device");
  dlrun_memory_kind kind = opt_memory_kind(L, 2, "SingleDeviceSharding");
  sharding_ud *u = new_sharding_ud(L);
  dlrun_lua_check(L, dlrun_single_device_sharding_create(dev, kind, &u->s));
  intern_sharding(L);
  return 1;
}

dlrun_sharding *dlrun_lua_push_device_sharding(lua_State *L, dlrun_device *dev) {
  if (lua_getfield(L, LUA_REGISTRYINDEX, SINGLE_CACHE_KEY) != LUA_TTABLE) {
    lua_pop(L, 1);
    lua_newtable(L);
    lua_pushvalue(L, -1);
    lua_setfield(L, LUA_REGISTRYINDEX, SINGLE_CACHE_KEY);
  }
  /* (one whose __gc was called explicitly is replaced) */
  sharding_ud *u = lua_rawgetp(L, -1, dev) == LUA_TUSERDATA ? lua_touserdata(L, -1) : NULL;
  if (u && u->s) {
    lua_remove(L, -2);
    return u->s;
  }
  lua_pop(L, 1);
  u = new_sharding_ud(L);
  dlrun_lua_check(L, dlrun_single_device_sharding_create(dev, DLRUN_MEM_DEVICE, &u->s));
  dlrun_sharding *s = intern_sharding(L);
  lua_pushvalue(L, -1);
  lua_rawsetp(L, -3, dev);
  lua_remove(L, -2);
  return s;
}

dlrun_sharding *dlrun_lua_push_target(lua_State *L, int idx, const char *fn) {
  if (lua_isnoneornil(L, idx))
    return dlrun_lua_push_device_sharding(L, dlrun_local_device_get(dlrun_lua_runtime(L), NULL, 0));
  dlrun_device *dev = dlrun_lua_test_device(L, idx);
  if (dev) return dlrun_lua_push_device_sharding(L, dev);
  dlrun_sharding *s = dlrun_lua_test_sharding(L, idx);
  if (!s) dlrun_lua_type_error(L, fn, idx, "target", "a Device or a Sharding");
  lua_pushvalue(L, idx);
  return s;
}

/* A dimension the index covers whole prints as slice(None, None, None), as
 * JAX's index of a dimension that is not split. */
static void push_index(lua_State *L, int ndim, const int64_t *dims, const int64_t *lo,
                       const int64_t *hi) {
  lua_createtable(L, ndim, 0);
  dlrun_lua_set_printed(L, "tuple");
  for (int d = 0; d < ndim; d++) {
    lua_createtable(L, 2, 0);
    dlrun_lua_set_printed(L, lo[d] == 0 && hi[d] == dims[d] ? "whole_slice" : "slice");
    lua_pushinteger(L, lo[d] + 1);
    lua_rawseti(L, -2, 1);
    lua_pushinteger(L, hi[d]);
    lua_rawseti(L, -2, 2);
    lua_rawseti(L, -2, d + 1);
  }
}

void dlrun_lua_push_index(lua_State *L, int ndim, const int64_t *dims, const int64_t *lo,
                          const int64_t *hi) {
  push_index(L, ndim, dims, lo, hi);
}

static int l_shard_shape(lua_State *L) {
  dlrun_sharding *s = check_self(L, "shard_shape", 2);
  int64_t dims[DLRUN_MAX_NDIM], out[DLRUN_MAX_NDIM];
  int ndim = dlrun_lua_check_shape(L, 2, "shard_shape", "shape", dims);
  dlrun_lua_check(L, dlrun_sharding_check_shape(s, ndim, dims));
  dlrun_sharding_shard_shape(s, ndim, dims, out);
  lua_createtable(L, ndim, 0);
  dlrun_lua_set_printed(L, "tuple");
  for (int d = 0; d < ndim; d++) {
    lua_pushinteger(L, out[d]);
    lua_rawseti(L, -2, d + 1);
  }
  return 1;
}

static int l_devices_indices_map(lua_State *L) {
  dlrun_sharding *s = check_self(L, "devices_indices_map", 2);
  int64_t dims[DLRUN_MAX_NDIM], lo[DLRUN_MAX_NDIM], hi[DLRUN_MAX_NDIM];
  int ndim = dlrun_lua_check_shape(L, 2, "devices_indices_map", "shape", dims);
  dlrun_lua_check(L, dlrun_sharding_check_shape(s, ndim, dims));
  size_t n = dlrun_sharding_device_count(s);
  lua_createtable(L, 0, (int)n);
  dlrun_lua_set_printed(L, "index_map");
  for (size_t i = 0; i < n; i++) {
    dlrun_lua_push_device(L, dlrun_sharding_device(s, i));
    dlrun_sharding_shard_index(s, i, ndim, dims, lo, hi);
    push_index(L, ndim, dims, lo, hi);
    lua_rawset(L, -3);
  }
  return 1;
}

/* addressable_devices_indices_map(shape): devices_indices_map of this
 * process's devices only. */
static int l_addressable_devices_indices_map(lua_State *L) {
  const char *fn = "addressable_devices_indices_map";
  dlrun_sharding *s = check_self(L, fn, 2);
  int64_t dims[DLRUN_MAX_NDIM], lo[DLRUN_MAX_NDIM], hi[DLRUN_MAX_NDIM];
  int ndim = dlrun_lua_check_shape(L, 2, fn, "shape", dims);
  dlrun_lua_check(L, dlrun_sharding_check_shape(s, ndim, dims));
  size_t n = dlrun_sharding_device_count(s);
  lua_newtable(L);
  dlrun_lua_set_printed(L, "index_map");
  for (size_t i = 0; i < n; i++) {
    if (!dlrun_sharding_is_addressable(s, i)) continue;
    dlrun_lua_push_device(L, dlrun_sharding_device(s, i));
    dlrun_sharding_shard_index(s, i, ndim, dims, lo, hi);
    push_index(L, ndim, dims, lo, hi);
    lua_rawset(L, -3);
  }
  return 1;
}

static int l_is_equivalent_to(lua_State *L) {
  dlrun_sharding *a = check_self(L, "is_equivalent_to", 3);
  dlrun_sharding *b = check_sharding(L, 2, "is_equivalent_to");
  lua_Integer ndim;
  if (!dlrun_lua_to_integer(L, 3, &ndim) || ndim < 0 || ndim > DLRUN_MAX_NDIM)
    return dlrun_lua_number_error(L, "is_equivalent_to", 3, "ndim", "an integer from 0 to 32");
  lua_pushboolean(L, dlrun_sharding_is_equivalent(a, b, (int)ndim));
  return 1;
}

static int l_with_memory_kind(lua_State *L) {
  dlrun_sharding *s = check_self(L, "with_memory_kind", 2);
  dlrun_memory_kind kind = dlrun_lua_check_memory_kind(L, 2, "with_memory_kind");
  sharding_ud *u = new_sharding_ud(L);
  if (dlrun_sharding_is_named(s)) {
    dlrun_lua_check(L, dlrun_named_sharding_create(dlrun_sharding_mesh(s), dlrun_sharding_spec(s),
                                                   kind, &u->s));
    for (int k = 1; k <= 2; k++) {
      lua_getiuservalue(L, 1, k);
      lua_setiuservalue(L, -2, k);
    }
  } else {
    dlrun_lua_check(L, dlrun_single_device_sharding_create(dlrun_sharding_device(s, 0), kind, &u->s));
  }
  intern_sharding(L);
  return 1;
}

/* device_set (or addressable_devices, this process's only): the devices
 * ordered by platform then id. */
static int push_devices_sorted(lua_State *L, dlrun_sharding *s, bool local_only) {
  size_t n = dlrun_sharding_device_count(s);
  lua_createtable(L, (int)n, 0);
  dlrun_lua_set_printed(L, "set");
  lua_Integer k = 0;
  for (size_t i = 0; i < n; i++) {
    if (local_only && !dlrun_sharding_is_addressable(s, i)) continue;
    dlrun_lua_push_device(L, dlrun_sharding_device(s, i));
    lua_rawseti(L, -2, ++k);
  }
  lua_getglobal(L, "table");
  lua_getfield(L, -1, "sort");
  lua_remove(L, -2);
  lua_pushvalue(L, -2);
  lua_call(L, 1, 0);
  return 1;
}

static int push_device_set(lua_State *L, dlrun_sharding *s) {
  return push_devices_sorted(L, s, false);
}

void dlrun_lua_push_device_set(lua_State *L, dlrun_sharding *s) { push_device_set(L, s); }

static const char *const SHARDING_FIELDS[] = {
    "mesh", "spec", "memory_kind", "device_set", "num_devices", "is_fully_replicated",
    "is_fully_addressable", "addressable_devices", "kind", NULL,
};

/* What messages call the sharding at idx: its kind. */
static const char *sharding_kind(dlrun_sharding *s) {
  return dlrun_sharding_is_named(s) ? "NamedSharding" : "SingleDeviceSharding";
}

static int sharding_index(lua_State *L) {
  dlrun_sharding *s = check_sharding(L, 1, "Sharding.__index");
  if (lua_type(L, 2) != LUA_TSTRING) return 0;
  const char *key = dlrun_lua_field_name(L, 2);
  lua_pushvalue(L, 2);
  if (lua_rawget(L, lua_upvalueindex(1)) != LUA_TNIL) return 1;
  if (strcmp(key, "mesh") == 0) lua_getiuservalue(L, 1, 1);
  else if (strcmp(key, "spec") == 0) lua_getiuservalue(L, 1, 2);
  else if (strcmp(key, "memory_kind") == 0)
    lua_pushstring(L, dlrun_memory_kind_name(dlrun_sharding_memory_kind(s)));
  else if (strcmp(key, "device_set") == 0) push_device_set(L, s);
  else if (strcmp(key, "num_devices") == 0)
    lua_pushinteger(L, (lua_Integer)dlrun_sharding_device_count(s));
  else if (strcmp(key, "is_fully_replicated") == 0)
    lua_pushboolean(L, dlrun_sharding_is_fully_replicated(s));
  else if (strcmp(key, "is_fully_addressable") == 0)
    lua_pushboolean(L, dlrun_sharding_is_fully_addressable(s));
  else if (strcmp(key, "addressable_devices") == 0) push_devices_sorted(L, s, true);
  else if (strcmp(key, "kind") == 0) lua_pushstring(L, sharding_kind(s));
  else return dlrun_lua_attribute_error(L, sharding_kind(s), 2, SHARDING_FIELDS, lua_upvalueindex(1));
  return 1;
}

static int sharding_tostring(lua_State *L) {
  char buf[2048];
  lua_pushstring(L, dlrun_sharding_describe(check_sharding(L, 1, "tostring"), buf, sizeof buf));
  return 1;
}

static int sharding_gc(lua_State *L) {
  sharding_ud *u = luaL_testudata(L, 1, DLRUN_SHARDING_MT);
  if (!u) return 0;
  dlrun_sharding_release(u->s);
  u->s = NULL;
  return 0;
}

/* == never raises: a released Sharding equals nothing. */
static int sharding_eq(lua_State *L) {
  sharding_ud *a = luaL_testudata(L, 1, DLRUN_SHARDING_MT);
  sharding_ud *b = luaL_testudata(L, 2, DLRUN_SHARDING_MT);
  lua_pushboolean(L, a && b && a->s && b->s && dlrun_sharding_equal(a->s, b->s));
  return 1;
}

void dlrun_lua_sharding_open(lua_State *L) {
  static const luaL_Reg funcs[] = {
      {"Mesh", l_mesh},
      {"make_mesh", l_make_mesh},
      {"NamedSharding", l_named_sharding},
      {"SingleDeviceSharding", l_single_device_sharding},
      {NULL, NULL},
  };
  luaL_setfuncs(L, funcs, 0);

  /* dl.P's tables are told apart by their metatable, which prints them. */
  dlrun_lua_require(L, "dlrun.spec");
  lua_getfield(L, -1, "PartitionSpec");
  lua_pushcfunction(L, l_spec_string);
  lua_setfield(L, -2, "__tostring");
  lua_setfield(L, LUA_REGISTRYINDEX, SPEC_MT_KEY);
  lua_pop(L, 1);

  static const luaL_Reg mesh_meta[] = {
      {"__index", mesh_index}, {"__tostring", mesh_tostring}, {"__gc", mesh_gc}, {"__eq", mesh_eq},
      {NULL, NULL},
  };
  dlrun_lua_new_metatable(L, DLRUN_MESH_MT, "Mesh", mesh_meta);
  lua_pop(L, 1);

  static const luaL_Reg meta[] = {
      {"__tostring", sharding_tostring}, {"__gc", sharding_gc}, {"__eq", sharding_eq},
      {NULL, NULL},
  };
  dlrun_lua_new_metatable(L, DLRUN_SHARDING_MT, "Sharding", meta);
  static const luaL_Reg methods[] = {
      {"shard_shape", l_shard_shape},
      {"devices_indices_map", l_devices_indices_map},
      {"addressable_devices_indices_map", l_addressable_devices_indices_map},
      {"is_equivalent_to", l_is_equivalent_to},
      {"with_memory_kind", l_with_memory_kind},
      {NULL, NULL},
  };
  luaL_newlib(L, methods);
  lua_pushcclosure(L, sharding_index, 1);
  lua_setfield(L, -2, "__index");
  lua_pop(L, 1);
}
