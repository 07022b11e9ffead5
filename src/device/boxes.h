/* Internal: the sizes and strides of N-d boxes (boxcopy.c). */
#ifndef DLRUN_DEVICE_BOXES_H
#define DLRUN_DEVICE_BOXES_H

#include <stddef.h>
#include <stdint.h>

/* The bytes of the box [lo, hi) of esize-byte elements. */
uint64_t dlrun_box_bytes(size_t esize, int ndim, const int64_t *lo, const int64_t *hi);

/* Row-major element strides of a shape. */
void dlrun_row_major_strides(int ndim, const int64_t *dims, int64_t *strides);

#endif
