/* In-order work queues of host work (work_queue.h). */
#include "work_queue.h"
#include "host_services.h"

#include <stddef.h>
#include <stdio.h>

/* Host execution is built into libdlrun: its services are the library's. */
static const dlrun_platform_services *svc(void) { return dlrun_host_services(); }

/* Hand s to the workers: now (a wake-up), or in the calling thread's batch
 * when it holds them (`batch`: it is queueing). */
static void post(dlrun_work_queue *s, bool batch) {
  svc()->workers_post(s->workers, &s->item, batch);
}

/* Wake the work queue of a task parked on a dependency: its head task goes on
 * with its next dependency. */
static void wake_parked(dlrun_event_waiter *wt) {
  dlrun_task *t = (dlrun_task *)((char *)wt - offsetof(dlrun_task, waiter));
  post(t->owner, false);
}

static void wake_parked_ctx(void *ctx) { post(((dlrun_task *)ctx)->owner, false); }

static bool is_timeline(dlrun_event ev) {
  return ev.platform && ev.platform->event_query == svc()->timeline_query;
}

/* Park t on the first of its dependencies not yet complete. Returns false
 * when all are complete. t is not touched once parked: whoever wakes it
 * may run it at once. */
static bool park_on_dependency(dlrun_task *t) {
  while (t->next_dep < t->ndeps) {
    dlrun_event ev = t->deps[t->next_dep++];
    if (is_timeline(ev)) {
      t->waiter.fn = wake_parked;
      t->waiter.early = false;
      if (svc()->timeline_park(ev, &t->waiter)) return true;
    } else if (ev.platform && !ev.platform->event_query(ev)) {
      if (ev.platform->event_then(ev, wake_parked_ctx, t) == DLRUN_OK) return true;
      ev.platform->event_wait(ev); /* no memory to park: wait here (rare) */
    }
  }
  return false;
}

/* The status of the first failed dependency of t (all complete). */
static dlrun_status prior_failure(const dlrun_task *t) {
  for (size_t i = 0; i < t->ndeps; i++) {
    dlrun_status st = svc()->event_status(t->deps[i]);
    if (st) return st;
  }
  return DLRUN_OK;
}

/* Run t (its dependencies complete) and complete its point. */
static void run_task(dlrun_task *t) {
  dlrun_work_queue *s = t->owner;
  dlrun_event point = t->point;
  char msg[512];
  dlrun_status prior = prior_failure(t);
  if (prior) snprintf(msg, sizeof msg, "%s", svc()->last_error());
  dlrun_status st = t->fn(t->ctx, prior); /* may free t */
  if (prior) st = prior;
  else if (st) snprintf(msg, sizeof msg, "%s", svc()->last_error());
  svc()->timeline_complete(s->tl, point, st, st ? msg : NULL);
}

/* Take the head task of s off the queue. Called with s->mu. */
static void pop_head(dlrun_work_queue *s) {
  s->head = s->head->next;
  if (!s->head) s->tail = NULL;
}

/* After a task of s: hand s back to the workers if more are queued, so
 * that many busy work queues share the workers fairly. */
static void after_task(dlrun_work_queue *s) {
  pthread_mutex_lock(&s->mu);
  bool more = s->head != NULL;
  if (!more) s->scheduled = false;
  if (!more && s->idle_waiters) pthread_cond_broadcast(&s->idle_cv);
  pthread_mutex_unlock(&s->mu);
  if (more) post(s, false);
}

static bool all_complete(const dlrun_event *evs, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (!svc()->event_query(evs[i])) return false;
  return true;
}

/* Run the head task of s (a worker took it from the ready queue). A head
 * task whose dependencies are pending parks s instead (it stays
 * scheduled, off the queue) until the event it waits for wakes it. */
static void run_one(dlrun_work_item *it) {
  dlrun_work_queue *s = (dlrun_work_queue *)((char *)it - offsetof(dlrun_work_queue, item));
  pthread_mutex_lock(&s->mu);
  dlrun_task *t = s->head; /* only this thread takes from s now */
  size_t left = t->ndeps - t->next_dep;
  bool ready = !left || all_complete(t->deps + t->next_dep, left); /* the common case */
  if (ready) pop_head(s);
  pthread_mutex_unlock(&s->mu);
  if (!ready) {
    if (park_on_dependency(t)) return;
    pthread_mutex_lock(&s->mu);
    pop_head(s);
    pthread_mutex_unlock(&s->mu);
  }
  run_task(t);
  after_task(s);
}

dlrun_status dlrun_work_queue_init(dlrun_work_queue *s, dlrun_workers *w,
                                   const dlrun_platform *platform) {
  *s = (dlrun_work_queue){.item = {.run = run_one}, .workers = w};
  dlrun_status st = svc()->timeline_create(platform, &s->tl);
  if (st) return st;
  pthread_mutex_init(&s->mu, NULL);
  pthread_cond_init(&s->idle_cv, NULL);
  return DLRUN_OK;
}

/* Its last point complete, the worker that ran it may still be leaving
 * the work queue: destroy waits until it has. */
void dlrun_work_queue_destroy(dlrun_work_queue *s) {
  svc()->timeline_wait(svc()->timeline_last(s->tl));
  pthread_mutex_lock(&s->mu);
  s->idle_waiters++;
  while (s->scheduled) pthread_cond_wait(&s->idle_cv, &s->mu);
  s->idle_waiters--;
  pthread_mutex_unlock(&s->mu);
  svc()->timeline_destroy(s->tl);
  pthread_cond_destroy(&s->idle_cv);
  pthread_mutex_destroy(&s->mu);
}

dlrun_event dlrun_work_queue_last(dlrun_work_queue *s) { return svc()->timeline_last(s->tl); }

dlrun_status dlrun_work_queue_submit(dlrun_work_queue *s, dlrun_task *t, const dlrun_event *deps,
                                     size_t ndeps, dlrun_task_fn fn, void *ctx,
                                     dlrun_event *point) {
  dlrun_status st = svc()->workers_start(s->workers);
  if (st) return st;
  *t = (dlrun_task){.fn = fn, .ctx = ctx, .owner = s, .deps = deps, .ndeps = ndeps};
  pthread_mutex_lock(&s->mu);
  if (s->tail) s->tail->next = t;
  else s->head = t;
  s->tail = t;
  dlrun_event at = t->point = svc()->timeline_begin(s->tl); /* in queue order */
  bool schedule = !s->scheduled;
  s->scheduled = true;
  pthread_mutex_unlock(&s->mu);
  if (point) *point = at; /* t may have run and gone already */
  if (schedule) post(s, true);
  return DLRUN_OK;
}

dlrun_status dlrun_work_queue_run(dlrun_work_queue *s, dlrun_task *t, const dlrun_event *deps,
                                  size_t ndeps, dlrun_task_fn fn, void *ctx, dlrun_event *point) {
  pthread_mutex_lock(&s->mu);
  bool now = !s->scheduled && all_complete(deps, ndeps);
  if (now) {
    s->scheduled = true; /* work queued meanwhile waits behind this */
    *t = (dlrun_task){.fn = fn, .ctx = ctx, .owner = s, .deps = deps, .ndeps = ndeps,
                      .point = svc()->timeline_begin(s->tl)};
  }
  pthread_mutex_unlock(&s->mu);
  if (!now) return dlrun_work_queue_submit(s, t, deps, ndeps, fn, ctx, point);
  if (point) *point = t->point;
  run_task(t);
  after_task(s);
  return DLRUN_OK;
}
