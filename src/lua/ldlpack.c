/* DLPack from Lua: x:__dlpack__{...}, x:__dlpack_device__(), dl.to_dlpack,
 * dl.from_dlpack, and Capsules.
 *
 * A Capsule holds one exported tensor. Collecting an unconsumed capsule runs
 * the tensor's deleter; importing it consumes it (its name becomes
 * "used_dltensor" or "used_dltensor_versioned") and its collection then does
 * nothing. */
#include <string.h>

#include "binding.h"
#include "dlrun/lua.h"

typedef struct capsule_ud {
  DLManagedTensor *legacy;
  DLManagedTensorVersioned *versioned;
  bool used;
  bool copied;                  /* the export made a copy (legacy tensors cannot say) */
  bool stored;                  /* the tensor lives in this userdata, after the struct */
  dlrun_import_outcome import;  /* what from_dlpack did with it */
} capsule_ud;
/* The storage after the struct (dlrun_export_into) must be 8-byte aligned. */
_Static_assert(sizeof(capsule_ud) % 8 == 0, "capsule_ud size");

static capsule_ud *test_capsule(lua_State *L, int idx) {
  return luaL_testudata(L, idx, DLRUN_CAPSULE_MT);
}

static DLTensor *capsule_tensor(capsule_ud *c) {
  return c->legacy ? &c->legacy->dl_tensor : &c->versioned->dl_tensor;
}

/* Push an empty Capsule whose metatable is the value at mt_idx, with
 * `storage` bytes after the struct for the tensor (dlrun_export_into). */
static capsule_ud *new_capsule(lua_State *L, int mt_idx, size_t storage) {
  capsule_ud *c = lua_newuserdatauv(L, sizeof *c + storage, 0);
  *c = (capsule_ud){0};
  lua_pushvalue(L, mt_idx);
  lua_setmetatable(L, -2);
  return c;
}

/* Push a Capsule taking over the tensor (valid, empty, before it holds it). */
void dlrun_lua_pushcapsule(lua_State *L, DLManagedTensor *legacy,
                           DLManagedTensorVersioned *versioned) {
  luaL_getmetatable(L, DLRUN_CAPSULE_MT);
  capsule_ud *c = new_capsule(L, lua_gettop(L), 0);
  lua_remove(L, -2);
  c->legacy = legacy;
  c->versioned = versioned;
}

/* Push a Capsule taking over an export's tensor (and its `copied`). */
void dlrun_lua_push_exported(lua_State *L, const dlrun_exported *e) {
  dlrun_lua_pushcapsule(L, e->legacy, e->versioned);
  ((capsule_ud *)lua_touserdata(L, -1))->copied = e->copied;
}

/* A tensor stored in the capsule moves out to memory of its own before a
 * consumer gets it: the consumer may call its deleter after the capsule is
 * gone. Raises (the capsule unchanged) when memory runs out. */
static void detach(lua_State *L, capsule_ud *c) {
  if (!c->stored) return;
  dlrun_exported e = {.legacy = c->legacy, .versioned = c->versioned};
  dlrun_lua_check(L, dlrun_export_detach(&e));
  c->legacy = e.legacy;
  c->versioned = e.versioned;
  c->stored = false;
}

/* Take the tensor out of an unconsumed Capsule, marking it used. */
int dlrun_lua_takecapsule(lua_State *L, int idx, DLManagedTensor **legacy,
                          DLManagedTensorVersioned **versioned) {
  capsule_ud *c = test_capsule(L, idx);
  if (!c || c->used || (!c->legacy && !c->versioned)) return 0;
  detach(L, c);
  *legacy = c->legacy;
  *versioned = c->versioned;
  c->used = true;
  return 1;
}

/* __gc, its upvalue the Capsule metatable: a collection (one per export)
 * looks nothing up by name. */
static int capsule_gc(lua_State *L) {
  capsule_ud *c = lua_touserdata(L, 1);
  if (c && lua_getmetatable(L, 1)) {
    if (!lua_rawequal(L, -1, lua_upvalueindex(1))) c = NULL;
    lua_pop(L, 1);
  } else {
    c = NULL;
  }
  if (c && !c->used) {
    c->used = true;
    if (c->legacy && c->legacy->deleter) c->legacy->deleter(c->legacy);
    if (c->versioned && c->versioned->deleter) c->versioned->deleter(c->versioned);
  }
  return 0;
}

