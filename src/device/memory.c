/* What a user steers and sees of device memories beyond their statistics:
 * peak reset, giving unused memory back, and snapshots of every block with
 * the array or export that holds it (buffer.h's tags). */
#include <string.h>

#include "buffer.h"
#include "core/alloc.h"
#include "core/status_impl.h"

static dlrun_status check_memory(dlrun_device *dev, dlrun_memory_kind kind, const char *fn) {
  DLRUN_NONNULL(dev, fn, "dev");
  if ((int)kind < 0 || kind >= DLRUN_MEM_KIND_COUNT)
    return dlrun_fail(DLRUN_ERR_VALUE, "%s: invalid memory kind %d (expected %d or %d)", fn,
                      (int)kind, DLRUN_MEM_DEVICE, DLRUN_MEM_PINNED_HOST);
  return dev->local ? DLRUN_OK : dlrun_not_local(dev);
}

dlrun_status dlrun_device_reset_peak_memory_stats(dlrun_device *dev, dlrun_memory_kind kind) {
  dlrun_status st = check_memory(dev, kind, "dlrun_device_reset_peak_memory_stats");
  if (!st) dlrun_pool_reset_peak(dev->pools[kind]);
  return st;
}

dlrun_status dlrun_device_release_unused(dlrun_device *dev, uint64_t *released) {
  if (released) *released = 0;
  dlrun_status st = check_memory(dev, DLRUN_MEM_DEVICE, "dlrun_device_release_unused");
  if (st) return st;
  uint64_t n = 0;
  for (int k = 0; k < DLRUN_MEM_KIND_COUNT; k++) n += dlrun_pool_release_unused(dev->pools[k]);
  if (released) *released = n;
  return DLRUN_OK;
}

uint64_t dlrun_runtime_release_unused(dlrun_runtime *rt) {
  uint64_t total = 0, n;
  if (!rt) return 0;
  for (size_t i = 0; i < rt->ndevices; i++)
    if (rt->devices[i].local && !dlrun_device_release_unused(&rt->devices[i], &n)) total += n;
  return total;
}

const char *dlrun_owner_kind_name(dlrun_owner_kind kind) {
  switch (kind) {
  case DLRUN_OWNER_ARRAY: return "array";
  case DLRUN_OWNER_EXPORT: return "export";
  case DLRUN_OWNER_WORK: return "work";
  default: return "none";
  }
}

typedef struct collect {
  dlrun_memory_segment *seg;
  size_t cap;
} collect;

/* Called with the pool's mutex held: a tagged buffer is alive until its
 * block is freed, which takes that mutex, so its tags can be read. */
static int add_block(void *ctx, uint64_t offset, uint64_t size, uint64_t requested,
                     bool allocated, void *tag) {
  collect *c = ctx;
  if (dlrun_grow(&c->seg->blocks, c->seg->nblocks, &c->cap, sizeof *c->seg->blocks, 16))
    return 1;
  dlrun_memory_block *b = &c->seg->blocks[c->seg->nblocks];
  *b = (dlrun_memory_block){.offset = offset, .size = size, .requested_size = requested,
                            .allocated = allocated};
  if (!allocated) return c->seg->nblocks++, 0;
  const dlrun_buffer *buf = tag;
  b->owner = DLRUN_OWNER_WORK;
  if (buf && atomic_load(&buf->arrays) > 0) b->owner = DLRUN_OWNER_ARRAY;
  else if (buf && atomic_load(&buf->exports) > 0) b->owner = DLRUN_OWNER_EXPORT;
  const dlrun_buffer_owner *o = buf ? atomic_load(&buf->owner) : NULL;
  if (o) {
    if (!(b->sharding = dlrun_strdup(o->sharding))) return 1;
    b->dtype = o->dtype;
    b->ndim = o->ndim;
    memcpy(b->shape, o->dims, (size_t)o->ndim * sizeof *o->dims);
  }
  c->seg->nblocks++;
  return 0;
}

void dlrun_memory_snapshot_free(dlrun_memory_snapshot *snap) {
  if (!snap) return;
  for (size_t s = 0; s < snap->nsegments; s++) {
    for (size_t i = 0; i < snap->segments[s].nblocks; i++)
      dlrun_free((char *)snap->segments[s].blocks[i].sharding);
    dlrun_free(snap->segments[s].blocks);
  }
  dlrun_free(snap->segments);
  dlrun_free(snap);
}

dlrun_status dlrun_device_memory_snapshot(dlrun_device *dev, dlrun_memory_kind kind,
                                          dlrun_memory_snapshot **out) {
  DLRUN_NONNULL(out, "dlrun_device_memory_snapshot", "out");
  *out = NULL;
  dlrun_status st = check_memory(dev, kind, "dlrun_device_memory_snapshot");
  if (st) return st;
  dlrun_memory_snapshot *snap = dlrun_calloc(1, sizeof *snap);
  if (snap) snap->segments = dlrun_calloc(1, sizeof *snap->segments);
  if (!snap || !snap->segments) {
    dlrun_free(snap);
    return dlrun_fail_oom_host(sizeof *snap + sizeof *snap->segments);
  }
  snap->kind = kind;
  snap->nsegments = 1;
  collect c = {snap->segments, 0};
  if (dlrun_pool_visit(dev->pools[kind], add_block, &c)) {
    dlrun_memory_snapshot_free(snap);
    return dlrun_fail_oom_host(c.cap * sizeof(dlrun_memory_block));
  }
  dlrun_device_memory_stats(dev, kind, &snap->stats);
  snap->segments[0].size = snap->stats.bytes_limit;
  snap->segments[0].bytes_reserved = snap->stats.bytes_reserved;
  *out = snap;
  return DLRUN_OK;
}
