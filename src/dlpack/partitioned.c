/* The `__partitioned__` description of an array (include/dlrun/partitioned.h).
 *
 * Built from the sharding alone (every device, this process's or not), so
 * every process of a job describes the same grid; only `data` is local. */
#include <string.h>

#include "core/alloc.h"
#include "core/status_impl.h"
#include "dlrun/partitioned.h"
#include "dlrun/sharding.h"

static void delete_exported(dlrun_exported *e) {
  if (e->legacy && e->legacy->deleter) e->legacy->deleter(e->legacy);
  if (e->versioned && e->versioned->deleter) e->versioned->deleter(e->versioned);
  *e = (dlrun_exported){0};
}

void dlrun_partitioned_release(dlrun_partitioned *p) {
  if (!p) return;
  for (size_t i = 0; p->partitions && i < p->npartitions; i++) {
    delete_exported(&p->partitions[i].data);
    dlrun_free(p->partitions[i].locations);
  }
  dlrun_free(p->partitions);
  dlrun_free(p->locals);
  dlrun_free(p);
}

/* The array's own shard on `dev` (a job's array holds only local shards). */
static dlrun_status local_shard(dlrun_array *a, dlrun_device *dev, dlrun_array **out) {
  size_t n = dlrun_array_shard_count(a);
  for (size_t j = 0; j < n; j++) {
    dlrun_device *d;
    dlrun_array_shard_index(a, j, &d, NULL, NULL, NULL);
    if (d == dev) return dlrun_array_shard_data(a, j, out);
  }
  return dlrun_fail(DLRUN_ERR_RUNTIME, "__partitioned__: the array holds no shard on %s",
                    dlrun_device_name(dev));
}

static void add_stats(dlrun_transfer_stats *sum, const dlrun_transfer_stats *s) {
  sum->bytes_moved += s->bytes_moved;
  sum->local_bytes += s->local_bytes;
  sum->copies += s->copies;
  sum->shares += s->shares;
  sum->bytes_sent += s->bytes_sent;
  sum->bytes_received += s->bytes_received;
  sum->ipc_bytes += s->ipc_bytes;
}

/* Grid shape and each device's partition (row-major) into part_of. */
static void grid(dlrun_partitioned *p, const dlrun_sharding *s, size_t ndev, size_t *part_of,
                 int64_t *block) {
  dlrun_sharding_shard_shape(s, p->ndim, p->shape, block);
  p->npartitions = 1;
  for (int d = 0; d < p->ndim; d++) {
    p->tiling[d] = block[d] ? p->shape[d] / block[d] : 1; /* a size-0 dim is one block */
    p->npartitions *= (size_t)p->tiling[d];
  }
  for (size_t i = 0; i < ndev; i++) {
    int64_t lo[DLRUN_MAX_NDIM], hi[DLRUN_MAX_NDIM];
    dlrun_sharding_shard_index(s, i, p->ndim, p->shape, lo, hi);
    size_t k = 0;
    for (int d = 0; d < p->ndim; d++)
      k = k * (size_t)p->tiling[d] + (size_t)(block[d] ? lo[d] / block[d] : 0);
    part_of[i] = k;
  }
}

/* Fill positions, starts, shapes and locations (no data yet). */
static dlrun_status layout(dlrun_partitioned *p, const dlrun_sharding *s, size_t ndev,
                           const size_t *part_of, const int64_t *block) {
  for (size_t k = 0; k < p->npartitions; k++) {
    dlrun_partition *q = &p->partitions[k];
    size_t rest = k;
    for (int d = p->ndim - 1; d >= 0; d--) {
      q->position[d] = (int64_t)(rest % (size_t)p->tiling[d]);
      rest /= (size_t)p->tiling[d];
      q->start[d] = q->position[d] * block[d];
      q->shape[d] = block[d];
    }
  }
  for (size_t i = 0; i < ndev; i++) p->partitions[part_of[i]].nlocations++;
  for (size_t k = 0; k < p->npartitions; k++) {
    dlrun_partition *q = &p->partitions[k];
    q->locations = dlrun_calloc(q->nlocations ? q->nlocations : 1, sizeof *q->locations);
    if (!q->locations)
      return dlrun_fail(DLRUN_ERR_RESOURCE_EXHAUSTED, "__partitioned__: out of memory");
    q->nlocations = 0;
  }
  /* Device order gives ascending replica ids within each partition. */
  for (size_t i = 0; i < ndev; i++) {
    dlrun_partition *q = &p->partitions[part_of[i]];
    dlrun_device *dev = dlrun_sharding_device(s, i);
    q->locations[q->nlocations++] = (dlrun_partition_location){
        .process = dlrun_device_process_index(dev),
        .device = dev,
        .replica_id = dlrun_sharding_replica_id(s, i, p->ndim, p->shape)};
  }
  return DLRUN_OK;
}

