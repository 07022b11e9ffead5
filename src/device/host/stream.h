/* Internal: ordered streams of host work, run by a shared set of worker
 * threads: the queue of a platform that runs its work on the host (cpu,
 * sim; host/hostexec.h).
 *
 * A stream runs its tasks one at a time, in the order queued; its points
 * are a timeline's (device/timeline.h), so a task's completion is an event
 * any platform can wait for. Worker threads are shared by all streams of a
 * runtime and started on first use, so an idle device costs no thread. */
#ifndef DLRUN_DEVICE_STREAM_H
#define DLRUN_DEVICE_STREAM_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "device/timeline.h"

typedef struct dlrun_workers dlrun_workers;
typedef struct dlrun_stream dlrun_stream;
typedef struct dlrun_task dlrun_task;

/* A task: run on a worker thread (or on the caller's, dlrun_stream_run).
 * `prior` is the status of the first of its dependencies that failed: the
 * task must then skip its work (but still release what it holds) and its
 * point fails with that dependency's message. Otherwise it returns its own
 * status, with the message set (dlrun_fail) on failure. */
typedef dlrun_status (*dlrun_task_fn)(void *ctx, dlrun_status prior);

/* The queue node of a submitted task, kept by the submitter (inside its
 * task, so that queueing allocates nothing). Fields are the stream's. */
struct dlrun_task {
  dlrun_task_fn fn;
  void *ctx;
  dlrun_task *next;
  dlrun_stream *owner;
  const dlrun_event *deps; /* the submitter's, read until fn starts */
  size_t ndeps, next_dep;
  dlrun_event point;     /* its completion */
  dlrun_waiter waiter;   /* while parked on a dependency */
};

struct dlrun_stream {
  pthread_mutex_t mu;
  dlrun_task *head, *tail;
  bool scheduled;           /* in the ready queue, parked, or being run */
  dlrun_stream *next_ready; /* link in the workers' ready queue */
  dlrun_workers *workers;
  dlrun_timeline tl;        /* its points */
};

/* Whether the calling thread is one of w's worker threads. */
bool dlrun_workers_is_current(const dlrun_workers *w);

/* Create the worker set (threads start lazily). `nthreads` >= 1. */
dlrun_status dlrun_workers_create(int nthreads, dlrun_workers **out);
/* Stop and join the threads; streams must be drained first. NULL is a no-op. */
void dlrun_workers_destroy(dlrun_workers *w);

/* A stream whose events name `platform` (its event slots are the
 * timeline's). */
void dlrun_stream_init(dlrun_stream *s, dlrun_workers *w, const dlrun_platform *platform);
void dlrun_stream_destroy(dlrun_stream *s); /* waits for queued work */

/* Queue fn(ctx) on s, to run once every event in deps (of any platform) is
 * complete. `node` (and `deps`) stay the caller's and must live until fn
 * starts; fn may free them. A waiting task parks its stream without
 * holding a worker thread (on a timeline's event, or through a foreign
 * platform's event_then), so dependencies never deadlock the workers. On
 * success *point (may be NULL) is fn's completion; on failure (no thread)
 * nothing is queued and fn is not run. */
dlrun_status dlrun_stream_submit(dlrun_stream *s, dlrun_task *node, const dlrun_event *deps,
                                 size_t ndeps, dlrun_task_fn fn, void *ctx, dlrun_event *point);
/* The same for a caller about to wait for it: when s is idle and every
 * dependency is complete, fn runs now on the calling thread. */
dlrun_status dlrun_stream_run(dlrun_stream *s, dlrun_task *node, const dlrun_event *deps,
                              size_t ndeps, dlrun_task_fn fn, void *ctx, dlrun_event *point);

/* Run fn(ctx, i) for i in [0, n), spreading the items over the calling
 * thread and any idle worker threads; returns when all are done. The caller
 * works too, so this never waits on a thread that is not running. */
void dlrun_workers_parallel(dlrun_workers *w, size_t n, void (*fn)(void *ctx, size_t i),
                            void *ctx);

/* Queue a batch of tasks cheaply: between hold and release, the streams
 * the calling thread makes ready wait, and release hands them all to the
 * workers under one lock and wakes them once. Pairs nest, per thread; the
 * holder must not wait for what it queued before releasing. Hold fails only
 * when no worker thread runs and none can start. */
dlrun_status dlrun_workers_hold(dlrun_workers *w);
void dlrun_workers_release(dlrun_workers *w);
/* Hand what the calling thread holds to the workers now, staying held: so
 * that it may wait for it (a failure path). */
void dlrun_workers_flush(dlrun_workers *w);

#endif
