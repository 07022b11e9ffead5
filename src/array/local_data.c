/* make_array_from_process_local_data: a global array from each process's
 * slab of it. The slab is the box that this process's shards cover; they
 * must tile it exactly (a process holding blocks 0 and 2 of a dimension but
 * not 1 has no one slab to pass). */
#include <string.h>

#include "array_impl.h"
#include "core/alloc.h"
#include "core/status_impl.h"
#include "transfer_impl.h"

#define FN "make_array_from_process_local_data"

/* The blocks this process holds: per dimension the first block and how
 * many (span); `held` is how many distinct blocks, `nlocal` the local
 * shards. Blocks are numbered on a probe shape of one element per block. */
typedef struct slab {
  int64_t parts[DLRUN_MAX_NDIM];
  int64_t first[DLRUN_MAX_NDIM];
  int64_t span[DLRUN_MAX_NDIM];
  size_t held, nlocal;
} slab;

static dlrun_status find_slab(const dlrun_sharding *s, int ndim, slab *sl) {
  memset(sl, 0, sizeof *sl);
  size_t nblocks = 1;
  for (int d = 0; d < ndim; d++) {
    sl->parts[d] = dlrun_sharding_partitions(s, d);
    nblocks *= (size_t)sl->parts[d];
  }
  dlrun_status st = dlrun_sharding_check_shape(s, ndim, sl->parts);
  if (st) return st;
  bool *seen = dlrun_calloc(nblocks, 1);
  if (!seen) return dlrun_fail_oom_host(nblocks);
  int64_t last[DLRUN_MAX_NDIM], lo[DLRUN_MAX_NDIM], hi[DLRUN_MAX_NDIM];
  for (size_t i = 0; i < dlrun_sharding_device_count(s); i++) {
    if (!dlrun_sharding_is_addressable(s, i)) continue;
    dlrun_sharding_shard_index(s, i, ndim, sl->parts, lo, hi);
    size_t block = 0;
    for (int d = 0; d < ndim; d++) {
      block = block * (size_t)sl->parts[d] + (size_t)lo[d];
      if (!sl->nlocal || lo[d] < sl->first[d]) sl->first[d] = lo[d];
      if (!sl->nlocal || lo[d] > last[d]) last[d] = lo[d];
    }
    sl->held += !seen[block];
    seen[block] = true;
    sl->nlocal++;
  }
  dlrun_free(seen);
  size_t box = 1;
  for (int d = 0; d < ndim; d++) {
    sl->span[d] = sl->nlocal ? last[d] - sl->first[d] + 1 : 0;
    box *= (size_t)sl->span[d];
  }
  if (sl->nlocal && box != sl->held)
    return dlrun_fail(DLRUN_ERR_VALUE,
                      FN ": this process's shards of the sharding do not form one box of the "
                      "global array (%zu distinct blocks in a span of %zu); each process must "
                      "hold one slab, such as a run of rows",
                      sl->held, box);
  return DLRUN_OK;
}

/* The global shape: given (checked against the sharding), or inferred. */
static dlrun_status global_shape(const dlrun_sharding *s, const dlrun_array *local,
                                 const slab *sl, int ndim, const int64_t *dims, int64_t *g) {
  char a[256], b[256];
  int n = local->ndim;
  if (dims) {
    if (ndim != n)
      return dlrun_fail(DLRUN_ERR_VALUE,
                        FN ": global_shape %s has %d dimensions, but local_data has %d (shape %s)",
                        dlrun_tuple_string(dims, ndim < 0 ? 0 : ndim, a, sizeof a), ndim, n,
                        dlrun_tuple_string(local->dims, n, b, sizeof b));
    memcpy(g, dims, (size_t)n * sizeof *g);
    return dlrun_sharding_check_shape(s, n, g);
  }
  if (!sl->nlocal)
    return dlrun_fail(DLRUN_ERR_VALUE,
                      FN ": this process holds no shard of the sharding, so the global shape "
                      "cannot be inferred from local_data; pass global_shape");
  for (int d = 0; d < n; d++) {
    if (local->dims[d] % sl->span[d])
      return dlrun_fail(DLRUN_ERR_VALUE,
                        FN ": cannot infer the global shape: dimension %d of local_data (shape "
                        "%s) does not divide among the %lld shards this process holds along "
                        "it; pass global_shape",
                        d, dlrun_tuple_string(local->dims, n, a, sizeof a),
                        (long long)sl->span[d]);
    g[d] = local->dims[d] / sl->span[d] * sl->parts[d];
  }
  return DLRUN_OK;
}

dlrun_status dlrun_array_from_process_local_data(dlrun_sharding *sharding, dlrun_array *local,
                                                 int ndim, const int64_t *dims,
                                                 dlrun_array **out) {
  DLRUN_NONNULL(out, FN, "out");
  *out = NULL;
  DLRUN_NONNULL(sharding, FN, "sharding");
  DLRUN_NONNULL(local, FN, "local_data");
  dlrun_status st = dlrun_array_check_live(local);
  if (st) return st;
  if (!dlrun_sharding_is_fully_addressable(local->sharding))
    return dlrun_fail(DLRUN_ERR_VALUE,
                      FN ": local_data must be this process's own data, but it spans other "
                      "processes' devices");
  if (dlrun_sharding_device(sharding, 0)->rt != dlrun_sharding_device(local->sharding, 0)->rt)
    return dlrun_fail(DLRUN_ERR_VALUE, FN ": local_data and the sharding belong to different runtimes");
  slab sl;
  if ((st = find_slab(sharding, local->ndim, &sl))) return st;
  int64_t g[DLRUN_MAX_NDIM], offset[DLRUN_MAX_NDIM], shape[DLRUN_MAX_NDIM];
  if ((st = global_shape(sharding, local, &sl, ndim, dims, g))) return st;
  int n = local->ndim;
  if (!sl.nlocal) return dlrun_array_alloc(sharding, local->dtype, n, g, out);
  bool same = true;
  for (int d = 0; d < n; d++) {
    int64_t block = g[d] / sl.parts[d];
    offset[d] = sl.first[d] * block;
    shape[d] = sl.span[d] * block;
    same &= shape[d] == local->dims[d];
  }
  if (!same) {
    char a[256], b[256], c[256], e[256], text[768];
    return dlrun_fail(DLRUN_ERR_VALUE,
                      FN ": local_data has shape %s, but this process's shards of the global "
                      "shape %s under %s cover a slab of shape %s at %s",
                      dlrun_tuple_string(local->dims, n, a, sizeof a),
                      dlrun_tuple_string(g, n, b, sizeof b),
                      dlrun_sharding_describe(sharding, text, sizeof text),
                      dlrun_tuple_string(shape, n, c, sizeof c),
                      dlrun_tuple_string(offset, n, e, sizeof e));
  }
  return dlrun_put_slab(local, sharding, g, offset, out);
}
