/* Device buffers: memory from a device's pool, or outside memory wrapped. */
#include <string.h>

#include "buffer.h"
#include "boxes.h"
#include "core/alloc.h"
#include "core/status_impl.h"
#include "core/trace_impl.h"

static void destroy_buffer(dlrun_ref *ref);

dlrun_status dlrun_buffer_create(dlrun_device *dev, dlrun_memory_kind kind, uint64_t nbytes,
                                 dlrun_buffer **out) {
  *out = NULL;
  if (!dev->local) return dlrun_not_local(dev);
  dlrun_buffer *b = dlrun_calloc(1, sizeof *b);
  if (!b) return dlrun_fail_oom_host(sizeof *b);
  uint64_t start = dlrun_trace_enabled() ? dlrun_trace_now() : 0;
  if (nbytes > 0) {
    dlrun_status st = dlrun_pool_alloc_tagged(dev->pools[kind], nbytes, b, &b->block);
    if (st == DLRUN_ERR_RESOURCE_EXHAUSTED && !dlrun_pool_fits(dev->pools[kind], nbytes)) {
      /* The pool is full, but queued work may still hold buffers that are
       * otherwise unreferenced: let it finish and try once more. */
      dlrun_runtime_synchronize(dev->rt);
      st = dlrun_pool_alloc_tagged(dev->pools[kind], nbytes, b, &b->block);
    }
    if (st) {
      dlrun_free(b);
      return st;
    }
    b->data = dlrun_block_ptr(b->block);
  }
  dlrun_ref_init(&b->ref, destroy_buffer);
  b->dev = dev;
  b->kind = kind;
  b->nbytes = nbytes;
  dlrun_runtime_retain(dev->rt); /* the pool must outlive the buffer */
  if (nbytes)
    dlrun_trace_event(NULL, "memory", "alloc", start,
                      "\"device\": \"%s\", \"memory\": \"%s\", \"bytes\": %llu", dev->name,
                      dlrun_memory_kind_name(kind), (unsigned long long)nbytes);
  *out = b;
  return DLRUN_OK;
}

dlrun_status dlrun_buffer_wrap(dlrun_device *dev, dlrun_memory_kind kind, void *data,
                               uint64_t nbytes, size_t ctx_bytes, dlrun_buffer **out) {
  *out = NULL;
  if (!dev->local) return dlrun_not_local(dev);
  /* Zero bytes are in every memory (a zero-size export's data is NULL). */
  if (nbytes && !dev->platform->owns(dev, kind, data, nbytes))
    return dlrun_fail(DLRUN_ERR_BUFFER,
                      "the %llu bytes at %p are not in %s's %s memory",
                      (unsigned long long)nbytes, data, dev->name, dlrun_memory_kind_name(kind));
  size_t head = (sizeof(dlrun_buffer) + 7) & ~(size_t)7;
  if (ctx_bytes > SIZE_MAX - head) return dlrun_fail_oom_host(SIZE_MAX);
  dlrun_buffer *b = dlrun_calloc(1, head + ctx_bytes);
  if (!b) return dlrun_fail_oom_host(head + ctx_bytes);
  dlrun_ref_init(&b->ref, destroy_buffer);
  b->dev = dev;
  b->kind = kind;
  b->data = data;
  b->external = true;
  b->nbytes = nbytes;
  b->release_ctx = ctx_bytes ? (char *)b + head : NULL;
  dlrun_runtime_retain(dev->rt);
  *out = b;
  return DLRUN_OK;
}

void dlrun_buffer_retain(dlrun_buffer *b) { dlrun_ref_retain(&b->ref); }

const int64_t *dlrun_buffer_layout(const dlrun_buffer *b, int ndim, const int64_t *dims,
                                   int64_t *scratch) {
  if (b->strides) return b->strides;
  dlrun_row_major_strides(ndim, dims, scratch);
  return scratch;
}

void dlrun_buffer_release(dlrun_buffer *b) {
  if (b) dlrun_ref_release(&b->ref);
}

static void destroy_buffer(dlrun_ref *ref) {
  dlrun_buffer *b = (dlrun_buffer *)ref;
  dlrun_runtime *rt = b->dev->rt;
  uint64_t start = dlrun_trace_enabled() ? dlrun_trace_now() : 0;
  if (b->release) b->release(b->release_ctx);
  if (!b->external) dlrun_pool_free(b->dev->pools[b->kind], b->block);
  dlrun_free(b->strides);
  /* After the pool's free: no snapshot reads it now. */
  dlrun_buffer_owner_release(atomic_load(&b->owner));
  if (b->nbytes)
    dlrun_trace_event(NULL, "memory", b->external ? "release" : "free", start,
                      "\"device\": \"%s\", \"bytes\": %llu", b->dev->name,
                      (unsigned long long)b->nbytes);
  dlrun_free(b);
  dlrun_runtime_release(rt);
}

dlrun_status dlrun_buffer_owner_create(const char *dtype, int ndim, const int64_t *dims,
                                       const char *sharding, dlrun_buffer_owner **out) {
  size_t n = strlen(sharding) + 1;
  dlrun_buffer_owner *o = *out = dlrun_malloc(sizeof *o + n);
  if (!o) return dlrun_fail_oom_host(sizeof *o + n);
  atomic_init(&o->refs, 1);
  o->dtype = dtype;
  o->ndim = ndim;
  if (ndim) memcpy(o->dims, dims, (size_t)ndim * sizeof *dims);
  memcpy(o->sharding, sharding, n);
  return DLRUN_OK;
}

void dlrun_buffer_owner_release(dlrun_buffer_owner *o) {
  if (o && atomic_fetch_sub(&o->refs, 1) == 1) dlrun_free(o);
}

void dlrun_buffer_tag_array(dlrun_buffer *b, dlrun_buffer_owner *o) {
  atomic_fetch_add(&b->arrays, 1);
  if (!b->block || !o || atomic_load(&b->owner)) return;
  atomic_fetch_add(&o->refs, 1);
  dlrun_buffer_owner *none = NULL;
  if (!atomic_compare_exchange_strong(&b->owner, &none, o)) dlrun_buffer_owner_release(o);
}

void dlrun_buffer_untag_array(dlrun_buffer *b) { atomic_fetch_sub(&b->arrays, 1); }

bool dlrun_buffer_wants_owner(dlrun_buffer *b) { return b->block && !atomic_load(&b->owner); }

void dlrun_buffer_tag_export(dlrun_buffer *b, int delta) { atomic_fetch_add(&b->exports, delta); }
