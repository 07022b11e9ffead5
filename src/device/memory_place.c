/* Where a device memory is, as its platform says (memory_place.h). */
#include "memory_place.h"

bool dlrun_memory_owns(const dlrun_device *dev, dlrun_memory_kind kind, const void *data,
                       uint64_t n) {
  return dev->platform->owns(dev, kind, data, n);
}

bool dlrun_memory_host_readable(const dlrun_device *dev, dlrun_memory_kind kind) {
  return dev->platform->host_readable(dev, kind);
}

bool dlrun_memory_same_place(const dlrun_device *have, dlrun_memory_kind have_kind,
                             const dlrun_device *want, dlrun_memory_kind want_kind) {
  if (dlrun_memory_is_host(have, have_kind)) return dlrun_memory_is_host(want, want_kind);
  return have == want && have_kind == want_kind;
}

bool dlrun_memory_is_host(const dlrun_device *dev, dlrun_memory_kind kind) {
  return dev->platform->is_host_memory(dev, kind);
}
