/* stress_threads: several host threads share one runtime through the C API.
 *
 * One runtime ("sim:8,cpu:1"); NTHREADS (6) host threads, each for ITERS
 * iterations (argv[1], default DEFAULT_ITERS: about 20 s under
 * ThreadSanitizer on two cores, 2-3 s without; argv[2] is the random seed),
 * pick random operations on a handful of arrays of their own and on a small
 * board of arrays shared by all threads:
 *
 *   - create arrays (from_host, full, arange) on random shardings: 1-D and
 *     2-D meshes over the eight sim devices (shared ones, and fresh ones made
 *     and dropped by the thread), random partition specs, single devices,
 *     device and pinned_host memory (pinned_host only where it can be had:
 *     see probe_pinned);
 *   - reshard them with dlrun_device_put (default, may_alias = never, allow,
 *     donate, donate + never) and delete or release the source or the result
 *     at once, while the copies are still in flight;
 *   - export single-device views (the array itself, a shard's data, a
 *     gathered copy) as legacy or versioned tensors, sometimes to the host
 *     (dl_device kDLCPU) or another sim device, sometimes copy = 1 or
 *     stream = -1, and then import the tensor back (dlrun_import, onto its
 *     own device, another one, the host or pinned memory, copy or not), call
 *     its deleter, or hand it to ANOTHER thread through a small
 *     mutex-protected queue, so that deleters run on threads other than the
 *     exporter's (and on dlrun's workers, when a copy still reads an
 *     imported buffer);
 *   - read, reshard, export and delete the shared arrays concurrently: an
 *     operation on an array another thread just deleted must fail cleanly
 *     with "Array has been deleted", and one that succeeds must see the
 *     right values.
 *
 * Every read (dlrun_array_read, whole or a random element range) and every
 * exported tensor (read through its own shape and strides) is compared with
 * the data the array was made from. Every exported tensor is wrapped in a
 * counting deleter so that the end can check that each ran exactly once.
 * After the threads join and the queue is drained: every deleter ran once,
 * dlrun_live_exports is 0, and after synchronizing, every pool of every
 * device has 0 bytes in use. The runtime is then released.
 *
 * Prints "stress_threads: N passed, N failed" last; exits non-zero on any
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

#include <dlrun/dlpack.h>
#include <dlrun/dlrun.h>

#define NTHREADS 6
#define NSLOTS 6
#define NSHARED 4
#define NMESHES 6
#define QUEUE_MAX 48
#define DEFAULT_ITERS 60000
#define MAX_PRINTED 40

/* ---- results ---- */

static atomic_llong n_passed, n_failed;
static atomic_int n_printed;
/* Index of the calling host thread: 0..NTHREADS-1 for the stress threads,
 * NTHREADS for main, -1 for threads dlrun started (its workers). */
static _Thread_local int self = -1;

static void failf(int line, const char *fmt, ...) {
  atomic_fetch_add(&n_failed, 1);
  if (atomic_fetch_add(&n_printed, 1) >= MAX_PRINTED) return;
  char msg[768];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  fprintf(stderr, "stress_threads: FAIL (thread %d, line %d): %s\n", self, line, msg);
}

#define CHECK(cond, ...)                                                                          \
  do {                                                                                            \
    if (cond) atomic_fetch_add(&n_passed, 1);                                                     \
    else failf(__LINE__, __VA_ARGS__);                                                            \
  } while (0)

#define CHECK_OK(st, what)                                                                        \
  CHECK((st) == DLRUN_OK, "%s: %s: %s", (what), dlrun_status_name(st), dlrun_last_error())

/* ---- random numbers (splitmix64, one state per thread) ---- */

typedef struct rng {
  uint64_t s;
} rng;

