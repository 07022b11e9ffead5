/* How the platforms name memory to DLPack (dlpack_codes.h). */
#include "dlpack_codes.h"
#include "core/status_impl.h"

void dlrun_buffer_dlpack_device(const dlrun_buffer *b, int32_t *type, int32_t *id) {
  b->dev->platform->dlpack_device(b->dev, b->kind, type, id);
}

void dlrun_memory_dlpack_device(const dlrun_device *dev, dlrun_memory_kind kind, int32_t *type,
                                int32_t *id) {
  dev->platform->dlpack_device(dev, kind, type, id);
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
