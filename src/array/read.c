/* Reading an array's data into host memory, gathering from its shards. A
 * flat range of elements is split into at most 2*ndim+1 boxes whose
 * row-major orders follow each other; each box is covered by pieces of the
 * shards that hold it. In a job, only this process's shards are read (no
 * collective): the array is readable when they cover it, as JAX reads a
 * replicated global array from the local replica. */
#include <string.h>

#include "array_impl.h"
#include "core/alloc.h"
#include "core/status_impl.h"
#include "device/boxes.h"
#include "device/copy_route.h"
#include "grid.h"
#include "storage_view.h"

typedef struct read_ctx {
  const dlrun_array *a;
  dlrun_buffer **bufs;
  size_t esize;
  char *dst;                  /* where the current box starts */
  dlrun_status st;            /* the first failure (a device's): the rest is skipped */
  int64_t box_lo[DLRUN_MAX_NDIM], box_strides[DLRUN_MAX_NDIM];
  int64_t shard_lo[DLRUN_MAX_NDIM], shard_hi[DLRUN_MAX_NDIM];
} read_ctx;

/* The first of a block's holders on this process, or `n` when none is. */
static size_t local_holder(const dlrun_sharding *s, const size_t *holders, size_t n) {
  for (size_t k = 0; k < n; k++)
    if (dlrun_sharding_is_addressable(s, holders[k])) return k;
  return n;
}

/* Whether every block of the grid has a holder on this process. */
static bool covers(const dlrun_array *a, const dlrun_grid *g) {
  for (size_t b = 0; b < g->nblocks; b++) {
    size_t n = g->first[b + 1] - g->first[b];
    if (local_holder(a->sharding, g->holder + g->first[b], n) == n) return false;
  }
  return true;
}

bool dlrun_array_has_full_value(const dlrun_array *a) {
  if (!a) return false;
  if (dlrun_sharding_is_fully_addressable(a->sharding)) return true;
  dlrun_grid g;
  if (dlrun_grid_build(a, &g)) return false;
  bool all = covers(a, &g);
  dlrun_grid_free(&g);
  return all;
}

static int read_piece(void *p, const int64_t *lo, const int64_t *hi, const size_t *holders,
                      size_t nholders) {
  read_ctx *c = p;
  size_t i = holders[local_holder(c->a->sharding, holders, nholders)]; /* covers() */
  dlrun_buffer *b = c->bufs[i];
  if ((c->st = dlrun_event_wait(b->ready))) return 1;
  dlrun_sharding_shard_index(c->a->sharding, i, c->a->ndim, c->a->dims, c->shard_lo, c->shard_hi);
  int64_t scratch[DLRUN_MAX_NDIM];
  const int64_t *strides = dlrun_buffer_layout(b, c->a->ndim, c->a->shard_dims, scratch);
  dlrun_box_end dst = dlrun_host_end(c->dst, c->box_lo, c->box_strides);
  dlrun_box_end src = dlrun_buffer_end(b, c->shard_lo, strides);
  c->st = dlrun_copy_sync(c->esize, c->a->ndim, lo, hi, &dst, &src);
  return c->st != DLRUN_OK;
}

/* Copy the box [lo, hi) to c->dst (row-major) and advance c->dst. */
static void read_box(read_ctx *c, const dlrun_grid *g, const int64_t *lo, const int64_t *hi) {
  if (c->st) return;
  int64_t count = 1, shape[DLRUN_MAX_NDIM];
  for (int d = 0; d < c->a->ndim; d++) {
    c->box_lo[d] = lo[d];
    shape[d] = hi[d] - lo[d];
    count *= shape[d];
  }
  dlrun_row_major_strides(c->a->ndim, shape, c->box_strides);
  dlrun_grid_cover(g, lo, hi, read_piece, c);
  c->dst += count * (int64_t)c->esize;
}

