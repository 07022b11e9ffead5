/* The one place where dlrun statuses become Lua error values. Error classes
 * live in lua/dlrun/errors.lua; its `new` is kept in the registry. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "binding.h"

#define ERRORS_KEY "dlrun.errors.new"
#define DESCRIBE_KEY "dlrun.errors.describe"
#define ATTRIBUTE_KEY "dlrun.errors.attribute_error"
#define PROBE_KEY "dlrun.errors.probe"

void dlrun_lua_errors_open(lua_State *L) {
  dlrun_lua_require(L, "dlrun.errors");
  lua_getfield(L, -1, "new");
  lua_setfield(L, LUA_REGISTRYINDEX, ERRORS_KEY);
  lua_getfield(L, -1, "describe");
  lua_setfield(L, LUA_REGISTRYINDEX, DESCRIBE_KEY);
  lua_getfield(L, -1, "attribute_error");
  lua_setfield(L, LUA_REGISTRYINDEX, ATTRIBUTE_KEY);
  lua_getfield(L, -1, "probe");
  lua_setfield(L, LUA_REGISTRYINDEX, PROBE_KEY);
  lua_pop(L, 1);
}

int dlrun_lua_attribute_error(lua_State *L, const char *shown, int key_idx,
                              const char *const *fields, int methods_idx) {
  if (lua_type(L, key_idx) != LUA_TSTRING) return 0;
  key_idx = lua_absindex(L, key_idx);
  if (methods_idx) methods_idx = lua_absindex(L, methods_idx);
  lua_getfield(L, LUA_REGISTRYINDEX, ATTRIBUTE_KEY);
  lua_pushstring(L, shown);
  lua_pushvalue(L, key_idx);
  lua_newtable(L);
  lua_Integer n = 0;
  for (const char *const *f = fields; *f; f++) {
    lua_pushstring(L, *f);
    lua_rawseti(L, -2, ++n);
  }
  if (methods_idx) {
    lua_pushnil(L);
    while (lua_next(L, methods_idx)) {
      lua_pop(L, 1);
      lua_pushvalue(L, -1);
      lua_rawseti(L, -3, ++n);
    }
  }
  lua_call(L, 3, 1);
  return lua_error(L);
}

int dlrun_lua_probe_field(lua_State *L, int idx, const char *key) {
  /* Only an __index metamethod can raise; anything else reads as it is. */
  if (luaL_getmetafield(L, idx, "__index") == LUA_TNIL) {
    if (!lua_istable(L, idx)) {
      lua_pushnil(L);
      return LUA_TNIL;
    }
    return lua_getfield(L, idx, key);
  }
  lua_pop(L, 1);
  idx = lua_absindex(L, idx);
  lua_getfield(L, LUA_REGISTRYINDEX, PROBE_KEY);
  lua_pushvalue(L, idx);
  lua_pushstring(L, key);
  lua_call(L, 2, 1);
  return lua_type(L, -1);
}

/* errors.describe, so that both sides show values alike. */
const char *dlrun_lua_describe(lua_State *L, int idx) {
  idx = lua_absindex(L, idx);
  lua_getfield(L, LUA_REGISTRYINDEX, DESCRIBE_KEY);
  lua_pushvalue(L, idx);
  lua_call(L, 1, 1);
  return lua_tostring(L, -1);
}

static int raise_message(lua_State *L, const char *class_name, const char *message) {
  lua_getfield(L, LUA_REGISTRYINDEX, ERRORS_KEY);
  lua_pushstring(L, class_name);
  lua_pushstring(L, message);
  lua_call(L, 2, 1);
  return lua_error(L);
}

void dlrun_lua_check(lua_State *L, dlrun_status status) {
  if (status == DLRUN_OK) return;
  raise_message(L, dlrun_status_name(status), dlrun_last_error());
}

void dlrun_lua_check_in(lua_State *L, const char *fn, dlrun_status status) {
  if (status == DLRUN_OK) return;
  const char *message = dlrun_last_error();
  size_t n = strlen(fn);
  if (strncmp(message, fn, n) == 0 && (message[n] == ':' || message[n] == ' '))
    raise_message(L, dlrun_status_name(status), message);
  dlrun_lua_raise(L, dlrun_status_name(status), "%s: %s", fn, message);
}

