/* Host memory regions, shareable with other processes on this host
 * (region.h). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <fcntl.h>
#include <unistd.h>

#include "region.h"
#include "host_services.h"

/* Host execution is built into libdlrun: its services are the library's. */
static const dlrun_platform_services *svc(void) { return dlrun_host_services(); }

static atomic_uint_fast64_t next_id = 1;

/* The bytes: the memfd mapped shared when one can be made, else anonymous
 * memory (a process that runs out of descriptors still works, unshared). */
static dlrun_status map_bytes(dlrun_host_region *r, uint64_t size) {
  r->fd = svc()->shared_file_create(size, (void **)&r->view);
  return r->fd >= 0 ? DLRUN_OK : svc()->map_host(size, (void **)&r->view);
}

dlrun_status dlrun_host_region_reserve(dlrun_host_region *r, uint64_t size, bool hidden,
                                       void **base) {
  dlrun_status st = map_bytes(r, size);
  if (st) return st;
  void *addr = r->view;
  if (hidden && (st = svc()->map_inaccessible(size, &addr))) {
    svc()->unmap(r->view, size);
    if (r->fd >= 0) close(r->fd);
    r->view = NULL;
    r->fd = -1;
    return st;
  }
  r->size = size;
  r->id = atomic_fetch_add(&next_id, 1);
  atomic_store_explicit(&r->base, (unsigned char *)addr, memory_order_release);
  *base = addr;
  return DLRUN_OK;
}

void dlrun_host_region_release(dlrun_host_region *r) {
  unsigned char *base = atomic_load(&r->base);
  if (!base) return;
  if (base != r->view) svc()->unmap(base, r->size);
  svc()->unmap(r->view, r->size);
  if (r->fd >= 0) close(r->fd);
  atomic_store(&r->base, NULL);
  r->view = NULL;
  r->fd = -1;
  r->size = 0;
}

void *dlrun_host_region_view(const dlrun_host_region *r, const void *data) {
  const unsigned char *base = atomic_load_explicit(&r->base, memory_order_acquire);
  if (!base || base == r->view) return (void *)data;
  return r->view + ((const unsigned char *)data - base);
}

bool dlrun_host_region_owns(const dlrun_host_region *r, const void *data, uint64_t n) {
  const unsigned char *base = atomic_load_explicit(&r->base, memory_order_acquire);
  const unsigned char *p = data;
  return base && p >= base && (uint64_t)(p - base) <= r->size &&
         n <= r->size - (uint64_t)(p - base);
}

dlrun_status dlrun_host_region_commit(dlrun_host_region *r, void *data, uint64_t size) {
  return svc()->commit_host(dlrun_host_region_view(r, data), size);
}

/* A memfd's pages are the file's: unmapping them from the view frees
 * nothing, so the range is punched out of the file (peers that map it then
 * read zeros there, never a fault: the file keeps its size). */
uint64_t dlrun_host_region_decommit(dlrun_host_region *r, void *data, uint64_t size) {
  unsigned char *view = dlrun_host_region_view(r, data);
  uint64_t held = svc()->decommit_host(view, size);
  if (r->fd >= 0)
    fallocate(r->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)(view - r->view),
              (off_t)size);
  if ((void *)view != data) held += svc()->decommit_host(data, size);
  return held;
}

bool dlrun_host_region_share(const dlrun_host_region *r, const void *data, uint64_t n,
                             dlrun_shared_region *out, uint64_t *offset) {
  if (r->fd < 0 || !dlrun_host_region_owns(r, data, n)) return false;
  const unsigned char *base = atomic_load_explicit(&r->base, memory_order_acquire);
  *out = (dlrun_shared_region){.id = r->id, .size = r->size, .handle = r->fd};
  *offset = (uint64_t)((const unsigned char *)data - base);
  return true;
}

dlrun_status dlrun_host_region_map_peer(const dlrun_shared_region *h, int pid,
                                        const void **mapping) {
  return svc()->shared_file_map(pid, h->handle, h->size, mapping);
}

void dlrun_host_region_unmap_peer(const dlrun_shared_region *h, const void *mapping) {
  svc()->shared_file_unmap(mapping, h->size);
}
