/* Tracing and per-device statistics, for `dlrun --trace` and `--stats` and
 * for host applications.
 *
 * While tracing is on, dlrun records every allocation, free, fill, copy (with
 * bytes, source and destination), export, import and deleter call with its
 * duration, on one track per device stream and one per host thread. */
#ifndef DLRUN_TRACE_H
#define DLRUN_TRACE_H

#include <stdint.h>

#include "device.h"
#include "export.h"
#include "status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Start recording (process-wide), streaming the events to `path` as Chrome
 * trace-event JSON (opens in Perfetto or chrome://tracing). The file is
 * created (or emptied) now, so an unwritable path fails here, with
 * DLRUN_ERR_RUNTIME naming it; events go through a fixed-size buffer, so
 * memory does not grow with the number of events. DLRUN_ERR_RUNTIME when
 * tracing is already on. */
DLRUN_API dlrun_status dlrun_trace_start(const char *path);
/* Stop recording and finish the file. DLRUN_ERR_RUNTIME naming the path when
 * a write failed, or when tracing was not on. */
DLRUN_API dlrun_status dlrun_trace_stop(void);

/* Traffic and exports of one device since its runtime started. */
typedef struct dlrun_device_stats {
  uint64_t bytes_in;     /* copied into this device from another one */
  uint64_t bytes_out;    /* copied from this device to another one */
  int64_t live_exports;  /* DLPack exports of its memory not yet deleted */
} dlrun_device_stats;

DLRUN_API void dlrun_device_stats_get(dlrun_device *dev, dlrun_device_stats *out);

/* Bytes of transfers queued and finished so far (for progress reports). */
DLRUN_API void dlrun_transfer_progress(dlrun_runtime *rt, uint64_t *queued, uint64_t *done);

/* The default runtime with a new reference when it has been started, else
 * NULL (starts nothing). */
DLRUN_API dlrun_runtime *dlrun_default_runtime_if_started(void);

#ifdef __cplusplus
}
#endif
#endif
