/* Internal: copying large runs with streaming (non-temporal) stores, which
 * write memory without first reading each destination line into the cache:
 * a third less memory traffic for copies far larger than the caches, as
 * glibc's memcpy does for one large block, but here for the many rows of a
 * strided box, which memcpy copies row by row through the cache. */
#ifndef DLRUN_DEVICE_STREAM_COPY_H
#define DLRUN_DEVICE_STREAM_COPY_H

#include <stdbool.h>
#include <stddef.h>

/* Whether this CPU streams (x86-64 with AVX2); else callers use memcpy. */
bool dlrun_stream_copy_supported(void);
/* Copy n bytes; the stores may stay unordered until dlrun_stream_copy_end. */
void dlrun_stream_copy(void *dst, const void *src, size_t n);
/* Order the streamed stores before what follows (the copy's completion). */
void dlrun_stream_copy_end(void);

#endif
