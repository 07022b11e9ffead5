/* The device layer's entry points for device bytes: each goes to the
 * queue of the platform that can reach the memories involved
 * (device/buffer.h). */
#include <stdio.h>
#include <string.h>

#include "buffer.h"
#include "core/alloc.h"
#include "core/status_impl.h"
#include "host_loops.h"
#include "timeline.h"
#include "enqueue.h"

dlrun_box_end dlrun_buffer_end(const dlrun_buffer *b, const int64_t *origin,
                               const int64_t *strides) {
  return (dlrun_box_end){.dev = b->dev, .kind = b->kind, .data = b->data, .origin = origin,
                         .strides = strides};
}

dlrun_box_end dlrun_host_end(const void *data, const int64_t *origin, const int64_t *strides) {
  return (dlrun_box_end){.data = data, .origin = origin, .strides = strides};
}

bool dlrun_memory_owns(const dlrun_device *dev, dlrun_memory_kind kind, const void *data,
                       uint64_t n) {
  return dev->platform->owns(dev, kind, data, n);
}

bool dlrun_memory_host_readable(const dlrun_device *dev, dlrun_memory_kind kind) {
  return dev->platform->host_readable(dev, kind);
}

static bool end_is_host(const dlrun_box_end *e) {
  return !e->dev || dlrun_memory_is_host(e->dev, e->kind);
}

/* An end as `queue`'s platform sees it: another platform's memory reaches
 * it only as host memory (route_of never hands it device memory of
 * another platform). */
static dlrun_box_end seen_by(const dlrun_device *queue, const dlrun_box_end *e) {
  dlrun_box_end out = *e;
  if (out.dev && (!queue || out.dev->platform != queue->platform)) out.dev = NULL;
  return out;
}

/* One platform's ends go to its queue (the destination's device); device
 * memory the host cannot use goes to its own platform's queue; between
 * device memories of two platforms, the copy is staged through the host. */
void dlrun_copy_route_of(const dlrun_box_end *dst, const dlrun_box_end *src,
                         dlrun_copy_route *out) {
  dlrun_device *d = dst->dev, *s = src->dev;
  bool dst_host = end_is_host(dst), src_host = end_is_host(src);
  *out = (dlrun_copy_route){0};
  if (d && s && d->platform == s->platform) out->queue = d;
  else if (!dst_host && !src_host) {
    out->staged = true;
    out->queue = d;
    out->src_queue = s;
  } else if (!dst_host) out->queue = d;
  else if (!src_host) out->queue = s;
  else out->queue = d ? d : s;
  out->dst = seen_by(out->queue, dst);
  out->src = seen_by(out->staged ? s : out->queue, src);
}

static dlrun_status copy_on(dlrun_device *queue, size_t esize, int ndim, const int64_t *lo,
                            const int64_t *hi, const dlrun_box_end *dst,
                            const dlrun_box_end *src) {
  if (!queue) { /* both plain host memory */
    dlrun_host_copy_box(esize, ndim, lo, hi, (void *)dst->data, dst->origin, dst->strides,
                        src->data, src->origin, src->strides);
    return DLRUN_OK;
  }
  dlrun_copy_piece piece = {.src = *src, .lo = lo, .hi = hi};
  dlrun_copy_op op = {.esize = esize, .ndim = ndim, .dst = *dst, .npieces = 1,
                      .pieces = &piece, .sync = true};
  dlrun_event done;
  dlrun_status st = dlrun_queue_copy_box(queue, &op, NULL, 0, &done);
  return st ? st : dlrun_event_wait(done);
}

