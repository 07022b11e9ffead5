/* Internal: ordered streams of work, run by a shared set of worker threads.
 *
 * Each device has one stream. A stream runs its tasks one at a time, in the
 * order queued. Worker threads are shared by all streams of a runtime and
 * started on first use, so an idle device costs no thread. */
#ifndef DLRUN_STREAM_H
#define DLRUN_STREAM_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "dlrun/status.h"

typedef struct dlrun_workers dlrun_workers;
typedef struct dlrun_stream dlrun_stream;
typedef struct dlrun_task dlrun_task;
struct dlrun_platform;

/* A task: run(ctx) on a worker thread. */
typedef void (*dlrun_task_fn)(void *ctx);

/* An event: a point in a platform's work. Only that platform's event slots
 * (device_impl.h) make and read one; to every other piece of code it is an
 * opaque handle, as a cudaEvent_t is. It is held by value: what a handle
 * names lives as long as its device (a host stream's point needs nothing
 * freed; a native platform would name an event of a per-stream ring and its
 * generation). {0}, of no platform, is an event that is already done. */
typedef struct dlrun_event {
  const struct dlrun_platform *platform; /* whose slots read it */
  uintptr_t handle[2];                   /* the platform's own */
} dlrun_event;

/* The queue node of a submitted task, kept by the submitter (inside its
 * task, so that queueing allocates nothing). Fields are the stream's. */
struct dlrun_task {
  dlrun_task_fn fn;
  void *ctx;
  dlrun_task *next;
  dlrun_stream *owner;
  const dlrun_event *deps; /* the submitter's, read until fn starts */
  size_t ndeps, next_dep;
  uint64_t wait_seq;       /* while parked: the seq awaited */
  dlrun_task *next_waiter; /* while parked: link in the other stream's waiters */
};

struct dlrun_stream {
  pthread_mutex_t mu;
  pthread_cond_t done_cv;
  dlrun_task *head, *tail;
  uint64_t enqueued;
  _Atomic uint64_t completed; /* read without the lock by queries */
  int sleepers;               /* threads waiting on done_cv */
  bool scheduled;             /* in the ready queue or being run */
  dlrun_stream *next_ready;   /* link in the workers' ready queue */
  dlrun_task *waiters;        /* head tasks of other streams parked on this one */
  dlrun_workers *workers;
  const struct dlrun_platform *platform; /* whose events these are */
};

/* Whether the calling thread is one of w's worker threads. */
bool dlrun_workers_is_current(const dlrun_workers *w);

/* Create the worker set (threads start lazily). `nthreads` >= 1. */
dlrun_status dlrun_workers_create(int nthreads, dlrun_workers **out);
/* Stop and join the threads; streams must be drained first. NULL is a no-op. */
void dlrun_workers_destroy(dlrun_workers *w);

dlrun_status dlrun_stream_init(dlrun_stream *s, dlrun_workers *w,
                               const struct dlrun_platform *platform);
void dlrun_stream_destroy(dlrun_stream *s); /* waits for queued work */

/* Queue fn(ctx) on s, to run once every event in deps (on any streams) is
 * done. `node` (and `deps`) stay the caller's and must live until fn
 * starts; fn may free them. A waiting task parks its stream without holding
 * a worker thread, so dependencies never deadlock the shared workers. On
 * success *out_event (may be NULL) marks fn's completion; on failure (no
 * thread) nothing is queued and fn is not run. */
dlrun_status dlrun_stream_submit(dlrun_stream *s, dlrun_task *node, const dlrun_event *deps,
                                 size_t ndeps, dlrun_task_fn fn, void *ctx,
                                 dlrun_event *out_event);

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

/* The host-stream events (what sim's and cpu's event slots are): a handle
 * holds the stream and how many of its tasks must have completed. The
 * point after everything queued on s so far; whether ev is done (no lock);
 * wait until it is. A task depending on another stream's host-stream event
 * parks that stream without a thread; on an event of another kind, it
 * waits through that event's platform on its worker thread. */
dlrun_event dlrun_stream_record(dlrun_stream *s);
bool dlrun_stream_reached(dlrun_event ev);
void dlrun_stream_wait(dlrun_event ev);

#endif
