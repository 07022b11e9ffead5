/* Copy plans (device/copy.h): the device layer's half of the transfer
 * engine. */
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

/* One destination's copies. Its storage is a slot of the plan's block,
 * sized to the rank; the common task (one piece, one unit, at most one
 * dependency) needs nothing else. Piece i reads srcs[i]; its coordinates
 * are coords(t, i): the source block's origin, then lo, then hi. */
struct dlrun_copy_task {
  dlrun_task node; /* its place in the destination stream's queue */
  dlrun_copy_plan *plan;
  dlrun_buffer *dst; /* a reference, released with the plan */
  size_t npieces, cap;
  dlrun_buffer **srcs;
  int64_t *piece_coords;
  copy_unit *units; /* the pieces cut for parallel copying; made with the plan */
  size_t nunits;
  dlrun_event *deps; /* the sources' ready events not yet done; set when queued */
  size_t ndeps;
  bool queued;
  dlrun_buffer *one_src;
  copy_unit one_unit;
  dlrun_event one_dep;
  int64_t own[]; /* dst_lo, dst_strides, then the first piece's coordinates */
};
typedef struct dlrun_copy_task copy_task;

struct dlrun_copy_plan {
  atomic_size_t pending; /* queued tasks not finished, plus the runner */
  dlrun_runtime *rt;     /* whose workers the runner holds, once it queued */
  size_t queued;
  int ndim;
  size_t esize;
  dlrun_buffer **srcs; /* one reference each */
  size_t nsrcs;
  size_t ntasks, cap, stride;
  unsigned char *tasks; /* cap slots of `stride` bytes, after the header */
  int64_t src_shape[];  /* ndim: the source array's shard shape */
};
typedef struct dlrun_copy_plan copy_plan;

#define ALIGN16(n) (((n) + 15) & ~(size_t)15)

static copy_task *task_at(const copy_plan *p, size_t i) {
  return (copy_task *)(void *)(p->tasks + i * p->stride);
}

static int64_t *coords(const copy_task *t, size_t i) {
  return t->piece_coords + i * 3 * (size_t)t->plan->ndim;
}
static const int64_t *dst_lo(const copy_task *t) { return t->own; }
static const int64_t *dst_strides(const copy_task *t) { return t->own + t->plan->ndim; }

static void release_sources(dlrun_buffer **srcs, size_t n) {
  for (size_t i = 0; i < n; i++) dlrun_buffer_release(srcs[i]);
  dlrun_free(srcs);
}

void dlrun_copy_plan_free(copy_plan *p) {
  if (!p) return;
  for (size_t i = 0; i < p->ntasks; i++) {
    copy_task *t = task_at(p, i);
    if (t->units != &t->one_unit) dlrun_free(t->units);
    if (t->deps != &t->one_dep) dlrun_free(t->deps);
    if (t->srcs != &t->one_src) {
      dlrun_free(t->srcs);
      dlrun_free(t->piece_coords);
    }
    dlrun_buffer_release(t->dst);
  }
  release_sources(p->srcs, p->nsrcs);
  dlrun_free(p);
}

dlrun_status dlrun_copy_plan_create(size_t ntasks, int ndim, size_t esize,
                                    const int64_t *src_shape, dlrun_buffer **srcs, size_t nsrcs,
                                    copy_plan **out) {
  size_t nd = (size_t)ndim;
  size_t head = ALIGN16(sizeof(copy_plan) + nd * sizeof(int64_t));
  size_t stride = ALIGN16(sizeof(copy_task) + 5 * nd * sizeof(int64_t));
  size_t size = head + ntasks * stride;
  copy_plan *p = ntasks <= (SIZE_MAX - head) / stride ? dlrun_malloc(size) : NULL;
  *out = p;
  if (!p) {
    release_sources(srcs, nsrcs);
    return dlrun_fail_oom_host(size);
  }
  *p = (copy_plan){.ndim = ndim, .esize = esize, .srcs = srcs, .nsrcs = nsrcs, .cap = ntasks,
                   .stride = stride, .tasks = (unsigned char *)p + head};
  memcpy(p->src_shape, src_shape, nd * sizeof *src_shape);
  return DLRUN_OK;
}

