/* Internal: the storage geometry of an array, the one place where elements
 * narrower than a byte meet code that moves bytes.
 *
 * Copies, boxes, pools and messages work in whole elements of `esize` bytes.
 * A packed array (dl_bits < 8, see subbyte_impl.h) is shown to them as a
 * uint8 array, its storage, whose boxes are runs of whole bytes:
 *
 *   k = the largest index in [0, n-1] such that dims[k] * ... * dims[n-1] * b
 *       is a multiple of 8 (b the width; n the array's ndim);
 *   storage dims = [dims[0], ..., dims[k-1], dims[k] * ... * dims[n-1] * b / 8].
 *
 * When no k exists (the array's bits are not a multiple of 8, ndim 0
 * included) the storage is [ceil(total * b / 8)] with k = 0, its last byte
 * padded with zero bits. A box of the array (lo, hi per dim, half-open) maps
 * to a box of the storage when it holds dims k+1 .. n-1 whole and each of its
 * two ends on dim k either lies on a byte (lo[k] * R * b a multiple of 8, R
 * the product of dims k+1 .. n-1) or is the end of the array; dims before k
 * map as they are. Then the box's own storage geometry (that of its shape)
 * is exactly the storage box, so a shard's buffer is its own packed array.
 *
 * Byte-sized dtypes map to themselves (storage = array, esize = the size). */
#ifndef DLRUN_STORAGE_IMPL_H
#define DLRUN_STORAGE_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dlrun/dtype.h"
#include "dlrun/shape.h"

typedef struct dlrun_storage {
  const dlrun_dtype_info *info; /* the array's dtype (static) */
  int ndim;                     /* the array's */
  int64_t dims[DLRUN_MAX_NDIM];
  int sndim;                    /* the storage's */
  int64_t sdims[DLRUN_MAX_NDIM];
  size_t esize;                 /* bytes per storage element: 1 when packed */
  int split;                    /* k; -1 when byte-sized */
  int64_t row_bits;             /* R * b: the bits of one index of dim k */
  int64_t step;                 /* elements of dim k between byte boundaries */
  int64_t nbytes;               /* the storage's bytes */
} dlrun_storage;

/* The storage of an array of dtype row `info` (dlrun_dtype_get's, or any
 * row that outlives *out) and shape dims[0..ndim-1] into *out.
 * DLRUN_ERR_VALUE for a NULL row, an invalid shape, or sizes past int64. */
dlrun_status dlrun_storage_of(const dlrun_dtype_info *info, int ndim, const int64_t *dims,
                              dlrun_storage *out);

/* The storage box (slo, shi: s->sndim entries each) of the array box lo, hi
 * (s->ndim entries each, 0 <= lo <= hi <= dims). DLRUN_ERR_VALUE when the box
 * does not start and end on a byte, with a message that names the box, the
 * array, the rule and what would map, e.g. "shard [0:6, 0:2] of int4[6,3]
 * does not start and end on a byte: ...". */
dlrun_status dlrun_storage_box(const dlrun_storage *s, const int64_t *lo, const int64_t *hi,
                               int64_t *slo, int64_t *shi);

#endif
