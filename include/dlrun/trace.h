/* Tracing, for `dlrun --trace` and for host applications (per-device
 * statistics are in stats.h).
 *
 * While tracing is on, dlrun records every allocation, free, fill, copy (with
 * bytes, source and destination), export, import and deleter call with its
 * duration, on one track per device stream and one per host thread. */
#ifndef DLRUN_TRACE_H
#define DLRUN_TRACE_H

#include <stddef.h>
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
 * tracing is already on. A trace still on when the process exits (exit(),
 * or returning from main) is finished then; a write error is then told on
 * stderr. */
DLRUN_API dlrun_status dlrun_trace_start(const char *path);
/* Stop recording and finish the file. DLRUN_ERR_RUNTIME naming the path when
 * a write failed, or "tracing is not on". */
DLRUN_API dlrun_status dlrun_trace_stop(void);
/* Whether tracing is on (1) or not (0). */
DLRUN_API int dlrun_trace_is_on(void);

/* This process's trace file for `path`, into buf (n bytes): `path` itself,
 * or on process p of a job of several processes, ".p" before the extension
 * of the file's name ("trace.json" -> "trace.1.json"), else after the name
 * ("trace" -> "trace.1"), so that each process writes a whole trace of its
 * own. DLRUN_ERR_VALUE when buf is too small. */
DLRUN_API dlrun_status dlrun_trace_process_path(const char *path, char *buf, size_t n);

/* Start tracing as the environment variable DLRUN_TRACE says: to this
 * process's file (dlrun_trace_process_path) for its value. Nothing when it
 * is unset or empty, when it was applied before, or when tracing was ever
 * started in this process (what the program asked for comes first). The
 * default runtime (dlrun_default_runtime) and the Lua module (require
 * "dlrun") call it; the error of an unwritable file starts "DLRUN_TRACE: ".
 * The trace is finished at exit, or by dlrun_trace_stop. */
DLRUN_API dlrun_status dlrun_trace_start_from_env(void);

#ifdef __cplusplus
}
#endif
#endif
