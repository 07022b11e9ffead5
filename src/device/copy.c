/* Running copy plans (device/copy.h): the device layer's half of the
 * transfer engine. */
#include <string.h>

#include "copy.h"
#include "core/alloc.h"
#include "core/status_impl.h"
#include "core/trace_impl.h"

struct copy_unit {
  size_t piece;     /* index into the task's pieces */
  int64_t lo0, hi0; /* the part [lo0, hi0) of the piece along dimension `dim` */
  int dim;
};
typedef struct copy_unit copy_unit;

/* The buffers a plan's tasks read, with one reference each, released by
 * the last task to finish. */
typedef struct source_set {
  atomic_size_t holders; /* queued tasks not finished, plus the enqueuer */
  size_t n;
  dlrun_buffer **bufs;
} source_set;

static void sources_release(source_set *set, size_t holders) {
  if (!set || atomic_fetch_sub(&set->holders, holders) != holders) return;
  for (size_t i = 0; i < set->n; i++) dlrun_buffer_release(set->bufs[i]);
  dlrun_free(set->bufs);
  dlrun_free(set);
}

/* One allocation per task in the common case (one piece, one unit, at most
 * one dependency), its coordinates sized to the array's rank: a put onto
 * thousands of devices plans thousands of these. Piece i's source buffer
 * is srcs[i]; its coordinates are coords(t, i): the source block's origin,
 * then lo, then hi, ndim each. */
struct dlrun_copy_task {
  dlrun_task node; /* its place in the destination stream's queue */
  dlrun_buffer *dst;
  source_set *sources; /* set when queued */
  int ndim;
  size_t esize;
  size_t npieces, cap;
  dlrun_buffer **srcs;
  int64_t *piece_coords;
  copy_unit *units; /* the pieces cut for parallel copying; made with the plan */
  size_t nunits;
  dlrun_event *deps; /* the sources' ready events not yet done; set when queued */
  size_t ndeps;
  dlrun_buffer *one_src;
  copy_unit one_unit;
  dlrun_event one_dep;
  /* dst_lo, dst_strides, src_shape (the source array's shard shape), then
   * the first piece's coordinates. */
  int64_t own[];
};
typedef struct dlrun_copy_task copy_task;

static int64_t *coords(const copy_task *t, size_t i) {
  return t->piece_coords + i * 3 * (size_t)t->ndim;
}
static const int64_t *dst_lo(const copy_task *t) { return t->own; }
static const int64_t *dst_strides(const copy_task *t) { return t->own + t->ndim; }
static const int64_t *src_shape(const copy_task *t) { return t->own + 2 * t->ndim; }

void dlrun_copy_task_free(copy_task *t) {
  if (!t) return;
  sources_release(t->sources, 1);
  if (t->units != &t->one_unit) dlrun_free(t->units);
  if (t->deps != &t->one_dep) dlrun_free(t->deps);
  dlrun_buffer_release(t->dst);
  if (t->srcs != &t->one_src) {
    dlrun_free(t->srcs);
    dlrun_free(t->piece_coords);
  }
  dlrun_free(t);
}

static uint64_t box_bytes(size_t esize, int ndim, const int64_t *lo, const int64_t *hi) {
  uint64_t bytes = esize;
  for (int d = 0; d < ndim; d++) bytes *= (uint64_t)(hi[d] - lo[d]);
  return bytes;
}

static uint64_t piece_bytes(const copy_task *t, size_t i) {
  const int64_t *c = coords(t, i);
  return box_bytes(t->esize, t->ndim, c + t->ndim, c + 2 * t->ndim);
}

/* Large pieces are cut along their outermost splittable dimension into
 * units of about this many bytes, so that idle workers can share one
 * device's copy. */
#define UNIT_BYTES ((uint64_t)4 << 20)

static void copy_one_unit(void *ctx, size_t i) {
  copy_task *t = ctx;
  const copy_unit *u = &t->units[i];
  int nd = t->ndim;
  const int64_t *c = coords(t, u->piece);
  dlrun_buffer *src = t->srcs[u->piece];
  dlrun_device *dst = t->dst->dev;
  int64_t lo[DLRUN_MAX_NDIM], hi[DLRUN_MAX_NDIM];
  memcpy(lo, c + nd, (size_t)nd * sizeof *lo);
  memcpy(hi, c + 2 * nd, (size_t)nd * sizeof *hi);
  if (nd) {
    lo[u->dim] = u->lo0;
    hi[u->dim] = u->hi0;
  }
  uint64_t start = dlrun_trace_enabled() ? dlrun_trace_now() : 0;
  int64_t scratch[DLRUN_MAX_NDIM];
  const int64_t *src_strides = dlrun_buffer_layout(src, nd, src_shape(t), scratch);
  dlrun_box_end to = dlrun_buffer_end(t->dst, dst_lo(t), dst_strides(t));
  dlrun_box_end from = dlrun_buffer_end(src, c, src_strides);
  dlrun_copy_box(t->esize, nd, lo, hi, &to, &from);
  uint64_t bytes = box_bytes(t->esize, nd, lo, hi);
  atomic_fetch_add(&dst->rt->bytes_done, bytes);
  dlrun_trace_event(dst->name, "transfer", "copy", start,
                    "\"bytes\": %llu, \"src\": \"%s\", \"dst\": \"%s\"",
                    (unsigned long long)bytes, src->dev->name, dst->name);
}

