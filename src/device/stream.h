/* Internal: ordered streams of work, run by a shared set of worker threads.
 *
 * Each device has one stream. A stream runs its tasks one at a time, in the
 * order queued. Worker threads are shared by all streams of a runtime and
 * started on first use, so an idle device costs no thread. */
#ifndef DLRUN_STREAM_H
#define DLRUN_STREAM_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "dlrun/status.h"

typedef struct dlrun_workers dlrun_workers;
typedef struct dlrun_stream dlrun_stream;
typedef struct dlrun_task dlrun_task;

/* A task: run(ctx) on a worker thread, then done(ctx) (may be NULL). */
typedef void (*dlrun_task_fn)(void *ctx);

struct dlrun_stream {
  pthread_mutex_t mu;
  pthread_cond_t done_cv;
  dlrun_task *head, *tail;
  uint64_t enqueued, completed;
  bool scheduled;           /* in the ready queue or being run */
  dlrun_stream *next_ready; /* link in the workers' ready queue */
  dlrun_task *waiters;      /* head tasks of other streams parked on this one */
  dlrun_workers *workers;
};

/* A point in a stream: done when the stream has completed `seq` tasks.
 * A NULL stream is an event that is already done. */
typedef struct dlrun_event {
  dlrun_stream *stream;
  uint64_t seq;
} dlrun_event;

/* Whether the calling thread is one of w's worker threads. */
bool dlrun_workers_is_current(const dlrun_workers *w);

/* Create the worker set (threads start lazily). `nthreads` >= 1. */
dlrun_status dlrun_workers_create(int nthreads, dlrun_workers **out);
/* Stop and join the threads; streams must be drained first. NULL is a no-op. */
void dlrun_workers_destroy(dlrun_workers *w);

dlrun_status dlrun_stream_init(dlrun_stream *s, dlrun_workers *w);
void dlrun_stream_destroy(dlrun_stream *s); /* waits for queued work */

/* Queue fn(ctx). On success *out_event (may be NULL) marks its completion.
 * On failure (no memory, no thread) nothing is queued and fn is not run. */
dlrun_status dlrun_stream_enqueue(dlrun_stream *s, dlrun_task_fn fn, void *ctx,
                                  dlrun_event *out_event);

/* Like dlrun_stream_enqueue, but fn runs only once every event in deps (on
 * any streams) is done. A waiting task parks its stream without holding a
 * worker thread, so dependencies never deadlock the shared workers. */
dlrun_status dlrun_stream_enqueue_after(dlrun_stream *s, const dlrun_event *deps, size_t ndeps,
                                        dlrun_task_fn fn, void *ctx, dlrun_event *out_event);

/* Run fn(ctx, i) for i in [0, n), spreading the items over the calling
 * thread and any idle worker threads; returns when all are done. The caller
 * works too, so this never waits on a thread that is not running. */
void dlrun_workers_parallel(dlrun_workers *w, size_t n, void (*fn)(void *ctx, size_t i),
                            void *ctx);

/* Queue a batch of tasks without waking a thread for each: between hold and
 * release, queued streams wait; release wakes the threads once. Pairs
 * nest. */
void dlrun_workers_hold(dlrun_workers *w);
void dlrun_workers_release(dlrun_workers *w);

/* An event marking everything queued on s so far. */
dlrun_event dlrun_stream_record(dlrun_stream *s);

void dlrun_event_wait(dlrun_event ev);
bool dlrun_event_done(dlrun_event ev);

#endif