dlrun_status dlrun_copy_sync(size_t esize, int ndim, const int64_t *lo, const int64_t *hi,
                             const dlrun_box_end *dst, const dlrun_box_end *src) {
  dlrun_copy_route r;
  dlrun_copy_route_of(dst, src, &r);
  if (!r.staged) return copy_on(r.queue, esize, ndim, lo, hi, &r.dst, &r.src);
  /* Through a host block holding the box, row-major. */
  int64_t shape[DLRUN_MAX_NDIM], strides[DLRUN_MAX_NDIM];
  uint64_t bytes = esize;
  for (int d = 0; d < ndim; d++) bytes *= (uint64_t)(shape[d] = hi[d] - lo[d]);
  dlrun_row_major_strides(ndim, shape, strides);
  void *stage = dlrun_malloc(bytes ? bytes : 1);
  if (!stage) return dlrun_fail_oom_host(bytes);
  dlrun_box_end host = dlrun_host_end(stage, lo, strides);
  dlrun_box_end to_host = seen_by(r.src_queue, &host);
  dlrun_status st = copy_on(r.src_queue, esize, ndim, lo, hi, &to_host, &r.src);
  if (!st) st = copy_on(r.queue, esize, ndim, lo, hi, &r.dst, &host);
  dlrun_free(stage);
  return st;
}

static void release_buffer(void *b) { dlrun_buffer_release(b); }

dlrun_status dlrun_buffer_fill_async(dlrun_buffer *b, const dlrun_fill *f) {
  dlrun_status st = dlrun_queue_fill(b->dev, b->kind, b->data, b->nbytes, f, NULL, 0, &b->ready);
  if (st) return st;
  dlrun_buffer_retain(b); /* until the fill is done: back before b reads ready */
  st = dlrun_event_is_timeline(b->ready) ? dlrun_timeline_then_early(b->ready, release_buffer, b)
                                         : dlrun_event_then(b->ready, release_buffer, b);
  if (!st) return DLRUN_OK;
  /* No memory to be called back: the fill is done before b can go. */
  char why[256];
  snprintf(why, sizeof why, "%s", dlrun_last_error());
  dlrun_event_wait(b->ready);
  dlrun_buffer_release(b);
  return dlrun_fail(st, "%s", why);
}

bool dlrun_memory_same_place(const dlrun_device *have, dlrun_memory_kind have_kind,
                             const dlrun_device *want, dlrun_memory_kind want_kind) {
  if (dlrun_memory_is_host(have, have_kind)) return dlrun_memory_is_host(want, want_kind);
  return have == want && have_kind == want_kind;
}

void dlrun_buffer_dlpack_device(const dlrun_buffer *b, int32_t *type, int32_t *id) {
  b->dev->platform->dlpack_device(b->dev, b->kind, type, id);
}

bool dlrun_memory_is_host(const dlrun_device *dev, dlrun_memory_kind kind) {
  return dev->platform->is_host_memory(dev, kind);
}

dlrun_status dlrun_buffer_export_data(const dlrun_buffer *b, void **data, uint64_t *byte_offset) {
  *data = b->data;
  *byte_offset = 0;
  const dlrun_platform *pl = b->dev->platform;
  if (!b->nbytes || !pl->export_data) return DLRUN_OK;
  return pl->export_data(b->dev, b->kind, b->data, data, byte_offset);
}

dlrun_status dlrun_memory_import(const dlrun_device *dev, dlrun_memory_kind kind, void *data,
                                 uint64_t byte_offset, uint64_t below, uint64_t span,
                                 const void **elem0, bool *handled) {
  const dlrun_platform *pl = dev->platform;
  *handled = pl->import_data != NULL;
  if (!*handled) return DLRUN_OK;
  if (byte_offset < below)
    return dlrun_fail(DLRUN_ERR_BUFFER, "from_dlpack: the tensor reaches %llu bytes before its "
                      "byte_offset %llu, outside the memory of %s",
                      (unsigned long long)below, (unsigned long long)byte_offset, dev->name);
  void *first;
  dlrun_status st = pl->import_data(dev, kind, data, byte_offset - below, span, &first);
  if (!st) *elem0 = (const char *)first + below;
  return st;
}

bool dlrun_device_has_streams(const dlrun_device *dev) {
  return dev->platform->stream_wait != NULL;
}