static uint64_t next_u64(rng *r) {
  uint64_t z = (r->s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

static int rnd(rng *r, int n) { return (int)(next_u64(r) % (uint64_t)n); }
static bool chance(rng *r, int percent) { return rnd(r, 100) < percent; }

/* ---- expected contents: the row-major bytes an array must hold ---- */

typedef struct expect {
  atomic_int refs;
  size_t nbytes;
  unsigned char data[];
} expect;

static expect *expect_new(size_t nbytes) {
  expect *e = calloc(1, sizeof *e + (nbytes ? nbytes : 1));
  if (!e) {
    fprintf(stderr, "stress_threads: out of host memory\n");
    exit(2);
  }
  atomic_init(&e->refs, 1);
  e->nbytes = nbytes;
  return e;
}

static expect *expect_ref(expect *e) {
  atomic_fetch_add(&e->refs, 1);
  return e;
}

static void expect_unref(expect *e) {
  if (e && atomic_fetch_sub(&e->refs, 1) == 1) free(e);
}

/* The box [lo, hi) of a row-major array of shape dims, as its own row-major
 * bytes. */
static expect *expect_box(const expect *e, int ndim, const int64_t *dims, size_t esize,
                          const int64_t *lo, const int64_t *hi) {
  int64_t count = 1;
  for (int d = 0; d < ndim; d++) count *= hi[d] - lo[d];
  expect *out = expect_new((size_t)count * esize);
  if (count == 0) return out;
  int64_t idx[DLRUN_MAX_NDIM];
  for (int d = 0; d < ndim; d++) idx[d] = lo[d];
  for (int64_t k = 0; k < count; k++) {
    int64_t off = 0;
    for (int d = 0; d < ndim; d++) off = off * dims[d] + idx[d];
    memcpy(out->data + (size_t)k * esize, e->data + (size_t)off * esize, esize);
    for (int d = ndim - 1; d >= 0; d--) {
      if (++idx[d] < hi[d]) break;
      idx[d] = lo[d];
    }
  }
  return out;
}

/* Store the small integer v as one element of dtype (exact for every dtype
 * used here). */
static void store_int(dlrun_dtype dtype, void *p, int64_t v) {
  switch (dtype) {
  case DLRUN_INT16: {
    int16_t x = (int16_t)v;
    memcpy(p, &x, sizeof x);
    break;
  }
  case DLRUN_INT32: {
    int32_t x = (int32_t)v;
    memcpy(p, &x, sizeof x);
    break;
  }
  case DLRUN_INT64: memcpy(p, &v, sizeof v); break;
  case DLRUN_UINT8: {
    uint8_t x = (uint8_t)v;
    memcpy(p, &x, sizeof x);
    break;
  }
  case DLRUN_FLOAT32: {
    float x = (float)v;
    memcpy(p, &x, sizeof x);
    break;
  }
  case DLRUN_FLOAT64: {
    double x = (double)v;
    memcpy(p, &x, sizeof x);
    break;
  }
  default: break;
  }
}

static const dlrun_dtype any_dtypes[] = {DLRUN_INT32, DLRUN_INT64, DLRUN_FLOAT32,
                                         DLRUN_FLOAT64, DLRUN_UINT8, DLRUN_INT16};
static const dlrun_dtype arange_dtypes[] = {DLRUN_INT32, DLRUN_INT64, DLRUN_FLOAT32,
                                            DLRUN_FLOAT64};

/* ---- the runtime and its meshes ---- */

static dlrun_runtime *rt;
static dlrun_device *sims[8], *host;
static dlrun_mesh *meshes[NMESHES];
static bool pinned_ok; /* pinned_host memory can be had here (see probe_pinned) */

static dlrun_mesh *mesh_of(const int *ids, size_t n, int naxes, int64_t a, int64_t b) {
  dlrun_device *devs[8];
  for (size_t i = 0; i < n; i++) devs[i] = sims[ids[i]];
  const char *names[2] = {"x", "y"};
  int64_t sizes[2] = {a, b};
  dlrun_mesh *m = NULL;
  dlrun_status st = dlrun_mesh_create(devs, n, naxes, names, sizes, &m);
  CHECK_OK(st, "mesh_create");
  return m;
}

/* A fresh mesh over a random subset (1, 2, 4 or 8) of the sim devices in
 * random order, 1-D or 2-D. */
static dlrun_mesh *random_mesh(rng *r) {
  static const int sizes[] = {1, 2, 4, 8};
  int n = sizes[rnd(r, 4)];
  int ids[8] = {0, 1, 2, 3, 4, 5, 6, 7};
  for (int i = 7; i > 0; i--) {
    int j = rnd(r, i + 1), t = ids[i];
    ids[i] = ids[j];
    ids[j] = t;
  }
  if (n >= 4 && chance(r, 50)) {
    int64_t a = n == 4 ? 2 : (chance(r, 50) ? 2 : 4);
    return mesh_of(ids, (size_t)n, 2, a, n / a);
  }
  return mesh_of(ids, (size_t)n, 1, n, 1);
}

static dlrun_sharding *single_sharding(dlrun_device *dev, dlrun_memory_kind kind) {
  dlrun_sharding *s = NULL;
  dlrun_status st = dlrun_single_device_sharding_create(dev, kind, &s);
  CHECK_OK(st, "single_device_sharding_create");
  return s;
}

/* A random sharding for an array of rank ndim whose dimensions are all
 * multiples of 8 (so any split divides them). */
static dlrun_sharding *random_sharding(rng *r, int ndim) {
  dlrun_memory_kind kind = pinned_ok && chance(r, 10) ? DLRUN_MEM_PINNED_HOST : DLRUN_MEM_DEVICE;
  if (chance(r, 15)) return single_sharding(chance(r, 80) ? sims[rnd(r, 8)] : host, kind);
  bool own = chance(r, 25);
  dlrun_mesh *m = own ? random_mesh(r) : meshes[rnd(r, NMESHES)];
  if (!m) return NULL;
  int naxes = dlrun_mesh_naxes(m);
  bool used[DLRUN_MAX_MESH_AXES] = {false};
  dlrun_partition_spec spec;
  memset(&spec, 0, sizeof spec);
  spec.nentries = ndim ? rnd(r, ndim + 1) : 0;
  for (int i = 0; i < spec.nentries; i++) {
    dlrun_spec_entry *e = &spec.entries[i];
    int free_axes[DLRUN_MAX_MESH_AXES], nfree = 0;
    for (int a = 0; a < naxes; a++)
      if (!used[a]) free_axes[nfree++] = a;
    int pick = rnd(r, 4); /* 0: not split, 1 and 3: one axis, 2: two axes */
    if (pick == 0 || nfree == 0) continue;
    int take = pick == 2 && nfree >= 2 ? 2 : 1;
    for (int k = 0; k < take; k++) {
      int j = rnd(r, nfree), a = free_axes[j];
      free_axes[j] = free_axes[--nfree];
      used[a] = true;
      e->axes[e->naxes++] = dlrun_mesh_axis_name(m, a);
    }
  }
  dlrun_sharding *s = NULL;
  dlrun_status st = dlrun_named_sharding_create(m, &spec, kind, &s);
  CHECK_OK(st, "named_sharding_create");
  if (own) dlrun_mesh_release(m);
  return s;
}

/* A random sharding that fits an array of any shape (an imported shard's
 * shape need not be a multiple of 8): a few tries, then one sim device. */
static dlrun_sharding *random_sharding_for(rng *r, dlrun_array *a) {
  for (int tries = 0; tries < 4; tries++) {
    dlrun_sharding *s = random_sharding(r, dlrun_array_ndim(a));
    if (!s) return NULL;
    if (dlrun_sharding_check_shape(s, dlrun_array_ndim(a), dlrun_array_shape(a)) == DLRUN_OK)
      return s;
    dlrun_sharding_release(s);
  }
  return single_sharding(sims[rnd(r, 8)], DLRUN_MEM_DEVICE);
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
    printf("stress_threads: note: no pinned_host memory here, running without it (%s: %s)\n",
           dlrun_status_name(st), dlrun_last_error());
  dlrun_runtime_release(probe);
  return st == DLRUN_OK;
}

/* ---- checking data ---- */

/* Compare the array (whole, or a random element range) with e. */
static void check_array(rng *r, dlrun_array *a, const expect *e, const char *what) {
  uint64_t nbytes = dlrun_array_nbytes(a);
  CHECK(nbytes == e->nbytes, "%s: %llu bytes, expected %zu", what, (unsigned long long)nbytes,
        e->nbytes);
  if (nbytes != e->nbytes) return;
  size_t esize = dlrun_dtype_get(dlrun_array_dtype(a))->size;
  uint64_t count = nbytes / esize, first = 0, n = count;
  if (count > 1 && chance(r, 30)) {
    first = (uint64_t)rnd(r, (int)count);
    n = 1 + (uint64_t)rnd(r, (int)(count - first));
  }
  unsigned char *buf = malloc(n * esize + 1);
  if (!buf) exit(2);
  dlrun_status st = dlrun_array_read(a, first * esize, n * esize, buf);
  CHECK_OK(st, what);
  if (st == DLRUN_OK)
    CHECK(memcmp(buf, e->data + first * esize, n * esize) == 0,
          "%s: elements %llu..%llu differ from the data the array was made from", what,
          (unsigned long long)first, (unsigned long long)(first + n));
  free(buf);
}

/* A deleted array refuses to be read, with JAX's message. */
static void check_deleted(dlrun_array *a, const char *what) {
  unsigned char byte;
  CHECK(dlrun_array_is_deleted(a), "%s: not deleted", what);
  dlrun_status st = dlrun_array_read(a, 0, 0, &byte);
  CHECK(st == DLRUN_ERR_RUNTIME && strstr(dlrun_last_error(), "Array has been deleted"),
        "%s: reading a deleted array gave %s: %s", what, dlrun_status_name(st),
        dlrun_last_error());
}

/* Compare a DLPack tensor, read through its own shape and strides, with e. */
static void check_tensor(const DLTensor *t, const expect *e, const char *what) {
  size_t esize = (size_t)t->dtype.bits / 8 * t->dtype.lanes;
  int64_t count = 1;
  for (int d = 0; d < t->ndim; d++) count *= t->shape[d];
  CHECK((size_t)count * esize == e->nbytes, "%s: tensor of %lld elements of %zu bytes, expected %zu bytes",
        what, (long long)count, esize, e->nbytes);
  if ((size_t)count * esize != e->nbytes || count == 0) return;
  const unsigned char *base = (const unsigned char *)t->data + t->byte_offset;
  /* Sim device memory is not host-readable: copy it out through the driver
   * (exports here are compact, so the span is the byte count). */
  unsigned char *copy = NULL;
  if (t->device.device_type == kDLExtDev) {
    copy = malloc(e->nbytes);
    dlrun_device *dev = dlrun_device_get(rt, "sim", (size_t)t->device.device_id);
    dlrun_status st = copy ? dlrun_device_copy_to_host(dev, DLRUN_MEM_DEVICE, base, e->nbytes, copy)
                           : DLRUN_ERR_RESOURCE_EXHAUSTED;
    CHECK(st == DLRUN_OK, "%s: device copy: %s", what, dlrun_last_error());
    if (st) {
      free(copy);
      return;
    }
    base = copy;
  }
  int64_t idx[DLRUN_MAX_NDIM] = {0}, wrong = -1;
  for (int64_t k = 0; k < count && wrong < 0; k++) {
    int64_t off = 0, compact = 1;
    for (int d = t->ndim - 1; d >= 0; d--) {
      off += idx[d] * (t->strides ? t->strides[d] : compact);
      compact *= t->shape[d];
    }
    if (memcmp(base + off * (int64_t)esize, e->data + (size_t)k * esize, esize) != 0) wrong = k;
    for (int d = t->ndim - 1; d >= 0; d--) {
      if (++idx[d] < t->shape[d]) break;
      idx[d] = 0;
    }
  }
  free(copy);
  CHECK(wrong < 0, "%s: element %lld of the exported tensor differs", what, (long long)wrong);
}

/* ---- counting deleters ---- */

/* Each exported tensor is handed on wrapped: the wrapper's deleter counts its
 * calls (kept until the end, so a second call is seen, not a use after
 * free) and runs dlrun's deleter on the first. */
typedef struct tracked {
  DLManagedTensor legacy;
  DLManagedTensorVersioned versioned;
  DLManagedTensor *inner_legacy;
  DLManagedTensorVersioned *inner_versioned;
  int exporter;
  atomic_int calls;
} tracked;

static tracked **tracked_all;
static int64_t tracked_cap;
static atomic_llong tracked_count, untracked;
static atomic_llong deleters_same, deleters_other_host, deleters_worker;

static void tracked_fire(tracked *t) {
  int prev = atomic_fetch_add(&t->calls, 1);
  if (prev != 0) {
    failf(__LINE__, "a deleter ran %d times", prev + 1);
    return;
  }
  if (self == t->exporter) atomic_fetch_add(&deleters_same, 1);
  else if (self >= 0) atomic_fetch_add(&deleters_other_host, 1);
  else atomic_fetch_add(&deleters_worker, 1);
  if (t->inner_legacy) t->inner_legacy->deleter(t->inner_legacy);
  else t->inner_versioned->deleter(t->inner_versioned);
}

static void tracked_delete_legacy(DLManagedTensor *m) { tracked_fire(m->manager_ctx); }
static void tracked_delete_versioned(DLManagedTensorVersioned *m) { tracked_fire(m->manager_ctx); }

/* Wrap an export; returns the wrapped one (the export itself past capacity). */
static dlrun_exported track(dlrun_exported ex) {
  int64_t id = atomic_fetch_add(&tracked_count, 1);
  if (id >= tracked_cap) {
    atomic_fetch_add(&untracked, 1);
    return ex;
  }
  tracked *t = calloc(1, sizeof *t);
  if (!t) exit(2);
  t->exporter = self;
  atomic_init(&t->calls, 0);
  t->inner_legacy = ex.legacy;
  t->inner_versioned = ex.versioned;
  dlrun_exported out = {0};
  if (ex.legacy) {
    t->legacy.dl_tensor = ex.legacy->dl_tensor;
    t->legacy.manager_ctx = t;
    t->legacy.deleter = tracked_delete_legacy;
    out.legacy = &t->legacy;
  } else {
    t->versioned.version = ex.versioned->version;
    t->versioned.flags = ex.versioned->flags;
    t->versioned.dl_tensor = ex.versioned->dl_tensor;
    t->versioned.manager_ctx = t;
    t->versioned.deleter = tracked_delete_versioned;
    out.versioned = &t->versioned;
  }
  tracked_all[id] = t;
  return out;
}

static const DLTensor *tensor_of(dlrun_exported ex) {
  return ex.legacy ? &ex.legacy->dl_tensor : &ex.versioned->dl_tensor;
}

static void call_deleter(dlrun_exported ex) {
  if (ex.legacy) ex.legacy->deleter(ex.legacy);
  else ex.versioned->deleter(ex.versioned);
}

/* ---- the hand-off queue ---- */

typedef struct handoff {
  dlrun_exported ex;
  expect *e; /* the tensor's row-major bytes */
  int producer;
} handoff;

static pthread_mutex_t queue_mu = PTHREAD_MUTEX_INITIALIZER;
static handoff queue[QUEUE_MAX];
static int queue_len;
static atomic_llong handed_over, taken_over;

static bool queue_push(handoff h) {
  pthread_mutex_lock(&queue_mu);
  bool ok = queue_len < QUEUE_MAX;
  if (ok) queue[queue_len++] = h;
  pthread_mutex_unlock(&queue_mu);
  if (ok) atomic_fetch_add(&handed_over, 1);
  return ok;
}

/* The oldest tensor another thread exported. */
static bool queue_pop_foreign(handoff *out) {
  bool found = false;
  pthread_mutex_lock(&queue_mu);
  for (int i = 0; i < queue_len && !found; i++)
    if (queue[i].producer != self) {
      *out = queue[i];
      memmove(&queue[i], &queue[i + 1], (size_t)(queue_len - i - 1) * sizeof *queue);
      queue_len--;
      found = true;
    }
  pthread_mutex_unlock(&queue_mu);
  if (found) atomic_fetch_add(&taken_over, 1);
  return found;
}

/* ---- per-thread state ---- */

typedef struct slot {
  dlrun_array *a;
  expect *e;
} slot;

typedef struct worker {
  int id;
  long iters;
  rng r;
  slot slots[NSLOTS];
  pthread_t thread;
} worker;

static void slot_clear(slot *s) {
  dlrun_array_release(s->a);
  expect_unref(s->e);
  s->a = NULL;
  s->e = NULL;
}

static void slot_set(slot *s, dlrun_array *a, expect *e) {
  slot_clear(s);
  s->a = a;
  s->e = e;
}

/* ---- operations ---- */

/* A new array (from_host, full or arange) on a random sharding and the data
 * it must hold. Returns false (after reporting) on failure. */
static bool make_array(rng *r, dlrun_array **out, expect **eout) {
  *out = NULL;
  *eout = NULL;
  int how = rnd(r, 3);
  int ndim;
  int64_t dims[2];
  dlrun_dtype dtype;
  if (how == 2) {
    ndim = 1;
    dims[0] = 8 * (1 + rnd(r, 16));
    dtype = arange_dtypes[rnd(r, 4)];
  } else {
    ndim = chance(r, 5) ? 0 : 1 + rnd(r, 2);
    for (int d = 0; d < ndim; d++) dims[d] = 8 * (1 + rnd(r, d == 0 ? 8 : 4));
    if (ndim && chance(r, 3)) dims[0] = 0;
    dtype = any_dtypes[rnd(r, 6)];
  }
  size_t esize = dlrun_dtype_get(dtype)->size;
  int64_t count = 1;
  for (int d = 0; d < ndim; d++) count *= dims[d];
  expect *e = expect_new((size_t)count * esize);
  dlrun_sharding *s = random_sharding(r, ndim);
  if (!s) {
    expect_unref(e);
    return false;
  }
  dlrun_status st;
  const char *what;
  if (how == 0) {
    what = "from_host";
    for (size_t i = 0; i < e->nbytes; i++) e->data[i] = (unsigned char)next_u64(r);
    st = dlrun_array_from_host(s, dtype, ndim, dims, e->data, e->nbytes, out);
  } else if (how == 1) {
    what = "full";
    int64_t v = rnd(r, 100);
    for (int64_t i = 0; i < count; i++) store_int(dtype, e->data + (size_t)i * esize, v);
    dlrun_scalar value = {.kind = DLRUN_SCALAR_INT, .i = v};
    st = dlrun_array_full(s, dtype, ndim, dims, &value, out);
  } else {
    what = "arange";
    int64_t start = rnd(r, 101) - 50, step = rnd(r, 9) - 4;
    for (int64_t i = 0; i < count; i++) store_int(dtype, e->data + (size_t)i * esize, start + i * step);
    dlrun_scalar first = {.kind = DLRUN_SCALAR_INT, .i = start};
    dlrun_scalar by = {.kind = DLRUN_SCALAR_INT, .i = step};
    st = dlrun_array_arange(s, dtype, &first, &by, count, out);
  }
  dlrun_sharding_release(s);
  CHECK_OK(st, what);
  if (st) {
    expect_unref(e);
    return false;
  }
  *eout = e;
  return true;
}

static void op_create(rng *r, slot *sl) {
  dlrun_array *a;
  expect *e;
  if (!make_array(r, &a, &e)) return;
  if (chance(r, 30)) check_array(r, a, e, "created array");
  slot_set(sl, a, e);
}

static dlrun_put_options random_put_options(rng *r, int *mode) {
  dlrun_put_options o = {.may_alias = DLRUN_ALIAS_DEFAULT, .donate = false};
  *mode = rnd(r, 5); /* 0: NULL options, 1: never, 2: donate, 3: donate + never, 4: allow */
  if (*mode == 1 || *mode == 3) o.may_alias = DLRUN_ALIAS_NEVER;
  if (*mode == 4) o.may_alias = DLRUN_ALIAS_ALLOW;
  o.donate = *mode == 2 || *mode == 3;
  return o;
}

static void op_reshard(rng *r, worker *w, slot *sl) {
  dlrun_array *a = sl->a;
  dlrun_sharding *s = random_sharding(r, dlrun_array_ndim(a));
  if (!s) return;
  int mode;
  dlrun_put_options o = random_put_options(r, &mode);
  dlrun_array *out = NULL;
  dlrun_status st = dlrun_device_put(a, s, mode ? &o : NULL, &out);
  dlrun_sharding_release(s);
  CHECK_OK(st, "device_put");
  if (st) return;
  expect *e = expect_ref(sl->e);
  if (o.donate) {
    CHECK(out != a, "a donating device_put returned its input");
    check_deleted(a, "donated source");
    slot_set(sl, out, e);
  } else {
    switch (rnd(r, 4)) {
    case 0: /* delete the source while its copies may be in flight */
      if (out != a) {
        dlrun_array_delete(a);
        check_deleted(a, "deleted source");
      }
      slot_set(sl, out, e);
      break;
    case 1: /* keep both */
      slot_set(&w->slots[rnd(r, NSLOTS)], out, e);
      break;
    case 2: /* drop the result at once: its copies finish into freed arrays */
      dlrun_array_release(out);
      expect_unref(e);
      return;
    default: /* delete the result at once (waits for its copies) */
      if (out != a) {
        dlrun_array_delete(out);
        check_deleted(out, "deleted result");
      }
      dlrun_array_release(out);
      expect_unref(e);
      return;
    }
  }
  if (chance(r, 50)) check_array(r, out, e, "resharded array");
}

static void op_read(rng *r, slot *sl) { check_array(r, sl->a, sl->e, "array"); }

static void op_delete(rng *r, slot *sl) {
  (void)r;
  dlrun_array_delete(sl->a);
  check_deleted(sl->a, "deleted array");
  slot_clear(sl);
}

/* Import a tensor (ours) onto a random target, check it, reshard or delete
 * it, and drop it: the deleter runs when dlrun no longer needs the memory. */
static void import_and_check(rng *r, dlrun_exported ex, expect *e) {
  const DLTensor *t = tensor_of(ex);
  dlrun_import_options o = {.target = NULL, .copy = chance(r, 20) ? DLRUN_COPY_ALWAYS : DLRUN_COPY_IF_NEEDED};
  int where = rnd(r, 10);
  if (where < 2) o.target = single_sharding(sims[rnd(r, 8)], DLRUN_MEM_DEVICE);
  else if (where < 4) o.target = single_sharding(host, DLRUN_MEM_DEVICE);
  else if (where < 5 && pinned_ok)
    o.target = single_sharding(sims[rnd(r, 8)], DLRUN_MEM_PINNED_HOST);
  else if (where < 6 && t->device.device_type == kDLExtDev)
    o.target = single_sharding(sims[t->device.device_id], DLRUN_MEM_DEVICE);
  dlrun_array *a = NULL;
  dlrun_import_outcome how;
  dlrun_status st = dlrun_import(rt, ex.legacy, ex.versioned, &o, &a, &how);
  dlrun_sharding_release(o.target);
  CHECK_OK(st, "import");
  if (st) {
    if (how == DLRUN_IMPORT_REFUSED) call_deleter(ex); /* still ours */
    return;
  }
  check_array(r, a, e, "imported array");
  switch (rnd(r, 4)) {
  case 0: { /* reshard it, then drop it while the copies read it: the
             * deleter may run on a dlrun worker */
    dlrun_sharding *s = random_sharding_for(r, a);
    if (!s) break;
    dlrun_array *out = NULL;
    dlrun_put_options never = {.may_alias = DLRUN_ALIAS_NEVER};
    st = dlrun_device_put(a, s, chance(r, 50) ? &never : NULL, &out);
    dlrun_sharding_release(s);
    CHECK_OK(st, "device_put of an imported array");
    if (st) break;
    dlrun_array_release(a);
    a = NULL;
    check_array(r, out, e, "resharded imported array");
    dlrun_array_release(out);
    break;
  }
  case 1:
    dlrun_array_delete(a);
    check_deleted(a, "deleted imported array");
    break;
  default: break;
  }
  dlrun_array_release(a);
}

/* Check a tensor (ours, now) and dispose of it: import it or call its
 * deleter. */
static void consume(rng *r, dlrun_exported ex, expect *e, const char *what) {
  check_tensor(tensor_of(ex), e, what);
  if (chance(r, 55)) import_and_check(r, ex, e);
  else call_deleter(ex);
}

static void take_over(rng *r) {
  handoff h;
  if (!queue_pop_foreign(&h)) return;
  consume(r, h.ex, h.e, "tensor from another thread");
  expect_unref(h.e);
}

/* Export a single-device view of `a` (holding e) and dispose of the tensor. */
static void export_array(rng *r, dlrun_array *a, expect *e, bool may_delete) {
  dlrun_export_options o = {.copy = DLRUN_COPY_IF_NEEDED};
  int version = rnd(r, 3);
  if (version == 1) {
    o.has_max_version = true;
    o.max_major = 1;
    o.max_minor = (uint32_t)rnd(r, 3);
  } else if (version == 2) {
    o.has_max_version = true;
    o.max_major = 0;
    o.max_minor = 8;
  }
  int place = rnd(r, 10);
  if (place < 2) {
    o.has_dl_device = true;
    o.device_type = kDLCPU;
    o.device_id = 0;
  } else if (place < 3) {
    o.has_dl_device = true;
    o.device_type = kDLExtDev;
    o.device_id = rnd(r, 8);
  }
  if (chance(r, 10)) o.copy = DLRUN_COPY_ALWAYS;
  /* stream = -1 (do not wait) is for sim device memory only: host memory
   * (the cpu device, pinned_host) takes no stream. */
  int32_t dl_type = 0, dl_id = 0;
  bool in_device_memory =
      dlrun_export_device(a, &dl_type, &dl_id) == DLRUN_OK && dl_type == kDLExtDev;
  bool no_wait = !o.has_dl_device && o.copy != DLRUN_COPY_ALWAYS && in_device_memory && chance(r, 15);
  if (no_wait) {
    o.has_stream = true;
    o.stream = -1;
    /* block_until_ready below waits for `a`, not for a protective copy. */
    o.legacy_sharing = DLRUN_LEGACY_SHARE;
  }
  dlrun_exported ex;
  dlrun_status st = dlrun_export(a, &o, &ex);
  CHECK_OK(st, "export");
  if (st) return;
  bool versioned = o.has_max_version && o.max_major >= 1;
  CHECK(versioned ? ex.versioned && !ex.legacy : ex.legacy && !ex.versioned,
        "export: wrong kind of tensor (versioned asked: %d)", versioned);
  const DLTensor *t = tensor_of(ex);
  if (o.has_dl_device)
    CHECK((int32_t)t->device.device_type == o.device_type && t->device.device_id == o.device_id,
          "export to (%d, %d) gave a tensor on (%d, %d)", o.device_type, o.device_id,
          (int)t->device.device_type, t->device.device_id);
  if (ex.versioned) {
    uint64_t f = ex.versioned->flags &
                 (DLPACK_FLAG_BITMASK_IS_COPIED | DLPACK_FLAG_BITMASK_READ_ONLY);
    CHECK(f == DLPACK_FLAG_BITMASK_IS_COPIED || f == DLPACK_FLAG_BITMASK_READ_ONLY,
          "versioned export flags %llu", (unsigned long long)ex.versioned->flags);
    if (o.copy == DLRUN_COPY_ALWAYS)
      CHECK(f == DLPACK_FLAG_BITMASK_IS_COPIED, "export with copy = 1: flags %llu",
            (unsigned long long)ex.versioned->flags);
  }
  /* stream = -1: the tensor may still be being written; wait for the
   * array before anyone reads it. */
  if (no_wait) CHECK_OK(dlrun_array_block_until_ready(a), "block_until_ready");
  ex = track(ex);
  /* The tensor stays valid whatever happens to the array. */
  if (may_delete && chance(r, 25)) dlrun_array_delete(a);
  int dest = rnd(r, 100);
  if (dest < 40) {
    check_tensor(tensor_of(ex), e, "exported tensor");
    handoff h = {.ex = ex, .e = expect_ref(e), .producer = self};
    if (queue_push(h)) return;
    expect_unref(h.e);
    call_deleter(ex);
  } else {
    consume(r, ex, e, "exported tensor");
  }
}

static void op_export(rng *r, slot *sl) {
  dlrun_array *a = sl->a;
  size_t nshards = dlrun_array_shard_count(a);
  dlrun_array *single = NULL;
  expect *e = NULL;
  dlrun_status st;
  int how = rnd(r, 3);
  if (nshards == 1 && how == 0) {
    dlrun_array_retain(a);
    single = a;
    e = expect_ref(sl->e);
  } else if (how == 1) {
    size_t i = (size_t)rnd(r, (int)nshards);
    st = dlrun_array_shard_data(a, i, &single);
    CHECK_OK(st, "shard_data");
    if (st) return;
    int64_t lo[DLRUN_MAX_NDIM], hi[DLRUN_MAX_NDIM];
    dlrun_array_shard_index(a, i, NULL, lo, hi, NULL);
    e = expect_box(sl->e, dlrun_array_ndim(a), dlrun_array_shape(a),
                   dlrun_dtype_get(dlrun_array_dtype(a))->size, lo, hi);
  } else {
    dlrun_device *dev = chance(r, 85) ? sims[rnd(r, 8)] : host;
    dlrun_sharding *s =
        single_sharding(dev, pinned_ok && chance(r, 15) ? DLRUN_MEM_PINNED_HOST : DLRUN_MEM_DEVICE);
    if (!s) return;
    int mode;
    dlrun_put_options o = random_put_options(r, &mode);
    o.donate = false;
    st = dlrun_device_put(a, s, mode ? &o : NULL, &single);
    dlrun_sharding_release(s);
    CHECK_OK(st, "device_put to one device");
    if (st) return;
    e = expect_ref(sl->e);
  }
  export_array(r, single, e, single != a);
  dlrun_array_release(single);
  expect_unref(e);
}

/* ---- the shared board: arrays every thread uses, and deletes ---- */

typedef struct board_entry {
  dlrun_array *a;
  expect *e;
} board_entry;

static pthread_mutex_t board_mu = PTHREAD_MUTEX_INITIALIZER;
static board_entry board[NSHARED];
static atomic_llong deleted_seen;

/* A failure on an array another thread may have deleted: accepted when it
 * is that one. */
static bool deleted_under_us(dlrun_status st, dlrun_array *a) {
  if (st != DLRUN_ERR_RUNTIME || !dlrun_array_is_deleted(a)) return false;
  CHECK(strstr(dlrun_last_error(), "Array has been deleted") != NULL, "deleted: message %s",
        dlrun_last_error());
  atomic_fetch_add(&deleted_seen, 1);
  return true;
}

/* Read a whole board array, which another thread may delete meanwhile. */
static void read_shared(dlrun_array *a, const expect *e) {
  unsigned char *buf = malloc(e->nbytes + 1);
  if (!buf) exit(2);
  dlrun_status st = dlrun_array_read(a, 0, e->nbytes, buf);
  if (!deleted_under_us(st, a)) {
    CHECK_OK(st, "read of a shared array");
    if (!st) CHECK(memcmp(buf, e->data, e->nbytes) == 0, "shared array: wrong values");
  }
  free(buf);
}

static void op_shared(rng *r) {
  int k = rnd(r, NSHARED);
  pthread_mutex_lock(&board_mu);
  dlrun_array *a = board[k].a;
  expect *e = expect_ref(board[k].e);
  dlrun_array_retain(a);
  pthread_mutex_unlock(&board_mu);

  dlrun_status st;
  switch (rnd(r, 6)) {
  case 0: /* read */
    read_shared(a, e);
    break;
  case 1: { /* reshard */
    dlrun_sharding *s = random_sharding(r, dlrun_array_ndim(a));
    if (!s) break;
    dlrun_put_options never = {.may_alias = DLRUN_ALIAS_NEVER};
    dlrun_array *out = NULL;
    st = dlrun_device_put(a, s, chance(r, 50) ? &never : NULL, &out);
    dlrun_sharding_release(s);
    if (!deleted_under_us(st, a)) {
      CHECK_OK(st, "device_put of a shared array");
      /* An equal sharding returns the array itself, which another thread
       * may delete meanwhile. */
      if (!st && out == a) read_shared(a, e);
      else if (!st) check_array(r, out, e, "resharded shared array");
    }
    dlrun_array_release(out);
    break;
  }
  case 2: { /* export one shard */
    size_t i = (size_t)rnd(r, (int)dlrun_array_shard_count(a));
    dlrun_array *single = NULL;
    st = dlrun_array_shard_data(a, i, &single);
    if (deleted_under_us(st, a)) break;
    CHECK_OK(st, "shard_data of a shared array");
    if (st) break;
    int64_t lo[DLRUN_MAX_NDIM], hi[DLRUN_MAX_NDIM];
    dlrun_array_shard_index(a, i, NULL, lo, hi, NULL);
    expect *se = expect_box(e, dlrun_array_ndim(a), dlrun_array_shape(a),
                            dlrun_dtype_get(dlrun_array_dtype(a))->size, lo, hi);
    export_array(r, single, se, true);
    expect_unref(se);
    dlrun_array_release(single);
    break;
  }
  case 3: { /* delete it under the others and put a fresh one in its place */
    dlrun_array *fresh;
    expect *fe;
    if (!make_array(r, &fresh, &fe)) break;
    dlrun_array_delete(a);
    board_entry old = {NULL, NULL};
    pthread_mutex_lock(&board_mu);
    if (board[k].a == a) {
      old = board[k];
      board[k].a = fresh;
      board[k].e = fe;
      fresh = NULL;
      fe = NULL;
    }
    pthread_mutex_unlock(&board_mu);
    dlrun_array_release(fresh);
    expect_unref(fe);
    dlrun_array_release(old.a);
    expect_unref(old.e);
    break;
  }
  default: /* wait for it */
    st = dlrun_array_block_until_ready(a);
    if (!deleted_under_us(st, a)) CHECK_OK(st, "block_until_ready of a shared array");
    break;
  }
  dlrun_array_release(a);
  expect_unref(e);
}

/* ---- the threads ---- */

static void *worker_main(void *arg) {
  worker *w = arg;
  self = w->id;
  rng *r = &w->r;
  for (long it = 0; it < w->iters; it++) {
    slot *sl = &w->slots[rnd(r, NSLOTS)];
    int op = rnd(r, 100);
    /* Two slots may hold one array (a device_put that returned its input):
     * deleting it through one leaves the other holding a deleted array. */
    if (sl->a && dlrun_array_is_deleted(sl->a)) {
      check_deleted(sl->a, "array deleted through another slot");
      slot_clear(sl);
    }
    if (!sl->a || op < 14) op_create(r, sl);
    else if (op < 34) op_reshard(r, w, sl);
    else if (op < 44) op_read(r, sl);
    else if (op < 64) op_export(r, sl);
    else if (op < 70) op_delete(r, sl);
    else if (op < 86) op_shared(r);
    else take_over(r);
    if (chance(r, 20)) take_over(r);
  }
  for (int i = 0; i < NSLOTS; i++) slot_clear(&w->slots[i]);
  return NULL;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
  long iters = argc > 1 ? strtol(argv[1], NULL, 10) : DEFAULT_ITERS;
  uint64_t seed = argc > 2 ? strtoull(argv[2], NULL, 10) : 20240607;
  if (iters < 1) iters = 1;
  self = NTHREADS;
  double start = now_s();

  dlrun_config cfg = {.devices = "sim:8,cpu:1", .device_memory = 64u << 20};
  pinned_ok = probe_pinned(&cfg);
  dlrun_status st = dlrun_runtime_create(&cfg, &rt);
  if (st) {
    fprintf(stderr, "stress_threads: runtime: %s: %s\n", dlrun_status_name(st), dlrun_last_error());
    printf("stress_threads: 0 passed, 1 failed\n");
    return 1;
  }
  for (int i = 0; i < 8; i++) sims[i] = dlrun_device_get(rt, "sim", (size_t)i);
  host = dlrun_host_device(rt);
  CHECK(sims[7] && host, "devices of sim:8,cpu:1");

  static const int in_order[] = {0, 1, 2, 3, 4, 5, 6, 7}, reversed[] = {7, 6, 5, 4, 3, 2, 1, 0};
  static const int upper[] = {4, 5, 6, 7}, odd[] = {1, 3, 5, 7}, pair[] = {6, 2};
  meshes[0] = mesh_of(in_order, 8, 1, 8, 1);
  meshes[1] = mesh_of(in_order, 8, 2, 4, 2);
  meshes[2] = mesh_of(reversed, 8, 2, 2, 4);
  meshes[3] = mesh_of(upper, 4, 1, 4, 1);
  meshes[4] = mesh_of(odd, 4, 2, 2, 2);
  meshes[5] = mesh_of(pair, 2, 1, 2, 1);
  for (int i = 0; i < NMESHES; i++)
    if (!meshes[i]) {
      printf("stress_threads: %lld passed, %lld failed\n", (long long)n_passed, (long long)n_failed);
      return 1;
    }

  tracked_cap = (int64_t)NTHREADS * iters * 4 + 64;
  tracked_all = calloc((size_t)tracked_cap, sizeof *tracked_all);
  if (!tracked_all) return 2;

  rng mr = {seed};
  for (int k = 0; k < NSHARED; k++)
    if (!make_array(&mr, &board[k].a, &board[k].e)) {
      printf("stress_threads: %lld passed, %lld failed\n", (long long)n_passed, (long long)n_failed);
      return 1;
    }

  worker workers[NTHREADS];
  memset(workers, 0, sizeof workers);
  for (int i = 0; i < NTHREADS; i++) {
    workers[i].id = i;
    workers[i].iters = iters;
    workers[i].r.s = seed * 1000003u + (uint64_t)i * 7919u + 1;
    if (pthread_create(&workers[i].thread, NULL, worker_main, &workers[i]) != 0) {
      fprintf(stderr, "stress_threads: cannot start thread %d\n", i);
      return 2;
    }
  }
  for (int i = 0; i < NTHREADS; i++) pthread_join(workers[i].thread, NULL);

  /* What is left in the queue is consumed here, on yet another thread. */
  handoff h;
  while (queue_pop_foreign(&h)) {
    consume(&mr, h.ex, h.e, "left-over tensor");
    expect_unref(h.e);
  }
  for (int k = 0; k < NSHARED; k++) {
    dlrun_array_release(board[k].a);
    expect_unref(board[k].e);
  }
  for (int i = 0; i < NMESHES; i++) dlrun_mesh_release(meshes[i]);

  /* Every deleter ran exactly once. */
  int64_t n = atomic_load(&tracked_count);
  if (n > tracked_cap) n = tracked_cap;
  int64_t not_once = 0;
  for (int64_t i = 0; i < n; i++) {
    int calls = atomic_load(&tracked_all[i]->calls);
    if (calls != 1 && not_once++ < 5)
      failf(__LINE__, "the deleter of export %lld ran %d times", (long long)i, calls);
    free(tracked_all[i]);
  }
  free(tracked_all);
  CHECK(not_once == 0, "%lld of %lld deleters did not run exactly once", (long long)not_once,
        (long long)n);
  CHECK(atomic_load(&untracked) == 0, "%lld exports were not tracked", (long long)untracked);
  if (iters >= 1000) /* a short run may hand nothing over */
    CHECK(atomic_load(&deleters_other_host) > 0,
          "no deleter ran on a thread other than its exporter's");
  int64_t live = dlrun_live_exports(rt);
  CHECK(live == 0, "%lld exports still alive", (long long)live);

  /* Once the queued work is done, every pool is empty. */
  size_t ndev = dlrun_device_count(rt, "sim") + dlrun_device_count(rt, "cpu");
  for (size_t i = 0; i < ndev; i++) {
    dlrun_device *d = i < 8 ? sims[i] : dlrun_device_get(rt, "cpu", i - 8);
    dlrun_device_synchronize(d);
  }
  for (size_t i = 0; i < ndev; i++) {
    dlrun_device *d = i < 8 ? sims[i] : dlrun_device_get(rt, "cpu", i - 8);
    for (int k = 0; k < DLRUN_MEM_KIND_COUNT; k++) {
      dlrun_memory_stats ms;
      st = dlrun_device_memory_stats(d, (dlrun_memory_kind)k, &ms);
      CHECK_OK(st, "memory_stats");
      CHECK(ms.bytes_in_use == 0, "%s %s memory: %llu bytes still in use", dlrun_device_name(d),
            dlrun_memory_kind_name((dlrun_memory_kind)k), (unsigned long long)ms.bytes_in_use);
    }
  }
  dlrun_runtime_release(rt);

  printf("stress_threads: %d threads x %ld iterations (seed %llu) in %.1f s: %lld exports, "
         "%lld handed to another thread; deleters ran on the exporting thread %lld times, on "
         "another host thread %lld, on a dlrun worker %lld; %lld operations met an array "
         "deleted by another thread\n",
         NTHREADS, iters, (unsigned long long)seed, now_s() - start, (long long)n,
         (long long)taken_over, (long long)deleters_same, (long long)deleters_other_host,
         (long long)deleters_worker, (long long)deleted_seen);
  long long p = atomic_load(&n_passed), f = atomic_load(&n_failed);
  printf("stress_threads: %lld passed, %lld failed\n", p, f);
  return f ? 1 : 0;
}