static const char *capsule_name(const capsule_ud *c) {
  if (c->legacy) return c->used ? "used_dltensor" : "dltensor";
  return c->used ? "used_dltensor_versioned" : "dltensor_versioned";
}

static void push_int_pair(lua_State *L, lua_Integer a, lua_Integer b) {
  lua_createtable(L, 2, 0);
  lua_pushinteger(L, a);
  lua_rawseti(L, -2, 1);
  lua_pushinteger(L, b);
  lua_rawseti(L, -2, 2);
}

static const char *const CAPSULE_FIELDS[] = {
    "name", "imported", "version", "flags", "read_only", "is_copied", "device", "byte_offset",
    "shape", "strides", "dtype", NULL,
};

static int is_capsule_field(const char *key) {
  for (const char *const *f = CAPSULE_FIELDS; *f; f++)
    if (strcmp(key, *f) == 0) return 1;
  return 0;
}

static int capsule_index(lua_State *L) {
  capsule_ud *c = test_capsule(L, 1);
  if (!c || lua_type(L, 2) != LUA_TSTRING) return 0;
  const char *key = dlrun_lua_field_name(L, 2);
  if (!is_capsule_field(key)) return dlrun_lua_attribute_error(L, "Capsule", 2, CAPSULE_FIELDS, 0);
  if (strcmp(key, "name") == 0) {
    lua_pushstring(L, capsule_name(c));
    return 1;
  }
  if (strcmp(key, "imported") == 0) { /* "wrapped", "copied"; nil until imported */
    if (c->import != DLRUN_IMPORT_WRAPPED && c->import != DLRUN_IMPORT_COPIED) return 0;
    lua_pushstring(L, c->import == DLRUN_IMPORT_WRAPPED ? "wrapped" : "copied");
    return 1;
  }
  if (c->used) /* the tensor now belongs to its consumer: only the name remains */
    return dlrun_lua_raise(L, "BufferError", "the capsule has been consumed (%s): %s is gone",
                           capsule_name(c), key);
  DLTensor *t = capsule_tensor(c);
  uint64_t flags = c->versioned ? c->versioned->flags : 0;
  if (strcmp(key, "version") == 0) {
    if (!c->versioned) return 0;
    push_int_pair(L, c->versioned->version.major, c->versioned->version.minor);
    dlrun_lua_set_printed(L, "tuple");
  } else if (strcmp(key, "flags") == 0) {
    lua_pushinteger(L, (lua_Integer)flags);
  } else if (strcmp(key, "read_only") == 0) {
    lua_pushboolean(L, (flags & DLPACK_FLAG_BITMASK_READ_ONLY) != 0);
  } else if (strcmp(key, "is_copied") == 0) {
    lua_pushboolean(L, (flags & DLPACK_FLAG_BITMASK_IS_COPIED) != 0 || c->copied);
  } else if (strcmp(key, "device") == 0) {
    push_int_pair(L, t->device.device_type, t->device.device_id);
    dlrun_lua_set_printed(L, "tuple");
  } else if (strcmp(key, "byte_offset") == 0) {
    lua_pushinteger(L, (lua_Integer)t->byte_offset);
  } else if (strcmp(key, "shape") == 0 || strcmp(key, "strides") == 0) {
    bool shape = key[1] == 'h';
    /* nil for NULL (a producer's "row-major" before DLPack 1.2): never
     * dlrun's own exports, which set both whatever ndim. */
    if (!(shape ? t->shape : t->strides)) return 0;
    lua_createtable(L, t->ndim, 0);
    dlrun_lua_set_printed(L, "tuple");
    for (int d = 0; d < t->ndim; d++) {
      lua_pushinteger(L, shape ? t->shape[d] : t->strides[d]);
      lua_rawseti(L, -2, d + 1);
    }
  } else if (strcmp(key, "dtype") == 0) {
    dlrun_dtype dt;
    if (dlrun_dtype_from_dlpack(t->dtype.code, t->dtype.bits, t->dtype.lanes, &dt)) return 0;
    lua_pushstring(L, dlrun_dtype_get(dt)->name);
  } else {
    return 0;
  }
  return 1;
}