dlrun_status dlrun_copy_plan_add_task(copy_plan *p, dlrun_buffer *dst, const int64_t *lo,
                                      const int64_t *strides, copy_task **out) {
  if (p->ntasks == p->cap)
    return dlrun_fail(DLRUN_ERR_RUNTIME, "copy plan: more than %zu tasks", p->cap);
  size_t nd = (size_t)p->ndim;
  copy_task *t = task_at(p, p->ntasks++);
  *t = (copy_task){.plan = p, .dst = dst, .cap = 1, .srcs = &t->one_src,
                   .piece_coords = t->own + 2 * nd, .units = &t->one_unit,
                   .deps = &t->one_dep};
  dlrun_buffer_retain(dst);
  memcpy(t->own, lo, nd * sizeof *lo);
  memcpy(t->own + nd, strides, nd * sizeof *strides);
  *out = t;
  return DLRUN_OK;
}

/* Room for twice as many pieces. */
static dlrun_status grow(copy_task *t) {
  size_t cap = t->cap * 2, per = 3 * (size_t)t->plan->ndim;
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
  size_t nd = (size_t)t->plan->ndim;
  int64_t *c = coords(t, t->npieces);
  t->srcs[t->npieces++] = src;
  memcpy(c, src_lo, nd * sizeof *src_lo);
  memcpy(c + nd, lo, nd * sizeof *lo);
  memcpy(c + 2 * nd, hi, nd * sizeof *hi);
  return DLRUN_OK;
}

size_t dlrun_copy_task_piece_count(const copy_task *t) { return t->npieces; }

static uint64_t box_bytes(size_t esize, int ndim, const int64_t *lo, const int64_t *hi) {
  uint64_t bytes = esize;
  for (int d = 0; d < ndim; d++) bytes *= (uint64_t)(hi[d] - lo[d]);
  return bytes;
}

static uint64_t piece_bytes(const copy_task *t, size_t i) {
  const int64_t *c = coords(t, i);
  int nd = t->plan->ndim;
  return box_bytes(t->plan->esize, nd, c + nd, c + 2 * nd);
}

/* Large pieces are cut along their outermost splittable dimension into
 * units of about this many bytes, so that idle workers can share one
 * device's copy. */
#define UNIT_BYTES ((uint64_t)4 << 20)

