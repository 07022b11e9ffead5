/* device_put: lay an array out by another sharding, device to device.
 *
 * For each destination shard: if a source shard with the same index already
 * sits on that device and memory, it is shared; otherwise a buffer is
 * allocated and a plan of pieces covers its box, each piece taken from a
 * source replica (one on the destination device first, else spread over the
 * holders). All allocation happens before any work is queued, so a failure
 * leaves nothing behind. The plan is data (device/copy.h): the device layer
 * runs each destination's copies as one task on its device's queue, after
 * the source buffers they read are ready. */
#include <string.h>

#include "array_impl.h"
#include "core/alloc.h"
#include "core/status_impl.h"
#include "core/storage_impl.h"
#include "device/boxes.h"
#include "device/copy.h"
#include "device/streaming.h"
#include "distributed/distributed_impl.h"
#include "grid.h"
#include "storage_view.h"
#include "transfer_impl.h"

typedef struct planner {
  dlrun_array *src;
  dlrun_buffer **src_bufs;
  dlrun_device *dst_dev;
  dlrun_memory_kind dst_kind;
  size_t spread; /* rotates the choice among replicas */
  dlrun_copy_task *task;
  dlrun_status st;
  uint64_t bytes, local_bytes;
} planner;

/* Choose the replica for one piece and append it to the task. */
static int plan_piece(void *ctx, const int64_t *lo, const int64_t *hi, const size_t *holders,
                      size_t nholders) {
  planner *p = ctx;
  size_t pick = holders[p->spread++ % nholders];
  for (size_t h = 0; h < nholders; h++)
    if (p->src_bufs[holders[h]]->dev == p->dst_dev) {
      pick = holders[h];
      break;
    }
  dlrun_buffer *src = p->src_bufs[pick];
  int64_t src_lo[DLRUN_MAX_NDIM], hi_unused[DLRUN_MAX_NDIM];
  dlrun_sharding_shard_index(p->src->sharding, pick, p->src->ndim, p->src->dims, src_lo,
                             hi_unused);
  if ((p->st = dlrun_copy_task_add(p->task, src, src_lo, lo, hi))) return 1;
  uint64_t bytes = dlrun_dtype_get(p->src->dtype)->size;
  for (int d = 0; d < p->src->ndim; d++) bytes *= (uint64_t)(hi[d] - lo[d]);
  bool local = src->dev == p->dst_dev && src->kind == p->dst_kind;
  *(local ? &p->local_bytes : &p->bytes) += bytes;
  return 0;
}

/* Where the destination lies: an array of shape dims whose box [offset,
 * offset + src shape) the source holds (offset NULL: the source is the
 * whole array). Shards of other processes are skipped. */
typedef struct put_target {
  dlrun_sharding *sharding;
  const int64_t *dims;
  const int64_t *offset;
} put_target;

/* A put in the making: its source, destination, and what it counts. */
typedef struct put_plan {
  dlrun_array *src;
  dlrun_buffer **src_bufs; /* the copy plan's references */
  put_target to;
  bool may_share;
  size_t n;
  int64_t shard_dims[DLRUN_MAX_NDIM], dst_strides[DLRUN_MAX_NDIM];
  uint64_t shard_nbytes;
  uint64_t writes; /* the new destination buffers' bytes: whether copies stream */
  dlrun_transfer_stats stats;
} put_plan;

/* Destination i's index in the source's coordinates; whether it shares a
 * source shard (its position in *j). */
static bool destination(const put_plan *pl, size_t i, int64_t *lo, int64_t *hi, ptrdiff_t *j) {
  int nd = pl->src->ndim;
  dlrun_sharding_shard_index(pl->to.sharding, i, nd, pl->to.dims, lo, hi);
  for (int d = 0; pl->to.offset && d < nd; d++) {
    lo[d] -= pl->to.offset[d];
    hi[d] -= pl->to.offset[d];
  }
  *j = pl->may_share && !pl->to.offset ? dlrun_put_shareable(pl->src, pl->to.sharding, i, lo, hi)
                                       : -1;
  return *j >= 0;
}

