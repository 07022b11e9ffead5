/* Internal: packed arrays as uint8 arrays of their storage (storage_view.c). */
#ifndef DLRUN_STORAGE_VIEW_H
#define DLRUN_STORAGE_VIEW_H

#include <stdbool.h>

#include "dlrun/array.h"
#include "dlrun/sharding.h"

/* Whether `dtype` is a packed sub-byte dtype (dl_bits below 8). */
bool dlrun_dtype_is_packed(dlrun_dtype dtype);

/* The storage shape (*sndim, sdims) of a packed array of shape (ndim, dims)
 * and the sharding that lays it out as `s` lays out the array: `s` itself
 * (a new reference) unless named, else the same mesh and memory kind with the
 * spec's first *sndim entries. The array's layout under `s` must have been
 * checked. The caller releases *out. */
dlrun_status dlrun_storage_sharding(dlrun_sharding *s, int ndim, const int64_t *dims,
                                    dlrun_dtype dtype, int *sndim, int64_t *sdims,
                                    dlrun_sharding **out);

/* A uint8 array of a's storage sharing a's buffers (each retained); the
 * caller releases *out. DLRUN_ERR_RUNTIME when a is deleted. */
dlrun_status dlrun_array_storage_view(dlrun_array *a, dlrun_array **out);

/* The packed array (dtype, ndim, dims, s) over the buffers of v, a storage
 * view made for it (each retained); the caller releases *out. */
dlrun_status dlrun_array_from_storage_view(dlrun_array *v, dlrun_dtype dtype, int ndim,
                                           const int64_t *dims, dlrun_sharding *s,
                                           dlrun_array **out);

#endif
