/* Copies of N-d boxes between any two memories: each goes to the queue of
 * the platform that can reach the memories involved (copy_route.h), and
 * the public driver copies. */
#include <stdio.h>
#include <string.h>

#include "copy_route.h"
#include "boxes.h"
#include "core/alloc.h"
#include "core/status_impl.h"
#include "enqueue.h"
#include "host_loops.h"
#include "memory_place.h"
#include "streaming.h"
#include "timeline.h"

dlrun_box_end dlrun_buffer_end(const dlrun_buffer *b, const int64_t *origin,
                               const int64_t *strides) {
  return (dlrun_box_end){.dev = b->dev, .kind = b->kind, .data = b->data, .origin = origin,
                         .strides = strides};
}

dlrun_box_end dlrun_host_end(const void *data, const int64_t *origin, const int64_t *strides) {
  return (dlrun_box_end){.data = data, .origin = origin, .strides = strides};
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
                            const int64_t *hi, const dlrun_box_end *dst, const dlrun_box_end *src,
                            bool stream) {
  if (!queue) { /* both plain host memory */
    dlrun_host_copy_box(esize, ndim, lo, hi, (void *)dst->data, dst->origin, dst->strides,
                        src->data, src->origin, src->strides, stream);
    return DLRUN_OK;
  }
  dlrun_copy_piece piece = {.src = *src, .lo = lo, .hi = hi};
  dlrun_copy_op op = {.esize = esize, .ndim = ndim, .dst = *dst, .npieces = 1,
                      .pieces = &piece, .sync = true, .stream = stream};
  dlrun_event done;
  dlrun_status st = dlrun_queue_copy_box(queue, &op, NULL, 0, &done);
  return st ? st : dlrun_event_wait(done);
}

dlrun_status dlrun_copy_sync(size_t esize, int ndim, const int64_t *lo, const int64_t *hi,
                             const dlrun_box_end *dst, const dlrun_box_end *src) {
  return dlrun_copy_sync_in(esize, ndim, lo, hi, dst, src,
                            dlrun_copy_streams(dlrun_box_bytes(esize, ndim, lo, hi)));
}

dlrun_status dlrun_copy_sync_in(size_t esize, int ndim, const int64_t *lo, const int64_t *hi,
                                const dlrun_box_end *dst, const dlrun_box_end *src, bool stream) {
  dlrun_copy_route r;
  dlrun_copy_route_of(dst, src, &r);
  if (!r.staged) return copy_on(r.queue, esize, ndim, lo, hi, &r.dst, &r.src, stream);
  /* Through a host block holding the box, row-major. */
  int64_t shape[DLRUN_MAX_NDIM], strides[DLRUN_MAX_NDIM];
  uint64_t bytes = esize;
  for (int d = 0; d < ndim; d++) bytes *= (uint64_t)(shape[d] = hi[d] - lo[d]);
  dlrun_row_major_strides(ndim, shape, strides);
  void *stage = dlrun_malloc(bytes ? bytes : 1);
  if (!stage) return dlrun_fail_oom_host(bytes);
  dlrun_box_end host = dlrun_host_end(stage, lo, strides);
  dlrun_box_end to_host = seen_by(r.src_queue, &host);
  /* The staging block is read back at once: only the second step streams. */
  dlrun_status st = copy_on(r.src_queue, esize, ndim, lo, hi, &to_host, &r.src, false);
  if (!st) st = copy_on(r.queue, esize, ndim, lo, hi, &r.dst, &host, stream);
  dlrun_free(stage);
  return st;
}

/* The copies of dlrun_copy_sync_fan as one unit, when their routes allow:
 * false when they do not (nothing done); else *st is the outcome. */
static bool copy_fan_together(size_t esize, int ndim, size_t n, const dlrun_fan_dst *dsts,
                              const dlrun_box_end *src, bool stream, dlrun_status *st) {
  if (n < 2) return false;
  const dlrun_platform *pl = NULL;
  for (size_t i = 0; i < n; i++) {
    dlrun_copy_route r;
    dlrun_copy_route_of(&dsts[i].dst, src, &r);
    if (r.staged || !r.queue || (pl && r.queue->platform != pl)) return false;
    pl = r.queue->platform;
  }
  if (!pl->copy_boxes) return false; /* checked before anything is allocated */
  size_t each = sizeof(dlrun_copy_op) + sizeof(dlrun_copy_piece) + sizeof(dlrun_copy_op *);
  dlrun_copy_op *ops = n <= SIZE_MAX / each ? dlrun_malloc(n * each) : NULL;
  if (!ops) {
    *st = dlrun_fail_oom_host(n * each);
    return true;
  }
  dlrun_copy_piece *pieces = (dlrun_copy_piece *)(void *)(ops + n);
  dlrun_copy_op **list = (dlrun_copy_op **)(void *)(pieces + n);
  dlrun_device *queue = NULL;
  for (size_t i = 0; i < n; i++) {
    dlrun_copy_route r;
    dlrun_copy_route_of(&dsts[i].dst, src, &r);
    if (i == 0) queue = r.queue;
    pieces[i] = (dlrun_copy_piece){.src = r.src, .lo = dsts[i].lo, .hi = dsts[i].hi};
    ops[i] = (dlrun_copy_op){.esize = esize, .ndim = ndim, .dst = r.dst, .npieces = 1,
                             .pieces = &pieces[i], .sync = true, .stream = stream};
    list[i] = &ops[i];
  }
  dlrun_event done;
  *st = dlrun_queue_copy_boxes(queue, list, n, NULL, 0, &done);
  if (!*st) *st = dlrun_event_wait(done);
  dlrun_free(ops);
  return true;
}

dlrun_status dlrun_copy_sync_fan(size_t esize, int ndim, size_t n, const dlrun_fan_dst *dsts,
                                 const dlrun_box_end *src, bool stream) {
  dlrun_status st = DLRUN_OK;
  if (copy_fan_together(esize, ndim, n, dsts, src, stream, &st)) return st;
  for (size_t i = 0; i < n && !st; i++)
    st = dlrun_copy_sync_in(esize, ndim, dsts[i].lo, dsts[i].hi, &dsts[i].dst, src, stream);
  return st;
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
