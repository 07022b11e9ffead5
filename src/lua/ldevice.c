/* Device userdata. Devices are interned per Lua state: the same device is
 * always the same Lua value, so == and table keys work. */
#include <string.h>

#include "binding.h"

#define INTERN_KEY "dlrun.devices"

typedef struct device_ud {
  dlrun_device *dev;
} device_ud;

void dlrun_lua_push_device(lua_State *L, dlrun_device *dev) {
  if (lua_getfield(L, LUA_REGISTRYINDEX, INTERN_KEY) != LUA_TTABLE) {
    lua_pop(L, 1);
    lua_newtable(L);
    lua_pushvalue(L, -1);
    lua_setfield(L, LUA_REGISTRYINDEX, INTERN_KEY);
  }
  if (lua_rawgetp(L, -1, dev) == LUA_TUSERDATA) {
    lua_remove(L, -2);
    return;
  }
  lua_pop(L, 1);
  device_ud *u = lua_newuserdatauv(L, sizeof *u, 0);
  u->dev = dev;
  luaL_setmetatable(L, DLRUN_DEVICE_MT);
  lua_pushvalue(L, -1);
  lua_rawsetp(L, -3, dev);
  lua_remove(L, -2);
}

dlrun_device *dlrun_lua_test_device(lua_State *L, int idx) {
  device_ud *u = luaL_testudata(L, idx, DLRUN_DEVICE_MT);
  return u ? u->dev : NULL;
}

/* The Device at idx, named `what` ("self", "other") in the TypeError. */
static dlrun_device *check_device(lua_State *L, int idx, const char *fn, const char *what) {
  dlrun_device *dev = dlrun_lua_test_device(L, idx);
  if (!dev) dlrun_lua_type_error(L, fn, idx, what, "a Device");
  return dev;
}

/* self of a method taking at most `max` arguments, self included. */
static dlrun_device *check_self(lua_State *L, const char *fn, int max) {
  dlrun_device *dev = check_device(L, 1, fn, "self");
  dlrun_lua_check_nargs(L, fn, max);
  return dev;
}

dlrun_memory_kind dlrun_lua_check_memory_kind(lua_State *L, int idx, const char *fn) {
  if (lua_isnoneornil(L, idx)) return DLRUN_MEM_DEVICE;
  if (lua_type(L, idx) != LUA_TSTRING)
    dlrun_lua_type_error(L, fn, idx, "memory_kind", "\"device\" or \"pinned_host\"");
  const char *k = dlrun_lua_check_cstring(L, idx, fn, "memory_kind");
  if (strcmp(k, "device") == 0) return DLRUN_MEM_DEVICE;
  if (strcmp(k, "pinned_host") == 0) return DLRUN_MEM_PINNED_HOST;
  dlrun_lua_raise(L, "ValueError",
                  "%s: unknown memory kind '%s' (expected \"device\" or \"pinned_host\")", fn, k);
  return DLRUN_MEM_DEVICE;
}

static void set_integer(lua_State *L, const char *key, uint64_t v) {
  lua_pushinteger(L, (lua_Integer)v);
  lua_setfield(L, -2, key);
}

static int l_memory_stats(lua_State *L) {
  dlrun_device *dev = check_self(L, "memory_stats", 2);
  dlrun_memory_kind kind = dlrun_lua_check_memory_kind(L, 2, "memory_stats");
  dlrun_memory_stats s;
  dlrun_lua_check(L, dlrun_device_memory_stats(dev, kind, &s));
  lua_createtable(L, 0, 8);
  dlrun_lua_set_printed(L, "record");
  set_integer(L, "bytes_in_use", s.bytes_in_use);
  set_integer(L, "peak_bytes_in_use", s.peak_bytes_in_use);
  set_integer(L, "bytes_limit", s.bytes_limit);
  set_integer(L, "bytes_reserved", s.bytes_reserved);
  set_integer(L, "num_allocs", s.num_allocs);
  set_integer(L, "largest_alloc_size", s.largest_alloc_size);
  set_integer(L, "largest_free_block_bytes", s.largest_free_block_bytes);
  lua_pushnumber(L, s.fragmentation);
  lua_setfield(L, -2, "fragmentation");
  return 1;
}

static int l_reset_peak(lua_State *L) {
  dlrun_device *dev = check_self(L, "reset_peak_memory_stats", 2);
  dlrun_memory_kind kind = dlrun_lua_check_memory_kind(L, 2, "reset_peak_memory_stats");
  dlrun_lua_check(L, dlrun_device_reset_peak_memory_stats(dev, kind));
  return 0;
}

static int l_release_unused(lua_State *L) {
  uint64_t n;
  dlrun_lua_check(L, dlrun_device_release_unused(check_self(L, "release_unused", 1), &n));
  lua_pushinteger(L, (lua_Integer)n);
  return 1;
}

