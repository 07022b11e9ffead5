/* stress_lua_states: two Lua states, each on its own thread, sharing one
 * runtime.
 *
 * The host makes one runtime ("sim:8,cpu:1") and NSTATES Lua states
 * (luaL_newstate + luaL_openlibs, package.path on the lua/ folder: the
 * DLRUN_LUA_DIR environment variable, else `lua` relative to the current
 * directory, so run from the source tree's root), each opened with
 * dlrun_lua_open on that one runtime and run by its own thread. Each state
 * runs CHUNK (below) for ITERS iterations (argv[1], default DEFAULT_ITERS:
 * about 20 s under ThreadSanitizer on two cores, 5-10 s without; argv[2] is
 * the random seed): it makes arrays (arange, frombytes) on random shardings
 * of 1-D and 2-D meshes, reshards them (donating, never aliasing, deleting
 * the source while the copies run), gathers and exports them (legacy,
 * versioned, to the host, copied), imports them back, exports single shards,
 * and reads and reshards an array the host pushed into every state
 * (dlrun_lua_pusharray). Both states finish their loops before either
 * closes: collecting a pushed Array deletes the host's array (see README).
 * They also reset the shared transfer statistics now and then and check that
 * each dl.export's bytes_moved is exactly its own; before the threads start,
 * the same is checked deterministically with a second state whose transfers
 * and resets run in the middle of the first one's exports.
 *
 * Capsules cross states: `send(capsule, ...)` in one state takes the tensor
 * out of the capsule (dlrun_lua_takecapsule) and queues it, under a mutex,
 * for the next state, whose `recv()` pushes it into a new Capsule there
 * (dlrun_lua_pushcapsule). The receiver imports it (onto its own device or
 * another, then reshards it and drops the import while the copies run) or
 * lets the capsule be collected unconsumed, so that imports and deleters run
 * in another state on another thread than the export. Every tensor that
 * crosses is wrapped in a counting deleter.
 *
 * Checked: every value the chunks read (tobytes against the bytes the
 * arrays were made from), every chunk ran to the end without error and
 * received tensors from its peer; after every state is closed, every
 * crossing tensor's deleter ran exactly once, dlrun_live_exports is 0, and
 * once the devices are synchronized every pool is empty. Prints
 * "stress_lua_states: N passed, N failed" last; exits non-zero on any
 * failure. Built like the host examples: public headers only. */
#define _POSIX_C_SOURCE 200809L

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>

#include <dlrun/dlpack.h>
#include <dlrun/dlrun.h>
#include <dlrun/lua.h>

#define NSTATES 2
#define DEFAULT_ITERS 12000
#define INBOX_MAX 16
#define MAX_PRINTED 40

/* ---- results ---- */

static atomic_llong n_passed, n_failed;
static atomic_int n_printed;
/* 0..NSTATES-1 on the state threads, NSTATES on main, -1 on dlrun's workers. */
static _Thread_local int self = -1;

static void failf(int line, const char *fmt, ...) {
  atomic_fetch_add(&n_failed, 1);
  if (atomic_fetch_add(&n_printed, 1) >= MAX_PRINTED) return;
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  fprintf(stderr, "stress_lua_states: FAIL (thread %d, line %d): %s\n", self, line, msg);
}

#define CHECK(cond, ...)                                                                          \
  do {                                                                                            \
    if (cond) atomic_fetch_add(&n_passed, 1);                                                     \
    else failf(__LINE__, __VA_ARGS__);                                                            \
  } while (0)

/* ---- the chunk each state runs ----
 *
 * Globals from the host: dl, ID (1-based), ITERS, SEED, PINNED (whether
 * pinned_host memory can be had), SHARED (an Array the host pushed),
 * SHARED_FIRST, SHARED_STEP (its int32 values are first + i*step), send,
 * recv, done_sending. Returns checks, failures,
 * tensors sent, tensors received. */
