/* Per-device statistics and transfer progress, for `dlrun --stats`, the
 * progress line and host applications. */
#ifndef DLRUN_STATS_H
#define DLRUN_STATS_H

#include <stdint.h>

#include "device.h"
#include "export.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Traffic and exports of one device since its runtime started. */
typedef struct dlrun_device_stats {
  uint64_t bytes_in;     /* copied into this device from another one */
  uint64_t bytes_out;    /* copied from this device to another one */
  int64_t live_exports;  /* DLPack exports of its memory not yet deleted */
} dlrun_device_stats;

DLRUN_API void dlrun_device_stats_get(dlrun_device *dev, dlrun_device_stats *out);

/* One device's row of `dlrun --stats` and dl.stats(): its device memory
 * (memory kind DLRUN_MEM_DEVICE) and its traffic. */
typedef struct dlrun_device_report {
  dlrun_device *device; /* borrowed from the runtime */
  dlrun_memory_stats memory;
  dlrun_device_stats traffic;
} dlrun_device_report;

/* The rows of this process's devices of rt, platform by platform in the
 * runtime's order ("sim,cpu"), each platform's by id: fills the first n of
 * `rows` (may be NULL when n is 0) and returns how many rows there are. */
DLRUN_API size_t dlrun_runtime_report(dlrun_runtime *rt, dlrun_device_report *rows, size_t n);

/* Bytes of transfers queued and finished so far (for progress reports). */
DLRUN_API void dlrun_transfer_progress(dlrun_runtime *rt, uint64_t *queued, uint64_t *done);

/* The default runtime with a new reference when it has been started, else
 * NULL (starts nothing). */
DLRUN_API dlrun_runtime *dlrun_default_runtime_if_started(void);

#ifdef __cplusplus
}
#endif
#endif
