/* Device accessors and the runtime's devices per platform (device groups). */
#include <string.h>

#include "core/alloc.h"
#include "core/status_impl.h"
#include "device_impl.h"
#include "timeline.h"
#include "dlrun/debug.h"
#include "dlrun/opencl.h"
#include "dlrun/stats.h"

static const dlrun_device_group *find_group(dlrun_runtime *rt, const char *platform) {
  if (!platform) return rt->default_group;
  for (size_t g = 0; g < rt->ngroups; g++)
    if (strcmp(rt->groups[g].platform->name, platform) == 0) return &rt->groups[g];
  return NULL;
}

/* Getters given NULL answer NULL, 0 or -1 rather than crash. */

size_t dlrun_device_count(dlrun_runtime *rt, const char *platform) {
  const dlrun_device_group *g = rt ? find_group(rt, platform) : NULL;
  return g ? g->count : 0;
}

dlrun_device *dlrun_device_get(dlrun_runtime *rt, const char *platform, size_t i) {
  const dlrun_device_group *g = rt ? find_group(rt, platform) : NULL;
  return g && i < g->count ? &rt->devices[g->first + i] : NULL;
}

size_t dlrun_local_device_count(dlrun_runtime *rt, const char *platform) {
  const dlrun_device_group *g = rt ? find_group(rt, platform) : NULL;
  return g ? g->local_count : 0;
}

dlrun_device *dlrun_local_device_get(dlrun_runtime *rt, const char *platform, size_t i) {
  const dlrun_device_group *g = rt ? find_group(rt, platform) : NULL;
  if (!g || i >= g->local_count) return NULL;
  return &rt->devices[g->first + (size_t)rt->process_index * g->local_count + i];
}

const char *dlrun_default_backend(dlrun_runtime *rt) {
  return rt ? rt->default_group->platform->name : NULL;
}
dlrun_device *dlrun_host_device(dlrun_runtime *rt) { return rt ? rt->host : NULL; }

dlrun_device *dlrun_process_host_device(dlrun_runtime *rt, int process) {
  if (!rt || !rt->host) return NULL;
  for (size_t i = 0; i < rt->ndevices; i++) {
    dlrun_device *d = &rt->devices[i];
    if (d->platform == rt->host->platform && d->process_index == process &&
        d->local_index == rt->host->local_index)
      return d;
  }
  return NULL;
}
const char *dlrun_runtime_platforms(dlrun_runtime *rt) { return rt ? rt->platforms : NULL; }
const char *dlrun_runtime_spec(dlrun_runtime *rt) { return rt ? rt->spec : NULL; }

int dlrun_device_id(const dlrun_device *dev) { return dev ? dev->id : -1; }
const char *dlrun_device_platform(const dlrun_device *dev) {
  return dev ? dev->platform->name : NULL;
}
int dlrun_device_process_index(const dlrun_device *dev) { return dev ? dev->process_index : -1; }
const char *dlrun_device_name(const dlrun_device *dev) { return dev ? dev->name : NULL; }
dlrun_runtime *dlrun_device_runtime(const dlrun_device *dev) { return dev ? dev->rt : NULL; }

dlrun_status dlrun_device_memory_stats(dlrun_device *dev, dlrun_memory_kind kind,
                                       dlrun_memory_stats *out) {
  DLRUN_NONNULL(dev, "dlrun_device_memory_stats", "dev");
  DLRUN_NONNULL(out, "dlrun_device_memory_stats", "out");
  if ((int)kind < 0 || kind >= DLRUN_MEM_KIND_COUNT)
    return dlrun_fail(DLRUN_ERR_VALUE, "invalid memory kind %d", (int)kind);
  if (!dev->local) return dlrun_not_local(dev);
  dlrun_pool_stats s;
  dlrun_pool_get_stats(dev->pools[kind], &s);
  *out = (dlrun_memory_stats){
      .bytes_in_use = s.bytes_in_use,
      .peak_bytes_in_use = s.peak_bytes_in_use,
      .bytes_limit = s.bytes_limit,
      .bytes_reserved = s.bytes_reserved,
      .num_allocs = s.num_allocs,
      .largest_alloc_size = s.largest_alloc_size,
      .largest_free_block_bytes = s.largest_free_block_bytes,
      .fragmentation = s.fragmentation,
  };
  if (dev->platform->bytes_held) out->bytes_reserved = dev->platform->bytes_held(dev, kind);
  return DLRUN_OK;
}

dlrun_status dlrun_not_local(const dlrun_device *dev) {
  return dlrun_fail(DLRUN_ERR_RUNTIME,
                    "%s belongs to process %d: its memory is not addressable from process %d",
                    dev->name, dev->process_index, dev->rt->process_index);
}

void dlrun_device_synchronize(dlrun_device *dev) {
  if (!dev || !dev->local) return; /* another process's: nothing queued here */
  dlrun_event ev;
  if (dlrun_device_record(dev, &ev) == DLRUN_OK) dlrun_event_wait(ev);
}

