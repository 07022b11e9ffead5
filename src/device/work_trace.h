/* Trace events of device work, for whoever records it: the library, for
 * work a module's queue runs (enqueue.c); host execution (sim, cpu), which
 * records each unit as it runs through the services below (traces_own_work);
 * the messages of a put between processes (array/messages.c). */
#ifndef DLRUN_DEVICE_WORK_TRACE_H
#define DLRUN_DEVICE_WORK_TRACE_H

#include "device_impl.h"

/* What a copy's trace event names an end: its device, or "host"; memory
 * of another process's device mapped here (the one-copy path between
 * processes) is that device, and *process its process (else -1). */
const char *dlrun_trace_end(const dlrun_box_end *e, int *process);
/* A "transfer" event of `bytes` from src to dst on track, from start to
 * now; src_process (>= 0) says src is that process's device. */
void dlrun_trace_transfer(const char *track, const char *name, uint64_t start, uint64_t bytes,
                          const char *src, int src_process, const char *dst);

/* svc->trace_copy and svc->trace_work: a copy between the ends of a copy
 * op, and other work `name`, of `bytes` on dev's queue from start to now. */
void dlrun_trace_copy(const dlrun_device *dev, uint64_t start, uint64_t bytes,
                      const dlrun_box_end *src, const dlrun_box_end *dst);
void dlrun_trace_work(const dlrun_device *dev, const char *name, uint64_t start,
                      uint64_t bytes);

#endif
