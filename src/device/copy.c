/* Running copy plans (device/copy.h): the device layer's half of the
 * transfer engine. */
#include <string.h>

#include "copy.h"
#include "core/alloc.h"
#include "core/status_impl.h"
#include "core/trace_impl.h"

typedef struct piece {
  dlrun_buffer *src;
  int64_t src_lo[DLRUN_MAX_NDIM]; /* origin of the source shard */
  int64_t lo[DLRUN_MAX_NDIM], hi[DLRUN_MAX_NDIM];
} piece;

struct copy_unit {
  size_t piece;     /* index into the task's pieces */
  int64_t lo0, hi0; /* the part [lo0, hi0) of the piece along dimension `dim` */
  int dim;
};
typedef struct copy_unit copy_unit;

/* Most destinations read one piece, copied as one unit: those live inside
 * the task, so that such a task is a single allocation. */
struct dlrun_copy_task {
  dlrun_buffer *dst;
  copy_unit *units; /* the pieces cut for parallel copying; made with the plan */
  size_t nunits;
  int ndim;
  size_t esize;
  int64_t dst_lo[DLRUN_MAX_NDIM], dst_strides[DLRUN_MAX_NDIM];
  int64_t src_shape[DLRUN_MAX_NDIM]; /* shard shape of the source array */
  size_t npieces, cap;
  piece *pieces;
  piece one_piece;
  copy_unit one_unit;
};
typedef struct dlrun_copy_task copy_task;

void dlrun_copy_task_free(copy_task *t) {
  if (!t) return;
  for (size_t i = 0; i < t->npieces; i++) dlrun_buffer_release(t->pieces[i].src);
  if (t->units != &t->one_unit) dlrun_free(t->units);
  dlrun_buffer_release(t->dst);
  if (t->pieces != &t->one_piece) dlrun_free(t->pieces);
  dlrun_free(t);
}

static uint64_t piece_bytes(const copy_task *t, const piece *p) {
  uint64_t bytes = t->esize;
  for (int d = 0; d < t->ndim; d++) bytes *= (uint64_t)(p->hi[d] - p->lo[d]);
  return bytes;
}

/* Large pieces are cut along their outermost splittable dimension into
 * units of about this many bytes, so that idle workers can share one
 * device's copy. */
#define UNIT_BYTES ((uint64_t)4 << 20)

static void copy_one_unit(void *ctx, size_t i) {
  copy_task *t = ctx;
  const copy_unit *u = &t->units[i];
  const piece *p = &t->pieces[u->piece];
  dlrun_device *dst = t->dst->dev;
  int64_t lo[DLRUN_MAX_NDIM], hi[DLRUN_MAX_NDIM];
  memcpy(lo, p->lo, (size_t)t->ndim * sizeof *lo);
  memcpy(hi, p->hi, (size_t)t->ndim * sizeof *hi);
  if (t->ndim) {
    lo[u->dim] = u->lo0;
    hi[u->dim] = u->hi0;
  }
  uint64_t start = dlrun_trace_enabled() ? dlrun_trace_now() : 0;
  int64_t scratch[DLRUN_MAX_NDIM];
  const int64_t *src_strides = dlrun_buffer_layout(p->src, t->ndim, t->src_shape, scratch);
  dlrun_box_end to = dlrun_buffer_end(t->dst, t->dst_lo, t->dst_strides);
  dlrun_box_end from = dlrun_buffer_end(p->src, p->src_lo, src_strides);
  dlrun_copy_box(t->esize, t->ndim, lo, hi, &to, &from);
  uint64_t bytes = t->esize;
  for (int d = 0; d < t->ndim; d++) bytes *= (uint64_t)(hi[d] - lo[d]);
  atomic_fetch_add(&dst->rt->bytes_done, bytes);
  dlrun_trace_event(dst->name, "transfer", "copy", start,
                    "\"bytes\": %llu, \"src\": \"%s\", \"dst\": \"%s\"",
                    (unsigned long long)bytes, p->src->dev->name, dst->name);
}

/* How many units a piece is cut into, and along which dimension. */
static size_t unit_count(const copy_task *t, const piece *p, int *dim) {
  *dim = 0;
  while (*dim < t->ndim && p->hi[*dim] - p->lo[*dim] == 1) (*dim)++;
  if (*dim == t->ndim) return 1;
  uint64_t want = (piece_bytes(t, p) + UNIT_BYTES - 1) / UNIT_BYTES;
  uint64_t extent = (uint64_t)(p->hi[*dim] - p->lo[*dim]);
  return want < 1 ? 1 : want > extent ? extent : want;
}

/* Cut the task's pieces into units (at planning, so that running the copy
 * allocates nothing). */
