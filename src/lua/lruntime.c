/* The runtime as seen from Lua: configure, devices, device_count,
 * default_backend, platforms. Each Lua state holds one reference to the process-wide
 * default runtime, dropped when the state closes. */
#include <stdatomic.h>
#include <stdio.h>
#include <unistd.h>

#include "binding.h"
#include "dlrun/platform.h"

#define RUNTIME_KEY "dlrun.runtime"
#define HOST_KEY "dlrun.host_runtime"

typedef struct runtime_ref {
  dlrun_runtime *rt;
} runtime_ref;

static int runtime_gc(lua_State *L) {
  runtime_ref *r = lua_touserdata(L, 1);
  dlrun_runtime_release(r->rt);
  r->rt = NULL;
  return 0;
}

/* Push an empty holder whose __gc releases the runtime it is given; made
 * before the runtime is acquired, so a Lua memory error leaks nothing. */
static runtime_ref *new_holder(lua_State *L) {
  runtime_ref *r = lua_newuserdatauv(L, sizeof *r, 0);
  r->rt = NULL;
  lua_newtable(L);
  lua_pushcfunction(L, runtime_gc);
  lua_setfield(L, -2, "__gc");
  lua_setmetatable(L, -2);
  return r;
}

/* Store the holder on top of the stack as L's runtime. */
static void bind_holder(lua_State *L, bool host) {
  lua_setfield(L, LUA_REGISTRYINDEX, RUNTIME_KEY);
  lua_pushboolean(L, host);
  lua_setfield(L, LUA_REGISTRYINDEX, HOST_KEY);
}

/* An explicit device memory (configure, DLRUN_DEVICE_MEMORY, --device-memory)
 * that over-commits host RAM is said once per process, on stderr: filling
 * such memory ends with the kernel killing the process, not with an error. */
static void note_memory(dlrun_runtime *rt) {
  static atomic_flag said = ATOMIC_FLAG_INIT;
  const char *note = dlrun_runtime_memory_note(rt);
  if (note && !atomic_flag_test_and_set(&said)) {
    fprintf(stderr, "dlrun: warning: %s\n", note);
    fflush(stderr);
  }
}

dlrun_runtime *dlrun_lua_runtime(lua_State *L) {
  if (lua_getfield(L, LUA_REGISTRYINDEX, RUNTIME_KEY) == LUA_TUSERDATA) {
    runtime_ref *r = lua_touserdata(L, -1);
    lua_pop(L, 1);
    if (r->rt) return r->rt;
  } else {
    lua_pop(L, 1);
  }
  runtime_ref *r = new_holder(L);
  dlrun_lua_check(L, dlrun_default_runtime(&r->rt));
  dlrun_runtime *rt = r->rt;
  bind_holder(L, false);
  note_memory(rt);
  return rt;
}

void dlrun_lua_bind_host_runtime(lua_State *L, dlrun_runtime *rt) {
  runtime_ref *r = new_holder(L);
  dlrun_runtime_retain(rt);
  r->rt = rt;
  bind_holder(L, true);
}

/* A capacity option: bytes (a whole number or a size string) or a share of
 * host RAM ("25%"). */
static void opt_capacity(lua_State *L, const char *key, uint64_t *bytes, double *fraction) {
  int t = lua_getfield(L, 1, key);
  if (t == LUA_TSTRING) {
    dlrun_lua_check(L, dlrun_parse_capacity(dlrun_lua_check_cstring(L, -1, "configure", key), bytes, fraction));
  } else if (t == LUA_TNUMBER) {
    int whole;
    lua_Integer n = lua_tointegerx(L, -1, &whole);
    if (!whole)
      dlrun_lua_raise(L, "ValueError", "configure: %s must be a whole number of bytes, got %s",
                      key, dlrun_lua_describe(L, -1));
    if (n <= 0)
      dlrun_lua_raise(L, "ValueError", "configure: %s must be positive, got %lld", key,
                      (long long)n);
    *bytes = (uint64_t)n;
  } else if (t != LUA_TNIL) {
    dlrun_lua_raise(L, "TypeError",
                    "configure: option %s must be a number of bytes, a size string such as "
                    "\"2GiB\" or a share of host RAM such as \"25%%\", got %s",
                    key, dlrun_lua_typename(L, -1));
  }
  lua_pop(L, 1);
}

