/* Internal: the one place work is enqueued on a device's queue, the only
 * caller of the platforms' copy_box, copy_boxes and fill slots. A module's queue
 * (opencl, cuda) runs work the host does not see run, so each piece's trace
 * event is recorded when the work's event completes, from when it was
 * enqueued; host execution (sim, cpu) records each unit as it runs
 * (host/hostexec.c). */
#ifndef DLRUN_DEVICE_ENQUEUE_H
#define DLRUN_DEVICE_ENQUEUE_H

#include "device_impl.h"

/* queue->platform->copy_box, traced. */
dlrun_status dlrun_queue_copy_box(dlrun_device *queue, dlrun_copy_op *op, const dlrun_event *waits,
                                  size_t nwaits, dlrun_event *done);
/* queue->platform->copy_boxes (the platform has one), traced. */
dlrun_status dlrun_queue_copy_boxes(dlrun_device *queue, dlrun_copy_op *const *ops, size_t nops,
                                    const dlrun_event *waits, size_t nwaits, dlrun_event *done);
/* dev->platform->fill, traced. */
dlrun_status dlrun_queue_fill(dlrun_device *dev, dlrun_memory_kind kind, void *data,
                              uint64_t nbytes, const dlrun_fill *f, const dlrun_event *waits,
                              size_t nwaits, dlrun_event *done);

#endif