/* Every destination buffer of this process, shared or new, before anything
 * is queued: the one step that can run out of device memory. */
static dlrun_status alloc_destinations(put_plan *pl, dlrun_buffer **bufs) {
  dlrun_sharding *dst = pl->to.sharding;
  int64_t lo[DLRUN_MAX_NDIM], hi[DLRUN_MAX_NDIM];
  for (size_t i = 0; i < pl->n; i++) {
    if (!dlrun_sharding_is_addressable(dst, i)) continue;
    ptrdiff_t j;
    if (destination(pl, i, lo, hi, &j)) {
      bufs[i] = pl->src_bufs[j];
      dlrun_buffer_retain(bufs[i]);
      pl->stats.shares++;
      continue;
    }
    dlrun_status st = dlrun_buffer_create(dlrun_sharding_device(dst, i),
                                          dlrun_sharding_memory_kind(dst), pl->shard_nbytes,
                                          &bufs[i]);
    if (st) return st;
    pl->writes += pl->shard_nbytes;
  }
  return DLRUN_OK;
}

/* One task per new destination, each queued as soon as it is planned, so
 * that the first copies run while the later ones are planned. */
static dlrun_status queue_copies(put_plan *pl, dlrun_buffer **bufs, const dlrun_grid *grid,
                                 dlrun_copy_plan *copies) {
  dlrun_sharding *dst = pl->to.sharding;
  int64_t lo[DLRUN_MAX_NDIM], hi[DLRUN_MAX_NDIM];
  dlrun_status st = DLRUN_OK;
  for (size_t i = 0; i < pl->n && !st && pl->shard_nbytes; i++) {
    ptrdiff_t j;
    if (!dlrun_sharding_is_addressable(dst, i) || destination(pl, i, lo, hi, &j)) continue;
    dlrun_copy_task *t;
    if ((st = dlrun_copy_plan_add_task(copies, bufs[i], lo, pl->dst_strides, &t))) break;
    planner p = {.src = pl->src, .src_bufs = pl->src_bufs, .dst_dev = bufs[i]->dev,
                 .dst_kind = dlrun_sharding_memory_kind(dst), .spread = i, .task = t};
    dlrun_grid_cover(grid, lo, hi, plan_piece, &p);
    if (!(st = p.st)) st = dlrun_copy_task_seal(t);
    if (!st) st = dlrun_copy_plan_queue(copies, t);
    pl->stats.bytes_moved += p.bytes;
    pl->stats.local_bytes += p.local_bytes;
    pl->stats.copies += dlrun_copy_task_piece_count(t);
  }
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

/* The one process holding every device of a and b, or -1 when they span
 * several. */
static int only_process(const dlrun_sharding *a, const dlrun_sharding *b) {
  int p = dlrun_device_process_index(dlrun_sharding_device(a, 0));
  const dlrun_sharding *both[2] = {a, b};
  for (size_t s = 0; s < 2; s++)
    for (size_t i = 0; i < dlrun_sharding_device_count(both[s]); i++)
      if (dlrun_device_process_index(dlrun_sharding_device(both[s], i)) != p) return -1;
  return p;
}

/* Plan, wrap and queue a put on this process; counts it. All allocation
 * but the copy tasks' own happens before anything is queued; a failure
 * after that waits for what was queued and frees it, so that it leaves
 * nothing behind. */
static dlrun_status put_run(dlrun_array *src, put_target to, bool may_share,
                            dlrun_transfer_stats *stats, dlrun_array **out) {
  put_plan pl = {.src = src, .to = to, .may_share = may_share,
                 .n = dlrun_sharding_device_count(to.sharding)};
  uint64_t nbytes;
  dlrun_array_layout(to.sharding, src->dtype, src->ndim, to.dims, pl.shard_dims, &nbytes,
                     &pl.shard_nbytes);
  dlrun_row_major_strides(src->ndim, pl.shard_dims, pl.dst_strides);
  pl.src_bufs = dlrun_malloc(src->nshards * sizeof *pl.src_bufs);
  if (!pl.src_bufs) return dlrun_fail_oom_host(src->nshards * sizeof *pl.src_bufs);
  dlrun_status st = dlrun_array_acquire_buffers(src, pl.src_bufs);
  if (st) {
    dlrun_free(pl.src_bufs);
    return st;
  }
  /* A source whose writing already failed raises here; one still being
   * written fails the copies that read it, and so the result. */
  for (size_t i = 0; i < src->nshards && !st; i++)
    if (pl.src_bufs[i]) st = dlrun_event_status(pl.src_bufs[i]->ready);
  if (st) {
    dlrun_buffers_release(pl.src_bufs, src->nshards);
    return st;
  }
  dlrun_copy_plan *copies; /* takes src_bufs, whatever happens */
  size_t esize = dlrun_dtype_get(src->dtype)->size;
  if ((st = dlrun_copy_plan_create(pl.n, src->ndim, esize, src->shard_dims, pl.src_bufs,
                                   src->nshards, &copies)))
    return st;
  dlrun_grid grid = {0};
  dlrun_buffer **bufs = dlrun_calloc(pl.n, sizeof *bufs);
  if (!bufs) st = dlrun_fail_oom_host(pl.n * sizeof *bufs);
  if (!st) st = dlrun_grid_build(src, &grid);
  if (!st) st = alloc_destinations(&pl, bufs);
  if (st) {
    dlrun_grid_free(&grid);
    dlrun_copy_plan_free(copies);
    dlrun_buffers_release(bufs, bufs ? pl.n : 0);
    return st;
  }
  /* The array takes the buffer references; the tasks take their own. */
  if ((st = dlrun_array_wrap(src->dtype, src->ndim, to.dims, to.sharding, bufs, out))) {
    dlrun_grid_free(&grid);
    dlrun_copy_plan_free(copies);
    return st;
  }
  dlrun_copy_plan_stream(copies, dlrun_copy_streams(pl.writes));
  dlrun_copy_plan_start(copies);
  st = queue_copies(&pl, bufs, &grid, copies);
  dlrun_grid_free(&grid);
  if (st) {
    dlrun_copy_plan_abort(copies);
    dlrun_array_release(*out);
    *out = NULL;
    return st;
  }
  if ((st = dlrun_copy_plan_finish(copies))) { /* it waited for what was queued */
    dlrun_array_release(*out);
    *out = NULL;
    return st;
  }
  dlrun_count_transfer(dlrun_sharding_device(to.sharding, 0)->rt, &pl.stats);
  *stats = pl.stats;
  return DLRUN_OK;
}

/* A packed array moves as the uint8 array of its storage (storage_view.h):
 * the same put on the views, whose result's buffers the packed result
 * takes. Every process of a job takes this path alike. */
static dlrun_status put_packed(dlrun_array *src, dlrun_sharding *dst, const dlrun_put_options *o,
                               dlrun_array **out) {
  dlrun_array *sv = NULL, *dv = NULL;
  dlrun_sharding *ds = NULL;
  int sndim;
  int64_t sdims[DLRUN_MAX_NDIM];
  dlrun_status st = dlrun_array_storage_view(src, &sv);
  if (!st) st = dlrun_storage_sharding(dst, src->ndim, src->dims, src->dtype, &sndim, sdims, &ds);
  if (!st) st = dlrun_device_put(sv, ds, o, &dv);
  if (!st) st = dlrun_array_from_storage_view(dv, src->dtype, src->ndim, src->dims, dst, out);
  if (!st && o->donate) dlrun_array_delete(src);
  if (dv) dlrun_array_release(dv);
  if (sv) dlrun_array_release(sv);
  if (ds) dlrun_sharding_release(ds);
  return st;
}

dlrun_status dlrun_device_put(dlrun_array *src, dlrun_sharding *dst,
                              const dlrun_put_options *options, dlrun_array **out) {
  DLRUN_NONNULL(out, "dlrun_device_put", "out");
  *out = NULL;
  dlrun_put_options o = options ? *options : (dlrun_put_options){0};
  dlrun_status st = validate_put(src, dst, &o);
  if (!st && dlrun_dtype_is_packed(src->dtype)) {
    if (o.may_alias != DLRUN_ALIAS_NEVER && !o.donate && dlrun_sharding_equal(src->sharding, dst)) {
      if (o.stats) *o.stats = (dlrun_transfer_stats){0};
      dlrun_array_retain(src);
      *out = src;
      return DLRUN_OK;
    }
    return put_packed(src, dst, &o, out);
  }
  /* Between processes: collective. Where both shardings are another single
   * process's, this one takes no part: its result holds no shard. */
  int owner = src && dst && dlrun_distributed_job_transport() ? only_process(src->sharding, dst)
                                                              : dlrun_process_index();
  if (owner < 0) return dlrun_device_put_global(src, dst, &o, st, out);
  if (st) return st;
  bool may_share = o.may_alias != DLRUN_ALIAS_NEVER;
  if (may_share && !o.donate && dlrun_sharding_equal(src->sharding, dst)) {
    if (o.stats) *o.stats = (dlrun_transfer_stats){0};
    dlrun_array_retain(src);
    *out = src;
    return DLRUN_OK;
  }
  if (owner != dlrun_process_index()) {
    if (o.stats) *o.stats = (dlrun_transfer_stats){0};
    if ((st = dlrun_array_alloc(dst, src->dtype, src->ndim, src->dims, out))) return st;
    if (o.donate) dlrun_array_delete(src);
    return DLRUN_OK;
  }
  dlrun_transfer_stats stats;
  put_target to = {.sharding = dst, .dims = src->dims};
  if ((st = put_run(src, to, may_share || o.donate, &stats, out))) return st;
  if (o.stats) *o.stats = stats;
  if (o.donate) dlrun_array_delete(src);
  return DLRUN_OK;
}

/* put_slab of a packed array: the same on the storage views, the slab's
 * box mapped to the global storage's bytes (or the rule's ValueError). */
static dlrun_status put_slab_packed(dlrun_array *src, dlrun_sharding *dst, const int64_t *dims,
                                    const int64_t *offset, dlrun_array **out) {
  int n = src->ndim, sndim;
  int64_t shard_dims[DLRUN_MAX_NDIM], sdims[DLRUN_MAX_NDIM], hi[DLRUN_MAX_NDIM];
  int64_t slo[DLRUN_MAX_NDIM], shi[DLRUN_MAX_NDIM];
  uint64_t nbytes, shard_nbytes;
  dlrun_storage g;
  dlrun_status st = dlrun_array_layout(dst, src->dtype, n, dims, shard_dims, &nbytes,
                                       &shard_nbytes);
  if (!st) st = dlrun_storage_of(dlrun_dtype_get(src->dtype), n, dims, &g);
  for (int d = 0; d < n; d++) hi[d] = offset[d] + src->dims[d];
  if (!st) st = dlrun_storage_box(&g, offset, hi, slo, shi);
  if (st) return st;
  dlrun_array *sv = NULL, *dv = NULL;
  dlrun_sharding *ds = NULL;
  st = dlrun_array_storage_view(src, &sv);
  if (!st) st = dlrun_storage_sharding(dst, n, dims, src->dtype, &sndim, sdims, &ds);
  if (!st) {
    dlrun_transfer_stats stats;
    put_target to = {.sharding = ds, .dims = sdims, .offset = slo};
    st = put_run(sv, to, false, &stats, &dv);
  }
  if (!st) st = dlrun_array_from_storage_view(dv, src->dtype, n, dims, dst, out);
  if (dv) dlrun_array_release(dv);
  if (sv) dlrun_array_release(sv);
  if (ds) dlrun_sharding_release(ds);
  return st;
}

dlrun_status dlrun_put_slab(dlrun_array *src, dlrun_sharding *dst, const int64_t *dims,
                            const int64_t *offset, dlrun_array **out) {
  if (dlrun_dtype_is_packed(src->dtype)) return put_slab_packed(src, dst, dims, offset, out);
  dlrun_transfer_stats stats;
  put_target to = {.sharding = dst, .dims = dims, .offset = offset};
  return put_run(src, to, false, &stats, out);
}