static int capsule_tostring(lua_State *L) {
  capsule_ud *c = test_capsule(L, 1);
  if (!c) return dlrun_lua_type_error(L, "tostring", 1, "capsule", "a Capsule");
  lua_pushfstring(L, "Capsule(%s)", capsule_name(c));
  return 1;
}

/* ---- export ---- */

/* The option `field` at vidx (not nil): a pair of integers {a, b} (2 and
 * 2.0 alike, as everywhere else). */
static void opt_int_pair(lua_State *L, int vidx, const char *field, const char *fn, int64_t *a,
                         int64_t *b) {
  if (lua_type(L, vidx) != LUA_TTABLE)
    dlrun_lua_raise(L, "TypeError", "%s: %s must be a pair of integers {a, b}, got %s", fn, field,
                    dlrun_lua_value_text(L, vidx));
  lua_geti(L, vidx, 1);
  lua_geti(L, vidx, 2);
  int top = lua_gettop(L);
  lua_Integer x, y;
  if (dlrun_lua_to_integer(L, top - 1, &x) && dlrun_lua_to_integer(L, top, &y)) {
    *a = x;
    *b = y;
    lua_pop(L, 2);
    return;
  }
  const char *first = dlrun_lua_value_text(L, top - 1); /* anchored on the stack */
  dlrun_lua_raise(L, "TypeError", "%s: %s must be a pair of integers {a, b}, got {%s, %s}", fn,
                  field, first, dlrun_lua_value_text(L, top));
}

/* The `copy` option: nil (if needed), false (never), true (always). */
static dlrun_copy_mode check_copy(lua_State *L, int idx, const char *fn) {
  int t = lua_getfield(L, idx, "copy");
  dlrun_copy_mode mode = DLRUN_COPY_IF_NEEDED;
  if (t == LUA_TBOOLEAN) mode = lua_toboolean(L, -1) ? DLRUN_COPY_ALWAYS : DLRUN_COPY_NEVER;
  else if (t != LUA_TNIL)
    dlrun_lua_raise(L, "TypeError", "%s: copy must be a boolean or nil, got %s", fn,
                    dlrun_lua_typename(L, -1));
  lua_pop(L, 1);
  return mode;
}

/* Whether the string at idx is `s` (of length n). */
static bool string_is(lua_State *L, int idx, const char *s, size_t n) {
  size_t len;
  const char *v = lua_tolstring(L, idx, &len);
  return len == n && memcmp(v, s, n) == 0;
}

/* __dlpack__'s option names, in the order messages list them and values
 * are checked; their lengths differ, which finds a key in one comparison. */
static const char *const EXPORT_KEYS[] = {"stream",         "max_version",      "dl_device", "copy",
                                          "legacy_sharing", "legacy_knows_1_1", NULL};
enum { STREAM, MAX_VERSION, DL_DEVICE, COPY, LEGACY_SHARING, LEGACY_KNOWS_1_1 };

static int export_key(const char *k, size_t n) {
  int i = n == 6 ? STREAM : n == 11 ? MAX_VERSION : n == 9 ? DL_DEVICE : n == 4 ? COPY
        : n == 14 ? LEGACY_SHARING : n == 16 ? LEGACY_KNOWS_1_1 : -1;
  return i >= 0 && memcmp(k, EXPORT_KEYS[i], n) == 0 ? i : -1;
}

/* The options checked in one walk of the table (an export per call stays
 * cheap: nothing is looked up by name). A value of the wrong kind is only
 * noted there; the errors are raised afterwards, in the order of
 * EXPORT_KEYS after any unknown key's, as when each key was looked up in
 * turn. max_version and dl_device, tables, are read afterwards. */
typedef struct export_walk {
  unsigned present, bad; /* bit i: EXPORT_KEYS[i] */
} export_walk;