static void opt_fraction(lua_State *L, const char *key, double *fraction) {
  int t = lua_getfield(L, 1, key);
  if (t == LUA_TNUMBER) *fraction = lua_tonumber(L, -1);
  else if (t != LUA_TNIL)
    dlrun_lua_raise(L, "TypeError", "configure: option %s must be a number above 0 and at most "
                    "1, got %s", key, dlrun_lua_typename(L, -1));
  if (t == LUA_TNUMBER && !(*fraction > 0 && *fraction <= 1))
    dlrun_lua_raise(L, "ValueError", "configure: %s must be above 0 and at most 1, got %s", key,
                    dlrun_lua_describe(L, -1));
  lua_pop(L, 1);
}

/* A memory's capacity options: `key` (bytes, or a share as "25%") and
 * key_fraction, one of them. */
static void opt_memory(lua_State *L, const char *key, uint64_t *bytes, double *fraction) {
  double share = 0;
  char fraction_key[48];
  snprintf(fraction_key, sizeof fraction_key, "%s_fraction", key);
  opt_capacity(L, key, bytes, &share);
  opt_fraction(L, fraction_key, fraction);
  if ((share || *bytes) && *fraction)
    dlrun_lua_raise(L, "ValueError", "configure: %s and %s are both set (expected one of them)",
                    key, fraction_key);
  if (share) *fraction = share;
}

static void opt_preallocate(lua_State *L, const char *key, dlrun_preallocate *out) {
  int t = lua_getfield(L, 1, key);
  if (t == LUA_TBOOLEAN) *out = lua_toboolean(L, -1) ? DLRUN_PREALLOCATE_ON : DLRUN_PREALLOCATE_OFF;
  else if (t != LUA_TNIL)
    dlrun_lua_raise(L, "TypeError", "configure: option %s must be true or false, got %s", key,
                    dlrun_lua_typename(L, -1));
  lua_pop(L, 1);
}

static int l_configure(lua_State *L) {
  if (!lua_istable(L, 1))
    return dlrun_lua_type_error(L, "configure", 1, "options",
                                "a table {devices=, device_memory=, ...}");
  dlrun_lua_check_nargs(L, "configure", 1);
  static const char *const keys[] = {
      "devices", "device_memory", "device_memory_fraction", "device_preallocate",
      "pinned_host_memory", "pinned_host_memory_fraction", "pinned_host_preallocate",
      "host_memory", "host_memory_fraction", NULL};
  dlrun_lua_check_option_keys(L, 1, "configure", keys, "ValueError");
  dlrun_config c = {0};
  int t = lua_getfield(L, 1, "devices");
  if (t == LUA_TSTRING) /* the table keeps it alive */
    c.devices = dlrun_lua_check_cstring(L, -1, "configure", "devices");
  else if (t != LUA_TNIL)
    return dlrun_lua_raise(L, "TypeError",
                           "configure: option devices must be a device spec string such as "
                           "\"sim:8\", got %s",
                           dlrun_lua_typename(L, -1));
  opt_memory(L, "device_memory", &c.device_memory, &c.device_memory_fraction);
  opt_memory(L, "pinned_host_memory", &c.pinned_host_memory, &c.pinned_host_memory_fraction);
  opt_memory(L, "host_memory", &c.host_memory, &c.host_memory_fraction);
  opt_preallocate(L, "device_preallocate", &c.device_preallocate);
  opt_preallocate(L, "pinned_host_preallocate", &c.pinned_host_preallocate);
  lua_getfield(L, LUA_REGISTRYINDEX, HOST_KEY);
  if (lua_toboolean(L, -1))
    return dlrun_lua_raise(L, "RuntimeError",
                           "configure: this Lua state uses its host application's runtime (%s); "
                           "the host configures it",
                           dlrun_runtime_spec(dlrun_lua_runtime(L)));
  dlrun_lua_check(L, dlrun_default_set_config(&c));
  return 0;
}

/* empty_cache(): every pool of this process gives its unused memory back
 * to the system; returns the bytes. */
static int l_empty_cache(lua_State *L) {
  dlrun_lua_check_nargs(L, "empty_cache", 0);
  lua_pushinteger(L, (lua_Integer)dlrun_runtime_release_unused(dlrun_lua_runtime(L)));
  return 1;
}

/* An optional platform name at idx; raises JAX's RuntimeError when absent. */
static const char *opt_platform(lua_State *L, int idx, const char *fn, dlrun_runtime *rt) {
  if (lua_isnoneornil(L, idx)) return NULL;
  if (lua_type(L, idx) != LUA_TSTRING)
    dlrun_lua_type_error(L, fn, idx, "backend", "a platform name such as \"sim\" or \"cpu\"");
  const char *p = dlrun_lua_check_cstring(L, idx, fn, "backend");
  if (dlrun_device_count(rt, p) == 0)
    dlrun_lua_raise(L, "RuntimeError",
                    "Unknown backend: '%s' requested, but no platforms that are instances of "
                    "%s are present. Platforms present are: %s",
                    p, p, dlrun_runtime_platforms(rt));
  return p;
}

