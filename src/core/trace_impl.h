/* Internal: recording trace events. Cheap when tracing is off: one relaxed
 * atomic load. */
#ifndef DLRUN_TRACE_IMPL_H
#define DLRUN_TRACE_IMPL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "dlrun/trace.h"

extern atomic_bool dlrun_tracing;

static inline bool dlrun_trace_enabled(void) {
  return atomic_load_explicit(&dlrun_tracing, memory_order_relaxed);
}

/* Whether tracing was ever started in this process (DLRUN_TRACE then stays
 * unread: what a program started itself comes first). */
bool dlrun_trace_was_started(void);

/* Microseconds on the trace clock. */
uint64_t dlrun_trace_now(void);

/* A complete event from `start` to now. `track` names a device queue
 * ("SimDevice(id=3)"), or is NULL for the calling host thread. `args` is a
 * JSON object body such as "\"bytes\": 256" (may be NULL). */
void dlrun_trace_event(const char *track, const char *category, const char *name,
                       uint64_t start, const char *args_fmt, ...)
    __attribute__((format(printf, 5, 6)));

/* Events still to come from work in flight: the device layer counts the
 * queued copies and fills whose events it records when they complete (+1 when
 * queued, -1 once recorded), and stopping the trace waits for them, at most a
 * few seconds, so that a trace finished at exit holds all the work. */
void dlrun_trace_pending(int delta);

/* A counter sample, now: the value of counter `name` ("SimDevice(id=3)
 * device memory") under the devices process, as `series` ("bytes_in_use").
 * Callers write samples of one counter in the order of its changes (the
 * pool does, under its mutex), so the last sample is the final value. */
void dlrun_trace_counter(const char *name, const char *series, uint64_t value);

#endif