static const char *const CHUNK[] = {
    "local dl, ID, ITERS = dl, ID, ITERS\n",
    "local send, recv, done_sending = send, recv, done_sending\n",
    "local checks, fails, sent, received = 0, 0, 0, 0\n",
    "local function check(ok, fmt, ...)\n",
    "  checks = checks + 1\n",
    "  if not ok then\n",
    "    fails = fails + 1\n",
    "    if fails <= 10 then\n",
    "      io.stderr:write(('stress_lua_states: FAIL (state %d): ' .. fmt .. '\\n'):format(ID, ...))\n",
    "    end\n",
    "  end\n",
    "end\n",
    "math.randomseed(SEED)\n",
    "local rnd = math.random\n",
    "local sims, host = dl.devices('sim'), dl.host_device()\n",
    "local meshes = {\n",
    "  {dl.make_mesh({8}, {'x'}), {'x'}},\n",
    "  {dl.make_mesh({4, 2}, {'x', 'y'}), {'x', 'y'}},\n",
    "  {dl.Mesh({{sims[8], sims[7], sims[6], sims[5]}, {sims[4], sims[3], sims[2], sims[1]}},\n",
    "           {'x', 'y'}), {'x', 'y'}},\n",
    "  {dl.Mesh({sims[2], sims[4], sims[6], sims[8]}, {'x'}), {'x'}},\n",
    "}\n",
    "local formats = {int32 = '<i4', int64 = '<i8', float32 = '<f', float64 = '<d'}\n",
    "local dtypes = {'int32', 'int64', 'float32', 'float64'}\n",
    "local function bytes(dtype, n, first, step)\n",
    "  local f, out = formats[dtype], {}\n",
    "  for i = 0, n - 1 do out[#out + 1] = string.pack(f, first + i * step) end\n",
    "  return table.concat(out)\n",
    "end\n",
    /* A random sharding for rank 1 or 2 (dimensions multiples of 8). */
    "local function sharding(ndim)\n",
    "  local k = rnd(12)\n",
    "  if k == 1 then return dl.SingleDeviceSharding(sims[rnd(8)]) end\n",
    "  if k == 2 then return dl.SingleDeviceSharding(host) end\n",
    "  if k == 3 then return dl.SingleDeviceSharding(sims[rnd(8)], PINNED and 'pinned_host' or nil) end\n",
    "  local m = meshes[rnd(#meshes)]\n",
    "  local mesh, names = m[1], m[2]\n",
    "  local a, b = names[1], names[2]\n",
    "  if b and rnd(2) == 1 then a, b = b, a end\n",
    "  local spec\n",
    "  if ndim == 1 then\n",
    "    local c = rnd(3)\n",
    "    spec = c == 1 and dl.P() or (c == 2 or not b) and dl.P(a) or dl.P({a, b})\n",
    "  else\n",
    "    local c = rnd(5)\n",
    "    if c == 1 then spec = dl.P(a, b)\n",
    "    elseif c == 2 then spec = dl.P(nil, a)\n",
    "    elseif c == 3 and b then spec = dl.P({a, b}, nil)\n",
    "    elseif c == 4 then spec = dl.P(a)\n",
    "    else spec = dl.P() end\n",
    "  end\n",
    "  return dl.NamedSharding(mesh, spec, PINNED and rnd(10) == 1 and 'pinned_host' or nil)\n",
    "end\n",
    "local put_options = {false, {may_alias = false}, {donate = true},\n",
    "                     {donate = true, may_alias = false}, {may_alias = true}}\n",
    "local export_options = {false, {max_version = {1, 0}}, {max_version = {1, 1}, dl_device = {1, 0}},\n",
    "                        {copy = true}, {max_version = {1, 1}, copy = true}}\n",
    /* A tensor from the other state: import it, or let it be collected. */
    "local function consume(cap, dtype, n, first, step)\n",
    "  received = received + 1\n",
    "  local want = bytes(dtype, n, first, step)\n",
    "  local k = rnd(4)\n",
    "  if k == 1 then\n",
    "    cap = nil -- collected unconsumed: the deleter runs in this state\n",
    "  elseif k == 2 then\n",
    "    local z = dl.from_dlpack(cap)\n",
    "    check(z:tobytes() == want, 'received %s[%d] imported: wrong values', dtype, n)\n",
    "    local w = dl.device_put(z, sharding(z.ndim), {may_alias = false})\n",
    "    z:delete() -- while the copies may still read it: the deleter may run on a worker\n",
    "    check(w:tobytes() == want, 'received %s[%d] resharded: wrong values', dtype, n)\n",
    "  else\n",
    "    local z = dl.from_dlpack(cap, {device = sims[rnd(8)], copy = rnd(2) == 1 or nil})\n",
    "    check(z:tobytes() == want, 'received %s[%d] copied in: wrong values', dtype, n)\n",
    "    z:delete()\n",
    "  end\n",
    "  check(cap == nil or cap.name:sub(1, 5) == 'used_', 'a consumed capsule is named %s',\n",
    "        cap and cap.name)\n",
    "end\n",
    "local shared_want = bytes('int32', SHARED.size, SHARED_FIRST, SHARED_STEP)\n",
    "for it = 1, ITERS do\n",
    "  local dtype = dtypes[rnd(#dtypes)]\n",
    "  local first, step = rnd(-50, 50), ({-3, -2, -1, 1, 2, 3})[rnd(6)]\n",
    "  local x, n, ndim\n",
    "  if rnd(2) == 1 then\n",
    "    n, ndim = 8 * rnd(16), 1\n",
    "    x = dl.arange(first, first + n * step, step, dtype, sharding(1))\n",
    "  else\n",
    "    local rows, cols = 8 * rnd(4), 8 * rnd(4)\n",
    "    n, ndim = rows * cols, 2\n",
    "    x = dl.frombytes(bytes(dtype, n, first, step), {rows, cols}, dtype, sharding(2))\n",
    "  end\n",
    "  local want = bytes(dtype, n, first, step)\n",
    "  if rnd(3) == 1 then check(x:tobytes() == want, 'made %s[%d]: wrong values', dtype, n) end\n",
    /* reshard */
    "  local opts = put_options[rnd(#put_options)]\n",
    "  local y = dl.device_put(x, sharding(ndim), opts or nil)\n",
    "  if opts and opts.donate then\n",
    "    check(x:is_deleted(), 'a donated array is not deleted')\n",
    "  elseif rnd(3) == 1 and y ~= x then\n",
    "    x:delete() -- while its copies may still run\n",
    "  end\n",
    "  x = nil\n",
    "  if rnd(2) == 1 then check(y:tobytes() == want, 'resharded %s[%d]: wrong values', dtype, n) end\n",
    /* gather, export, import here or send to the other state */
    "  local g = dl.device_put(y, rnd(5) == 1 and host or sims[rnd(8)])\n",
    "  local cap = g:__dlpack__(export_options[rnd(#export_options)] or nil)\n",
    "  if rnd(3) == 1 and g ~= y then g:delete() end -- the capsule keeps the memory\n",
    "  if rnd(2) == 1 and send(cap, dtype, n, first, step) then\n",
    "    sent = sent + 1\n",
    "    check(cap.name:sub(1, 5) == 'used_', 'a sent capsule is named %s', cap.name)\n",
    "  else\n",
    "    local z = dl.from_dlpack(cap, rnd(2) == 1 and {device = sims[rnd(8)]} or nil)\n",
    "    check(z:tobytes() == want, 'imported %s[%d]: wrong values', dtype, n)\n",
    "    if rnd(2) == 1 then z:delete() end\n",
    "  end\n",
    "  cap, g = nil, nil\n",
    /* export's bytes_moved is this call's own, whatever the other state does */
    "  if rnd(4) == 1 then dl.reset_transfer_stats() end\n",
    "  if rnd(3) == 1 then\n",
    "    local here = y.sharding.num_devices == 1 and y.addressable_shards[1].device == host\n",
    "                 and y.sharding.memory_kind == 'device'\n",
    "    local want_moved = here and 0 or y.nbytes\n",
    "    local r = dl.export(y, {strategy = 'host', max_version = {1, 0}})\n",
    "    check(r.bytes_moved == want_moved, 'export of %s[%d] to the host: bytes_moved %d, not %d',\n",
    "          dtype, n, r.bytes_moved, want_moved)\n",
    "  end\n",
    /* one shard over DLPack */
    "  local shards = y.addressable_shards\n",
    "  local sh = shards[rnd(#shards)].data\n",
    "  local c2 = sh:__dlpack__(rnd(2) == 1 and {max_version = {1, 0}} or nil)\n",
    "  local z2 = dl.from_dlpack(c2, {device = sims[rnd(8)], copy = rnd(2) == 1 or nil})\n",
    "  check(z2:tobytes() == sh:tobytes(), 'shard of %s[%d] over DLPack: wrong values', dtype, n)\n",
    "  if rnd(4) == 1 then y:delete() end\n",
    "  y, sh, c2, z2, shards = nil, nil, nil, nil, nil\n",
    /* the host's array, shared by every state */
    "  if rnd(4) == 1 then\n",
    "    local s = dl.device_put(SHARED, sharding(1), {may_alias = false})\n",
    "    check(s:tobytes() == shared_want, 'shared array resharded: wrong values')\n",
    "  elseif rnd(3) == 1 then\n",
    "    check(SHARED:tobytes() == shared_want, 'shared array: wrong values')\n",
    "  end\n",
    /* tensors from the other state */
    "  for _ = 1, 2 do\n",
    "    local rc, rdtype, rn, rfirst, rstep = recv(false)\n",
    "    if not rc then break end\n",
    "    consume(rc, rdtype, rn, rfirst, rstep)\n",
    "  end\n",
    "  if rnd(10) == 1 then collectgarbage() elseif rnd(3) == 1 then collectgarbage('step') end\n",
    "end\n",
    "done_sending()\n",
    "while true do\n",
    "  local rc, rdtype, rn, rfirst, rstep = recv(true)\n",
    "  if not rc then break end\n",
    "  consume(rc, rdtype, rn, rfirst, rstep)\n",
    "end\n",
    "collectgarbage()\n",
    "return checks, fails, sent, received\n",
    NULL,
};