/* devices([backend]) of every process, or local_devices([backend]) of this
 * one. */
static int push_devices(lua_State *L, const char *fn, bool local) {
  dlrun_lua_check_nargs(L, fn, 1);
  dlrun_runtime *rt = dlrun_lua_runtime(L);
  const char *platform = opt_platform(L, 1, fn, rt);
  size_t n = local ? dlrun_local_device_count(rt, platform) : dlrun_device_count(rt, platform);
  lua_createtable(L, (int)n, 0);
  dlrun_lua_set_printed(L, "list");
  for (size_t i = 0; i < n; i++) {
    dlrun_lua_push_device(L, local ? dlrun_local_device_get(rt, platform, i)
                                   : dlrun_device_get(rt, platform, i));
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
  return 1;
}

static int l_devices(lua_State *L) { return push_devices(L, "devices", false); }
static int l_local_devices(lua_State *L) { return push_devices(L, "local_devices", true); }

static int count_devices(lua_State *L, const char *fn, bool local) {
  dlrun_lua_check_nargs(L, fn, 1);
  dlrun_runtime *rt = dlrun_lua_runtime(L);
  const char *platform = opt_platform(L, 1, fn, rt);
  size_t n = local ? dlrun_local_device_count(rt, platform) : dlrun_device_count(rt, platform);
  lua_pushinteger(L, (lua_Integer)n);
  return 1;
}

static int l_device_count(lua_State *L) { return count_devices(L, "device_count", false); }
static int l_local_device_count(lua_State *L) {
  return count_devices(L, "local_device_count", true);
}

static int l_default_backend(lua_State *L) {
  dlrun_lua_check_nargs(L, "default_backend", 0);
  lua_pushstring(L, dlrun_default_backend(dlrun_lua_runtime(L)));
  return 1;
}

static int l_host_device(lua_State *L) {
  dlrun_lua_check_nargs(L, "host_device", 0);
  dlrun_lua_push_device(L, dlrun_host_device(dlrun_lua_runtime(L)));
  return 1;
}

/* Whether standard output is a terminal (for colour in pictures). */
static int l_stdout_is_terminal(lua_State *L) {
  lua_pushboolean(L, isatty(STDOUT_FILENO));
  return 1;
}

static int l_device_spec(lua_State *L) {
  dlrun_lua_check_nargs(L, "device_spec", 0);
  lua_pushstring(L, dlrun_runtime_spec(dlrun_lua_runtime(L)));
  return 1;
}

/* Every platform dlrun knows, in the registry's order: whether its
 * hardware is here, with how many devices (0: as many as asked), or why
 * not. Needs no runtime. */
static int l_platforms(lua_State *L) {
  dlrun_lua_check_nargs(L, "platforms", 0);
  size_t max = dlrun_platforms_list(NULL, 0);
  /* A userdata: freed by the collector even when a push below raises. */
  dlrun_platform_status *st = lua_newuserdatauv(L, (max ? max : 1) * sizeof *st, 0);
  size_t n = dlrun_platforms_list(st, max);
  if (n > max) n = max;
  lua_createtable(L, (int)n, 0);
  dlrun_lua_set_printed(L, "list");
  for (size_t i = 0; i < n; i++) {
    lua_createtable(L, 0, 6);
    dlrun_lua_set_printed(L, "record");
    lua_pushstring(L, st[i].name);
    lua_setfield(L, -2, "name");
    lua_pushstring(L, st[i].class_name);
    lua_setfield(L, -2, "class_name");
    lua_pushboolean(L, st[i].is_accelerator);
    lua_setfield(L, -2, "accelerator");
    lua_pushboolean(L, st[i].available);
    lua_setfield(L, -2, "available");
    lua_pushinteger(L, (lua_Integer)st[i].ndevices);
    lua_setfield(L, -2, "devices");
    if (!st[i].available) {
      lua_pushstring(L, st[i].why);
      lua_setfield(L, -2, "reason");
    }
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
  return 1;
}

void dlrun_lua_runtime_open(lua_State *L) {
  static const luaL_Reg funcs[] = {
      {"configure", l_configure},       {"devices", l_devices},
      {"device_count", l_device_count}, {"default_backend", l_default_backend},
      {"local_devices", l_local_devices}, {"local_device_count", l_local_device_count},
      {"host_device", l_host_device},   {"device_spec", l_device_spec},
      {"empty_cache", l_empty_cache},   {"platforms", l_platforms},
      {"_stdout_is_terminal", l_stdout_is_terminal},
      {NULL, NULL},
  };
  luaL_setfuncs(L, funcs, 0);
}