bool dlrun_event_done(dlrun_event ev) { return !ev.platform || ev.platform->event_query(ev); }

dlrun_status dlrun_event_status(dlrun_event ev) {
  if (dlrun_event_is_timeline(ev)) return dlrun_timeline_status(ev);
  if (!ev.platform || !ev.platform->event_query(ev)) return DLRUN_OK;
  return ev.platform->event_wait(ev); /* complete: returns at once */
}

dlrun_status dlrun_event_wait(dlrun_event ev) {
  return ev.platform ? ev.platform->event_wait(ev) : DLRUN_OK;
}

typedef struct foreign_callback {
  void (*fn)(void *ctx);
  void *ctx;
} foreign_callback;

/* A foreign platform's callback thread counts as an event callback too. */
static void run_foreign(void *p) {
  foreign_callback c = *(foreign_callback *)p;
  dlrun_free(p);
  dlrun_timeline_run_as_callback(c.fn, c.ctx);
}

dlrun_status dlrun_event_then(dlrun_event ev, void (*fn)(void *ctx), void *ctx) {
  if (!ev.platform) {
    fn(ctx);
    return DLRUN_OK;
  }
  if (dlrun_event_is_timeline(ev)) return dlrun_timeline_then(ev, fn, ctx);
  foreign_callback *c = dlrun_malloc(sizeof *c);
  if (!c) return dlrun_fail_oom_host(sizeof *c);
  *c = (foreign_callback){fn, ctx};
  dlrun_status st = ev.platform->event_then(ev, run_foreign, c);
  if (st) dlrun_free(c);
  return st;
}

dlrun_status dlrun_events_wait(const dlrun_event *evs, size_t n) {
  for (size_t i = n; i-- > 0;) dlrun_event_wait(evs[i]);
  for (size_t i = 0; i < n; i++) {
    dlrun_status st = dlrun_event_status(evs[i]);
    if (st) return st;
  }
  return DLRUN_OK;
}

dlrun_status dlrun_device_record(dlrun_device *dev, dlrun_event *out) {
  return dev->platform->record(dev, NULL, 0, out);
}

void dlrun_device_stats_get(dlrun_device *dev, dlrun_device_stats *out) {
  if (!out) return;
  if (!dev) {
    *out = (dlrun_device_stats){0};
    return;
  }
  out->bytes_in = atomic_load(&dev->bytes_in);
  out->bytes_out = atomic_load(&dev->bytes_out);
  out->live_exports = atomic_load(&dev->live_exports);
}

void dlrun_transfer_progress(dlrun_runtime *rt, uint64_t *queued, uint64_t *done) {
  if (queued) *queued = rt ? atomic_load(&rt->bytes_queued) : 0;
  if (done) *done = rt ? atomic_load(&rt->bytes_done) : 0;
}

void dlrun_runtime_synchronize(dlrun_runtime *rt) {
  for (size_t i = 0; i < rt->ndevices; i++) dlrun_device_synchronize(&rt->devices[i]);
}

const char *dlrun_memory_kind_name(dlrun_memory_kind kind) {
  return kind == DLRUN_MEM_PINNED_HOST ? "pinned_host" : "device";
}

dlrun_status dlrun_debug_inject_failure(dlrun_device *dev, const char *what, unsigned count) {
  DLRUN_NONNULL(dev, "dlrun_debug_inject_failure", "dev");
  bool copy = what && strcmp(what, "copy") == 0, fill = what && strcmp(what, "fill") == 0;
  if (!copy && !fill)
    return dlrun_fail(DLRUN_ERR_VALUE, "inject_failure: what must be \"copy\" or \"fill\", got "
                      "%s%.32s%s", what ? "\"" : "", what ? what : "NULL", what ? "\"" : "");
  if (!dev->local) return dlrun_not_local(dev);
  if (!dev->platform->inject_failure)
    return dlrun_fail(DLRUN_ERR_RUNTIME, "inject_failure: %s's platform (%s) cannot inject "
                      "failures", dev->name, dev->platform->name);
  return dev->platform->inject_failure(dev, copy ? DLRUN_WORK_COPY : DLRUN_WORK_FILL, count);
}

dlrun_status dlrun_opencl_handles(dlrun_device *dev, void **context, void **queue,
                                  void **device_id) {
  DLRUN_NONNULL(dev, "dlrun_opencl_handles", "dev");
  if (strcmp(dev->platform->name, "opencl") != 0 || !dev->platform->native_handles)
    return dlrun_fail(DLRUN_ERR_VALUE, "dlrun_opencl_handles: %s is a device of platform %s, "
                      "not opencl", dev->name, dev->platform->name);
  if (!dev->local) return dlrun_not_local(dev);
  void *h[3] = {NULL, NULL, NULL};
  dlrun_status st = dev->platform->native_handles(dev, h, 3);
  if (st) return st;
  if (context) *context = h[0];
  if (queue) *queue = h[1];
  if (device_id) *device_id = h[2];
  return DLRUN_OK;
}