/* lua_Reader over the lines of CHUNK. */
static const char *read_chunk(lua_State *L, void *ud, size_t *size) {
  (void)L;
  size_t *next = ud;
  const char *line = CHUNK[*next];
  if (!line) return NULL;
  (*next)++;
  *size = strlen(line);
  return line;
}

/* ---- counting deleters ---- */

typedef struct tracked {
  DLManagedTensor legacy;
  DLManagedTensorVersioned versioned;
  DLManagedTensor *inner_legacy;
  DLManagedTensorVersioned *inner_versioned;
  int exporter;
  atomic_int calls;
  struct tracked *next; /* in the list of all */
} tracked;

static pthread_mutex_t tracked_mu = PTHREAD_MUTEX_INITIALIZER;
static tracked *tracked_all;
static atomic_llong deleters_same, deleters_other, deleters_worker;

static void tracked_fire(tracked *t) {
  int prev = atomic_fetch_add(&t->calls, 1);
  if (prev != 0) {
    failf(__LINE__, "a deleter ran %d times", prev + 1);
    return;
  }
  if (self == t->exporter) atomic_fetch_add(&deleters_same, 1);
  else if (self >= 0) atomic_fetch_add(&deleters_other, 1);
  else atomic_fetch_add(&deleters_worker, 1);
  if (t->inner_legacy) t->inner_legacy->deleter(t->inner_legacy);
  else t->inner_versioned->deleter(t->inner_versioned);
}

