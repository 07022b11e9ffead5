/* Internal: comparing elements by value, as NumPy's np.equal does. */
#ifndef DLRUN_DTYPE_IMPL_H
#define DLRUN_DTYPE_IMPL_H

#include <stdint.h>

#include "dlrun/dtype.h"

/* The flat index of the first of `count` elements of `dtype` at which a and
 * b differ as values, or -1 when every pair is equal. Floats and complex
 * numbers compare by value (-0.0 equals 0.0; NaN equals nothing, not even
 * itself, so an element holding NaN always differs); integers and bools by
 * their bytes; a packed sub-byte dtype's a and b are packed runs of `count`
 * elements, compared element by element. `dtype` must be a valid dtype. */
int64_t dlrun_dtype_first_unequal(dlrun_dtype dtype, const void *a, const void *b, int64_t count);

/* The first DLPack version (major.minor) whose type codes include `dtype`'s:
 * 1.1 for codes 7 to 17 and for elements under 8 bits, 0.0 for every older
 * type. A legacy consumer (no max_version) may not know the code. `dtype`
 * must be a valid dtype. */
void dlrun_dtype_dlpack_since(dlrun_dtype dtype, unsigned *major, unsigned *minor);

#endif
