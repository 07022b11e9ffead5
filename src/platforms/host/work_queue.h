/* In-order work queues of host tasks, run by the runtime's shared worker
 * threads (svc->workers_*): the queue of a platform that runs its work on
 * the host (cpu, sim; hostexec.h).
 *
 * A work queue runs its tasks one at a time, in the order queued; its points
 * are a timeline's (svc->timeline_*), so a task's completion is an event
 * any platform can wait for. The workers are shared by all work queues of a
 * runtime and started on first use, so an idle device costs no thread. */
#ifndef DLRUN_HOST_WORK_QUEUE_H
#define DLRUN_HOST_WORK_QUEUE_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "dlrun/platform.h"

typedef struct dlrun_work_queue dlrun_work_queue;
typedef struct dlrun_task dlrun_task;

/* A task: run on a worker thread (or on the caller's, dlrun_work_queue_run).
 * `prior` is the status of the first of its dependencies that failed: the
 * task must then skip its work (but still release what it holds) and its
 * point fails with that dependency's message. Otherwise it returns its own
 * status, with the message set (svc->fail) on failure. */
typedef dlrun_status (*dlrun_task_fn)(void *ctx, dlrun_status prior);

/* The queue node of a submitted task, kept by the submitter (inside its
 * task, so that queueing allocates nothing). Fields are the work queue's. */
struct dlrun_task {
  dlrun_task_fn fn;
  void *ctx;
  dlrun_task *next;
  dlrun_work_queue *owner;
  const dlrun_event *deps; /* the submitter's, read until fn starts */
  size_t ndeps, next_dep;
  dlrun_event point;          /* its completion */
  dlrun_event_waiter waiter;  /* while parked on a dependency */
};

struct dlrun_work_queue {
  dlrun_work_item item;     /* first: in the workers' ready queue while scheduled */
  pthread_mutex_t mu;
  pthread_cond_t idle_cv;   /* scheduled fell, and someone waits for that */
  int idle_waiters;
  dlrun_task *head, *tail;
  bool scheduled;           /* in the ready queue, parked, or being run */
  dlrun_workers *workers;
  dlrun_timeline *tl;       /* its points */
};

/* A work queue on the workers w whose events name `platform` (its event slots
 * are the timeline's). Fails only for lack of memory. */
dlrun_status dlrun_work_queue_init(dlrun_work_queue *s, dlrun_workers *w,
                                   const dlrun_platform *platform);
void dlrun_work_queue_destroy(dlrun_work_queue *s); /* waits for queued work */

/* Queue fn(ctx) on s, to run once every event in deps (of any platform) is
 * complete. `node` (and `deps`) stay the caller's and must live until fn
 * starts; fn may free them. A waiting task parks its work queue without
 * holding a worker thread (on a timeline's event, or through a foreign
 * platform's event_then), so dependencies never deadlock the workers. On
 * success *point (may be NULL) is fn's completion; on failure (no thread)
 * nothing is queued and fn is not run. */
dlrun_status dlrun_work_queue_submit(dlrun_work_queue *s, dlrun_task *node,
                                     const dlrun_event *deps, size_t ndeps, dlrun_task_fn fn,
                                     void *ctx, dlrun_event *point);
/* The same for a caller about to wait for it: when s is idle and every
 * dependency is complete, fn runs now on the calling thread. */
dlrun_status dlrun_work_queue_run(dlrun_work_queue *s, dlrun_task *node, const dlrun_event *deps,
                                  size_t ndeps, dlrun_task_fn fn, void *ctx, dlrun_event *point);
/* The point after everything queued on s. */
dlrun_event dlrun_work_queue_last(dlrun_work_queue *s);

#endif
