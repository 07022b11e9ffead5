/* Internal: buffers and arrays. */
#ifndef DLRUN_ARRAY_IMPL_H
#define DLRUN_ARRAY_IMPL_H

#include <pthread.h>
#include <stdatomic.h>

#include "device/device_impl.h"
#include "dlrun/array.h"
#include "shard/shard_impl.h"

/* Device memory holding one shard, reference counted: arrays, queued work
 * and exports each hold a reference. The memory returns to the pool when the
 * last one is released. */
typedef struct dlrun_buffer {
  atomic_int refs;
  dlrun_device *dev;
  dlrun_memory_kind kind;
  dlrun_block *block; /* NULL for zero bytes and for outside memory */
  void *data;         /* NULL for zero bytes */
  uint64_t nbytes;
  int64_t *strides;   /* element strides of the data; NULL: row-major */
  dlrun_event ready;  /* the data is written once this is done */
  /* Outside memory (an imported tensor): not from a pool; release, when
   * set, is called once when the buffer goes. */
  bool external;
  void (*release)(void *ctx);
  void *release_ctx;
} dlrun_buffer;

/* Allocate nbytes on dev's `kind` memory. *out holds one reference. The
 * ready event starts done. */
dlrun_status dlrun_buffer_create(dlrun_device *dev, dlrun_memory_kind kind, uint64_t nbytes,
                                 dlrun_buffer **out);
/* A buffer over memory dlrun does not own (e.g. an imported tensor) on
 * dev's `kind` memory; release(ctx), when set, runs once when the last
 * reference goes. On failure release is not called. */
dlrun_status dlrun_buffer_wrap(dlrun_device *dev, dlrun_memory_kind kind, void *data,
                               uint64_t nbytes, void (*release)(void *ctx), void *ctx,
                               dlrun_buffer **out);
void dlrun_buffer_retain(dlrun_buffer *b);
/* The element strides of b's data for a shard of shape `dims`: its own
 * (an imported layout) or row-major ones written to `scratch`. */
const int64_t *dlrun_buffer_layout(const dlrun_buffer *b, int ndim, const int64_t *dims,
                                   int64_t *scratch);
void dlrun_buffer_release(dlrun_buffer *b);

struct dlrun_array {
  atomic_int refs;
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
};

/* Check that a shape of dtype can take the sharding; fills the shard shape
 * and byte sizes. */
dlrun_status dlrun_array_layout(const dlrun_sharding *s, dlrun_dtype dtype, int ndim,
                                const int64_t *dims, int64_t *shard_dims, uint64_t *nbytes,
                                uint64_t *shard_nbytes);

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

/* Row-major element strides of a shape. */
void dlrun_row_major_strides(int ndim, const int64_t *dims, int64_t *strides);

/* Copy the N-d region [lo, hi) (global coordinates) from a block `src` whose
 * element [0...] sits at src_origin, laid out with element strides
 * src_strides, into the block `dst` likewise placed. Runs that are
 * contiguous in both (whole rows or more) go in one call of `copy`; a NULL
 * `copy` means host memory (memcpy, and tight loops for strided data). */
void dlrun_copy_box(size_t esize, int ndim, const int64_t *lo, const int64_t *hi, void *dst,
                    const int64_t *dst_origin, const int64_t *dst_strides, const void *src,
                    const int64_t *src_origin, const int64_t *src_strides,
                    void (*copy)(void *, const void *, size_t));

/* Add to a runtime's transfer statistics (counted when planned). */
void dlrun_count_transfer(dlrun_runtime *rt, const dlrun_transfer_stats *s);

#endif