static void tracked_delete_legacy(DLManagedTensor *m) { tracked_fire(m->manager_ctx); }
static void tracked_delete_versioned(DLManagedTensorVersioned *m) { tracked_fire(m->manager_ctx); }

/* The wrapper (kept until the end, so that a second call is seen). */
static tracked *track(DLManagedTensor *legacy, DLManagedTensorVersioned *versioned) {
  tracked *t = calloc(1, sizeof *t);
  if (!t) return NULL;
  t->exporter = self;
  atomic_init(&t->calls, 0);
  t->inner_legacy = legacy;
  t->inner_versioned = versioned;
  if (legacy) {
    t->legacy.dl_tensor = legacy->dl_tensor;
    t->legacy.manager_ctx = t;
    t->legacy.deleter = tracked_delete_legacy;
  } else {
    t->versioned.version = versioned->version;
    t->versioned.flags = versioned->flags;
    t->versioned.dl_tensor = versioned->dl_tensor;
    t->versioned.manager_ctx = t;
    t->versioned.deleter = tracked_delete_versioned;
  }
  pthread_mutex_lock(&tracked_mu);
  t->next = tracked_all;
  tracked_all = t;
  pthread_mutex_unlock(&tracked_mu);
  return t;
}

/* ---- inboxes: tensors on their way from one state to the next ---- */

typedef struct parcel {
  tracked *t;
  char dtype[16];
  lua_Integer n, first, step;
} parcel;

typedef struct inbox {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  parcel items[INBOX_MAX];
  int len;
  bool senders_done; /* the state that sends here has finished its loop */
} inbox;

static inbox inboxes[NSTATES];
static atomic_llong crossed;

/* send(capsule, dtype, n, first, step) -> true when the tensor left for the
 * next state (the capsule is then "used_..."), false when its inbox is full
 * (the capsule is untouched). */
static int l_send(lua_State *L) {
  int id = (int)lua_tointeger(L, lua_upvalueindex(1));
  inbox *to = &inboxes[(id + 1) % NSTATES];
  parcel p = {0};
  snprintf(p.dtype, sizeof p.dtype, "%s", luaL_checkstring(L, 2));
  p.n = luaL_checkinteger(L, 3);
  p.first = luaL_checkinteger(L, 4);
  p.step = luaL_checkinteger(L, 5);
  pthread_mutex_lock(&to->mu);
  bool room = to->len < INBOX_MAX;
  pthread_mutex_unlock(&to->mu);
  if (!room) {
    lua_pushboolean(L, 0);
    return 1;
  }
  DLManagedTensor *legacy = NULL;
  DLManagedTensorVersioned *versioned = NULL;
  if (!dlrun_lua_takecapsule(L, 1, &legacy, &versioned))
    return luaL_error(L, "send: argument #1 must be an unconsumed Capsule");
  /* From here the tensor is ours: nothing may raise until it is queued. */
  p.t = track(legacy, versioned);
  if (!p.t) {
    if (legacy) legacy->deleter(legacy);
    else versioned->deleter(versioned);
    failf(__LINE__, "send: out of host memory");
    lua_pushboolean(L, 1);
    return 1;
  }
  pthread_mutex_lock(&to->mu);
  to->items[to->len++] = p; /* only this state adds to this inbox: room is still there */
  pthread_cond_broadcast(&to->cv);
  pthread_mutex_unlock(&to->mu);
  atomic_fetch_add(&crossed, 1);
  lua_pushboolean(L, 1);
  return 1;
}

/* recv(wait) -> capsule, dtype, n, first, step; or nil when the inbox is
 * empty (wait: block until a tensor comes or the sender is done). */
