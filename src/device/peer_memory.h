/* Internal: the device layer's half of the one-copy path between processes
 * on one host. A process says where a buffer's memory can be mapped by its
 * peers (dlrun_buffer_share); a peer copies a box straight out of that
 * memory into its own buffers (dlrun_buffers_pull), having mapped each region
 * once, through the platform's map_shared, until dlrun_peer_memory_unmap_all
 * (the end of the job). The peer's memory is read only here, as host memory
 * the copy engine reads: no layer above sees the mapping. */
#ifndef DLRUN_DEVICE_PEER_MEMORY_H
#define DLRUN_DEVICE_PEER_MEMORY_H

#include "device/buffer.h"

/* Where a shard's bytes are in its process's shared memory; travels
 * between processes as it is (four 64-bit words). size 0: not shared. */
typedef struct dlrun_shared_source {
  uint64_t id, size;
  int64_t handle;
  uint64_t offset;
} dlrun_shared_source;

/* Fill *out for b (row-major memory in a region its platform shares), or
 * return false (*out zeroed): b's pieces then travel through the transport. */
bool dlrun_buffer_share(const dlrun_buffer *b, dlrun_shared_source *out);

/* One destination of a pull: the box [lo, hi) (global coordinates) into
 * buf, a block at origin. */
typedef struct dlrun_pull_dst {
  dlrun_buffer *buf;
  const int64_t *origin, *lo, *hi;
} dlrun_pull_dst;

/* Copy each dsts[i]'s box (into blocks of shape dst_shard_dims) from the
 * shard that process `peer` (process id `pid` on this host) shares as *src
 * on its device src_dev (a row-major block of shape src_shard_dims at
 * src_origin), reading it once for all where their platform takes copies
 * together, streaming when `stream` (the call's pulls write more than the
 * caches hold: streaming.h). Returns once the copies are done, with the
 * reason when the memory cannot be mapped or a copy fails. */
dlrun_status dlrun_buffers_pull(size_t n, const dlrun_pull_dst *dsts, size_t esize, int ndim,
                                const int64_t *dst_shard_dims, const dlrun_device *src_dev,
                                int peer, int pid, const dlrun_shared_source *src,
                                const int64_t *src_shard_dims, const int64_t *src_origin,
                                bool stream);

/* The peers' regions mapped here (peer_maps.c). The mapping of peer's region
 * `src`, mapping it the first time (kept until the job ends); its failure
 * names the peer. */
dlrun_status dlrun_peer_memory_map(const dlrun_device *src_dev, int peer, int pid,
                                   const dlrun_shared_source *src, const void **mapping);
/* Unmap every peer region mapped so far (the job ends). */
void dlrun_peer_memory_unmap_all(void);
/* The peer's device whose memory, mapped here, holds p; NULL when none
 * does. The trace names it as the source of a copy out of that memory. */
const dlrun_device *dlrun_peer_memory_device(const void *p);
/* Peer regions mapped now (tests). */
size_t dlrun_peer_memory_mapped_count(void);

#endif
