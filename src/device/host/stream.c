#include "stream.h"

#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/alloc.h"
#include "core/status_impl.h"
#include "device/device_impl.h"

/* A parallel loop being run (dlrun_workers_parallel). */
typedef struct dlrun_job {
  void (*fn)(void *ctx, size_t i);
  void *ctx;
  size_t n;
  atomic_size_t next;  /* the next item to claim */
  int helpers;         /* worker threads inside it (under workers.mu) */
  struct dlrun_job *link;
} dlrun_job;

struct dlrun_workers {
  pthread_mutex_t mu;
  pthread_cond_t ready_cv;
  pthread_cond_t jobs_cv; /* a helper left a job */
  dlrun_job *jobs;        /* parallel loops open to helpers */
  dlrun_stream *ready_head, *ready_tail;
  pthread_t *threads;
  int nthreads;
  atomic_int started; /* written under mu; never falls until destroy */
  int idle;        /* threads waiting for work */
  int ready_count; /* streams in the ready queue */
  bool stop;
};

dlrun_status dlrun_workers_create(int nthreads, dlrun_workers **out) {
  *out = NULL;
  dlrun_workers *w = dlrun_calloc(1, sizeof *w);
  if (!w) return dlrun_fail_oom_host(sizeof *w);
  w->threads = dlrun_calloc((size_t)nthreads, sizeof *w->threads);
  if (!w->threads) {
    dlrun_free(w);
    return dlrun_fail_oom_host((size_t)nthreads * sizeof(pthread_t));
  }
  w->nthreads = nthreads;
  pthread_mutex_init(&w->mu, NULL);
  pthread_cond_init(&w->ready_cv, NULL);
  pthread_cond_init(&w->jobs_cv, NULL);
  *out = w;
  return DLRUN_OK;
}

void dlrun_workers_destroy(dlrun_workers *w) {
  if (!w) return;
  pthread_mutex_lock(&w->mu);
  w->stop = true;
  pthread_cond_broadcast(&w->ready_cv);
  pthread_mutex_unlock(&w->mu);
  for (int i = 0; i < atomic_load(&w->started); i++) pthread_join(w->threads[i], NULL);
  pthread_cond_destroy(&w->ready_cv);
  pthread_cond_destroy(&w->jobs_cv);
  pthread_mutex_destroy(&w->mu);
  dlrun_free(w->threads);
  dlrun_free(w);
}

/* Called with w->mu held. */
static void push_ready(dlrun_workers *w, dlrun_stream *s) {
  s->next_ready = NULL;
  if (w->ready_tail) w->ready_tail->next_ready = s;
  else w->ready_head = s;
  w->ready_tail = s;
  w->ready_count++;
  if (w->idle) pthread_cond_signal(&w->ready_cv);
}

/* Wake the stream of a task parked on a dependency: its head task goes on
 * with its next dependency. */
static void grow_threads(dlrun_workers *w);

static void requeue(dlrun_stream *s) {
  dlrun_workers *w = s->workers;
  pthread_mutex_lock(&w->mu);
  push_ready(w, s);
  grow_threads(w);
  pthread_mutex_unlock(&w->mu);
}

static void wake_parked(dlrun_waiter *wt) {
  dlrun_task *t = (dlrun_task *)((char *)wt - offsetof(dlrun_task, waiter));
  requeue(t->owner);
}

static void wake_parked_ctx(void *ctx) { requeue(((dlrun_task *)ctx)->owner); }

/* Park t on the first of its dependencies not yet complete. Returns false
 * when all are complete. t is not touched once parked: whoever wakes it
 * may run it at once. */
