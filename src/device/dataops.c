/* The device layer's entry points for device bytes: each goes to the
 * platform of the memory involved (device/buffer.h). */
#include <string.h>

#include "buffer.h"
#include "core/alloc.h"
#include "core/status_impl.h"
#include "core/trace_impl.h"
#include "platform_impl.h"

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

static bool end_host_readable(const dlrun_box_end *e) {
  return !e->dev || dlrun_memory_host_readable(e->dev, e->kind);
}

/* The copy goes to the platform whose memory the host cannot read (the
 * destination's first); between host-readable memories, any will do. Both
 * ends on memories the host cannot read must be one platform's: sim is the
 * only such platform today (a second one would stage through the host). */
void dlrun_copy_box(size_t esize, int ndim, const int64_t *lo, const int64_t *hi,
                    const dlrun_box_end *dst, const dlrun_box_end *src) {
  const dlrun_device *by = !end_host_readable(dst) ? dst->dev
                           : !end_host_readable(src) ? src->dev
                           : dst->dev ? dst->dev : src->dev;
  if (by) by->platform->copy_box(esize, ndim, lo, hi, dst, src);
  else dlrun_host_copy_box(esize, ndim, lo, hi, (void *)dst->data, dst->origin, dst->strides,
                           src->data, src->origin, src->strides);
}

void dlrun_buffer_fill(dlrun_buffer *b, const dlrun_fill *f) {
  if (b->nbytes) b->dev->platform->fill(b->dev, b->kind, b->data, b->nbytes, f);
}

typedef struct fill_task {
  dlrun_task node;
  dlrun_buffer *buf;
  dlrun_fill fill;
} fill_task;

static void run_fill(void *ctx) {
  fill_task *t = ctx;
  uint64_t start = dlrun_trace_enabled() ? dlrun_trace_now() : 0;
  dlrun_buffer_fill(t->buf, &t->fill);
  dlrun_trace_event(t->buf->dev->name, "compute", t->fill.sequence ? "arange" : "fill", start,
                    "\"bytes\": %llu", (unsigned long long)t->buf->nbytes);
  dlrun_buffer_release(t->buf);
  dlrun_free(t);
}

dlrun_status dlrun_buffer_fill_async(dlrun_buffer *b, const dlrun_fill *f) {
  fill_task *t = dlrun_malloc(sizeof *t);
  if (!t) return dlrun_fail_oom_host(sizeof *t);
  *t = (fill_task){.buf = b, .fill = *f};
  dlrun_buffer_retain(b);
  dlrun_status st = dlrun_device_submit(b->dev, &t->node, NULL, 0, run_fill, t, &b->ready);
  if (st) {
    dlrun_buffer_release(b);
    dlrun_free(t);
  }
  return st;
}

dlrun_scalar dlrun_fill_value(const dlrun_fill *f, int64_t i) {
  if (f->integral)
    return (dlrun_scalar){.kind = DLRUN_SCALAR_INT, .i = f->start.i + (f->first + i) * f->step.i};
  return (dlrun_scalar){.kind = DLRUN_SCALAR_FLOAT,
                        .re = f->start.re + (double)(f->first + i) * f->step.re};
}

/* A repeated element: written once, then the filled prefix doubles. */
void dlrun_host_fill(void *data, uint64_t nbytes, const dlrun_fill *f) {
  unsigned char *p = data;
  if (f->sequence) {
    uint64_t n = nbytes / f->esize;
    for (uint64_t i = 0; i < n; i++) {
      dlrun_scalar v = dlrun_fill_value(f, (int64_t)i);
      dlrun_dtype_store(f->dtype, p + i * f->esize, &v); /* checked when planned */
    }
    return;
  }
  bool zero = true;
  for (size_t i = 0; i < f->esize; i++) zero &= f->pattern[i] == 0;
  if (zero) {
    memset(p, 0, nbytes);
    return;
  }
  memcpy(p, f->pattern, f->esize);
  uint64_t done = f->esize;
  while (done < nbytes) {
    uint64_t chunk = done < nbytes - done ? done : nbytes - done;
    memcpy(p + done, p, chunk);
    done += chunk;
  }
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
  int32_t type, id;
  dev->platform->dlpack_device(dev, kind, &type, &id);
  return type == DL_CPU;
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
  if (to_host) dlrun_copy_box(1, 1, lo, hi, &h, &d);
  else dlrun_copy_box(1, 1, lo, hi, &d, &h);
  return DLRUN_OK;
}

dlrun_status dlrun_device_copy_to_host(dlrun_device *dev, dlrun_memory_kind kind,
                                       const void *device_data, uint64_t nbytes, void *host) {
  return driver_copy(dev, kind, device_data, nbytes, host, true, "dlrun_device_copy_to_host");
}

dlrun_status dlrun_device_copy_from_host(dlrun_device *dev, dlrun_memory_kind kind,
                                         void *device_data, const void *host, uint64_t nbytes) {
  return driver_copy(dev, kind, device_data, nbytes, host, false, "dlrun_device_copy_from_host");
}