/* How many units piece i is cut into, and along which dimension. */
static size_t unit_count(const copy_task *t, size_t i, int *dim) {
  int nd = t->plan->ndim;
  const int64_t *c = coords(t, i), *lo = c + nd, *hi = c + 2 * nd;
  *dim = 0;
  while (*dim < nd && hi[*dim] - lo[*dim] == 1) (*dim)++;
  if (*dim == nd) { /* one element (or rank 0): a single unit */
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
  int dim, nd = t->plan->ndim;
  size_t n = 0;
  for (size_t i = 0; i < t->npieces; i++) n += unit_count(t, i, &dim);
  if (n > 1 && !(t->units = dlrun_malloc(n * sizeof *t->units))) {
    t->units = &t->one_unit;
    return dlrun_fail_oom_host(n * sizeof *t->units);
  }
  if (t->npieces > 1 && !(t->deps = dlrun_malloc(t->npieces * sizeof *t->deps))) {
    t->deps = &t->one_dep;
    return dlrun_fail_oom_host(t->npieces * sizeof *t->deps);
  }
  size_t k = 0;
  for (size_t i = 0; i < t->npieces; i++) {
    size_t parts = unit_count(t, i, &dim);
    const int64_t *c = coords(t, i);
    int64_t lo = nd ? c[nd + dim] : 0, extent = nd ? c[2 * nd + dim] - lo : 0;
    for (size_t j = 0; j < parts; j++)
      t->units[k++] = (copy_unit){.piece = i, .dim = dim,
                                  .lo0 = lo + extent * (int64_t)j / (int64_t)parts,
                                  .hi0 = lo + extent * (int64_t)(j + 1) / (int64_t)parts};
  }
  t->nunits = n;
  return DLRUN_OK;
}

static void copy_one_unit(void *ctx, size_t i) {
  copy_task *t = ctx;
  const copy_plan *p = t->plan;
  const copy_unit *u = &t->units[i];
  int nd = p->ndim;
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
  const int64_t *src_strides = dlrun_buffer_layout(src, nd, p->src_shape, scratch);
  dlrun_box_end to = dlrun_buffer_end(t->dst, dst_lo(t), dst_strides(t));
  dlrun_box_end from = dlrun_buffer_end(src, c, src_strides);
  dlrun_copy_box(p->esize, nd, lo, hi, &to, &from);
  uint64_t bytes = box_bytes(p->esize, nd, lo, hi);
  atomic_fetch_add(&dst->rt->bytes_done, bytes);
  dlrun_trace_event(dst->name, "transfer", "copy", start,
                    "\"bytes\": %llu, \"src\": \"%s\", \"dst\": \"%s\"",
                    (unsigned long long)bytes, src->dev->name, dst->name);
}

/* Drop `n` holds on the plan; the last frees it. */
static void plan_done(copy_plan *p, size_t n) {
  if (atomic_fetch_sub(&p->pending, n) == n) dlrun_copy_plan_free(p);
}

static void run_copy(void *ctx) {
  copy_task *t = ctx;
  if (t->nunits == 1) copy_one_unit(t, 0); /* nothing to share */
  else dlrun_workers_parallel(t->dst->dev->rt->workers, t->nunits, copy_one_unit, t);
  plan_done(t->plan, 1); /* may free t */
}

void dlrun_copy_plan_start(copy_plan *p) {
  atomic_init(&p->pending, 1); /* the runner's hold */
  p->rt = NULL;
  p->queued = 0;
}

/* The runtime whose workers run the plan, held on first use. */
static dlrun_status hold_workers(copy_plan *p, dlrun_runtime *rt) {
  if (p->rt) return DLRUN_OK;
  dlrun_status st = dlrun_workers_hold(rt->workers);
  if (!st) p->rt = rt;
  return st;
}

dlrun_status dlrun_copy_plan_queue(copy_plan *p, copy_task *t) {
  dlrun_device *dst = t->dst->dev;
  dlrun_status st = hold_workers(p, dst->rt);
  if (st) return st;
  uint64_t task_bytes = 0;
  t->ndeps = 0;
  for (size_t k = 0; k < t->npieces; k++) {
    dlrun_buffer *src = t->srcs[k];
    if (!dlrun_event_done(src->ready)) t->deps[t->ndeps++] = src->ready;
    task_bytes += piece_bytes(t, k);
  }
  /* Counted before the task can finish, so done never passes queued. */
  atomic_fetch_add(&p->rt->bytes_queued, task_bytes);
  atomic_fetch_add(&p->pending, 1);
  st = dlrun_device_submit(dst, &t->node, t->deps, t->ndeps, run_copy, t, &t->dst->ready);
  if (st) {
    atomic_fetch_sub(&p->pending, 1);
    atomic_fetch_sub(&p->rt->bytes_queued, task_bytes); /* what will never be done */
    return st;
  }
  t->queued = true;
  for (size_t k = 0; k < t->npieces; k++) {
    dlrun_buffer *src = t->srcs[k];
    if (src->dev == dst) continue;
    uint64_t bytes = piece_bytes(t, k);
    atomic_fetch_add(&src->dev->bytes_out, bytes);
    atomic_fetch_add(&dst->bytes_in, bytes);
  }
  if (++p->queued % 64 == 0) { /* let the workers start on what is queued */
    dlrun_workers_release(p->rt->workers);
    dlrun_workers_hold(p->rt->workers); /* cannot fail: a thread runs */
  }
  return DLRUN_OK;
}

void dlrun_copy_plan_finish(copy_plan *p) {
  if (p->rt) dlrun_workers_release(p->rt->workers);
  plan_done(p, 1);
}

void dlrun_copy_plan_abort(copy_plan *p) {
  if (p->rt) dlrun_workers_release(p->rt->workers);
  /* The runner's hold keeps every task, and its destination, alive. */
  for (size_t i = 0; i < p->ntasks; i++)
    if (task_at(p, i)->queued) dlrun_event_wait(task_at(p, i)->dst->ready);
  plan_done(p, 1);
}

dlrun_status dlrun_copy_plan_run(copy_plan *p) {
  dlrun_copy_plan_start(p);
  dlrun_status st = DLRUN_OK;
  for (size_t i = 0; i < p->ntasks && !st; i++) st = dlrun_copy_plan_queue(p, task_at(p, i));
  dlrun_copy_plan_finish(p);
  return st;
}