static bool park_on_dependency(dlrun_task *t) {
  while (t->next_dep < t->ndeps) {
    dlrun_event ev = t->deps[t->next_dep++];
    if (dlrun_event_is_timeline(ev)) {
      t->waiter.fn = wake_parked;
      t->waiter.early = false;
      if (dlrun_timeline_park(ev, &t->waiter)) return true;
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
    dlrun_status st = dlrun_event_status(t->deps[i]);
    if (st) return st;
  }
  return DLRUN_OK;
}

/* Run t (its dependencies complete) and complete its point. */
static void run_task(dlrun_task *t) {
  dlrun_stream *s = t->owner;
  dlrun_event point = t->point;
  char msg[512];
  dlrun_status prior = prior_failure(t);
  if (prior) snprintf(msg, sizeof msg, "%s", dlrun_last_error());
  dlrun_status st = t->fn(t->ctx, prior); /* may free t */
  if (prior) st = prior;
  else if (st) snprintf(msg, sizeof msg, "%s", dlrun_last_error());
  dlrun_timeline_complete(&s->tl, point, st, st ? msg : NULL);
}

/* Take the head task of s off the queue. Called with s->mu. */
static void pop_head(dlrun_stream *s) {
  s->head = s->head->next;
  if (!s->head) s->tail = NULL;
}

/* After a task of s: hand s back to the ready queue if more are queued, so
 * that many busy streams share the workers fairly. */
static void after_task(dlrun_stream *s) {
  pthread_mutex_lock(&s->mu);
  bool more = s->head != NULL;
  if (!more) s->scheduled = false;
  if (!more && s->idle_waiters) pthread_cond_broadcast(&s->idle_cv);
  pthread_mutex_unlock(&s->mu);
  if (more) requeue(s);
}

static bool all_complete(const dlrun_event *evs, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (!dlrun_event_done(evs[i])) return false;
  return true;
}

/* Run the head task of s. A head task whose dependencies are pending
 * parks s instead (it stays scheduled, off the queue) until the event it
 * waits for wakes it. */
static void run_one(dlrun_stream *s) {
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

static void run_items(dlrun_job *job) {
  size_t i;
  while ((i = atomic_fetch_add(&job->next, 1)) < job->n) job->fn(job->ctx, i);
}

/* A job with items left to claim, or NULL. Called with w->mu held. */
static dlrun_job *open_job(dlrun_workers *w) {
  for (dlrun_job *j = w->jobs; j; j = j->link)
    if (atomic_load(&j->next) < j->n) return j;
  return NULL;
}

static _Thread_local const dlrun_workers *current_workers;

bool dlrun_workers_is_current(const dlrun_workers *w) { return current_workers == w; }

static void *worker_main(void *arg) {
  dlrun_workers *w = arg;
  current_workers = w;
  pthread_mutex_lock(&w->mu);
  for (;;) {
    w->idle++;
    dlrun_job *job;
    while (!(job = open_job(w)) && !w->ready_head && !w->stop)
      pthread_cond_wait(&w->ready_cv, &w->mu);
    w->idle--;
    if (job) { /* help a parallel loop first: someone waits for it */
      job->helpers++;
      pthread_mutex_unlock(&w->mu);
      run_items(job);
      pthread_mutex_lock(&w->mu);
      job->helpers--;
      pthread_cond_broadcast(&w->jobs_cv);
      continue;
    }
    if (!w->ready_head) break; /* stop requested and nothing left */
    dlrun_stream *s = w->ready_head;
    w->ready_count--;
    w->ready_head = s->next_ready;
    if (!w->ready_head) w->ready_tail = NULL;
    pthread_mutex_unlock(&w->mu);
    run_one(s);
    pthread_mutex_lock(&w->mu);
  }
  pthread_mutex_unlock(&w->mu);
  return NULL;
}

/* Start one more worker thread, if the set is not full. Called with w->mu
 * held. Returns whether a thread was started. */
static bool start_thread(dlrun_workers *w) {
  int started = atomic_load_explicit(&w->started, memory_order_relaxed);
  if (started >= w->nthreads || pthread_create(&w->threads[started], NULL, worker_main, w) != 0)
    return false;
  atomic_store(&w->started, started + 1);
  return true;
}

/* One more thread when the streams waiting outnumber the idle threads (a
 * failure just means fewer threads). Called with w->mu held. */
static void grow_threads(dlrun_workers *w) {
  if (w->ready_count > w->idle) start_thread(w);
}

/* At least one thread, so that queued work runs: the only way queueing
 * fails. */
static dlrun_status ensure_a_thread(dlrun_workers *w) {
  if (atomic_load(&w->started) > 0) return DLRUN_OK;
  pthread_mutex_lock(&w->mu);
  bool ok = atomic_load(&w->started) > 0 || start_thread(w);
  pthread_mutex_unlock(&w->mu);
  return ok ? DLRUN_OK : dlrun_fail(DLRUN_ERR_RESOURCE_EXHAUSTED, "cannot start a worker thread");
}

/* Streams this thread made ready while holding w: handed to the ready
 * queue together, under one lock, when it releases. */
typedef struct held_batch {
  dlrun_workers *w;
  int depth;
  dlrun_stream *head, *tail;
} held_batch;
static _Thread_local held_batch held;

/* Hand the held streams to the ready queue and wake the idle threads
 * once. Called with w->mu held. */
static void flush_held(dlrun_workers *w) {
  if (!held.head) return;
  if (w->ready_tail) w->ready_tail->next_ready = held.head;
  else w->ready_head = held.head;
  w->ready_tail = held.tail;
  for (dlrun_stream *s = held.head; s; s = s->next_ready) w->ready_count++;
  held.head = held.tail = NULL;
  if (w->idle) pthread_cond_broadcast(&w->ready_cv);
  grow_threads(w);
}

void dlrun_workers_parallel(dlrun_workers *w, size_t n, void (*fn)(void *ctx, size_t i),
                            void *ctx) {
  dlrun_job job = {.fn = fn, .ctx = ctx, .n = n};
  atomic_init(&job.next, 0);
  if (n > 1) {
    pthread_mutex_lock(&w->mu);
    job.link = w->jobs;
    w->jobs = &job;
    /* Start one more thread when none is idle: a failure just means less help. */
    if (w->idle == 0) start_thread(w);
    pthread_cond_broadcast(&w->ready_cv);
    pthread_mutex_unlock(&w->mu);
  }
  run_items(&job);
  if (n <= 1) return;
  pthread_mutex_lock(&w->mu);
  dlrun_job **link = &w->jobs;
  while (*link != &job) link = &(*link)->link;
  *link = job.link;
  while (job.helpers > 0) pthread_cond_wait(&w->jobs_cv, &w->mu);
  pthread_mutex_unlock(&w->mu);
}

dlrun_status dlrun_workers_hold(dlrun_workers *w) {
  if (held.w && held.w != w) return DLRUN_OK; /* another runtime's batch: queue directly */
  dlrun_status st = ensure_a_thread(w);
  if (st) return st;
  held.w = w;
  held.depth++;
  return DLRUN_OK;
}

void dlrun_workers_release(dlrun_workers *w) {
  if (held.w != w || --held.depth > 0) return;
  held.w = NULL;
  if (!held.head) return;
  pthread_mutex_lock(&w->mu);
  flush_held(w);
  pthread_mutex_unlock(&w->mu);
}

void dlrun_workers_flush(dlrun_workers *w) {
  if (held.w != w || !held.head) return;
  pthread_mutex_lock(&w->mu);
  flush_held(w);
  pthread_mutex_unlock(&w->mu);
}

void dlrun_stream_init(dlrun_stream *s, dlrun_workers *w, const dlrun_platform *platform) {
  *s = (dlrun_stream){.workers = w};
  dlrun_timeline_init(&s->tl, platform);
  pthread_mutex_init(&s->mu, NULL);
  pthread_cond_init(&s->idle_cv, NULL);
}

/* Its last point complete, the worker that ran it may still be leaving
 * the stream: destroy waits until it has. */
void dlrun_stream_destroy(dlrun_stream *s) {
  dlrun_timeline_wait(dlrun_timeline_last(&s->tl));
  pthread_mutex_lock(&s->mu);
  s->idle_waiters++;
  while (s->scheduled) pthread_cond_wait(&s->idle_cv, &s->mu);
  s->idle_waiters--;
  pthread_mutex_unlock(&s->mu);
  dlrun_timeline_fini(&s->tl);
  pthread_cond_destroy(&s->idle_cv);
  pthread_mutex_destroy(&s->mu);
}

dlrun_status dlrun_stream_submit(dlrun_stream *s, dlrun_task *t, const dlrun_event *deps,
                                 size_t ndeps, dlrun_task_fn fn, void *ctx, dlrun_event *point) {
  dlrun_workers *w = s->workers;
  dlrun_status st = ensure_a_thread(w);
  if (st) return st;
  *t = (dlrun_task){.fn = fn, .ctx = ctx, .owner = s, .deps = deps, .ndeps = ndeps};
  pthread_mutex_lock(&s->mu);
  if (s->tail) s->tail->next = t;
  else s->head = t;
  s->tail = t;
  dlrun_event at = t->point = dlrun_timeline_begin(&s->tl); /* in queue order */
  bool schedule = !s->scheduled;
  s->scheduled = true;
  pthread_mutex_unlock(&s->mu);
  if (point) *point = at; /* t may have run and gone already */
  if (!schedule) return DLRUN_OK;
  if (held.w == w) { /* no worker can see s yet: it is this thread's to link */
    s->next_ready = NULL;
    if (held.tail) held.tail->next_ready = s;
    else held.head = s;
    held.tail = s;
    return DLRUN_OK;
  }
  pthread_mutex_lock(&w->mu);
  push_ready(w, s);
  grow_threads(w);
  pthread_mutex_unlock(&w->mu);
  return DLRUN_OK;
}


dlrun_status dlrun_stream_run(dlrun_stream *s, dlrun_task *t, const dlrun_event *deps,
                              size_t ndeps, dlrun_task_fn fn, void *ctx, dlrun_event *point) {
  pthread_mutex_lock(&s->mu);
  bool now = !s->scheduled && all_complete(deps, ndeps);
  if (now) {
    s->scheduled = true; /* work queued meanwhile waits behind this */
    *t = (dlrun_task){.fn = fn, .ctx = ctx, .owner = s, .deps = deps, .ndeps = ndeps,
                      .point = dlrun_timeline_begin(&s->tl)};
  }
  pthread_mutex_unlock(&s->mu);
  if (!now) return dlrun_stream_submit(s, t, deps, ndeps, fn, ctx, point);
  if (point) *point = t->point;
  run_task(t);
  after_task(s);
  return DLRUN_OK;
}
