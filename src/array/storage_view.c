/* Packed arrays seen as bytes: a packed (sub-byte) array and a uint8 array
 * of its storage shape (core/storage_impl.h) share the same buffers, shard
 * for shard, once its sharding has been checked (dlrun_array_layout): every
 * shard is a box of whole bytes of the storage, laid out as the packed run
 * of its own elements. Transfers, reads and copies from host memory run on
 * the uint8 view, so that the byte-moving code never meets half a byte. */
#include <string.h>

#include "array_impl.h"
#include "core/alloc.h"
#include "core/status_impl.h"
#include "core/storage_impl.h"
#include "storage_view.h"

bool dlrun_dtype_is_packed(dlrun_dtype dtype) {
  const dlrun_dtype_info *info = dlrun_dtype_get(dtype);
  return info && info->dl_bits < 8;
}

dlrun_status dlrun_storage_sharding(dlrun_sharding *s, int ndim, const int64_t *dims,
                                    dlrun_dtype dtype, int *sndim, int64_t *sdims,
                                    dlrun_sharding **out) {
  dlrun_storage g;
  dlrun_status st = dlrun_storage_of(dlrun_dtype_get(dtype), ndim, dims, &g);
  if (st) return st;
  *sndim = g.sndim;
  memcpy(sdims, g.sdims, (size_t)g.sndim * sizeof *sdims);
  if (!dlrun_sharding_is_named(s)) {
    dlrun_sharding_retain(s);
    *out = s;
    return DLRUN_OK;
  }
  /* Dims past the split are never divided (checked): the spec's entries for
   * the storage's dims are the array's first ones. */
  dlrun_partition_spec spec = *dlrun_sharding_spec(s);
  if (spec.nentries > g.sndim) spec.nentries = g.sndim;
  return dlrun_named_sharding_create(dlrun_sharding_mesh(s), &spec,
                                     dlrun_sharding_memory_kind(s), out);
}

dlrun_status dlrun_array_storage_view(dlrun_array *a, dlrun_array **out) {
  int sndim;
  int64_t sdims[DLRUN_MAX_NDIM];
  dlrun_sharding *ss;
  dlrun_status st = dlrun_storage_sharding(a->sharding, a->ndim, a->dims, a->dtype, &sndim,
                                           sdims, &ss);
  if (st) return st;
  dlrun_buffer **bufs = dlrun_calloc(a->nshards ? a->nshards : 1, sizeof *bufs);
  if (!bufs) {
    dlrun_sharding_release(ss);
    return dlrun_fail_oom_host(a->nshards * sizeof *bufs);
  }
  if ((st = dlrun_array_acquire_buffers(a, bufs))) {
    dlrun_free(bufs);
    dlrun_sharding_release(ss);
    return st;
  }
  st = dlrun_array_wrap(DLRUN_UINT8, sndim, sdims, ss, bufs, out);
  dlrun_sharding_release(ss);
  return st;
}

dlrun_status dlrun_array_from_storage_view(dlrun_array *v, dlrun_dtype dtype, int ndim,
                                           const int64_t *dims, dlrun_sharding *s,
                                           dlrun_array **out) {
  dlrun_buffer **bufs = dlrun_calloc(v->nshards ? v->nshards : 1, sizeof *bufs);
  if (!bufs) return dlrun_fail_oom_host(v->nshards * sizeof *bufs);
  dlrun_status st = dlrun_array_acquire_buffers(v, bufs);
  if (st) {
    dlrun_free(bufs);
    return st;
  }
  return dlrun_array_wrap(dtype, ndim, dims, s, bufs, out);
}
