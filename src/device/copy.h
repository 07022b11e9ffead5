/* Internal: running copy plans, the device layer's half of the transfer
 * engine. A planner (src/array/transfer.c) describes, for one destination
 * buffer, which boxes come from which source buffers; the device layer
 * runs each such task on the destination device's stream, after the
 * sources it reads are ready, its pieces shared among idle workers.
 * Everything is allocated while planning: running allocates nothing. */
#ifndef DLRUN_DEVICE_COPY_H
#define DLRUN_DEVICE_COPY_H

#include "device/buffer.h"

typedef struct dlrun_copy_task dlrun_copy_task;

/* A task filling `dst` (a reference is taken), whose block sits at global
 * coordinates dst_lo with element strides dst_strides; its sources are
 * shards of shape src_shape (laid out as each source buffer says). */
dlrun_status dlrun_copy_task_create(dlrun_buffer *dst, int ndim, size_t esize,
                                    const int64_t *dst_lo, const int64_t *dst_strides,
                                    const int64_t *src_shape, dlrun_copy_task **out);
/* Add the box [lo, hi) (global coordinates), read from `src`, whose block
 * starts at src_lo. No reference is taken: src must be one of the sources
 * handed to dlrun_copy_tasks_enqueue with the task. */
dlrun_status dlrun_copy_task_add(dlrun_copy_task *t, dlrun_buffer *src, const int64_t *src_lo,
                                 const int64_t *lo, const int64_t *hi);
/* Cut the pieces into units for parallel copying; after the last add. */
dlrun_status dlrun_copy_task_seal(dlrun_copy_task *t);
size_t dlrun_copy_task_piece_count(const dlrun_copy_task *t);
/* Free a task that was not queued (NULL is a no-op). */
void dlrun_copy_task_free(dlrun_copy_task *t);

/* Queue tasks[0..n) (NULL entries skipped), each on its destination's
 * stream after the sources it reads; the destination buffer's ready event
 * becomes the task's. A queued task is owned by its stream (its entry is
 * set to NULL). On failure the tasks not yet queued stay the caller's; the
 * queued ones finish harmlessly.
 * srcs[0..nsrcs) are the buffers the tasks read: the call takes over the
 * caller's reference to each and the array itself (a dlrun_malloc block),
 * whatever it returns; the last queued task to finish releases them (one
 * reference per plan, not one per piece). */
dlrun_status dlrun_copy_tasks_enqueue(dlrun_copy_task **tasks, size_t n, dlrun_buffer **srcs,
                                      size_t nsrcs);

#endif