/* One block of a snapshot as a table; owner fields only when known. */
static void push_block(lua_State *L, const dlrun_memory_block *b) {
  lua_createtable(L, 0, 8);
  set_integer(L, "offset", b->offset);
  set_integer(L, "size", b->size);
  set_integer(L, "requested_size", b->requested_size);
  lua_pushstring(L, b->allocated ? "allocated" : "free");
  lua_setfield(L, -2, "state");
  if (!b->allocated) return;
  lua_pushstring(L, dlrun_owner_kind_name(b->owner));
  lua_setfield(L, -2, "owner");
  if (!b->dtype) return;
  lua_pushstring(L, b->dtype);
  lua_setfield(L, -2, "dtype");
  lua_createtable(L, b->ndim, 0);
  for (int i = 0; i < b->ndim; i++) {
    lua_pushinteger(L, (lua_Integer)b->shape[i]);
    lua_rawseti(L, -2, i + 1);
  }
  lua_setfield(L, -2, "shape");
  lua_pushstring(L, b->sharding);
  lua_setfield(L, -2, "sharding");
}

/* Build the table with the snapshot at idx (a light userdata) in hand. */
static int push_snapshot(lua_State *L) {
  const dlrun_memory_snapshot *snap = lua_touserdata(L, 1);
  lua_createtable(L, 0, 6);
  dlrun_lua_set_printed(L, "record");
  lua_pushstring(L, dlrun_memory_kind_name(snap->kind));
  lua_setfield(L, -2, "kind");
  set_integer(L, "bytes_in_use", snap->stats.bytes_in_use);
  set_integer(L, "bytes_reserved", snap->stats.bytes_reserved);
  set_integer(L, "bytes_limit", snap->stats.bytes_limit);
  set_integer(L, "largest_free_block_bytes", snap->stats.largest_free_block_bytes);
  lua_createtable(L, (int)snap->nsegments, 0);
  for (size_t s = 0; s < snap->nsegments; s++) {
    const dlrun_memory_segment *seg = &snap->segments[s];
    lua_createtable(L, 0, 3);
    set_integer(L, "size", seg->size);
    set_integer(L, "bytes_reserved", seg->bytes_reserved);
    lua_createtable(L, (int)seg->nblocks, 0);
    for (size_t i = 0; i < seg->nblocks; i++) {
      push_block(L, &seg->blocks[i]);
      lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
    lua_setfield(L, -2, "blocks");
    lua_rawseti(L, -2, (lua_Integer)s + 1);
  }
  lua_setfield(L, -2, "segments");
  return 1;
}

static int l_memory_snapshot(lua_State *L) {
  dlrun_device *dev = check_self(L, "memory_snapshot", 2);
  dlrun_memory_kind kind = dlrun_lua_check_memory_kind(L, 2, "memory_snapshot");
  dlrun_memory_snapshot *snap;
  dlrun_lua_check(L, dlrun_device_memory_snapshot(dev, kind, &snap));
  /* Built in protected mode: a Lua memory error must not leak the snapshot. */
  lua_pushcfunction(L, push_snapshot);
  lua_pushlightuserdata(L, snap);
  int rc = lua_pcall(L, 1, 1, 0);
  dlrun_memory_snapshot_free(snap);
  if (rc != LUA_OK) return lua_error(L);
  return 1;
}

static int l_synchronize(lua_State *L) {
  dlrun_device_synchronize(check_self(L, "synchronize", 1));
  return 0;
}

static const char *const DEVICE_FIELDS[] = {
    "id", "platform", "process_index", "memory_stats", "synchronize", "memory_snapshot",
    "reset_peak_memory_stats", "release_unused", NULL,
};

static int device_index(lua_State *L) {
  dlrun_device *dev = check_device(L, 1, "Device.__index", "self");
  if (lua_type(L, 2) != LUA_TSTRING) return 0;
  const char *key = dlrun_lua_field_name(L, 2);
  if (strcmp(key, "id") == 0) lua_pushinteger(L, dlrun_device_id(dev));
  else if (strcmp(key, "platform") == 0) lua_pushstring(L, dlrun_device_platform(dev));
  else if (strcmp(key, "process_index") == 0) lua_pushinteger(L, dlrun_device_process_index(dev));
  else if (strcmp(key, "memory_stats") == 0) lua_pushcfunction(L, l_memory_stats);
  else if (strcmp(key, "synchronize") == 0) lua_pushcfunction(L, l_synchronize);
  else if (strcmp(key, "memory_snapshot") == 0) lua_pushcfunction(L, l_memory_snapshot);
  else if (strcmp(key, "reset_peak_memory_stats") == 0) lua_pushcfunction(L, l_reset_peak);
  else if (strcmp(key, "release_unused") == 0) lua_pushcfunction(L, l_release_unused);
  else return dlrun_lua_attribute_error(L, "Device", 2, DEVICE_FIELDS, 0);
  return 1;
}

static int device_tostring(lua_State *L) {
  lua_pushstring(L, dlrun_device_name(check_device(L, 1, "tostring", "self")));
  return 1;
}

static int device_lt(lua_State *L) {
  dlrun_device *a = check_device(L, 1, "<", "self"), *b = check_device(L, 2, "<", "other");
  int c = strcmp(dlrun_device_platform(a), dlrun_device_platform(b));
  lua_pushboolean(L, c ? c < 0 : dlrun_device_id(a) < dlrun_device_id(b));
  return 1;
}

void dlrun_lua_device_open(lua_State *L) {
  static const luaL_Reg meta[] = {
      {"__index", device_index}, {"__tostring", device_tostring}, {"__lt", device_lt},
      {NULL, NULL},
  };
  dlrun_lua_new_metatable(L, DLRUN_DEVICE_MT, "Device", meta);
  lua_pop(L, 1);
}