/* How many units piece i is cut into, and along which dimension. */
static size_t unit_count(const copy_task *t, size_t i, int *dim) {
  const int64_t *c = coords(t, i), *lo = c + t->ndim, *hi = c + 2 * t->ndim;
  *dim = 0;
  while (*dim < t->ndim && hi[*dim] - lo[*dim] == 1) (*dim)++;
  if (*dim == t->ndim) { /* one element (or rank 0): a single unit */
    *dim = 0;
    return 1;
  }
  uint64_t want = (piece_bytes(t, i) + UNIT_BYTES - 1) / UNIT_BYTES;
  uint64_t extent = (uint64_t)(hi[*dim] - lo[*dim]);
  return want < 1 ? 1 : want > extent ? extent : want;
}

/* Cut the task's pieces into units and make room for its dependencies (at
 * planning, so that queueing and running the copy allocate nothing). */
dlrun_status dlrun_copy_task_seal(copy_task *t) {
  int dim;
  size_t n = 0;
  for (size_t i = 0; i < t->npieces; i++) n += unit_count(t, i, &dim);
  t->units = n == 1 ? &t->one_unit : dlrun_malloc(n * sizeof *t->units);
  if (!t->units) return dlrun_fail_oom_host(n * sizeof *t->units);
  t->deps = t->npieces <= 1 ? &t->one_dep : dlrun_malloc(t->npieces * sizeof *t->deps);
  if (!t->deps) return dlrun_fail_oom_host(t->npieces * sizeof *t->deps);
  size_t k = 0;
  for (size_t i = 0; i < t->npieces; i++) {
    size_t parts = unit_count(t, i, &dim);
    const int64_t *c = coords(t, i);
    int64_t lo = t->ndim ? c[t->ndim + dim] : 0, extent = t->ndim ? c[2 * t->ndim + dim] - lo : 0;
    for (size_t j = 0; j < parts; j++)
      t->units[k++] = (copy_unit){.piece = i, .dim = dim,
                                  .lo0 = lo + extent * (int64_t)j / (int64_t)parts,
                                  .hi0 = lo + extent * (int64_t)(j + 1) / (int64_t)parts};
  }
  t->nunits = n;
  return DLRUN_OK;
}

static void run_copy(void *ctx) {
  copy_task *t = ctx;
  if (t->nunits == 1) copy_one_unit(t, 0); /* nothing to share */
  else dlrun_workers_parallel(t->dst->dev->rt->workers, t->nunits, copy_one_unit, t);
  dlrun_copy_task_free(t);
}

dlrun_status dlrun_copy_task_create(dlrun_buffer *dst, int ndim, size_t esize,
                                    const int64_t *lo, const int64_t *strides,
                                    const int64_t *shard_shape, copy_task **out) {
  size_t nd = (size_t)ndim, size = sizeof(copy_task) + 6 * nd * sizeof(int64_t);
  copy_task *t = dlrun_malloc(size);
  *out = t;
  if (!t) return dlrun_fail_oom_host(size);
  *t = (copy_task){.dst = dst, .ndim = ndim, .esize = esize, .cap = 1, .srcs = &t->one_src,
                   .piece_coords = t->own + 3 * nd};
  dlrun_buffer_retain(dst);
  memcpy(t->own, lo, nd * sizeof *lo);
  memcpy(t->own + nd, strides, nd * sizeof *strides);
  memcpy(t->own + 2 * nd, shard_shape, nd * sizeof *shard_shape);
  return DLRUN_OK;
}

