/* A host application embedding Lua and dlrun (include/dlrun/lua.h).
 *
 * The host creates its own runtime and Lua state, opens dlrun in the state
 * bound to that runtime (the global `dl`), and registers one function for
 * scripts:
 *
 *   consume(capsule, name [, first [, step]]) -> number of values checked
 *
 * which takes the DLPack tensor out of the capsule, checks that element i (in
 * row-major order, whatever the tensor's strides) equals first + i*step, and
 * calls the tensor's deleter. It then runs a pipeline script
 * (examples/host/embed_pipeline.lua unless argv[1] names another) that shards,
 * gathers and exports arrays, closes the Lua state and reports what it
 * consumed. It exits 0 only if every value matched, every deleter ran and no
 * export is left alive.
 *
 * The pure-Lua half of dlrun is found through DLRUN_LUA_DIR, else the lua/
 * folder of the source tree this program was built in (the program is
 * <root>/build/examples/embed, so <root>/lua).
 *
 * Built against an installed dlrun (README, "Install"), with dlrun-lua.pc:
 *   cc -o embed embed.c $(pkg-config --cflags --libs dlrun-lua)
 *   DLRUN_LUA_DIR=$(pkg-config --variable=luadir dlrun-lua) ./embed embed_pipeline.lua */
#define _POSIX_C_SOURCE 200809L

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>

#include <dlrun/dlpack.h>
#include <dlrun/dlrun.h>
#include <dlrun/lua.h>

/* What the host learnt about one consumed tensor. */
typedef struct consumed {
  char name[64];
  int64_t count; /* values checked */
  int64_t wrong; /* values that did not match */
  char first_wrong[160];
  const char *unread; /* why the host could not read it, or NULL */
  int deleted; /* 1 once its deleter ran and released exactly one export */
} consumed;

typedef struct host {
  dlrun_runtime *rt;
  consumed *items;
  size_t n, cap;
  int64_t values, deleters;
} host;

/* ---- reading a DLPack tensor ---- */

/* The name of a dtype this example reads, or NULL. */
static const char *dtype_name(DLDataType t) {
  if (t.lanes != 1) return NULL;
  switch (t.code) {
  case kDLFloat:
    return t.bits == 32 ? "float32" : t.bits == 64 ? "float64" : NULL;
  case kDLInt:
    return t.bits == 8 ? "int8" : t.bits == 16 ? "int16" : t.bits == 32 ? "int32"
         : t.bits == 64 ? "int64" : NULL;
  case kDLUInt:
    return t.bits == 8 ? "uint8" : t.bits == 16 ? "uint16" : t.bits == 32 ? "uint32"
         : t.bits == 64 ? "uint64" : NULL;
  default:
    return NULL;
  }
}

/* One element as an integer (integer dtypes) or a double (floats). */
typedef struct value {
  int is_int;
  int64_t i;
  double d;
} value;

/* Load the integer at p as stype (kDLInt) or utype (kDLUInt) into v.i. */
#define LOAD_INT(stype, utype)                                                                    \
  do {                                                                                            \
    stype s_;                                                                                     \
    utype u_;                                                                                     \
    memcpy(&s_, p, sizeof s_);                                                                    \
    memcpy(&u_, p, sizeof u_);                                                                    \
    v.i = t.code == kDLInt ? (int64_t)s_ : (int64_t)u_;                                           \
  } while (0)

static value load(DLDataType t, const char *p) {
  value v = {0};
  if (t.code == kDLFloat) {
    if (t.bits == 32) {
      float f;
      memcpy(&f, p, sizeof f);
      v.d = f;
    } else {
      memcpy(&v.d, p, sizeof v.d);
    }
    return v;
  }
  v.is_int = 1;
  switch (t.bits) {
  case 8: LOAD_INT(int8_t, uint8_t); break;
  case 16: LOAD_INT(int16_t, uint16_t); break;
  case 32: LOAD_INT(int32_t, uint32_t); break;
  default: memcpy(&v.i, p, sizeof v.i); break; /* uint64 above INT64_MAX wraps */
  }
  v.d = (double)v.i;
  return v;
}

/* The expected value of element i: first + i*step, exact for integers. */
typedef struct expect {
  int exact; /* first and step are integers */
  lua_Integer first, step;
  double dfirst, dstep;
} expect;