dlrun_status dlrun_copy_task_seal(copy_task *t) {
  int dim;
  size_t n = 0;
  for (size_t i = 0; i < t->npieces; i++) n += unit_count(t, &t->pieces[i], &dim);
  t->units = n == 1 ? &t->one_unit : dlrun_malloc(n * sizeof *t->units);
  if (!t->units) return dlrun_fail_oom_host(n * sizeof *t->units);
  size_t k = 0;
  for (size_t i = 0; i < t->npieces; i++) {
    const piece *p = &t->pieces[i];
    size_t parts = unit_count(t, p, &dim);
    int64_t lo = t->ndim ? p->lo[dim] : 0, extent = t->ndim ? p->hi[dim] - lo : 0;
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
                                    const int64_t *dst_lo, const int64_t *dst_strides,
                                    const int64_t *src_shape, copy_task **out) {
  copy_task *t = dlrun_calloc(1, sizeof *t);
  *out = t;
  if (!t) return dlrun_fail_oom_host(sizeof *t);
  *t = (copy_task){.dst = dst, .ndim = ndim, .esize = esize};
  dlrun_buffer_retain(dst);
  memcpy(t->dst_lo, dst_lo, (size_t)ndim * sizeof *dst_lo);
  memcpy(t->dst_strides, dst_strides, (size_t)ndim * sizeof *dst_strides);
  memcpy(t->src_shape, src_shape, (size_t)ndim * sizeof *src_shape);
  return DLRUN_OK;
}

dlrun_status dlrun_copy_task_add(copy_task *t, dlrun_buffer *src, const int64_t *src_lo,
                                 const int64_t *lo, const int64_t *hi) {
  if (t->npieces == 0) {
    t->pieces = &t->one_piece;
    t->cap = 1;
  } else if (t->npieces == t->cap) {
    size_t cap = t->cap * 2;
    piece *grown = dlrun_malloc(cap * sizeof *grown);
    if (!grown) return dlrun_fail_oom_host(cap * sizeof *grown);
    memcpy(grown, t->pieces, t->npieces * sizeof *grown);
    if (t->pieces != &t->one_piece) dlrun_free(t->pieces);
    t->pieces = grown;
    t->cap = cap;
  }
  piece *pc = &t->pieces[t->npieces++];
  pc->src = src;
  dlrun_buffer_retain(src);
  memcpy(pc->src_lo, src_lo, (size_t)t->ndim * sizeof *src_lo);
  memcpy(pc->lo, lo, (size_t)t->ndim * sizeof *lo);
  memcpy(pc->hi, hi, (size_t)t->ndim * sizeof *hi);
  return DLRUN_OK;
}

size_t dlrun_copy_task_piece_count(const copy_task *t) { return t->npieces; }

dlrun_status dlrun_copy_tasks_enqueue(copy_task **tasks, size_t n) {
  dlrun_status st = DLRUN_OK;
  dlrun_workers *workers = NULL;
  for (size_t i = 0; i < n && !workers; i++)
    if (tasks[i]) workers = tasks[i]->dst->dev->rt->workers;
  if (!workers) return DLRUN_OK;
  dlrun_workers_hold(workers);
  for (size_t i = 0; i < n; i++) {
    copy_task *t = tasks[i];
    if (!t) continue;
    dlrun_event stack_deps[16], *deps = stack_deps;
    if (t->npieces > 16 && !(deps = dlrun_malloc(t->npieces * sizeof *deps))) {
      st = dlrun_fail_oom_host(t->npieces * sizeof *deps);
      break;
    }
    size_t ndeps = 0;
    for (size_t k = 0; k < t->npieces; k++)
      if (!dlrun_event_done(t->pieces[k].src->ready)) deps[ndeps++] = t->pieces[k].src->ready;
    dlrun_device *dst = t->dst->dev;
    uint64_t task_bytes = 0;
    for (size_t k = 0; k < t->npieces; k++) {
      uint64_t bytes = piece_bytes(t, &t->pieces[k]);
      task_bytes += bytes;
      if (t->pieces[k].src->dev != dst) {
        atomic_fetch_add(&t->pieces[k].src->dev->bytes_out, bytes);
        atomic_fetch_add(&dst->bytes_in, bytes);
      }
    }
    atomic_fetch_add(&dst->rt->bytes_queued, task_bytes);
    st = dlrun_stream_enqueue_after(&dst->stream, deps, ndeps, run_copy, t, &t->dst->ready);
    if (deps != stack_deps) dlrun_free(deps);
    if (st) break;
    tasks[i] = NULL; /* the queue owns it now */
    if (i % 64 == 63) { /* let the workers start on what is queued */
      dlrun_workers_release(workers);
      dlrun_workers_hold(workers);
    }
  }
  dlrun_workers_release(workers);
  return st;
}