dlrun_status dlrun_device_stream_wait(const dlrun_device *dev, int64_t stream, dlrun_event ev) {
  return dev->platform->stream_wait(dev, stream, ev);
}

int64_t dlrun_device_consumer_stream(const dlrun_device *dev) {
  return dev->platform->consumer_stream ? dev->platform->consumer_stream(dev) : 0;
}

dlrun_device *dlrun_device_from_dlpack(dlrun_runtime *rt, int32_t type, int32_t id,
                                       dlrun_memory_kind *kind) {
  for (size_t g = 0; g < rt->ngroups; g++) {
    const dlrun_device_group *grp = &rt->groups[g];
    /* DLPack device ids are process-local ordinals, as CUDA's. */
    ptrdiff_t i = grp->platform->dlpack_lookup(type, id, grp->local_count, kind);
    if (i >= 0)
      return &rt->devices[grp->first + (size_t)rt->process_index * grp->local_count + (size_t)i];
  }
  return NULL;
}

dlrun_device *dlrun_device_exporting_as(dlrun_runtime *rt, int32_t type, int32_t id,
                                        bool *type_known) {
  *type_known = false;
  for (size_t g = 0; g < rt->ngroups; g++) {
    const dlrun_device_group *grp = &rt->groups[g];
    dlrun_device *local = &rt->devices[grp->first + (size_t)rt->process_index * grp->local_count];
    for (size_t i = 0; i < grp->local_count; i++) {
      int32_t t, d;
      grp->platform->dlpack_device(&local[i], DLRUN_MEM_DEVICE, &t, &d);
      if (t != type) continue;
      if (d == id) return &local[i];
      *type_known = true;
    }
  }
  return NULL;
}

/* ---- the public driver copies ---- */

static dlrun_status driver_copy(dlrun_device *dev, dlrun_memory_kind kind, const void *device_data,
                                uint64_t nbytes, const void *host, bool to_host, const char *fn) {
  DLRUN_NONNULL(dev, fn, "dev");
  if ((int)kind < 0 || kind >= DLRUN_MEM_KIND_COUNT)
    return dlrun_fail(DLRUN_ERR_VALUE, "%s: invalid memory kind %d", fn, (int)kind);
  if (!dev->local) return dlrun_not_local(dev);
  if (nbytes == 0) return DLRUN_OK;
  DLRUN_NONNULL(device_data, fn, "device_data");
  DLRUN_NONNULL(host, fn, "host");
  if (nbytes > INT64_MAX || !dlrun_memory_owns(dev, kind, device_data, nbytes))
    return dlrun_fail(DLRUN_ERR_VALUE, "%s: the %llu bytes at %p are not in %s's %s memory", fn,
                      (unsigned long long)nbytes, device_data, dev->name,
                      kind == DLRUN_MEM_DEVICE ? "device" : "pinned_host");
  static const int64_t origin[1] = {0}, strides[1] = {1};
  int64_t lo[1] = {0}, hi[1] = {(int64_t)nbytes};
  dlrun_box_end d = {.dev = dev, .kind = kind, .data = device_data, .origin = origin,
                     .strides = strides};
  dlrun_box_end h = dlrun_host_end(host, origin, strides);
  return to_host ? dlrun_copy_sync(1, 1, lo, hi, &h, &d) : dlrun_copy_sync(1, 1, lo, hi, &d, &h);
}

dlrun_status dlrun_device_copy_to_host(dlrun_device *dev, dlrun_memory_kind kind,
                                       const void *device_data, uint64_t nbytes, void *host) {
  return driver_copy(dev, kind, device_data, nbytes, host, true, "dlrun_device_copy_to_host");
}

dlrun_status dlrun_device_copy_from_host(dlrun_device *dev, dlrun_memory_kind kind,
                                         void *device_data, const void *host, uint64_t nbytes) {
  return driver_copy(dev, kind, device_data, nbytes, host, false, "dlrun_device_copy_from_host");
}
