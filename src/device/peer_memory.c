/* The one-copy path between processes on one host (peer_memory.h). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#include "core/alloc.h"
#include "core/status_impl.h"
#include "device/peer_memory.h"
#include "distributed/distributed_impl.h"

/* A peer's region mapped here. */
typedef struct mapping {
  int peer;
  const dlrun_device *dev; /* the peer's device whose memory it is (the trace names it) */
  const dlrun_platform *platform;
  dlrun_shared_region region;
  const void *view;
} mapping;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static mapping *maps;
static size_t nmaps, capmaps;
static atomic_size_t mapped; /* nmaps, read without mu when tracing */

/* Test hooks, read once: DLRUN_FAIL_IPC_MAP=k makes this process's k-th
 * mapping of a peer's region fail; DLRUN_IPC_DELAY_MS=n waits n ms before
 * each copy out of a peer's memory (so that a spec can kill the peer while
 * the copy is under way). */
static pthread_once_t hooks_once = PTHREAD_ONCE_INIT;
static long fail_at, delay_ms, attempts;

static void read_hooks(void) {
  const char *f = getenv("DLRUN_FAIL_IPC_MAP"), *d = getenv("DLRUN_IPC_DELAY_MS");
  fail_at = f ? strtol(f, NULL, 10) : 0;
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

/* The view of peer's region `src`, mapping it the first time. */
static dlrun_status view_of(const dlrun_device *src_dev, int peer, int pid,
                            const dlrun_shared_source *src, const void **view) {
  pthread_mutex_lock(&mu);
  for (size_t i = 0; i < nmaps; i++)
    if (maps[i].peer == peer && maps[i].region.id == src->id) {
      *view = maps[i].view;
      pthread_mutex_unlock(&mu);
      return DLRUN_OK;
    }
  dlrun_status st = dlrun_grow(&maps, nmaps, &capmaps, sizeof *maps, 8);
  mapping m = {.peer = peer, .dev = src_dev, .platform = src_dev->platform,
               .region = {.id = src->id, .size = src->size, .handle = src->handle}};
  if (!st && fail_at && ++attempts == fail_at)
    st = dlrun_fail(DLRUN_ERR_RUNTIME, "cannot map the memory of process %d: injected failure "
                    "(DLRUN_FAIL_IPC_MAP)", peer);
  if (!st) st = m.platform->map_shared(&m.region, pid, &m.view);
  if (!st) {
    if (nmaps == 0) dlrun_distributed_at_leave(dlrun_peer_memory_unmap_all);
    maps[nmaps++] = m;
    atomic_store(&mapped, nmaps);
    *view = m.view;
  }
  pthread_mutex_unlock(&mu);
  return st;
}

dlrun_status dlrun_buffer_pull(dlrun_buffer *dst, size_t esize, int ndim,
                               const int64_t *dst_shard_dims, const int64_t *dst_origin,
                               const int64_t *lo, const int64_t *hi, const dlrun_device *src_dev,
                               int peer, int pid, const dlrun_shared_source *src,
                               const int64_t *src_shard_dims, const int64_t *src_origin) {
  pthread_once(&hooks_once, read_hooks);
  uint64_t bytes = esize;
  for (int d = 0; d < ndim; d++) bytes *= (uint64_t)src_shard_dims[d];
  if (src->offset > src->size || bytes > src->size - src->offset)
    return dlrun_fail(DLRUN_ERR_RUNTIME,
                      "process %d shared a shard of %llu bytes at %llu of a region of %llu",
                      peer, (unsigned long long)bytes, (unsigned long long)src->offset,
                      (unsigned long long)src->size);
  const void *view;
  dlrun_status st = view_of(src_dev, peer, pid, src, &view);
  if (st) return st;
  if (delay_ms > 0) nanosleep(&(struct timespec){delay_ms / 1000, delay_ms % 1000 * 1000000L}, NULL);
  int64_t src_strides[DLRUN_MAX_NDIM], dst_scratch[DLRUN_MAX_NDIM];
  dlrun_row_major_strides(ndim, src_shard_dims, src_strides);
  dlrun_box_end from = dlrun_host_end((const unsigned char *)view + src->offset, src_origin,
                                      src_strides);
  dlrun_box_end to = dlrun_buffer_end(dst, dst_origin,
                                      dlrun_buffer_layout(dst, ndim, dst_shard_dims, dst_scratch));
  return dlrun_copy_sync(esize, ndim, lo, hi, &to, &from);
}

void dlrun_peer_memory_unmap_all(void) {
  pthread_mutex_lock(&mu);
  for (size_t i = 0; i < nmaps; i++) maps[i].platform->unmap_shared(&maps[i].region, maps[i].view);
  dlrun_free(maps);
  maps = NULL;
  nmaps = capmaps = 0;
  atomic_store(&mapped, 0);
  pthread_mutex_unlock(&mu);
}

const dlrun_device *dlrun_peer_memory_device(const void *p) {
  if (!atomic_load(&mapped)) return NULL;
  const dlrun_device *dev = NULL;
  uintptr_t a = (uintptr_t)p;
  pthread_mutex_lock(&mu);
  for (size_t i = 0; i < nmaps && !dev; i++) {
    uintptr_t v = (uintptr_t)maps[i].view;
    if (a >= v && a - v < maps[i].region.size) dev = maps[i].dev;
  }
  pthread_mutex_unlock(&mu);
  return dev;
}

size_t dlrun_peer_memory_mapped_count(void) {
  pthread_mutex_lock(&mu);
  size_t n = nmaps;
  pthread_mutex_unlock(&mu);
  return n;
}
