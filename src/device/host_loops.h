/* Internal: the host loops, over bytes the host can address: copying an
 * N-d box between strided blocks (boxcopy.c) and filling (fill.c). The
 * device layer copies host memory with them; platforms get them as
 * services (svc->host_copy_box, svc->host_fill). */
#ifndef DLRUN_DEVICE_HOST_LOOPS_H
#define DLRUN_DEVICE_HOST_LOOPS_H

#include "dlrun/platform.h"

void dlrun_host_copy_box(size_t esize, int ndim, const int64_t *lo, const int64_t *hi, void *dst,
                         const int64_t *dst_origin, const int64_t *dst_strides, const void *src,
                         const int64_t *src_origin, const int64_t *src_strides, bool stream);
/* Bytes copied with streaming stores since the process started (tests). */
uint64_t dlrun_host_streamed_bytes(void);
void dlrun_host_fill(void *data, uint64_t nbytes, const dlrun_fill *f);

#endif
