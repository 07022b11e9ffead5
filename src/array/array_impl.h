/* Internal: buffers and arrays. */
#ifndef DLRUN_ARRAY_IMPL_H
#define DLRUN_ARRAY_IMPL_H

#include <pthread.h>
#include <stdatomic.h>

#include "device/device_impl.h"
#include "dlrun/array.h"

/* Device memory holding one shard, reference counted: arrays, queued work
 * and exports each hold a reference. The memory returns to the pool when the
 * last one is released. */
typedef struct dlrun_buffer {
  atomic_int refs;
  dlrun_device *dev;
  dlrun_memory_kind kind;
  dlrun_block *block; /* NULL for zero bytes */
  void *data;         /* NULL for zero bytes */
  uint64_t nbytes;
  dlrun_event ready;  /* the data is written once this is done */
} dlrun_buffer;

/* Allocate nbytes on dev's `kind` memory. *out holds one reference. The
 * ready event starts done. */
dlrun_status dlrun_buffer_create(dlrun_device *dev, dlrun_memory_kind kind, uint64_t nbytes,
                                 dlrun_buffer **out);
void dlrun_buffer_retain(dlrun_buffer *b);
void dlrun_buffer_release(dlrun_buffer *b);

struct dlrun_array {
  atomic_int refs;
  dlrun_dtype dtype;
  int ndim;
  int64_t dims[DLRUN_MAX_NDIM];
  int64_t size;
  uint64_t nbytes;
  dlrun_device *device;
  pthread_mutex_t mu; /* guards buf against delete racing with readers */
  dlrun_buffer *buf;  /* NULL once deleted */
  bool deleted;
};

/* A new array owning `buf` (the reference passes to the array). */
dlrun_status dlrun_array_wrap(dlrun_dtype dtype, int ndim, const int64_t *dims,
                              dlrun_buffer *buf, dlrun_array **out);

/* The live buffer with a new reference, or DLRUN_ERR_RUNTIME when deleted. */
dlrun_status dlrun_array_acquire_buffer(dlrun_array *a, dlrun_buffer **out);

#endif
