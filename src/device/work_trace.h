/* Enqueueing copies and fills on a device's queue, with their trace events
 * for platforms that do not record their own: a module's queue (opencl,
 * cuda) runs work the host does not see run, so the library records each
 * piece when the work's event completes, from when it was enqueued. A
 * platform that traces its own work (traces_own_work: host execution, sim
 * and cpu) records each unit as it runs, through the services below. */
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

/* queue->platform->copy_box, traced. */
dlrun_status dlrun_queue_copy_box(dlrun_device *queue, dlrun_copy_op *op, const dlrun_event *waits,
                                  size_t nwaits, dlrun_event *done);
/* dev->platform->fill, traced. */
dlrun_status dlrun_queue_fill(dlrun_device *dev, dlrun_memory_kind kind, void *data,
                              uint64_t nbytes, const dlrun_fill *f, const dlrun_event *waits,
                              size_t nwaits, dlrun_event *done);

#endif