static export_walk walk_export_options(lua_State *L, int idx, const char *fn,
                                       dlrun_export_options *o) {
  export_walk w = {0, 0};
  lua_pushnil(L);
  while (lua_next(L, idx)) {
    size_t n = 0;
    const char *k = lua_type(L, -2) == LUA_TSTRING ? lua_tolstring(L, -2, &n) : NULL;
    int i = k ? export_key(k, n) : -1;
    if (i < 0) {
      lua_pop(L, 2);
      dlrun_lua_check_option_keys(L, idx, fn, EXPORT_KEYS, "TypeError"); /* raises */
      return w;
    }
    w.present |= 1u << i;
    int t = lua_type(L, -1);
    bool ok = true;
    if (i == STREAM) {
      lua_Integer v;
      ok = dlrun_lua_to_integer(L, -1, &v);
      if (ok) {
        o->has_stream = true;
        o->stream = v;
      }
    } else if (i == COPY) {
      ok = t == LUA_TBOOLEAN;
      if (ok) o->copy = lua_toboolean(L, -1) ? DLRUN_COPY_ALWAYS : DLRUN_COPY_NEVER;
    } else if (i == LEGACY_KNOWS_1_1) {
      ok = t == LUA_TBOOLEAN;
      if (ok) o->legacy_knows_1_1 = lua_toboolean(L, -1);
    } else if (i == LEGACY_SHARING) {
      ok = t == LUA_TSTRING;
      if (ok && string_is(L, -1, "share", 5)) o->legacy_sharing = DLRUN_LEGACY_SHARE;
      else ok = ok && string_is(L, -1, "protect", 7);
    }
    if (!ok) w.bad |= 1u << i;
    lua_pop(L, 1);
  }
  return w;
}

dlrun_export_options dlrun_lua_check_export_options(lua_State *L, int idx, const char *fn) {
  dlrun_export_options o = {0};
  int type = lua_type(L, idx);
  if (type == LUA_TNONE || type == LUA_TNIL) return o;
  if (type != LUA_TTABLE)
    dlrun_lua_type_error(L, fn, idx, "options",
                         "a table {stream=, max_version=, dl_device=, copy=, legacy_sharing=, "
                         "legacy_knows_1_1=}");
  idx = lua_absindex(L, idx);
  export_walk w = walk_export_options(L, idx, fn, &o);
  int64_t a, b;
  if (w.present & (1u << MAX_VERSION)) {
    lua_getfield(L, idx, "max_version");
    opt_int_pair(L, lua_gettop(L), "max_version", fn, &a, &b);
    lua_pop(L, 1);
    if (a < 0 || b < 0 || a > UINT32_MAX || b > UINT32_MAX)
      dlrun_lua_raise(L, "BufferError", "%s: max_version (%lld, %lld) is not a version", fn,
                      (long long)a, (long long)b);
    o.has_max_version = true;
    o.max_major = (uint32_t)a;
    o.max_minor = (uint32_t)b;
  }
  if (w.present & (1u << DL_DEVICE)) {
    lua_getfield(L, idx, "dl_device");
    opt_int_pair(L, lua_gettop(L), "dl_device", fn, &a, &b);
    lua_pop(L, 1);
    /* Core takes int32 values: refuse others here, as given, in core's words. */
    char type[64];
    if (a < INT32_MIN || a > INT32_MAX)
      dlrun_lua_raise(L, "BufferError",
                      "The device specification passed to to_dlpack contains an unsupported "
                      "device type (DLDeviceType: %s)",
                      dlrun_dlpack_device_type_text(a, type, sizeof type));
    if (b < INT32_MIN || b > INT32_MAX)
      dlrun_lua_raise(L, "BufferError",
                      "The device specification passed to to_dlpack names device id %lld, which "
                      "does not exist for DLDeviceType %s",
                      (long long)b, dlrun_dlpack_device_type_text(a, type, sizeof type));
    o.has_dl_device = true;
    o.device_type = (int32_t)a;
    o.device_id = (int32_t)b;
  }
  if (!w.bad) return o;
  if (w.bad & (1u << COPY)) {
    lua_getfield(L, idx, "copy");
    dlrun_lua_raise(L, "TypeError", "%s: copy must be a boolean or nil, got %s", fn,
                    dlrun_lua_typename(L, -1));
  }
  if (w.bad & (1u << LEGACY_SHARING)) {
    lua_getfield(L, idx, "legacy_sharing");
    dlrun_lua_raise(L, "ValueError", "%s: legacy_sharing must be \"protect\" or \"share\", got %s",
                    fn, luaL_tolstring(L, -1, NULL));
  }
  if (w.bad & (1u << LEGACY_KNOWS_1_1)) {
    lua_getfield(L, idx, "legacy_knows_1_1");
    dlrun_lua_raise(L, "TypeError", "%s: legacy_knows_1_1 must be a boolean or nil, got %s", fn,
                    dlrun_lua_typename(L, -1));
  }
  lua_getfield(L, idx, "stream"); /* the one left */
  dlrun_lua_raise(L, "BufferError", "%s: stream must be nil or an integer, got %s", fn,
                  dlrun_lua_value_text(L, -1));
  return o; /* not reached */
}