static int matches(const expect *e, DLDataType t, value v, int64_t i, char *got, char *want,
                   size_t size) {
  int ok;
  if (v.is_int && e->exact) {
    int64_t w = (int64_t)e->first + i * (int64_t)e->step;
    ok = v.i == w;
    snprintf(got, size, "%lld", (long long)v.i);
    snprintf(want, size, "%lld", (long long)w);
  } else {
    double w = e->dfirst + (double)i * e->dstep;
    /* A float32 holds the float32 nearest the exact value. */
    if (t.code == kDLFloat && t.bits == 32) w = (float)w;
    ok = v.d == w;
    snprintf(got, size, "%.17g", v.d);
    snprintf(want, size, "%.17g", w);
  }
  return ok;
}

/* Check every element of t in row-major order. Returns the number checked;
 * fills c->wrong and c->first_wrong. Sets *why (and returns -1) when the
 * tensor cannot be read here. */
/* The bytes of t's elements where this host can read them: host memory as
 * it is; a sim device's memory, which the host cannot read (as a GPU's),
 * copied out through the runtime's driver call (as cudaMemcpy would).
 * Returns the base to index from, or NULL with *why; *copy is to be freed. */
static const char *readable_base(dlrun_runtime *rt, const DLTensor *t, size_t itemsize,
                                 void **copy, const char **why) {
  const char *base = (const char *)t->data + t->byte_offset;
  *copy = NULL;
  if (t->device.device_type == kDLCPU) return base;
  int64_t span = 1; /* elements from the first to the last (strides are >= 0 here) */
  for (int d = 0; d < t->ndim; d++) {
    if (t->strides && t->strides[d] < 0) {
      *why = "negative strides on a device tensor";
      return NULL;
    }
    int64_t compact = 1;
    for (int k = d + 1; k < t->ndim; k++) compact *= t->shape[k];
    span += (t->shape[d] - 1) * (t->strides ? t->strides[d] : compact);
  }
  dlrun_device *dev = dlrun_device_get(rt, "sim", (size_t)t->device.device_id);
  *copy = malloc((size_t)span * itemsize);
  if (!dev || !*copy ||
      dlrun_device_copy_to_host(dev, DLRUN_MEM_DEVICE, base, (uint64_t)span * itemsize, *copy)) {
    *why = "cannot copy the device tensor to the host";
    free(*copy);
    *copy = NULL;
    return NULL;
  }
  return *copy;
}

static int64_t check_tensor(dlrun_runtime *rt, const DLTensor *t, const expect *e, consumed *c,
                            const char **why) {
  if (t->device.device_type != kDLCPU && t->device.device_type != kDLExtDev) {
    *why = "the tensor is on a device this host cannot read (expected kDLCPU or a sim device)";
    return -1;
  }
  if (!dtype_name(t->dtype)) {
    *why = "unsupported dtype (this host reads float32/64 and 8- to 64-bit integers)";
    return -1;
  }
  int64_t n = 1;
  for (int d = 0; d < t->ndim; d++) n *= t->shape[d];
  if (n == 0) return 0;
  if (!t->data) {
    *why = "the tensor has no data";
    return -1;
  }
  size_t itemsize = t->dtype.bits / 8;
  int64_t *idx = calloc(t->ndim > 0 ? (size_t)t->ndim : 1, sizeof *idx);
  if (!idx) {
    *why = "out of host memory";
    return -1;
  }
  void *copy;
  const char *base = readable_base(rt, t, itemsize, &copy, why);
  if (!base) {
    free(idx);
    return -1;
  }
  for (int64_t i = 0; i < n; i++) {
    /* Offset of the element at idx, in elements: the strides when given,
     * else compact row-major. */
    int64_t off = 0, compact = 1;
    for (int d = t->ndim - 1; d >= 0; d--) {
      off += idx[d] * (t->strides ? t->strides[d] : compact);
      compact *= t->shape[d];
    }
    char got[48], want[48];
    if (!matches(e, t->dtype, load(t->dtype, base + off * (int64_t)itemsize), i, got, want,
                 sizeof got)) {
      if (c->wrong++ == 0)
        snprintf(c->first_wrong, sizeof c->first_wrong, "element %lld is %s, expected %s",
                 (long long)i, got, want);
    }
    for (int d = t->ndim - 1; d >= 0; d--) { /* next row-major index */
      if (++idx[d] < t->shape[d]) break;
      idx[d] = 0;
    }
  }
  free(idx);
  free(copy);
  return n;
}

/* ---- the function scripts call ---- */