static int l_recv(lua_State *L) {
  int id = (int)lua_tointeger(L, lua_upvalueindex(1));
  bool wait = lua_toboolean(L, 1);
  inbox *in = &inboxes[id];
  luaL_checkstack(L, 5, "recv");
  parcel p;
  bool got = false;
  pthread_mutex_lock(&in->mu);
  while (wait && in->len == 0 && !in->senders_done) pthread_cond_wait(&in->cv, &in->mu);
  if (in->len > 0) {
    p = in->items[0];
    memmove(&in->items[0], &in->items[1], (size_t)(in->len - 1) * sizeof *in->items);
    in->len--;
    got = true;
  }
  pthread_mutex_unlock(&in->mu);
  if (!got) {
    lua_pushnil(L);
    return 1;
  }
  if (p.t->inner_legacy) dlrun_lua_pushcapsule(L, &p.t->legacy, NULL);
  else dlrun_lua_pushcapsule(L, NULL, &p.t->versioned);
  lua_pushstring(L, p.dtype);
  lua_pushinteger(L, p.n);
  lua_pushinteger(L, p.first);
  lua_pushinteger(L, p.step);
  return 5;
}

/* done_sending(): this state sends no more. */
static int l_done_sending(lua_State *L) {
  int id = (int)lua_tointeger(L, lua_upvalueindex(1));
  inbox *to = &inboxes[(id + 1) % NSTATES];
  pthread_mutex_lock(&to->mu);
  to->senders_done = true;
  pthread_cond_broadcast(&to->cv);
  pthread_mutex_unlock(&to->mu);
  return 0;
}

/* ---- the states ---- */

static dlrun_runtime *rt;
static dlrun_array *shared; /* pushed into every state */
static const lua_Integer shared_first = 7, shared_step = 3, shared_n = 256;
static char lua_dir[4096];
static bool pinned_ok; /* pinned_host memory can be had here (see probe_pinned) */

typedef struct state {
  int id;
  long iters;
  uint64_t seed;
  pthread_t thread;
  bool ran;                  /* the chunk returned */
  lua_Integer checks, fails, sent, received;
  char error[1024];
} state;

/* Both states finish their loops before either closes. */
static pthread_mutex_t barrier_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t barrier_cv = PTHREAD_COND_INITIALIZER;
static int at_barrier;

static void barrier(void) {
  pthread_mutex_lock(&barrier_mu);
  at_barrier++;
  pthread_cond_broadcast(&barrier_cv);
  while (at_barrier < NSTATES) pthread_cond_wait(&barrier_cv, &barrier_mu);
  pthread_mutex_unlock(&barrier_mu);
}

static int traceback(lua_State *L) {
  const char *msg = luaL_tolstring(L, 1, NULL);
  luaL_traceback(L, L, msg, 1);
  return 1;
}

/* Libraries, package.path, and dlrun on the shared runtime as global dl. */
static void open_dlrun(lua_State *L) {
  luaL_openlibs(L);
  lua_getglobal(L, "package");
  lua_pushfstring(L, "%s/?.lua;%s/?/init.lua;", lua_dir, lua_dir);
  lua_getfield(L, -2, "path");
  lua_concat(L, 2);
  lua_setfield(L, -2, "path");
  lua_pop(L, 1);
  dlrun_lua_open(L, rt);
  lua_setglobal(L, "dl");
}

/* setup(state): open_dlrun, and the globals CHUNK uses. */
static int setup(lua_State *L) {
  state *s = lua_touserdata(L, 1);
  open_dlrun(L);
  lua_pushinteger(L, s->id + 1);
  lua_setglobal(L, "ID");
  lua_pushinteger(L, (lua_Integer)s->iters);
  lua_setglobal(L, "ITERS");
  lua_pushinteger(L, (lua_Integer)s->seed);
  lua_setglobal(L, "SEED");
  lua_pushboolean(L, pinned_ok);
  lua_setglobal(L, "PINNED");
  dlrun_lua_pusharray(L, shared);
  lua_setglobal(L, "SHARED");
  lua_pushinteger(L, shared_first);
  lua_setglobal(L, "SHARED_FIRST");
  lua_pushinteger(L, shared_step);
  lua_setglobal(L, "SHARED_STEP");
  static const struct {
    const char *name;
    lua_CFunction fn;
  } fns[] = {{"send", l_send}, {"recv", l_recv}, {"done_sending", l_done_sending}};
  for (size_t i = 0; i < sizeof fns / sizeof *fns; i++) {
    lua_pushinteger(L, s->id);
    lua_pushcclosure(L, fns[i].fn, 1);
    lua_setglobal(L, fns[i].name);
  }
  return 0;
}

