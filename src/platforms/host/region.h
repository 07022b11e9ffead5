/* The memory regions of the platforms whose memory is host RAM
 * (sim, cpu): one per pool, the bytes in one mapping (`view`), handed out
 * at device addresses that are either the view itself or a second,
 * inaccessible range of the same size (sim's private memory).
 *
 * When other processes of the job run on this host and may map this
 * process's memory (known when the job is joined), a new region's bytes
 * are a memfd mapped shared, so that a peer maps the same file once
 * (dlrun_host_region_map_peer) and copies straight out of it;
 * otherwise, or when no memfd can be made, anonymous memory that nobody
 * else can map. */
#ifndef DLRUN_HOST_REGION_H
#define DLRUN_HOST_REGION_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "dlrun/platform.h"

typedef struct dlrun_host_region {
  _Atomic(unsigned char *) base; /* device addresses; NULL until reserved */
  unsigned char *view;           /* the bytes, read-write */
  uint64_t size;
  int fd;      /* the memfd behind the view; -1: anonymous memory */
  uint64_t id; /* unique among this process's regions (peers cache by it) */
} dlrun_host_region;

/* Reserve `size` bytes into r (unreserved: zeroed); `hidden`: the device
 * addresses are an inaccessible range, else the view's own. *base: the
 * device address of the first byte. */
dlrun_status dlrun_host_region_reserve(dlrun_host_region *r, uint64_t size, bool hidden,
                                       void **base);
void dlrun_host_region_release(dlrun_host_region *r);
/* Where the bytes at device address `data` are (data itself when not hidden). */
void *dlrun_host_region_view(const dlrun_host_region *r, const void *data);
/* Whether [data, data + n) lies in r. */
bool dlrun_host_region_owns(const dlrun_host_region *r, const void *data, uint64_t n);
/* Commit, and give back (returning the bytes that were resident), the
 * bytes at device addresses [data, data + size). */
dlrun_status dlrun_host_region_commit(dlrun_host_region *r, void *data, uint64_t size);
uint64_t dlrun_host_region_decommit(dlrun_host_region *r, void *data, uint64_t size);

/* What a peer needs to map r, and the offset of device address `data` in
 * it; false when r is not shareable or does not hold [data, data + n). */
bool dlrun_host_region_share(const dlrun_host_region *r, const void *data, uint64_t n,
                             dlrun_shared_region *out, uint64_t *offset);
/* The platform slots map_shared and unmap_shared of host-RAM platforms
 * (svc->shared_file_map: read-only, checked, keeping the file alive). */
dlrun_status dlrun_host_region_map_peer(const dlrun_shared_region *h, int pid,
                                        const void **mapping);
void dlrun_host_region_unmap_peer(const dlrun_shared_region *h, const void *mapping);

#endif