/* Elements [s, e) of the sub-array below the fixed leading coordinates
 * lo[0..depth) as boxes in order: a partial first row, whole rows, a
 * partial last row, recursing into the partial rows. */
static void read_range(read_ctx *c, const dlrun_grid *g, int depth, int64_t *lo, int64_t *hi,
                       int64_t s, int64_t e) {
  const int64_t *dims = c->a->dims;
  int ndim = c->a->ndim;
  if (s >= e || c->st) return;
  if (depth == ndim) {
    read_box(c, g, lo, hi);
    return;
  }
  int64_t inner = 1;
  for (int d = depth + 1; d < ndim; d++) inner *= dims[d];
  int64_t r0 = s / inner, r1 = e / inner; /* rows [r0, r1) may be whole */
  for (int d = depth + 1; d < ndim; d++) {
    lo[d] = 0;
    hi[d] = dims[d];
  }
  if (s % inner) { /* partial first row */
    lo[depth] = r0;
    hi[depth] = r0 + 1;
    int64_t row_end = (r0 + 1) * inner < e ? (r0 + 1) * inner : e;
    read_range(c, g, depth + 1, lo, hi, s - r0 * inner, row_end - r0 * inner);
    if (row_end == e) return;
    r0++;
    for (int d = depth + 1; d < ndim; d++) {
      lo[d] = 0;
      hi[d] = dims[d];
    }
  }
  if (r1 > r0) { /* whole rows */
    lo[depth] = r0;
    hi[depth] = r1;
    read_box(c, g, lo, hi);
  }
  if (e % inner && r1 * inner >= s) { /* partial last row */
    lo[depth] = r1;
    hi[depth] = r1 + 1;
    read_range(c, g, depth + 1, lo, hi, 0, e - r1 * inner);
  }
}

dlrun_status dlrun_array_read(dlrun_array *a, uint64_t offset, uint64_t nbytes, void *dst) {
  DLRUN_NONNULL(a, "dlrun_array_read", "array");
  if (nbytes) DLRUN_NONNULL(dst, "dlrun_array_read", "dst");
  if (dlrun_dtype_is_packed(a->dtype)) { /* the bytes of its storage view */
    dlrun_array *v;
    dlrun_status st = dlrun_array_storage_view(a, &v);
    if (st) return st;
    st = dlrun_array_read(v, offset, nbytes, dst);
    dlrun_array_release(v);
    return st;
  }
  size_t esize = dlrun_dtype_get(a->dtype)->size;
  if (offset > a->nbytes || nbytes > a->nbytes - offset || offset % esize || nbytes % esize)
    return dlrun_fail(DLRUN_ERR_VALUE,
                      "read of %llu bytes at offset %llu is outside the array's %llu bytes or "
                      "not on element boundaries",
                      (unsigned long long)nbytes, (unsigned long long)offset,
                      (unsigned long long)a->nbytes);
  dlrun_status st = dlrun_array_check_live(a);
  dlrun_grid g;
  if (st || (st = dlrun_grid_build(a, &g))) return st;
  if (!covers(a, &g)) st = dlrun_array_check_addressable(a); /* the fetch error */
  read_ctx c = {.a = a, .esize = esize, .dst = dst};
  if (!st && nbytes) {
    c.bufs = dlrun_malloc(a->nshards * sizeof *c.bufs);
    if (!c.bufs) st = dlrun_fail_oom_host(a->nshards * sizeof *c.bufs);
    else if ((st = dlrun_array_acquire_buffers(a, c.bufs))) dlrun_free(c.bufs);
  }
  if (!st && nbytes) {
    int64_t lo[DLRUN_MAX_NDIM], hi[DLRUN_MAX_NDIM];
    read_range(&c, &g, 0, lo, hi, (int64_t)(offset / esize), (int64_t)((offset + nbytes) / esize));
    dlrun_buffers_release(c.bufs, a->nshards);
    st = c.st;
  }
  dlrun_grid_free(&g);
  return st;
}
