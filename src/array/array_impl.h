/* Internal: buffers and arrays. */
#ifndef DLRUN_ARRAY_IMPL_H
#define DLRUN_ARRAY_IMPL_H

#include <pthread.h>
#include <stdatomic.h>

#include "device/buffer.h"
#include "device/device_impl.h"
#include "dlrun/array.h"
#include "shard/shard_impl.h"

struct dlrun_array {
  dlrun_ref ref; /* first: the object base */
  dlrun_dtype dtype;
  int ndim;
  int64_t dims[DLRUN_MAX_NDIM];
  int64_t size;
  uint64_t nbytes;
  dlrun_sharding *sharding;
  int64_t shard_dims[DLRUN_MAX_NDIM];
  uint64_t shard_nbytes;
  size_t nshards;     /* one per device of the sharding, in its order */
  pthread_mutex_t mu; /* guards bufs against delete racing with readers */
  dlrun_buffer **bufs; /* NULL once deleted */
  bool deleted;
  int import_outcome; /* a dlrun_import_outcome; set by dlrun_import only */
};

/* Check that a shape of dtype can take the sharding; fills the shard shape
 * and byte sizes. */
dlrun_status dlrun_array_layout(const dlrun_sharding *s, dlrun_dtype dtype, int ndim,
                                const int64_t *dims, int64_t *shard_dims, uint64_t *nbytes,
                                uint64_t *shard_nbytes);

/* A reference to dev's SingleDeviceSharding of `kind` memory (the caller
 * releases it), as dlrun_single_device_sharding_create makes, but made
 * once and kept by the device (device_sharding.c). */
dlrun_status dlrun_device_sharding(dlrun_device *dev, dlrun_memory_kind kind,
                                   dlrun_sharding **out);

/* A new array owning `bufs` (the array of nshards references passes to the
 * array, also on failure). The shape must have been checked. */
dlrun_status dlrun_array_wrap(dlrun_dtype dtype, int ndim, const int64_t *dims,
                              dlrun_sharding *sharding, dlrun_buffer **bufs, dlrun_array **out);

/* Allocate one buffer per device of the sharding (all or nothing) and wrap
 * them: an array whose contents the caller then writes. */
dlrun_status dlrun_array_alloc(dlrun_sharding *sharding, dlrun_dtype dtype, int ndim,
                               const int64_t *dims, dlrun_array **out);

/* The live buffers with a new reference each, into out[nshards]; or
 * DLRUN_ERR_RUNTIME when deleted. Release with dlrun_buffers_release. */
dlrun_status dlrun_array_acquire_buffers(dlrun_array *a, dlrun_buffer **out);
void dlrun_buffers_release(dlrun_buffer **bufs, size_t n);

/* RuntimeError "Fetching value for an Array that spans non-addressable ..."
 * (JAX's text with dlrun's names) when some shard is another process's. */
dlrun_status dlrun_array_check_addressable(const dlrun_array *a);

/* Add to a runtime's transfer statistics (counted when planned). */
void dlrun_count_transfer(dlrun_runtime *rt, const dlrun_transfer_stats *s);

#endif
