/* What device_put on one process and between processes share
 * (transfer_impl.h): which source shard a destination shard may be, and
 * the runtime's transfer counts. */
#include <stdatomic.h>

#include "array_impl.h"
#include "device/device_impl.h"
#include "transfer_impl.h"

ptrdiff_t dlrun_put_shareable(const dlrun_array *src, const dlrun_sharding *dst, size_t i,
                              const int64_t *lo, const int64_t *hi) {
  if (dlrun_sharding_memory_kind(dst) != dlrun_sharding_memory_kind(src->sharding)) return -1;
  ptrdiff_t j = dlrun_sharding_device_position(src->sharding, dlrun_sharding_device(dst, i));
  if (j < 0) return -1;
  int64_t slo[DLRUN_MAX_NDIM], shi[DLRUN_MAX_NDIM];
  dlrun_sharding_shard_index(src->sharding, (size_t)j, src->ndim, src->dims, slo, shi);
  for (int d = 0; d < src->ndim; d++)
    if (slo[d] != lo[d] || shi[d] != hi[d]) return -1;
  return j;
}

void dlrun_count_transfer(dlrun_runtime *rt, const dlrun_transfer_stats *s) {
  atomic_fetch_add(&rt->bytes_moved, s->bytes_moved);
  atomic_fetch_add(&rt->local_bytes, s->local_bytes);
  atomic_fetch_add(&rt->copies, s->copies);
  atomic_fetch_add(&rt->shares, s->shares);
  atomic_fetch_add(&rt->bytes_sent, s->bytes_sent);
  atomic_fetch_add(&rt->bytes_received, s->bytes_received);
  atomic_fetch_add(&rt->ipc_bytes, s->ipc_bytes);
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
  out->bytes_sent = atomic_load(&rt->bytes_sent);
  out->bytes_received = atomic_load(&rt->bytes_received);
  out->ipc_bytes = atomic_load(&rt->ipc_bytes);
}

void dlrun_transfer_stats_reset(dlrun_runtime *rt) {
  if (!rt) return;
  atomic_store(&rt->bytes_moved, 0);
  atomic_store(&rt->local_bytes, 0);
  atomic_store(&rt->copies, 0);
  atomic_store(&rt->shares, 0);
  atomic_store(&rt->bytes_sent, 0);
  atomic_store(&rt->bytes_received, 0);
  atomic_store(&rt->ipc_bytes, 0);
}