/* Bytes a transfer copied: between devices or memory kinds, and within one. */
static lua_Integer copied_bytes(const dlrun_transfer_stats *s) {
  return (lua_Integer)(s->bytes_moved + s->local_bytes);
}

/* The export functions' upvalues: the metatables of Array and Capsule. */
#define ARRAY_MT_UP lua_upvalueindex(1)
#define CAPSULE_MT_UP lua_upvalueindex(2)

/* Push a Capsule exporting the array at 1; with `counted`, also the bytes
 * this export copied. */
static int export_to_capsule(lua_State *L, const char *fn, int counted) {
  dlrun_array *a = dlrun_lua_check_array_mt(L, 1, ARRAY_MT_UP, fn);
  dlrun_lua_check_nargs(L, fn, 2);
  dlrun_export_options o = dlrun_lua_check_export_options(L, 2, fn);
  dlrun_transfer_stats stats;
  o.stats = &stats;
  /* The capsule exists (empty) before the export, so nothing can leak; it
   * holds the tensor too (one allocation per export). */
  size_t size = dlrun_export_size(dlrun_array_ndim(a), &o);
  capsule_ud *c = new_capsule(L, CAPSULE_MT_UP, size);
  dlrun_exported e;
  dlrun_lua_check(L, dlrun_export_into(a, &o, c + 1, size, &e));
  c->legacy = e.legacy;
  c->versioned = e.versioned;
  c->copied = e.copied;
  c->stored = true;
  if (!counted) return 1;
  lua_pushinteger(L, copied_bytes(&stats));
  return 2;
}

static int l_dlpack(lua_State *L) { return export_to_capsule(L, "__dlpack__", 0); }
static int l_to_dlpack(lua_State *L) { return export_to_capsule(L, "to_dlpack", 0); }

/* dl._dlpack_counted(x, opts) -> capsule, bytes: x:__dlpack__(opts) (same
 * errors) and the bytes that export itself copied, for lua/dlrun/export.lua.
 * Per call: other threads' or states' transfers do not count. */
static int l_dlpack_counted(lua_State *L) { return export_to_capsule(L, "__dlpack__", 1); }

/* dl._put_counted(x, target) -> array, bytes: dl.device_put(x, target) for
 * one Array and a Device or Sharding, with the bytes that put copied (x
 * itself and 0 when nothing had to change). For lua/dlrun/export.lua. */
static int l_put_counted(lua_State *L) {
  dlrun_array *x = dlrun_lua_check_array(L, 1, "_put_counted");
  dlrun_lua_check_nargs(L, "_put_counted", 2);
  if (lua_isnoneornil(L, 2))
    return dlrun_lua_type_error(L, "_put_counted", 2, "target", "a Device or a Sharding");
  dlrun_lua_push_target(L, 2, "_put_counted");
  dlrun_transfer_stats stats;
  dlrun_put_options o = {.may_alias = DLRUN_ALIAS_DEFAULT, .stats = &stats};
  dlrun_lua_push_put(L, 1, x, lua_gettop(L), &o);
  lua_pushinteger(L, copied_bytes(&stats));
  return 2;
}

static int l_dlpack_device(lua_State *L) {
  dlrun_array *a = dlrun_lua_check_array(L, 1, "__dlpack_device__");
  dlrun_lua_check_nargs(L, "__dlpack_device__", 1);
  int32_t type, id;
  dlrun_lua_check(L, dlrun_export_device(a, &type, &id));
  lua_pushinteger(L, type);
  lua_pushinteger(L, id);
  return 2;
}

