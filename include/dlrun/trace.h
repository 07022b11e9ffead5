/* Tracing, for `dlrun --trace` and for host applications (per-device
 * statistics are in stats.h).
 *
 * While tracing is on, dlrun records every allocation, free, fill, copy (with
 * bytes, source and destination), export, import and deleter call with its
 * duration, on one track per device stream and one per host thread. */
#ifndef DLRUN_TRACE_H
#define DLRUN_TRACE_H

#include <stdint.h>

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

#ifdef __cplusplus
}
#endif
#endif
