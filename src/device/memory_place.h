/* Internal: where a device memory is, as its platform says: which
 * addresses it owns, whether it is host memory (memory_place.c). */
#ifndef DLRUN_DEVICE_MEMORY_PLACE_H
#define DLRUN_DEVICE_MEMORY_PLACE_H

#include <stdbool.h>
#include <stdint.h>

#include "device/device_impl.h"

/* Whether [data, data + n) lies in dev's `kind` memory (host memory for
 * platforms whose memory is the host's). */
bool dlrun_memory_owns(const dlrun_device *dev, dlrun_memory_kind kind, const void *data,
                       uint64_t n);
/* Whether dev's `kind` memory is host memory (it exports as kDLCPU): what
 * any host consumer may share, whatever mode the platform runs in. */
bool dlrun_memory_is_host(const dlrun_device *dev, dlrun_memory_kind kind);
/* Whether data in memory `have` can be used as memory `want` without a copy:
 * any host memory serves as any other (cpu devices, pinned_host memory);
 * device memory only as itself. */
bool dlrun_memory_same_place(const dlrun_device *have, dlrun_memory_kind have_kind,
                             const dlrun_device *want, dlrun_memory_kind want_kind);
/* Whether the host can read dev's `kind` memory at its device addresses. */
bool dlrun_memory_host_readable(const dlrun_device *dev, dlrun_memory_kind kind);

#endif
