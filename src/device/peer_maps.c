/* The peers' regions mapped into this process (peer_memory.h): the table
 * that the pulls map into and the trace reads, apart from the copies. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>

#include "core/alloc.h"
#include "core/status_impl.h"
#include "device/peer_memory.h"
#include "distributed/distributed_impl.h"

/* A peer's region mapped here. */
typedef struct peer_map {
  int peer;
  const dlrun_device *dev; /* the peer's device whose memory it is (the trace names it) */
  const dlrun_platform *platform;
  dlrun_shared_region region;
  const void *mapping;
} peer_map;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static peer_map *maps;
static size_t nmaps, capmaps;
static atomic_size_t mapped; /* nmaps, read without mu (the trace, the count) */

/* Test hook, read once: DLRUN_FAIL_IPC_MAP=k makes this process's k-th
 * mapping of a peer's region fail. */
static pthread_once_t hook_once = PTHREAD_ONCE_INIT;
static long fail_at, attempts;

static void read_hook(void) {
  const char *f = getenv("DLRUN_FAIL_IPC_MAP");
  fail_at = f ? strtol(f, NULL, 10) : 0;
}

dlrun_status dlrun_peer_memory_map(const dlrun_device *src_dev, int peer, int pid,
                                   const dlrun_shared_source *src, const void **mapping) {
  pthread_once(&hook_once, read_hook);
  pthread_mutex_lock(&mu);
  for (size_t i = 0; i < nmaps; i++)
    if (maps[i].peer == peer && maps[i].region.id == src->id) {
      *mapping = maps[i].mapping;
      pthread_mutex_unlock(&mu);
      return DLRUN_OK;
    }
  dlrun_status st = dlrun_grow(&maps, nmaps, &capmaps, sizeof *maps, 8);
  peer_map m = {.peer = peer, .dev = src_dev, .platform = src_dev->platform,
                .region = {.id = src->id, .size = src->size, .handle = src->handle}};
  if (!st && fail_at && ++attempts == fail_at)
    st = dlrun_fail(DLRUN_ERR_RUNTIME, "cannot map the memory of process %d: injected failure "
                    "(DLRUN_FAIL_IPC_MAP)", peer);
  if (!st) st = m.platform->map_shared(&m.region, pid, &m.mapping);
  if (!st) {
    if (nmaps == 0) dlrun_distributed_at_leave(dlrun_peer_memory_unmap_all);
    maps[nmaps++] = m;
    atomic_store(&mapped, nmaps);
    *mapping = m.mapping;
  }
  pthread_mutex_unlock(&mu);
  return st;
}

void dlrun_peer_memory_unmap_all(void) {
  pthread_mutex_lock(&mu);
  for (size_t i = 0; i < nmaps; i++)
    maps[i].platform->unmap_shared(&maps[i].region, maps[i].mapping);
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
    uintptr_t v = (uintptr_t)maps[i].mapping;
    if (a >= v && a - v < maps[i].region.size) dev = maps[i].dev;
  }
  pthread_mutex_unlock(&mu);
  return dev;
}

size_t dlrun_peer_memory_mapped_count(void) { return atomic_load(&mapped); }