/* Export each partition's first local holder. */
static dlrun_status export_locals(dlrun_partitioned *p, dlrun_array *a, const dlrun_sharding *s,
                                  const dlrun_export_options *options) {
  dlrun_export_options o = {.has_max_version = true, .max_major = DLRUN_DLPACK_MAJOR,
                            .max_minor = DLRUN_DLPACK_MINOR};
  if (options) o = *options;
  dlrun_transfer_stats sum = {0}, one;
  o.stats = &one;
  for (size_t k = 0; k < p->npartitions; k++) {
    dlrun_partition *q = &p->partitions[k];
    for (size_t r = 0; r < q->nlocations && !q->data_device; r++) {
      dlrun_device *dev = q->locations[r].device;
      ptrdiff_t i = dlrun_sharding_device_position(s, dev);
      if (i < 0 || !dlrun_sharding_is_addressable(s, (size_t)i)) continue;
      dlrun_array *shard;
      dlrun_status st = local_shard(a, dev, &shard);
      if (st != DLRUN_OK) return st;
      one = (dlrun_transfer_stats){0};
      st = dlrun_export(shard, &o, &q->data);
      dlrun_array_release(shard);
      if (st != DLRUN_OK) return st;
      add_stats(&sum, &one);
      q->data_device = dev;
      p->locals[p->nlocals++] = k;
    }
  }
  if (options && options->stats) *options->stats = sum;
  return DLRUN_OK;
}

dlrun_status dlrun_array_partitioned(dlrun_array *a, const dlrun_export_options *options,
                                     dlrun_partitioned **out) {
  DLRUN_NONNULL(out, "dlrun_array_partitioned", "out");
  *out = NULL;
  DLRUN_NONNULL(a, "dlrun_array_partitioned", "array");
  dlrun_status st = dlrun_array_check_live(a);
  if (st != DLRUN_OK) return st;
  const dlrun_sharding *s = dlrun_array_sharding(a);
  size_t ndev = dlrun_sharding_device_count(s);
  dlrun_partitioned *p = dlrun_calloc(1, sizeof *p);
  size_t *part_of = dlrun_calloc(ndev ? ndev : 1, sizeof *part_of);
  if (!p || !part_of) {
    dlrun_free(p);
    dlrun_free(part_of);
    return dlrun_fail(DLRUN_ERR_RESOURCE_EXHAUSTED, "__partitioned__: out of memory");
  }
  p->ndim = dlrun_array_ndim(a);
  p->dtype = dlrun_array_dtype(a);
  memcpy(p->shape, dlrun_array_shape(a), (size_t)p->ndim * sizeof *p->shape);
  int64_t block[DLRUN_MAX_NDIM];
  grid(p, s, ndev, part_of, block);
  p->partitions = dlrun_calloc(p->npartitions, sizeof *p->partitions);
  p->locals = dlrun_calloc(p->npartitions, sizeof *p->locals);
  if (!p->partitions || !p->locals)
    st = dlrun_fail(DLRUN_ERR_RESOURCE_EXHAUSTED, "__partitioned__: out of memory");
  if (st == DLRUN_OK) st = layout(p, s, ndev, part_of, block);
  if (st == DLRUN_OK) st = export_locals(p, a, s, options);
  dlrun_free(part_of);
  if (st != DLRUN_OK) {
    dlrun_partitioned_release(p);
    return st;
  }
  *out = p;
  return DLRUN_OK;
}
