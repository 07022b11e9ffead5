/* Internal: fills: the values of a sequence (fill.c) and queueing a
 * buffer's fill (buffer_fill.c). */
#ifndef DLRUN_DEVICE_FILL_H
#define DLRUN_DEVICE_FILL_H

#include "device/buffer.h"

/* Element i of a sequence fill (also what the planner checks up front, so
 * that every stored value fits). */
dlrun_scalar dlrun_fill_value(const dlrun_fill *f, int64_t i);

/* Queue the fill of b on its device's queue; b's ready event becomes the
 * fill's. On failure nothing is queued. */
dlrun_status dlrun_buffer_fill_async(dlrun_buffer *b, const dlrun_fill *f);

#endif