/* consume(capsule, name [, first [, step]]) */
static int l_consume(lua_State *L) {
  host *h = lua_touserdata(L, lua_upvalueindex(1));
  const char *name = luaL_checkstring(L, 2);
  expect e = {0};
  e.exact = lua_isnoneornil(L, 3) || lua_isinteger(L, 3);
  e.exact = e.exact && (lua_isnoneornil(L, 4) || lua_isinteger(L, 4));
  e.dfirst = luaL_optnumber(L, 3, 0);
  e.dstep = luaL_optnumber(L, 4, 1);
  if (e.exact) {
    e.first = luaL_optinteger(L, 3, 0);
    e.step = luaL_optinteger(L, 4, 1);
  }
  if (h->n == h->cap) { /* room for the record before owning the tensor */
    size_t cap = h->cap ? 2 * h->cap : 8;
    consumed *items = realloc(h->items, cap * sizeof *items);
    if (!items) return luaL_error(L, "consume: out of host memory");
    h->items = items;
    h->cap = cap;
  }
  DLManagedTensor *legacy = NULL;
  DLManagedTensorVersioned *versioned = NULL;
  if (!dlrun_lua_takecapsule(L, 1, &legacy, &versioned)) {
    const char *shown = luaL_tolstring(L, 1, NULL);
    return luaL_error(L, "consume: argument #1 must be an unconsumed Capsule, got %s", shown);
  }

  /* From here the host owns the tensor: nothing may raise until its deleter ran. */
  consumed *c = &h->items[h->n++];
  memset(c, 0, sizeof *c);
  snprintf(c->name, sizeof c->name, "%s", name);
  const char *why = NULL;
  int64_t checked;
  if (versioned && versioned->version.major != DLRUN_DLPACK_MAJOR) {
    why = "unknown DLPack major version";
    checked = -1;
  } else {
    checked = check_tensor(h->rt, versioned ? &versioned->dl_tensor : &legacy->dl_tensor, &e, c,
                           &why);
  }

  int64_t before = dlrun_live_exports(h->rt);
  if (versioned && versioned->deleter) versioned->deleter(versioned);
  if (legacy && legacy->deleter) legacy->deleter(legacy);
  c->deleted = before - dlrun_live_exports(h->rt) == 1;
  h->deleters += c->deleted;

  if (checked < 0) {
    c->unread = why;
    return luaL_error(L, "consume: %s: %s", c->name, why);
  }
  c->count = checked;
  h->values += checked;
  lua_pushinteger(L, (lua_Integer)checked);
  return 1;
}

/* ---- setting up the state ---- */

/* open_dlrun(host, lua_dir): the standard libraries, package.path, dlrun
 * bound to the host's runtime as the global `dl`, and `consume`. */
static int open_dlrun(lua_State *L) {
  host *h = lua_touserdata(L, 1);
  luaL_openlibs(L);
  /* package.path = "<dir>/?.lua;<dir>/?/init.lua;" .. package.path */
  const char *dir = lua_tostring(L, 2);
  lua_getglobal(L, "package");
  lua_pushfstring(L, "%s/?.lua;%s/?/init.lua;", dir, dir);
  lua_getfield(L, -2, "path");
  lua_concat(L, 2);
  lua_setfield(L, -2, "path");
  lua_pop(L, 1);
  dlrun_lua_open(L, h->rt);
  lua_setglobal(L, "dl");
  lua_pushlightuserdata(L, h);
  lua_pushcclosure(L, l_consume, 1);
  lua_setglobal(L, "consume");
  return 0;
}

/* Message handler: the error as tostring shows it ("ValueError: ..."). */
static int message(lua_State *L) {
  luaL_tolstring(L, 1, NULL);
  return 1;
}

/* Run fn(args...) protected; on error print "embed: <err>" and return 0. */
static int protected_call(lua_State *L, int nargs) {
  int base = lua_gettop(L) - nargs;
  lua_pushcfunction(L, message);
  lua_insert(L, base);
  int ok = lua_pcall(L, nargs, 0, base) == LUA_OK;
  if (!ok) fprintf(stderr, "embed: %s\n", lua_tostring(L, -1));
  lua_settop(L, base - 1);
  return ok;
}

/* Strip the last component of the absolute path p ("/a/b/c" -> "/a/b"). */
static void parent(char *p) {
  char *slash = strrchr(p, '/');
  if (slash && slash != p) *slash = '\0';
  else if (slash) p[1] = '\0';
}

