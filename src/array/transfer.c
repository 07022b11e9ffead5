/* device_put: lay an array out by another sharding, device to device.
 *
 * For each destination shard: if a source shard with the same index already
 * sits on that device and memory, it is shared; otherwise a buffer is
 * allocated and a plan of pieces covers its box, each piece taken from a
 * source replica (one on the destination device first, else spread over the
 * holders). All allocation happens before any work is queued, so a failure
 * leaves nothing behind. Each destination's copies then run as one task on
 * its device's stream, after the source buffers they read are ready. */
#include <string.h>

#include "array_impl.h"
#include "core/alloc.h"
#include "core/status_impl.h"
#include "core/trace_impl.h"
#include "grid.h"

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
typedef struct copy_task {
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
} copy_task;

static void copy_task_free(copy_task *t) {
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
static dlrun_status make_units(copy_task *t) {
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
  dlrun_workers_parallel(t->dst->dev->rt->workers, t->nunits, copy_one_unit, t);
  copy_task_free(t);
}

typedef struct planner {
  dlrun_array *src;
  dlrun_buffer **src_bufs;
  dlrun_device *dst_dev;
  size_t spread; /* rotates the choice among replicas */
  copy_task *task;
  dlrun_status st;
  uint64_t bytes, local_bytes;
} planner;

/* Choose the replica for one piece and append it to the task. */
static int plan_piece(void *ctx, const int64_t *lo, const int64_t *hi, const size_t *holders,
                      size_t nholders) {
  planner *p = ctx;
  copy_task *t = p->task;
  size_t pick = holders[p->spread++ % nholders];
  for (size_t h = 0; h < nholders; h++)
    if (p->src_bufs[holders[h]]->dev == p->dst_dev) {
      pick = holders[h];
      break;
    }
  if (t->npieces == 0) {
    t->pieces = &t->one_piece;
    t->cap = 1;
  } else if (t->npieces == t->cap) {
    size_t cap = t->cap * 2;
    piece *grown = dlrun_malloc(cap * sizeof *grown);
    if (!grown) {
      p->st = dlrun_fail_oom_host(cap * sizeof *grown);
      return 1;
    }
    memcpy(grown, t->pieces, t->npieces * sizeof *grown);
    if (t->pieces != &t->one_piece) dlrun_free(t->pieces);
    t->pieces = grown;
    t->cap = cap;
  }
  piece *pc = &t->pieces[t->npieces++];
  pc->src = p->src_bufs[pick];
  dlrun_buffer_retain(pc->src);
  int64_t hi_unused[DLRUN_MAX_NDIM];
  dlrun_sharding_shard_index(p->src->sharding, pick, p->src->ndim, p->src->dims, pc->src_lo,
                             hi_unused);
  for (int d = 0; d < t->ndim; d++) {
    pc->lo[d] = lo[d];
    pc->hi[d] = hi[d];
  }
  uint64_t bytes = piece_bytes(t, pc);
  bool local = pc->src->dev == p->dst_dev && pc->src->kind == t->dst->kind;
  *(local ? &p->local_bytes : &p->bytes) += bytes;
  return 0;
}

/* The source shard to share for destination i, or -1: the same device,
 * memory kind and index. */
static ptrdiff_t shareable(const dlrun_array *src, dlrun_buffer **src_bufs,
                           const dlrun_sharding *dst, size_t i, const int64_t *lo,
                           const int64_t *hi) {
  if (dlrun_sharding_memory_kind(dst) != dlrun_sharding_memory_kind(src->sharding)) return -1;
  ptrdiff_t j = dlrun_sharding_device_position(src->sharding, dlrun_sharding_device(dst, i));
  if (j < 0) return -1;
  int64_t slo[DLRUN_MAX_NDIM], shi[DLRUN_MAX_NDIM];
  dlrun_sharding_shard_index(src->sharding, (size_t)j, src->ndim, src->dims, slo, shi);
  for (int d = 0; d < src->ndim; d++)
    if (slo[d] != lo[d] || shi[d] != hi[d]) return -1;
  (void)src_bufs;
  return j;
}

/* Everything a put needs, allocated up front. */
typedef struct put_plan {
  size_t n;
  dlrun_buffer **dst_bufs; /* shared (retained) or fresh */
  copy_task **tasks;       /* NULL where shared or empty */
  dlrun_transfer_stats stats;
} put_plan;

static void plan_free(put_plan *pl) {
  for (size_t i = 0; i < pl->n; i++)
    if (pl->tasks && pl->tasks[i]) copy_task_free(pl->tasks[i]);
  dlrun_free(pl->tasks);
  dlrun_buffers_release(pl->dst_bufs, pl->n);
}

static dlrun_status plan_put(dlrun_array *src, dlrun_buffer **src_bufs, dlrun_sharding *dst,
                             bool may_share, put_plan *pl) {
  memset(pl, 0, sizeof *pl);
  pl->n = dlrun_sharding_device_count(dst);
  pl->dst_bufs = dlrun_calloc(pl->n, sizeof *pl->dst_bufs);
  pl->tasks = dlrun_calloc(pl->n, sizeof *pl->tasks);
  if (!pl->dst_bufs || !pl->tasks) {
    plan_free(pl);
    return dlrun_fail_oom_host(pl->n * 2 * sizeof(void *));
  }
  dlrun_grid grid;
  dlrun_status st = dlrun_grid_build(src, &grid);
  if (st) {
    plan_free(pl);
    return st;
  }
  int64_t shard_dims[DLRUN_MAX_NDIM], lo[DLRUN_MAX_NDIM], hi[DLRUN_MAX_NDIM];
  uint64_t nbytes, shard_nbytes;
  dlrun_array_layout(dst, src->dtype, src->ndim, src->dims, shard_dims, &nbytes, &shard_nbytes);
  size_t esize = dlrun_dtype_get(src->dtype)->size;
  for (size_t i = 0; i < pl->n && !st; i++) {
    dlrun_sharding_shard_index(dst, i, src->ndim, src->dims, lo, hi);
    ptrdiff_t j = may_share ? shareable(src, src_bufs, dst, i, lo, hi) : -1;
    if (j >= 0) {
      pl->dst_bufs[i] = src_bufs[j];
      dlrun_buffer_retain(src_bufs[j]);
      pl->stats.shares++;
      continue;
    }
    dlrun_device *dev = dlrun_sharding_device(dst, i);
    if ((st = dlrun_buffer_create(dev, dlrun_sharding_memory_kind(dst), shard_nbytes,
                                  &pl->dst_bufs[i])))
      break;
    if (shard_nbytes == 0) continue;
    copy_task *t = dlrun_calloc(1, sizeof *t);
    if (!t) {
      st = dlrun_fail_oom_host(sizeof *t);
      break;
    }
    pl->tasks[i] = t;
    *t = (copy_task){.dst = pl->dst_bufs[i], .ndim = src->ndim, .esize = esize};
    dlrun_buffer_retain(t->dst);
    memcpy(t->dst_lo, lo, sizeof lo);
    dlrun_row_major_strides(src->ndim, shard_dims, t->dst_strides);
    memcpy(t->src_shape, src->shard_dims, sizeof src->shard_dims);
    planner p = {.src = src, .src_bufs = src_bufs, .dst_dev = dev, .spread = i, .task = t};
    dlrun_grid_cover(&grid, lo, hi, plan_piece, &p);
    st = p.st;
    if (!st) st = make_units(t);
    pl->stats.bytes_moved += p.bytes;
    pl->stats.local_bytes += p.local_bytes;
    pl->stats.copies += t->npieces;
  }
  dlrun_grid_free(&grid);
  if (st) plan_free(pl);
  return st;
}

/* Queue each task after the sources it reads. On failure the tasks not yet
 * queued are freed; queued ones finish harmlessly into buffers that are then
 * dropped. */
static dlrun_status queue_plan(put_plan *pl, dlrun_workers *workers) {
  dlrun_status st = DLRUN_OK;
  dlrun_workers_hold(workers);
  for (size_t i = 0; i < pl->n; i++) {
    copy_task *t = pl->tasks[i];
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
    pl->tasks[i] = NULL; /* the queue owns it now */
    if (i % 64 == 63) { /* let the workers start on what is queued */
      dlrun_workers_release(workers);
      dlrun_workers_hold(workers);
    }
  }
  dlrun_workers_release(workers);
  return st;
}

static dlrun_status validate_put(dlrun_array *src, dlrun_sharding *dst,
                                 const dlrun_put_options *o) {
  if (!src || !dst) return dlrun_fail(DLRUN_ERR_VALUE, "device_put needs an array and a sharding");
  if ((int)o->may_alias < DLRUN_ALIAS_DEFAULT || o->may_alias > DLRUN_ALIAS_NEVER)
    return dlrun_fail(DLRUN_ERR_VALUE, "device_put: invalid may_alias mode %d", (int)o->may_alias);
  if (o->donate && o->may_alias == DLRUN_ALIAS_ALLOW)
    return dlrun_fail(DLRUN_ERR_VALUE, "may_alias and donate cannot be True at the same time.");
  dlrun_status st = dlrun_array_check_live(src);
  if (st) return st;
  if (dlrun_sharding_device(dst, 0)->rt != dlrun_sharding_device(src->sharding, 0)->rt)
    return dlrun_fail(DLRUN_ERR_VALUE, "device_put between arrays of different runtimes");
  int64_t shard_dims[DLRUN_MAX_NDIM];
  uint64_t nbytes, shard_nbytes;
  return dlrun_array_layout(dst, src->dtype, src->ndim, src->dims, shard_dims, &nbytes,
                            &shard_nbytes);
}

dlrun_status dlrun_device_put(dlrun_array *src, dlrun_sharding *dst,
                              const dlrun_put_options *options, dlrun_array **out) {
  DLRUN_NONNULL(out, "dlrun_device_put", "out");
  *out = NULL;
  dlrun_put_options o = options ? *options : (dlrun_put_options){0};
  dlrun_status st = validate_put(src, dst, &o);
  if (st) return st;
  bool may_share = o.may_alias != DLRUN_ALIAS_NEVER;
  if (may_share && !o.donate && dlrun_sharding_equal(src->sharding, dst)) {
    if (o.stats) *o.stats = (dlrun_transfer_stats){0};
    dlrun_array_retain(src);
    *out = src;
    return DLRUN_OK;
  }
  dlrun_buffer **src_bufs = dlrun_malloc(src->nshards * sizeof *src_bufs);
  if (!src_bufs) return dlrun_fail_oom_host(src->nshards * sizeof *src_bufs);
  if ((st = dlrun_array_acquire_buffers(src, src_bufs))) {
    dlrun_free(src_bufs);
    return st;
  }
  put_plan pl;
  st = plan_put(src, src_bufs, dst, may_share || o.donate, &pl);
  dlrun_buffers_release(src_bufs, src->nshards);
  if (st) return st;
  /* The array takes the buffer references; the plan keeps the tasks. */
  dlrun_buffer **bufs = pl.dst_bufs;
  pl.dst_bufs = NULL;
  if ((st = dlrun_array_wrap(src->dtype, src->ndim, src->dims, dst, bufs, out))) {
    plan_free(&pl);
    return st;
  }
  if ((st = queue_plan(&pl, dlrun_sharding_device(dst, 0)->rt->workers))) {
    plan_free(&pl);
    dlrun_array_release(*out);
    *out = NULL;
    return st;
  }
  dlrun_count_transfer(dlrun_sharding_device(dst, 0)->rt, &pl.stats);
  if (o.stats) *o.stats = pl.stats;
  plan_free(&pl);
  if (o.donate) dlrun_array_delete(src);
  return DLRUN_OK;
}

void dlrun_count_transfer(dlrun_runtime *rt, const dlrun_transfer_stats *s) {
  atomic_fetch_add(&rt->bytes_moved, s->bytes_moved);
  atomic_fetch_add(&rt->local_bytes, s->local_bytes);
  atomic_fetch_add(&rt->copies, s->copies);
  atomic_fetch_add(&rt->shares, s->shares);
}

void dlrun_transfer_stats_get(dlrun_runtime *rt, dlrun_transfer_stats *out) {
  if (!out) return;
  if (!rt) {
    *out = (dlrun_transfer_stats){0};
    return;
  }
  out->bytes_moved = atomic_load(&rt->bytes_moved);
  out->local_bytes = atomic_load(&rt->local_bytes);
  out->copies = atomic_load(&rt->copies);
  out->shares = atomic_load(&rt->shares);
}

void dlrun_transfer_stats_reset(dlrun_runtime *rt) {
  if (!rt) return;
  atomic_store(&rt->bytes_moved, 0);
  atomic_store(&rt->local_bytes, 0);
  atomic_store(&rt->copies, 0);
  atomic_store(&rt->shares, 0);
}