static void *state_main(void *arg) {
  state *s = arg;
  self = s->id;
  lua_State *L = luaL_newstate();
  if (!L) {
    snprintf(s->error, sizeof s->error, "cannot create a Lua state");
  } else {
    lua_pushcfunction(L, traceback);
    lua_pushcfunction(L, setup);
    lua_pushlightuserdata(L, s);
    if (lua_pcall(L, 1, 0, 1) != LUA_OK) {
      snprintf(s->error, sizeof s->error, "setup: %s", lua_tostring(L, -1));
    } else if (lua_load(L, read_chunk, &(size_t){0}, "=stress_chunk", "t") != LUA_OK) {
      snprintf(s->error, sizeof s->error, "chunk: %s", lua_tostring(L, -1));
    } else if (lua_pcall(L, 0, 4, 1) != LUA_OK) {
      snprintf(s->error, sizeof s->error, "%s", lua_tostring(L, -1));
    } else {
      s->ran = true;
      s->checks = lua_tointeger(L, -4);
      s->fails = lua_tointeger(L, -3);
      s->sent = lua_tointeger(L, -2);
      s->received = lua_tointeger(L, -1);
    }
  }
  /* Whatever happened, the peer must not wait for this state's tensors. */
  inbox *to = &inboxes[(s->id + 1) % NSTATES];
  pthread_mutex_lock(&to->mu);
  to->senders_done = true;
  pthread_cond_broadcast(&to->cv);
  pthread_mutex_unlock(&to->mu);
  barrier();
  if (L) lua_close(L); /* collects every array and unconsumed capsule */
  return NULL;
}

/* Whether pinned_host memory can be had here. Each device's pinned_host
 * pool (and the cpu device's memory) reserves the host's RAM of address
 * space on first use, which some environments refuse after a few pools
 * (valgrind, ulimit -v). Tried on a runtime of its own, released before the
 * real one is made: where it fails the run goes on without pinned_host
 * memory, and says so. */
static bool probe_pinned(const dlrun_config *cfg) {
  dlrun_runtime *probe = NULL;
  dlrun_status st = dlrun_runtime_create(cfg, &probe);
  size_t nsim = st ? 0 : dlrun_device_count(probe, "sim");
  size_t n = st ? 0 : nsim + dlrun_device_count(probe, "cpu");
  for (size_t i = 0; i <= n && !st; i++) {
    /* The cpu device's own memory first, then every pinned_host pool. */
    dlrun_device *d = i == 0 ? dlrun_host_device(probe)
                      : i <= nsim ? dlrun_device_get(probe, "sim", i - 1)
                                  : dlrun_device_get(probe, "cpu", i - 1 - nsim);
    dlrun_sharding *s = NULL;
    dlrun_array *a = NULL;
    int64_t dims[1] = {8};
    dlrun_scalar one = {.kind = DLRUN_SCALAR_INT, .i = 1};
    st = dlrun_single_device_sharding_create(d, i ? DLRUN_MEM_PINNED_HOST : DLRUN_MEM_DEVICE, &s);
    if (!st) st = dlrun_array_full(s, DLRUN_FLOAT32, 1, dims, &one, &a);
    if (!st) st = dlrun_array_block_until_ready(a);
    dlrun_sharding_release(s);
    dlrun_array_release(a);
  }
  if (st)
    printf("stress_lua_states: note: no pinned_host memory here, running without it (%s: %s)\n",
           dlrun_status_name(st), dlrun_last_error());
  dlrun_runtime_release(probe);
  return st == DLRUN_OK;
}

/* ---- export counts beside a second state, deterministically ----
 *
 * Two states on this thread share the runtime. State A exports while a
 * count hook, every few instructions, runs PEER_CODE in state B: B resets
 * the runtime's transfer statistics and makes a transfer of its own. Each
 * of A's exports must report exactly the bytes it copied itself. */

static lua_State *peer;

static const char PEER_SETUP[] = "Z = dl.arange(256, 'float32', dl.devices('sim')[1])\n";
static const char PEER_CODE[] =
    "dl.reset_transfer_stats()\n"
    "local z = dl.device_put(Z, dl.devices('sim')[2])\n";

static const char EXPORTER[] =
    "local x = dl.arange(1024, 'float32', dl.NamedSharding(dl.make_mesh({8}, {'x'}), dl.P('x')))\n"
    "x:block_until_ready()\n"
    "local calls = 0\n"
    "debug.sethook(function() calls = calls + 1; in_peer() end, '', 3)\n"
    "local g = dl.export(x, {strategy = 'gather'})\n"
    "local h = dl.export(x, {strategy = 'host'})\n"
    "local c = dl.export(x, {strategy = 'gather', dl_device = {1, 0}})\n"
    "local s = dl.export(x, {strategy = 'shards', copy = true})\n"
    "debug.sethook()\n"
    "return calls, g.bytes_moved, h.bytes_moved, c.bytes_moved, s.bytes_moved\n";

static int l_in_peer(lua_State *L) {
  if (luaL_dostring(peer, PEER_CODE) != LUA_OK) {
    lua_pushfstring(L, "peer: %s", lua_tostring(peer, -1));
    lua_pop(peer, 1);
    return lua_error(L);
  }
  return 0;
}

