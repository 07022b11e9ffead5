/* Internal: what DLPack import and export share. */
#ifndef DLRUN_DLPACK_IMPL_H
#define DLRUN_DLPACK_IMPL_H

#include "array/array_impl.h"
#include "dlrun/dlpack.h"

/* Where an export of dlrun came from: its buffer's ready event, runtime,
 * device and memory kind. */
typedef struct dlrun_export_origin {
  dlrun_event ready;
  dlrun_runtime *rt;
  dlrun_device *dev;
  dlrun_memory_kind kind;
} dlrun_export_origin;

/* When the tensor (one of legacy / versioned) is an export of dlrun whose
 * deleter has not run: true, with *origin filled. False for any other
 * producer's tensor. */
bool dlrun_export_source(const DLManagedTensor *legacy, const DLManagedTensorVersioned *versioned,
                         dlrun_export_origin *origin);

/* A versioned tensor over the fresh buffer b, whose reference it takes on
 * success: shape dims (ndim of them, row-major strides), dtype, b's own
 * DLPack device, flags 0. It is an export like every other (counted by
 * dlrun_live_exports, its deleter releasing b once from any thread, known
 * to dlrun_import). */
dlrun_status dlrun_export_fresh(dlrun_buffer *b, int ndim, const int64_t *dims,
                                dlrun_dtype dtype, DLManagedTensorVersioned **out);

/* JAX's ValueError for copy=False when data in `src` memory must be copied
 * to `dest`; the memory kinds are named when the devices are the same, so
 * that the two places never read alike. */
dlrun_status dlrun_copy_false_error(const dlrun_device *dest, dlrun_memory_kind dest_kind,
                                    const dlrun_device *src, dlrun_memory_kind src_kind);

#endif