/* ---- import ---- */

static dlrun_import_options check_import_options(lua_State *L, int idx) {
  dlrun_import_options o = {0};
  if (lua_isnoneornil(L, idx)) return o;
  if (!lua_istable(L, idx))
    dlrun_lua_type_error(L, "from_dlpack", idx, "options", "a table {device=, copy=}");
  static const char *const keys[] = {"device", "copy", NULL};
  dlrun_lua_check_option_keys(L, idx, "from_dlpack", keys, "TypeError");
  o.copy = check_copy(L, idx, "from_dlpack");
  if (lua_getfield(L, idx, "device") != LUA_TNIL) {
    /* anchored in the options table */
    o.target = dlrun_lua_test_sharding(L, -1);
    if (!o.target) {
      dlrun_device *dev = dlrun_lua_test_device(L, -1);
      if (!dev)
        dlrun_lua_raise(L, "TypeError", "from_dlpack: device must be a Device or a Sharding, got %s",
                        dlrun_lua_typename(L, -1));
      o.target = dlrun_lua_push_device_sharding(L, dev);
      lua_pop(L, 1); /* the cache keeps it */
    }
  }
  lua_pop(L, 1);
  return o;
}

/* Import the capsule at idx (consuming it) onto the options' target. */
static int import_capsule(lua_State *L, int idx, const dlrun_import_options *o) {
  capsule_ud *c = test_capsule(L, idx);
  if (c->used || (!c->legacy && !c->versioned))
    return dlrun_lua_raise(L, "BufferError",
                           "from_dlpack: the capsule has already been consumed (its name is %s)",
                           capsule_name(c));
  detach(L, c);
  dlrun_runtime *rt = dlrun_lua_runtime(L);
  lua_pushnil(L); /* room for the result */
  dlrun_array *out;
  dlrun_import_outcome how;
  dlrun_status st = dlrun_import(rt, c->legacy, c->versioned, o, &out, &how);
  /* Refused tensors stay the capsule's; any other outcome spends it. */
  if (how != DLRUN_IMPORT_REFUSED) c->used = true;
  c->import = how;
  dlrun_lua_check(L, st);
  dlrun_lua_push_array_owned(L, out, 0);
  return 1;
}

/* The stream a consumer passes to obj:__dlpack__ (the protocol): asks
 * obj:__dlpack_device__() where the tensor is; false when dlrun passes none
 * there (or the producer does not say). */
static bool consumer_stream(lua_State *L, int obj, int64_t *stream) {
  lua_getfield(L, obj, "__dlpack_device__");
  lua_pushvalue(L, obj);
  if (lua_pcall(L, 1, 2, 0) != LUA_OK) {
    lua_pop(L, 1);
    return false;
  }
  bool known = lua_isinteger(L, -2) && lua_isinteger(L, -1);
  bool has = known && dlrun_dlpack_consumer_stream(dlrun_lua_runtime(L),
                                                   (int32_t)lua_tointeger(L, -2),
                                                   (int32_t)lua_tointeger(L, -1), stream);
  lua_pop(L, 2);
  return has;
}

/* Call obj:__dlpack__(opts) protected; true with the result on the stack. */
static int call_dlpack(lua_State *L, int obj, int with_version) {
  int64_t stream;
  bool has_stream = consumer_stream(L, obj, &stream);
  lua_getfield(L, obj, "__dlpack__");
  lua_pushvalue(L, obj);
  lua_createtable(L, 0, 2);
  if (with_version) {
    push_int_pair(L, DLRUN_DLPACK_MAJOR, DLRUN_DLPACK_MINOR);
    lua_setfield(L, -2, "max_version");
  }
  if (has_stream) {
    lua_pushinteger(L, stream);
    lua_setfield(L, -2, "stream");
  }
  return lua_pcall(L, 2, 1, 0) == LUA_OK;
}

static int is_type_error(lua_State *L, int idx) {
  if (!lua_istable(L, idx)) return 0;
  lua_getfield(L, idx, "name");
  int is = lua_type(L, -1) == LUA_TSTRING && strcmp(lua_tostring(L, -1), "TypeError") == 0;
  lua_pop(L, 1);
  return is;
}