static int is_file(const char *p) {
  struct stat st;
  return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

/* The folder holding dlrun/init.lua and the source tree's root:
 * DLRUN_LUA_DIR and DLRUN_LUA_DIR/.., else <root>/lua and <root> where this
 * program is <root>/<build>/examples/embed. */
static int find_lua_dir(char *dir, char *root, size_t size) {
  const char *env = getenv("DLRUN_LUA_DIR");
  if (env && *env) {
    int k = snprintf(dir, size, "%s", env), r = snprintf(root, size, "%s/..", env);
    return k > 0 && (size_t)k < size && r > 0 && (size_t)r < size;
  }
  char exe[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0) return 0;
  exe[n] = '\0';
  parent(exe); /* <root>/build/examples */
  parent(exe); /* <root>/build */
  parent(exe); /* <root> */
  char probe[PATH_MAX + 32];
  snprintf(probe, sizeof probe, "%s/lua/dlrun/init.lua", exe);
  if (!is_file(probe)) return 0;
  int k = snprintf(dir, size, "%s/lua", exe), r = snprintf(root, size, "%s", exe);
  return k > 0 && (size_t)k < size && r > 0 && (size_t)r < size;
}

int main(int argc, char **argv) {
  char lua_dir[PATH_MAX], root[PATH_MAX];
  if (!find_lua_dir(lua_dir, root, sizeof lua_dir)) {
    fprintf(stderr, "embed: cannot find dlrun's Lua files (lua/dlrun/init.lua) next to the "
                    "build folder; set DLRUN_LUA_DIR to the source tree's lua folder\n");
    return 1;
  }
  char script[PATH_MAX + 64];
  if (argc > 1) snprintf(script, sizeof script, "%s", argv[1]);
  else snprintf(script, sizeof script, "%s/examples/host/embed_pipeline.lua", root);

  /* The host's own runtime: eight simulated accelerators and a host cpu. */
  dlrun_config cfg = {.devices = "sim:8,cpu:1", .device_memory = 256u << 20};
  host h = {0};
  dlrun_status st = dlrun_runtime_create(&cfg, &h.rt);
  if (st) {
    fprintf(stderr, "embed: runtime: %s: %s\n", dlrun_status_name(st), dlrun_last_error());
    return 1;
  }

  lua_State *L = luaL_newstate();
  if (!L) {
    fprintf(stderr, "embed: cannot create a Lua state\n");
    dlrun_runtime_release(h.rt);
    return 1;
  }
  lua_pushcfunction(L, open_dlrun);
  lua_pushlightuserdata(L, &h);
  lua_pushstring(L, lua_dir);
  int ok = protected_call(L, 2);
  if (ok) {
    if (luaL_loadfile(L, script) != LUA_OK) {
      fprintf(stderr, "embed: %s\n", lua_tostring(L, -1));
      lua_pop(L, 1);
      ok = 0;
    } else {
      ok = protected_call(L, 0);
    }
  }
  lua_close(L); /* collects every array and unconsumed capsule */

  int all_match = 1;
  for (size_t i = 0; i < h.n; i++) {
    consumed *c = &h.items[i];
    if (c->unread) {
      all_match = 0;
      printf("consumed %s: not read (%s)\n", c->name, c->unread);
    } else if (c->wrong) {
      all_match = 0;
      printf("consumed %s: %lld of %lld values wrong (%s)\n", c->name, (long long)c->wrong,
             (long long)c->count, c->first_wrong);
      fprintf(stderr, "embed: tensor %s: %lld of %lld values are not first + i*step: %s\n",
              c->name, (long long)c->wrong, (long long)c->count, c->first_wrong);
    } else {
      printf("consumed %s: %lld values ok\n", c->name, (long long)c->count);
    }
  }
  int64_t live = dlrun_live_exports(h.rt);
  printf("host: %zu tensors, %lld values checked, %lld deleters run, %lld exports alive\n", h.n,
         (long long)h.values, (long long)h.deleters, (long long)live);
  if (ok && (int64_t)h.n != h.deleters)
    fprintf(stderr, "embed: %lld of %zu deleters did not release exactly one export\n",
            (long long)((int64_t)h.n - h.deleters), h.n);
  if (ok && live != 0) fprintf(stderr, "embed: %lld exports still alive\n", (long long)live);
  int success = ok && all_match && (int64_t)h.n == h.deleters && live == 0;

  free(h.items);
  dlrun_runtime_release(h.rt);
  return success ? 0 : 1;
}
