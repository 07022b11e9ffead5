/* Arrays: a global shape, a dtype and the buffer(s) holding the data.
 *
 * Ownership: every function that makes an array gives the caller one
 * reference (*out), released with dlrun_array_release. Functions taking an
 * array borrow it. Work is asynchronous: creation may return before the data
 * is written; readers wait for it. */
#ifndef DLRUN_ARRAY_H
#define DLRUN_ARRAY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "device.h"
#include "dtype.h"
#include "export.h"
#include "shape.h"
#include "status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dlrun_array dlrun_array;

/* A new array on `dev` holding a copy of `nbytes` bytes at `data` (row-major,
 * native byte order). `nbytes` must equal the shape's byte size. `data` is
 * only read during the call. */
DLRUN_API dlrun_status dlrun_array_from_host(dlrun_device *dev, dlrun_dtype dtype, int ndim,
                                             const int64_t *dims, const void *data,
                                             uint64_t nbytes, dlrun_array **out);

/* A new array on `dev` with every element equal to `value` (converted by the
 * dtype rules; a value that does not fit is DLRUN_ERR_VALUE). */
DLRUN_API dlrun_status dlrun_array_full(dlrun_device *dev, dlrun_dtype dtype, int ndim,
                                        const int64_t *dims, const dlrun_scalar *value,
                                        dlrun_array **out);

/* A new 1-d array of `n` elements start + i*step, i = 0..n-1. Integer
 * dtypes need integral start and step and every value in range; floats are
 * computed in double precision then converted. */
DLRUN_API dlrun_status dlrun_array_arange(dlrun_device *dev, dlrun_dtype dtype,
                                          const dlrun_scalar *start, const dlrun_scalar *step,
                                          int64_t n, dlrun_array **out);

DLRUN_API void dlrun_array_retain(dlrun_array *a);
/* Drop one reference; the last one frees the array and, when nothing else
 * holds them, its buffers. NULL is a no-op. */
DLRUN_API void dlrun_array_release(dlrun_array *a);

/* Metadata; valid even after dlrun_array_delete. `shape` is owned by the
 * array. */
DLRUN_API dlrun_dtype dlrun_array_dtype(const dlrun_array *a);
DLRUN_API int dlrun_array_ndim(const dlrun_array *a);
DLRUN_API const int64_t *dlrun_array_shape(const dlrun_array *a);
DLRUN_API int64_t dlrun_array_size(const dlrun_array *a);
DLRUN_API uint64_t dlrun_array_nbytes(const dlrun_array *a);
/* The device holding the data (borrowed), even after deletion. */
DLRUN_API dlrun_device *dlrun_array_device(const dlrun_array *a);

/* DLRUN_OK while live; after deletion DLRUN_ERR_RUNTIME with JAX's message
 * "Array has been deleted with shape=float32[3]." */
DLRUN_API dlrun_status dlrun_array_check_live(const dlrun_array *a);

/* Wait until the data is written. DLRUN_ERR_RUNTIME when deleted. */
DLRUN_API dlrun_status dlrun_array_block_until_ready(dlrun_array *a);

/* Copy `nbytes` bytes starting at byte `offset` of the row-major data into
 * `dst` (caller's memory), after waiting for the data. The range must lie
 * inside the array. */
DLRUN_API dlrun_status dlrun_array_read(dlrun_array *a, uint64_t offset, uint64_t nbytes,
                                        void *dst);

/* Drop the array's hold on its device memory now (idempotent). The memory
 * is freed at once unless something else (queued work, an export) still
 * references it. Metadata stays readable; everything else then fails. */
DLRUN_API void dlrun_array_delete(dlrun_array *a);
DLRUN_API bool dlrun_array_is_deleted(const dlrun_array *a);

#ifdef __cplusplus
}
#endif
#endif
