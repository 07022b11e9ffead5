/* Internal: copy plans, the device layer's half of the transfer engine.
 *
 * A planner (src/array/transfer.c) describes, for each destination buffer,
 * which boxes come from which source buffers: one task per destination,
 * all in one plan. Running the plan queues each task on its destination
 * device's queue, after the sources it reads are ready; a task's pieces
 * are shared among idle workers. Everything is allocated while planning
 * (the tasks of a plan in one block): queueing and running allocate
 * nothing, and the plan is freed by the last task to finish. */
#ifndef DLRUN_DEVICE_COPY_H
#define DLRUN_DEVICE_COPY_H

#include "device/buffer.h"

typedef struct dlrun_copy_plan dlrun_copy_plan;
typedef struct dlrun_copy_task dlrun_copy_task;

/* A plan of at most `ntasks` tasks moving elements of esize bytes of an
 * array of rank ndim, whose source shards have shape src_shape (each laid
 * out as its buffer says). srcs[0..nsrcs) are the buffers the tasks may
 * read: the plan takes over the caller's reference to each and the array
 * itself (a dlrun_malloc block), whatever this returns; it holds them, one
 * reference per source, until its last task finishes. */
dlrun_status dlrun_copy_plan_create(size_t ntasks, int ndim, size_t esize,
                                    const int64_t *src_shape, dlrun_buffer **srcs, size_t nsrcs,
                                    dlrun_copy_plan **out);
/* Add a task filling `dst` (a reference is taken), whose block sits at
 * global coordinates dst_lo with element strides dst_strides. The task
 * belongs to the plan. */
dlrun_status dlrun_copy_plan_add_task(dlrun_copy_plan *p, dlrun_buffer *dst,
                                      const int64_t *dst_lo, const int64_t *dst_strides,
                                      dlrun_copy_task **out);
/* Add the box [lo, hi) (global coordinates), read from `src` (one of the
 * plan's sources), whose block starts at src_lo. */
dlrun_status dlrun_copy_task_add(dlrun_copy_task *t, dlrun_buffer *src, const int64_t *src_lo,
                                 const int64_t *lo, const int64_t *hi);
/* Whether the plan's copies stream (streaming.h: dlrun_copy_streams of the
 * bytes the whole call writes on this process); before the first queue. */
void dlrun_copy_plan_stream(dlrun_copy_plan *p, bool on);
/* Queue each task on its own, never together: queueing then allocates
 * nothing, and fails only when no worker thread can run. */
void dlrun_copy_plan_separate(dlrun_copy_plan *p);
/* Cut the pieces into units for parallel copying; after the last add. */
dlrun_status dlrun_copy_task_seal(dlrun_copy_task *t);
size_t dlrun_copy_task_piece_count(const dlrun_copy_task *t);

/* Queue every task of the plan (each destination buffer's ready event
 * becomes its task's). The plan is then its tasks': the caller must not
 * touch it again, whatever this returns. Fails when a task cannot be
 * queued (no worker thread, no memory): the tasks queued before it run,
 * the others never do. */
dlrun_status dlrun_copy_plan_run(dlrun_copy_plan *p);
/* Or queue the tasks one by one as they are made, so that the first copies
 * run while later ones are planned: start, then queue each sealed task (in
 * any order, each once), then finish, which hands the plan to its tasks
 * (the caller must not touch it again). A task that fails to queue (no
 * worker thread) is not run. Tasks whose copies a platform takes together
 * (copy_boxes) are held back and queued together, up to 64 at a time and by
 * finish; a failure to queue them surfaces from the queue call that
 * releases them or from finish, which then aborts. Between the first queue
 * and finish the calling thread holds the workers (dlrun_workers_hold) and
 * must not wait for what it queued. abort, instead of finish, waits for the
 * tasks queued so far and frees the plan: afterwards nothing of it runs or
 * holds memory; the tasks held back never run. */
void dlrun_copy_plan_start(dlrun_copy_plan *p);
dlrun_status dlrun_copy_plan_queue(dlrun_copy_plan *p, dlrun_copy_task *t);
dlrun_status dlrun_copy_plan_finish(dlrun_copy_plan *p);
void dlrun_copy_plan_abort(dlrun_copy_plan *p);
/* Free a plan that is not run (NULL is a no-op). */
void dlrun_copy_plan_free(dlrun_copy_plan *p);

#endif
