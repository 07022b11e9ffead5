/* Internal: the runtime's shared worker threads, started lazily, so that
 * thousands of idle devices cost no thread. They run the items handed to
 * them (a host-executed work queue made ready: platforms/host) and share the
 * parallel loops of the threads waiting on them. Platforms reach them
 * through their services (dlrun/platform.h). */
#ifndef DLRUN_DEVICE_WORKERS_H
#define DLRUN_DEVICE_WORKERS_H

#include <stdbool.h>
#include <stddef.h>

#include "dlrun/platform.h"

/* Create the worker set (threads start lazily). `nthreads` >= 1. */
dlrun_status dlrun_workers_create(int nthreads, dlrun_workers **out);
/* Stop and join the threads; their work must be done first. NULL is a no-op. */
void dlrun_workers_destroy(dlrun_workers *w);
/* Whether the calling thread is one of w's worker threads. */
bool dlrun_workers_is_current(const dlrun_workers *w);

/* At least one thread runs, so that work handed over runs: the only way
 * queueing fails. */
dlrun_status dlrun_workers_start(dlrun_workers *w);
/* Hand a ready item to the workers; `batch`: while the calling thread
 * holds w, it waits in the thread's batch until release. */
void dlrun_workers_post(dlrun_workers *w, dlrun_work_item *it, bool batch);

/* Run fn(ctx, i) for i in [0, n), spreading the items over the calling
 * thread and any idle worker threads; returns when all are done. The caller
 * works too, so this never waits on a thread that is not running. */
void dlrun_workers_parallel(dlrun_workers *w, size_t n, void (*fn)(void *ctx, size_t i),
                            void *ctx);

/* Queue a batch of work cheaply: between hold and release, the items the
 * calling thread posts wait, and release hands them all to the workers
 * under one lock and wakes them once. Pairs nest, per thread; the holder
 * must not wait for what it queued before releasing. Hold fails only when
 * no worker thread runs and none can start. */
dlrun_status dlrun_workers_hold(dlrun_workers *w);
void dlrun_workers_release(dlrun_workers *w);
/* Hand what the calling thread holds to the workers now, staying held: so
 * that it may wait for it (a failure path). */
void dlrun_workers_flush(dlrun_workers *w);

#endif
