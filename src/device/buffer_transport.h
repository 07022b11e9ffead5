/* Internal: buffers as the transport between processes sees them
 * (buffer_transport.c). */
#ifndef DLRUN_DEVICE_BUFFER_TRANSPORT_H
#define DLRUN_DEVICE_BUFFER_TRANSPORT_H

#include "device/buffer.h"
#include "distributed/transport.h"

/* Count `bytes` of a message between processes on b's device (its
 * dl.stats() bytes_moved_in when `in`, else bytes_moved_out); the peer's
 * device counts the other end. */
void dlrun_buffer_count_message(const dlrun_buffer *b, uint64_t bytes, bool in);

/* The message (distributed/transport.h) that sends or receives the non-empty box
 * [lo, hi) (global coordinates) of b, whose block of shape shard_dims
 * starts at `origin`, straight from or into b's memory through its
 * platform's transport view; to or from process `peer`. Dimensions are
 * merged where contiguous. DLRUN_ERR_RUNTIME when the platform's transport
 * cannot reach b's memory. */
dlrun_status dlrun_buffer_message(const dlrun_buffer *b, size_t esize, int ndim,
                                  const int64_t *shard_dims, const int64_t *origin,
                                  const int64_t *lo, const int64_t *hi, int peer,
                                  dlrun_transport_message *out);

/* How the transport reaches a memory (the distributed layer's
 * $DLRUN_DISTRIBUTED_DEVICE_MEMORY with what the transport says of itself). */
typedef enum dlrun_reach {
  DLRUN_REACH_HOST_VIEWS,   /* views that are host memory; stage the rest */
  DLRUN_REACH_DEVICE_VIEWS, /* device views too (a CUDA-aware transport) */
  DLRUN_REACH_DIRECT,       /* every view; a memory without one is refused */
  DLRUN_REACH_DIRECT_HOST,  /* the same, but the transport said it cannot
                               reach device memory: device views refused */
  DLRUN_REACH_STAGED,       /* stage every memory but host memory */
} dlrun_reach;
/* Whether the transport reads and writes b's memory through its view
 * (*direct), or the box goes through host memory, copied on b's device
 * queue (staged). Decided by the platform's slots alone: host memory and
 * views are direct; a view of device addresses (transport_view_device)
 * only when the transport reaches device memory. DLRUN_ERR_RUNTIME when
 * `reach` is DLRUN_REACH_DIRECT(_HOST) and b's memory has no view it may use. */
dlrun_status dlrun_buffer_reach(const dlrun_buffer *b, dlrun_reach reach, bool *direct);
/* Copy the box [lo, hi) of b (block of shape shard_dims at origin)
 * out into the host block `block` (`out`), or back in from it, on b's
 * device queue, now: the block holds the box row-major, contiguous.
 * Returns once it is done, with the device's failure if it failed. */
dlrun_status dlrun_buffer_stage(const dlrun_buffer *b, size_t esize, int ndim,
                                const int64_t *shard_dims, const int64_t *origin,
                                const int64_t *lo, const int64_t *hi, void *block, bool out);

#endif
