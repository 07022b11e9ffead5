/* The one-copy path between processes on one host (peer_memory.h): where
 * a buffer's bytes are shared, and a pull out of a peer's memory. */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#include "boxes.h"
#include "copy_route.h"
#include "core/alloc.h"
#include "core/status_impl.h"
#include "device/peer_memory.h"

/* Test hook, read once: DLRUN_IPC_DELAY_MS=n waits n ms before each copy
 * out of a peer's memory (so that a spec can kill the peer while the copy
 * is under way). */
static pthread_once_t hook_once = PTHREAD_ONCE_INIT;
static long delay_ms;

static void read_hook(void) {
  const char *d = getenv("DLRUN_IPC_DELAY_MS");
  delay_ms = d ? strtol(d, NULL, 10) : 0;
}

bool dlrun_buffer_share(const dlrun_buffer *b, dlrun_shared_source *out) {
  *out = (dlrun_shared_source){0};
  const dlrun_platform *pl = b->dev->platform;
  if (!pl->share || b->external || b->strides || !b->data) return false;
  dlrun_shared_region r;
  uint64_t offset;
  if (!pl->share(b->dev, b->kind, b->data, b->nbytes, &r, &offset) || !r.size) return false;
  *out = (dlrun_shared_source){.id = r.id, .size = r.size, .handle = r.handle, .offset = offset};
  return true;
}

dlrun_status dlrun_buffers_pull(size_t n, const dlrun_pull_dst *dsts, size_t esize, int ndim,
                                const int64_t *dst_shard_dims, const dlrun_device *src_dev,
                                int peer, int pid, const dlrun_shared_source *src,
                                const int64_t *src_shard_dims, const int64_t *src_origin,
                                bool stream) {
  pthread_once(&hook_once, read_hook);
  uint64_t bytes = esize;
  for (int d = 0; d < ndim; d++) bytes *= (uint64_t)src_shard_dims[d];
  if (src->offset > src->size || bytes > src->size - src->offset)
    return dlrun_fail(DLRUN_ERR_RUNTIME,
                      "process %d shared a shard of %llu bytes at %llu of a region of %llu",
                      peer, (unsigned long long)bytes, (unsigned long long)src->offset,
                      (unsigned long long)src->size);
  const void *mapping;
  dlrun_status st = dlrun_peer_memory_map(src_dev, peer, pid, src, &mapping);
  if (st) return st;
  if (delay_ms > 0) nanosleep(&(struct timespec){delay_ms / 1000, delay_ms % 1000 * 1000000L}, NULL);
  int64_t src_strides[DLRUN_MAX_NDIM];
  dlrun_row_major_strides(ndim, src_shard_dims, src_strides);
  dlrun_box_end from = dlrun_host_end((const unsigned char *)mapping + src->offset, src_origin,
                                      src_strides);
  /* The destinations' ends, and room for their strides. */
  size_t each = sizeof(dlrun_fan_dst) + DLRUN_MAX_NDIM * sizeof(int64_t);
  dlrun_fan_dst *to = n <= SIZE_MAX / each ? dlrun_malloc(n * each) : NULL;
  if (!to) return dlrun_fail_oom_host(n * each);
  int64_t *scratch = (int64_t *)(void *)(to + n);
  for (size_t i = 0; i < n; i++) {
    const dlrun_pull_dst *d = &dsts[i];
    int64_t *strides = scratch + i * DLRUN_MAX_NDIM;
    const int64_t *layout = dlrun_buffer_layout(d->buf, ndim, dst_shard_dims, strides);
    to[i] = (dlrun_fan_dst){.dst = dlrun_buffer_end(d->buf, d->origin, layout), .lo = d->lo,
                            .hi = d->hi};
  }
  st = dlrun_copy_sync_fan(esize, ndim, n, to, &from, stream);
  dlrun_free(to);
  return st;
}
