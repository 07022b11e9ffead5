/* Shape arithmetic with overflow checks. */
#ifndef DLRUN_SHAPE_H
#define DLRUN_SHAPE_H

#include <stddef.h>
#include <stdint.h>

#include "dtype.h"
#include "export.h"
#include "status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define DLRUN_MAX_NDIM 32

/* Number of elements of a shape. DLRUN_ERR_VALUE when ndim is outside
 * [0, DLRUN_MAX_NDIM], a dimension is negative, or the product overflows. */
DLRUN_API dlrun_status dlrun_shape_size(int ndim, const int64_t *dims, int64_t *out);

/* Byte size of a shape of `dtype` (a packed sub-byte dtype: ceil(elements *
 * bits / 8)); like dlrun_shape_size, and also an error when the byte size
 * does not fit in int64_t. */
DLRUN_API dlrun_status dlrun_shape_nbytes(int ndim, const int64_t *dims,
                                          dlrun_dtype dtype, uint64_t *out);

/* JAX's short form, "float32[3]", "int32[4,2]", "bool[]", into buf (always
 * NUL-terminated, truncated if n is too small). Returns buf. */
DLRUN_API const char *dlrun_shape_string(dlrun_dtype dtype, int ndim,
                                         const int64_t *dims, char *buf, unsigned long n);

/* Python-style tuple "(8, 2)", "(10,)", "()" of n values into buf (always
 * NUL-terminated, truncated if size is too small). Returns buf. */
DLRUN_API const char *dlrun_tuple_string(const int64_t *v, int n, char *buf, size_t size);

#ifdef __cplusplus
}
#endif
#endif