static int open_exporter(lua_State *L) {
  open_dlrun(L);
  lua_register(L, "in_peer", l_in_peer);
  return 0;
}

static int open_peer(lua_State *L) {
  open_dlrun(L);
  if (luaL_dostring(L, PEER_SETUP) != LUA_OK) return lua_error(L);
  return 0;
}

static void check_export_counts_beside_peer(void) {
  lua_State *a = luaL_newstate();
  peer = luaL_newstate();
  CHECK(a && peer, "cannot create two Lua states");
  if (!a || !peer) goto done;
  lua_pushcfunction(peer, open_peer);
  if (lua_pcall(peer, 0, 0, 0) != LUA_OK) {
    CHECK(false, "peer state: %s", lua_tostring(peer, -1));
    goto done;
  }
  lua_pushcfunction(a, open_exporter);
  if (lua_pcall(a, 0, 0, 0) != LUA_OK || luaL_loadstring(a, EXPORTER) != LUA_OK ||
      lua_pcall(a, 0, 5, 0) != LUA_OK) {
    CHECK(false, "exporting state: %s", lua_tostring(a, -1));
    goto done;
  }
  lua_Integer calls = lua_tointeger(a, -5);
  CHECK(calls > 0, "the peer never ran during the exports");
  static const char *const what[] = {"gather", "host", "gather to the host", "shards, copied"};
  static const lua_Integer want[] = {4096, 4096, 8192, 4096};
  for (int i = 0; i < 4; i++)
    CHECK(lua_tointeger(a, -4 + i) == want[i],
          "export (%s) beside a peer that reset and moved bytes %lld times: bytes_moved %lld, "
          "expected %lld", what[i], (long long)calls, (long long)lua_tointeger(a, -4 + i),
          (long long)want[i]);
done:
  if (a) lua_close(a);
  if (peer) lua_close(peer);
  peer = NULL;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int summary(void) {
  long long p = atomic_load(&n_passed), f = atomic_load(&n_failed);
  printf("stress_lua_states: %lld passed, %lld failed\n", p, f);
  return f ? 1 : 0;
}

int main(int argc, char **argv) {
  long iters = argc > 1 ? strtol(argv[1], NULL, 10) : DEFAULT_ITERS;
  uint64_t seed = argc > 2 ? strtoull(argv[2], NULL, 10) : 20240607;
  if (iters < 1) iters = 1;
  self = NSTATES;
  double start = now_s();
  const char *env = getenv("DLRUN_LUA_DIR");
  snprintf(lua_dir, sizeof lua_dir, "%s", env && *env ? env : "lua");

  dlrun_config cfg = {.devices = "sim:8,cpu:1", .device_memory = 64u << 20};
  pinned_ok = probe_pinned(&cfg);
  dlrun_status st = dlrun_runtime_create(&cfg, &rt);
  CHECK(st == DLRUN_OK, "runtime: %s: %s", dlrun_status_name(st), dlrun_last_error());
  if (st) return summary();

  /* The host's own array, pushed into every state: int32 first + i*step,
   * split over the eight sim devices. */
  {
    int32_t values[256];
    for (int i = 0; i < shared_n; i++) values[i] = (int32_t)(shared_first + i * shared_step);
    dlrun_device *devs[8];
    for (int i = 0; i < 8; i++) devs[i] = dlrun_device_get(rt, "sim", (size_t)i);
    const char *names[1] = {"x"};
    int64_t sizes[1] = {8}, dims[1] = {shared_n};
    dlrun_mesh *m = NULL;
    dlrun_sharding *s = NULL;
    st = dlrun_mesh_create(devs, 8, 1, names, sizes, &m);
    dlrun_partition_spec spec = {.nentries = 1, .entries = {{.naxes = 1, .axes = {"x"}}}};
    if (!st) st = dlrun_named_sharding_create(m, &spec, DLRUN_MEM_DEVICE, &s);
    if (!st) st = dlrun_array_from_host(s, DLRUN_INT32, 1, dims, values, sizeof values, &shared);
    dlrun_sharding_release(s);
    dlrun_mesh_release(m);
    CHECK(st == DLRUN_OK, "shared array: %s: %s", dlrun_status_name(st), dlrun_last_error());
    if (st) {
      dlrun_runtime_release(rt);
      return summary();
    }
  }

  check_export_counts_beside_peer();

  for (int i = 0; i < NSTATES; i++) {
    pthread_mutex_init(&inboxes[i].mu, NULL);
    pthread_cond_init(&inboxes[i].cv, NULL);
  }
  state states[NSTATES];
  memset(states, 0, sizeof states);
  for (int i = 0; i < NSTATES; i++) {
    states[i].id = i;
    states[i].iters = iters;
    states[i].seed = seed * 31 + (uint64_t)i;
    if (pthread_create(&states[i].thread, NULL, state_main, &states[i]) != 0) {
      fprintf(stderr, "stress_lua_states: cannot start thread %d\n", i);
      return 2;
    }
  }
  for (int i = 0; i < NSTATES; i++) pthread_join(states[i].thread, NULL);

  long long checks = 0, sent = 0, received = 0;
  for (int i = 0; i < NSTATES; i++) {
    state *s = &states[i];
    CHECK(s->ran, "state %d: %s", i + 1, s->error);
    CHECK(s->fails == 0, "state %d: %lld of %lld checks failed", i + 1, (long long)s->fails,
          (long long)s->checks);
    CHECK(s->checks > 0, "state %d checked nothing", i + 1);
    if (iters >= 100) /* a short run may send nothing */
      CHECK(s->received > 0, "state %d received no tensor from the other state", i + 1);
    /* The chunk's own checks count too. */
    atomic_fetch_add(&n_passed, s->checks - s->fails);
    checks += s->checks;
    sent += s->sent;
    received += s->received;
  }
  /* Tensors left in an inbox (a state that stopped early) go here. */
  for (int i = 0; i < NSTATES; i++) {
    for (int k = 0; k < inboxes[i].len; k++) {
      tracked *t = inboxes[i].items[k].t;
      if (t->inner_legacy) t->legacy.deleter(&t->legacy);
      else t->versioned.deleter(&t->versioned);
    }
    CHECK(inboxes[i].len == 0 || !states[0].ran || !states[1].ran,
          "%d tensors were left in state %d's inbox", inboxes[i].len, i + 1);
    inboxes[i].len = 0;
    pthread_cond_destroy(&inboxes[i].cv);
    pthread_mutex_destroy(&inboxes[i].mu);
  }
  CHECK(sent == received, "%lld tensors sent, %lld received", sent, received);

  /* The host's array is still the host's: check it, then drop it. */
  int32_t back[256];
  st = dlrun_array_read(shared, 0, sizeof back, back);
  if (st == DLRUN_OK) {
    bool same = true;
    for (int i = 0; i < shared_n; i++) same &= back[i] == (int32_t)(shared_first + i * shared_step);
    CHECK(same, "the host's array has wrong values after the states closed");
  } else {
    /* Reported separately: closing a state deletes the arrays the host
     * pushed into it (see README). Not a concurrency failure. */
    fprintf(stderr, "stress_lua_states: note: the host's array reads as %s after the states "
                    "closed: %s\n", dlrun_status_name(st), dlrun_last_error());
  }
  dlrun_array_release(shared);

  long long ntracked = 0, not_once = 0;
  for (tracked *t = tracked_all, *next; t; t = next) {
    next = t->next;
    int calls = atomic_load(&t->calls);
    if (calls != 1 && not_once++ < 5) failf(__LINE__, "a crossing tensor's deleter ran %d times", calls);
    ntracked++;
    free(t);
  }
  CHECK(not_once == 0, "%lld of %lld deleters did not run exactly once", not_once, ntracked);
  CHECK(ntracked == atomic_load(&crossed), "%lld tensors tracked, %lld crossed", ntracked,
        (long long)crossed);
  if (iters >= 100)
    CHECK(atomic_load(&deleters_other) > 0, "no deleter ran on another state's thread");
  int64_t live = dlrun_live_exports(rt);
  CHECK(live == 0, "%lld exports still alive after both states closed", (long long)live);

  size_t nsim = dlrun_device_count(rt, "sim"), ncpu = dlrun_device_count(rt, "cpu");
  for (size_t i = 0; i < nsim + ncpu; i++) {
    dlrun_device *d = i < nsim ? dlrun_device_get(rt, "sim", i) : dlrun_device_get(rt, "cpu", i - nsim);
    dlrun_device_synchronize(d);
  }
  for (size_t i = 0; i < nsim + ncpu; i++) {
    dlrun_device *d = i < nsim ? dlrun_device_get(rt, "sim", i) : dlrun_device_get(rt, "cpu", i - nsim);
    for (int k = 0; k < DLRUN_MEM_KIND_COUNT; k++) {
      dlrun_memory_stats ms;
      st = dlrun_device_memory_stats(d, (dlrun_memory_kind)k, &ms);
      CHECK(st == DLRUN_OK && ms.bytes_in_use == 0, "%s %s memory: %llu bytes still in use",
            dlrun_device_name(d), dlrun_memory_kind_name((dlrun_memory_kind)k),
            (unsigned long long)ms.bytes_in_use);
    }
  }
  dlrun_runtime_release(rt);

  printf("stress_lua_states: %d states x %ld iterations (seed %llu) in %.1f s: %lld checks in "
         "the chunks, %lld tensors crossed states; their deleters ran on the exporting state's "
         "thread %lld times, on the other state's thread %lld, on a dlrun worker %lld\n",
         NSTATES, iters, (unsigned long long)seed, now_s() - start, checks, ntracked,
         (long long)deleters_same, (long long)deleters_other, (long long)deleters_worker);
  return summary();
}
