/* Internal: copies of N-d boxes between any two memories, routed to the
 * device queue that can reach both (copy_route.c): the platform of device
 * memory the host cannot read, else the destination's device. */
#ifndef DLRUN_DEVICE_COPY_ROUTE_H
#define DLRUN_DEVICE_COPY_ROUTE_H

#include "device/buffer.h"

/* The end for buffer b, whose block starts at `origin` with `strides`. */
dlrun_box_end dlrun_buffer_end(const dlrun_buffer *b, const int64_t *origin,
                               const int64_t *strides);
/* The end for host memory. */
dlrun_box_end dlrun_host_end(const void *data, const int64_t *origin, const int64_t *strides);

/* Where a copy from src to dst runs: on `queue`'s device queue, with the
 * ends as that platform sees them (an end in another platform's host
 * memory becomes plain host memory); or, between device memories of two
 * different platforms, in two steps through host memory (staged: the
 * first on src_queue into a host block, the second on queue from it). */
typedef struct dlrun_copy_route {
  dlrun_device *queue;
  dlrun_device *src_queue; /* staged only */
  bool staged;
  dlrun_box_end dst, src;
} dlrun_copy_route;
void dlrun_copy_route_of(const dlrun_box_end *dst, const dlrun_box_end *src,
                         dlrun_copy_route *out);

/* Copy the N-d box [lo, hi) (global coordinates) of esize-byte elements
 * from src to dst now: host to device, device to host, device to device,
 * between platforms (staged). Returns when it is done, with the device's
 * failure if it failed. It streams (streaming.h) when the box alone is
 * large enough; dlrun_copy_sync_in streams as its caller's whole call does. */
dlrun_status dlrun_copy_sync(size_t esize, int ndim, const int64_t *lo, const int64_t *hi,
                             const dlrun_box_end *dst, const dlrun_box_end *src);
dlrun_status dlrun_copy_sync_in(size_t esize, int ndim, const int64_t *lo, const int64_t *hi,
                                const dlrun_box_end *dst, const dlrun_box_end *src, bool stream);

/* One destination of dlrun_copy_sync_fan: the box [lo, hi) into dst. */
typedef struct dlrun_fan_dst {
  dlrun_box_end dst;
  const int64_t *lo, *hi;
} dlrun_fan_dst;
/* Copy dsts[i]'s box from the one block src into each dsts[i].dst now,
 * returning when all are done: as one unit of work when every copy runs on
 * queues of one platform that takes copies together (copy_boxes: the
 * source is then read once for all), else one after another as
 * dlrun_copy_sync_in. */
dlrun_status dlrun_copy_sync_fan(size_t esize, int ndim, size_t n, const dlrun_fan_dst *dsts,
                                 const dlrun_box_end *src, bool stream);

#endif