int dlrun_lua_raise(lua_State *L, const char *class_name, const char *fmt, ...) {
  char message[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(message, sizeof message, fmt, ap);
  va_end(ap);
  return raise_message(L, class_name, message);
}

const char *dlrun_lua_typename(lua_State *L, int idx) {
  const char *name = luaL_typename(L, idx);
  if (luaL_getmetafield(L, idx, "__name") != LUA_TNIL) {
    if (lua_type(L, -1) == LUA_TSTRING) name = lua_tostring(L, -1);
    lua_pop(L, 1); /* the string stays alive in the metatable */
  }
  return name;
}

int dlrun_lua_type_error(lua_State *L, const char *fn, int arg, const char *what,
                         const char *expected) {
  return dlrun_lua_raise(L, "TypeError", "%s: argument %d (%s) must be %s, got %s", fn, arg,
                         what, expected, dlrun_lua_typename(L, arg));
}

const char *dlrun_lua_value_text(lua_State *L, int idx) {
  return lua_type(L, idx) == LUA_TNUMBER ? dlrun_lua_describe(L, idx) : dlrun_lua_typename(L, idx);
}

int dlrun_lua_number_error(lua_State *L, const char *fn, int arg, const char *what,
                           const char *expected) {
  return dlrun_lua_raise(L, "TypeError", "%s: argument %d (%s) must be %s, got %s", fn, arg,
                         what, expected, dlrun_lua_value_text(L, arg));
}

void dlrun_lua_check_nargs(lua_State *L, const char *fn, int max) {
  int n = lua_gettop(L);
  if (n > max)
    dlrun_lua_raise(L, "TypeError", "%s: expected at most %d argument%s, got %d", fn, max,
                    max == 1 ? "" : "s", n);
}

unsigned dlrun_lua_option_keys_present(lua_State *L, int idx, const char *fn,
                                       const char *const *keys, const char *class_name) {
  idx = lua_absindex(L, idx);
  unsigned present = 0;
  lua_pushnil(L);
  while (lua_next(L, idx)) {
    lua_pop(L, 1);
    size_t n = 0;
    const char *k = lua_type(L, -1) == LUA_TSTRING ? lua_tolstring(L, -1, &n) : NULL;
    int known = 0;
    for (const char *const *key = keys; k && *key && !known; key++)
      if ((known = strlen(*key) == n && memcmp(k, *key, n) == 0)) present |= 1u << (key - keys);
    if (known) continue;
    char expected[256];
    size_t used = 0;
    expected[0] = 0;
    for (const char *const *key = keys; *key && used < sizeof expected; key++)
      used += (size_t)snprintf(expected + used, sizeof expected - used, "%s%s",
                               key == keys ? "" : ", ", *key);
    /* TypeError is Python's for an unexpected keyword; configure and
     * device_put have always answered ValueError "unknown option". */
    dlrun_lua_raise(L, class_name, "%s: %s option '%s' (expected %s)", fn,
                    strcmp(class_name, "TypeError") == 0 ? "unexpected" : "unknown",
                    luaL_tolstring(L, -1, NULL), expected);
  }
  return present;
}

void dlrun_lua_check_option_keys(lua_State *L, int idx, const char *fn, const char *const *keys,
                                 const char *class_name) {
  dlrun_lua_option_keys_present(L, idx, fn, keys, class_name);
}

const char *dlrun_lua_check_cstring(lua_State *L, int idx, const char *fn, const char *what) {
  size_t len;
  const char *s = lua_tolstring(L, idx, &len);
  if (strlen(s) == len) return s;
  char shown[64]; /* the value, its NULs as \0, cut after 40 bytes */
  size_t used = 0;
  for (size_t i = 0; i < len && i < 40 && used + 3 < sizeof shown; i++) {
    if (s[i]) shown[used++] = s[i];
    else used += (size_t)snprintf(shown + used, sizeof shown - used, "\\0");
  }
  shown[used] = 0;
  return dlrun_lua_raise(L, "ValueError", "%s: embedded null byte in %s (\"%s%s\")", fn, what,
                         shown, len > 40 ? "..." : ""),
         NULL;
}

const char *dlrun_lua_field_name(lua_State *L, int idx) {
  size_t len;
  const char *s = lua_tolstring(L, idx, &len);
  return strlen(s) == len ? s : "";
}

int dlrun_lua_released_error(lua_State *L, int idx) {
  return dlrun_lua_raise(L, "RuntimeError",
                         "%s has been released (its __gc metamethod was called) and can no "
                         "longer be used",
                         dlrun_lua_typename(L, idx));
}