/* Room for twice as many pieces. */
static dlrun_status grow(copy_task *t) {
  size_t cap = t->cap * 2, per = 3 * (size_t)t->ndim;
  dlrun_buffer **srcs = dlrun_malloc(cap * sizeof *srcs);
  int64_t *pc = dlrun_malloc((cap * per + 1) * sizeof *pc); /* +1: rank 0 has none */
  if (!srcs || !pc) {
    dlrun_free(srcs);
    dlrun_free(pc);
    return dlrun_fail_oom_host(cap * (sizeof *srcs + per * sizeof *pc));
  }
  memcpy(srcs, t->srcs, t->npieces * sizeof *srcs);
  memcpy(pc, t->piece_coords, t->npieces * per * sizeof *pc);
  if (t->srcs != &t->one_src) {
    dlrun_free(t->srcs);
    dlrun_free(t->piece_coords);
  }
  t->srcs = srcs;
  t->piece_coords = pc;
  t->cap = cap;
  return DLRUN_OK;
}

dlrun_status dlrun_copy_task_add(copy_task *t, dlrun_buffer *src, const int64_t *src_lo,
                                 const int64_t *lo, const int64_t *hi) {
  if (t->npieces == t->cap) {
    dlrun_status st = grow(t);
    if (st) return st;
  }
  size_t nd = (size_t)t->ndim;
  int64_t *c = coords(t, t->npieces);
  t->srcs[t->npieces++] = src;
  memcpy(c, src_lo, nd * sizeof *src_lo);
  memcpy(c + nd, lo, nd * sizeof *lo);
  memcpy(c + 2 * nd, hi, nd * sizeof *hi);
  return DLRUN_OK;
}

size_t dlrun_copy_task_piece_count(const copy_task *t) { return t->npieces; }

dlrun_status dlrun_copy_tasks_enqueue(copy_task **tasks, size_t n, dlrun_buffer **srcs,
                                      size_t nsrcs) {
  source_set *set = dlrun_malloc(sizeof *set);
  dlrun_workers *workers = NULL;
  size_t queued = 0, todo = 0;
  uint64_t total = 0;
  for (size_t i = 0; i < n; i++)
    if (tasks[i]) {
      workers = tasks[i]->dst->dev->rt->workers;
      todo++;
      for (size_t k = 0; k < tasks[i]->npieces; k++) total += piece_bytes(tasks[i], k);
    }
  if (!set || !workers) {
    for (size_t i = 0; i < nsrcs; i++) dlrun_buffer_release(srcs[i]);
    dlrun_free(srcs);
    dlrun_free(set);
    return workers && !set ? dlrun_fail_oom_host(sizeof *set) : DLRUN_OK;
  }
  *set = (source_set){.n = nsrcs, .bufs = srcs};
  atomic_init(&set->holders, todo + 1);
  dlrun_runtime *rt = NULL;
  dlrun_status st = dlrun_workers_hold(workers);
  if (st) {
    sources_release(set, todo + 1);
    return st;
  }
  dlrun_device *bytes_dev = NULL; /* per-device counts summed while the source repeats */
  uint64_t bytes_out = 0;
  for (size_t i = 0; i < n && !st; i++) {
    copy_task *t = tasks[i];
    if (!t) continue;
    dlrun_device *dst = t->dst->dev;
    if (!rt) { /* counted before any task can finish, so done never passes queued */
      rt = dst->rt;
      atomic_fetch_add(&rt->bytes_queued, total);
    }
    t->ndeps = 0;
    uint64_t task_bytes = 0;
    for (size_t k = 0; k < t->npieces; k++) {
      dlrun_buffer *src = t->srcs[k];
      if (!dlrun_event_done(src->ready)) t->deps[t->ndeps++] = src->ready;
      uint64_t bytes = piece_bytes(t, k);
      task_bytes += bytes;
      if (src->dev == dst) continue;
      if (src->dev != bytes_dev) {
        if (bytes_dev) atomic_fetch_add(&bytes_dev->bytes_out, bytes_out);
        bytes_dev = src->dev;
        bytes_out = 0;
      }
      bytes_out += bytes;
      atomic_fetch_add(&dst->bytes_in, bytes);
    }
    t->sources = set;
    st = dlrun_device_submit(dst, &t->node, t->deps, t->ndeps, run_copy, t, &t->dst->ready);
    if (st) {
      t->sources = NULL; /* stays the caller's */
      break;
    }
    tasks[i] = NULL; /* the queue owns it now: t may be gone already */
    queued++;
    total -= task_bytes;
    if (queued % 64 == 0) { /* let the workers start on what is queued */
      dlrun_workers_release(workers);
      dlrun_workers_hold(workers); /* cannot fail: a thread runs */
    }
  }
  if (bytes_dev) atomic_fetch_add(&bytes_dev->bytes_out, bytes_out);
  if (st) atomic_fetch_sub(&rt->bytes_queued, total); /* what will never be done */
  dlrun_workers_release(workers);
  sources_release(set, todo - queued + 1);
  return st;
}