/* dl.from_dlpack(obj [, {device=, copy=}]) */
static int l_from_dlpack(lua_State *L) {
  dlrun_lua_check_nargs(L, "from_dlpack", 2);
  lua_settop(L, 2);
  dlrun_import_options o = check_import_options(L, 2);
  if (test_capsule(L, 1)) return import_capsule(L, 1, &o);
  int has_methods = 0;
  if (!lua_isnil(L, 1) && (lua_istable(L, 1) || lua_isuserdata(L, 1))) {
    /* probed as hasattr does: a dlrun object without them is no array */
    int a = dlrun_lua_probe_field(L, 1, "__dlpack__");
    int b = dlrun_lua_probe_field(L, 1, "__dlpack_device__");
    has_methods = a != LUA_TNIL && b != LUA_TNIL;
    lua_pop(L, 2);
  }
  if (!has_methods)
    return dlrun_lua_raise(L, "TypeError",
                           "The array passed to from_dlpack must have __dlpack__ and "
                           "__dlpack_device__ methods.");
  static const char *const methods[] = {"__dlpack__", "__dlpack_device__"};
  for (int i = 0; i < 2; i++) {
    lua_getfield(L, 1, methods[i]);
    if (!dlrun_lua_is_callable(L, -1))
      return dlrun_lua_raise(L, "TypeError",
                             "from_dlpack: the %s of argument 1 must be a method, got %s",
                             methods[i], dlrun_lua_typename(L, -1));
    lua_pop(L, 1);
  }
  /* The array-API way: ask for a versioned tensor first, and retry without
   * max_version when the producer refuses the argument (a TypeError). */
  if (!call_dlpack(L, 1, 1)) {
    if (!is_type_error(L, -1)) return lua_error(L);
    lua_pop(L, 1);
    if (!call_dlpack(L, 1, 0)) return lua_error(L);
  }
  if (!test_capsule(L, -1))
    return dlrun_lua_raise(L, "TypeError", "from_dlpack: __dlpack__ returned a %s, not a Capsule",
                           dlrun_lua_typename(L, -1));
  return import_capsule(L, lua_gettop(L), &o);
}

static int l_live_exports(lua_State *L) {
  dlrun_lua_check_nargs(L, "live_exports", 0);
  lua_pushinteger(L, dlrun_live_exports(dlrun_lua_runtime(L)));
  return 1;
}

/* Push the metatables of Array and Capsule: the export functions' upvalues. */
static void push_export_upvalues(lua_State *L) {
  luaL_getmetatable(L, DLRUN_ARRAY_MT);
  luaL_getmetatable(L, DLRUN_CAPSULE_MT);
}

void dlrun_lua_dlpack_open(lua_State *L) {
  static const luaL_Reg meta[] = {
      {"__index", capsule_index}, {"__tostring", capsule_tostring}, {NULL, NULL},
  };
  dlrun_lua_new_metatable(L, DLRUN_CAPSULE_MT, "Capsule", meta);
  lua_pushvalue(L, -1);
  lua_pushcclosure(L, capsule_gc, 1);
  lua_setfield(L, -2, "__gc");
  lua_pop(L, 1);
  static const luaL_Reg funcs[] = {
      {"from_dlpack", l_from_dlpack},
      {"live_exports", l_live_exports},
      {"_put_counted", l_put_counted},
      {NULL, NULL},
  };
  luaL_setfuncs(L, funcs, 0);
  static const luaL_Reg exports[] = {
      {"to_dlpack", l_to_dlpack},
      {"_dlpack_counted", l_dlpack_counted},
      {NULL, NULL},
  };
  push_export_upvalues(L);
  luaL_setfuncs(L, exports, 2);
  /* Arrays gain the DLPack methods. */
  static const luaL_Reg methods[] = {
      {"__dlpack_device__", l_dlpack_device},
      {"__cuda_array_interface__", dlrun_lua_cuda_array_interface},
      {NULL, NULL}};
  dlrun_lua_add_array_methods(L, methods, 0);
  static const luaL_Reg export_methods[] = {{"__dlpack__", l_dlpack}, {NULL, NULL}};
  push_export_upvalues(L);
  dlrun_lua_add_array_methods(L, export_methods, 2);
}
