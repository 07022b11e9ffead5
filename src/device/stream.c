#include "stream.h"

#include <stdatomic.h>
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

/* A host-stream event's handle: the stream, and the count of its tasks
 * that must have completed. */
static dlrun_event host_event(dlrun_stream *s, uint64_t seq) {
  return (dlrun_event){.platform = s->platform, .handle = {(uintptr_t)s, (uintptr_t)seq}};
}

/* The stream of a host-stream event, or NULL (done, or another kind). */
static dlrun_stream *stream_of(dlrun_event ev) {
  if (!ev.platform || ev.platform->event_query != dlrun_stream_reached) return NULL;
  return (dlrun_stream *)ev.handle[0];
}

static uint64_t seq_of(dlrun_event ev) { return (uint64_t)ev.handle[1]; }

/* Whether every dependency of t is done, read without locks. */
static bool deps_reached(const dlrun_task *t) {
  for (size_t i = t->next_dep; i < t->ndeps; i++)
    if (!dlrun_event_done(t->deps[i])) return false;
  return true;
}

/* Park t on the first of its dependencies not yet done. Returns false when
 * all are done. A dependency on t's own stream is done: t is at its head. */
static bool park_on_dependency(dlrun_task *t) {
  while (t->next_dep < t->ndeps) {
    dlrun_event ev = t->deps[t->next_dep];
    dlrun_stream *other = stream_of(ev);
    if (other && other != t->owner) {
      pthread_mutex_lock(&other->mu);
      if (atomic_load_explicit(&other->completed, memory_order_relaxed) < seq_of(ev)) {
        t->wait_seq = seq_of(ev);
        t->next_waiter = other->waiters;
        other->waiters = t;
        pthread_mutex_unlock(&other->mu);
        return true;
      }
      pthread_mutex_unlock(&other->mu);
    } else if (!other) {
      dlrun_event_wait(ev); /* another kind's event: its platform waits */
    }
    t->next_dep++;
  }
  return false;
}

/* Detach the waiters whose awaited seq is now complete. Called with s->mu. */
static dlrun_task *take_ready_waiters(dlrun_stream *s, uint64_t completed) {
  dlrun_task *ready = NULL, **link = &s->waiters;
  while (*link) {
    dlrun_task *t = *link;
    if (t->wait_seq <= completed) {
      *link = t->next_waiter;
      t->next_waiter = ready;
      ready = t;
    } else {
      link = &t->next_waiter;
    }
  }
  return ready;
}

/* Take the head task of s off the queue. Called with s->mu. */
static void pop_head(dlrun_stream *s) {
  s->head = s->head->next;
  if (!s->head) s->tail = NULL;
}

/* Run one task of s, then hand s back to the ready queue if more are queued,
 * so that many busy streams share the workers fairly. A head task whose
 * dependencies are pending parks s instead (it stays scheduled, off the
 * queue) until the stream it waits on wakes it. */
static void run_one(dlrun_workers *w, dlrun_stream *s) {
  pthread_mutex_lock(&s->mu);
  dlrun_task *t = s->head;
  bool ready = deps_reached(t); /* the common case: one lock, no parking */
  if (ready) pop_head(s);
  pthread_mutex_unlock(&s->mu);
  if (!ready) {
    if (park_on_dependency(t)) return;
    pthread_mutex_lock(&s->mu);
    pop_head(s);
    pthread_mutex_unlock(&s->mu);
  }

  t->fn(t->ctx); /* may free t */

  pthread_mutex_lock(&s->mu);
  uint64_t completed = atomic_load_explicit(&s->completed, memory_order_relaxed) + 1;
  atomic_store_explicit(&s->completed, completed, memory_order_release);
  if (s->sleepers) pthread_cond_broadcast(&s->done_cv);
  bool more = s->head != NULL;
  if (!more) s->scheduled = false;
  dlrun_task *woken = s->waiters ? take_ready_waiters(s, completed) : NULL;
  pthread_mutex_unlock(&s->mu);
  if (more || woken) {
    pthread_mutex_lock(&w->mu);
    if (more) push_ready(w, s);
    for (; woken; woken = woken->next_waiter) push_ready(w, woken->owner);
    pthread_mutex_unlock(&w->mu);
  }
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
    run_one(w, s);
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

dlrun_status dlrun_stream_init(dlrun_stream *s, dlrun_workers *w,
                               const struct dlrun_platform *platform) {
  *s = (dlrun_stream){.workers = w, .platform = platform};
  atomic_init(&s->completed, 0);
  pthread_mutex_init(&s->mu, NULL);
  pthread_cond_init(&s->done_cv, NULL);
  return DLRUN_OK;
}

void dlrun_stream_destroy(dlrun_stream *s) {
  dlrun_stream_wait(dlrun_stream_record(s));
  pthread_cond_destroy(&s->done_cv);
  pthread_mutex_destroy(&s->mu);
}

dlrun_status dlrun_stream_submit(dlrun_stream *s, dlrun_task *t, const dlrun_event *deps,
                                 size_t ndeps, dlrun_task_fn fn, void *ctx,
                                 dlrun_event *out_event) {
  dlrun_workers *w = s->workers;
  dlrun_status st = ensure_a_thread(w);
  if (st) return st;
  *t = (dlrun_task){.fn = fn, .ctx = ctx, .owner = s, .deps = deps, .ndeps = ndeps};
  pthread_mutex_lock(&s->mu);
  if (s->tail) s->tail->next = t;
  else s->head = t;
  s->tail = t;
  uint64_t seq = ++s->enqueued;
  bool schedule = !s->scheduled;
  s->scheduled = true;
  pthread_mutex_unlock(&s->mu);
  if (out_event) *out_event = host_event(s, seq);
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

dlrun_event dlrun_stream_record(dlrun_stream *s) {
  pthread_mutex_lock(&s->mu);
  dlrun_event ev = host_event(s, s->enqueued);
  pthread_mutex_unlock(&s->mu);
  return ev;
}

bool dlrun_stream_reached(dlrun_event ev) {
  dlrun_stream *s = (dlrun_stream *)ev.handle[0];
  return !s || atomic_load_explicit(&s->completed, memory_order_acquire) >= seq_of(ev);
}

void dlrun_stream_wait(dlrun_event ev) {
  if (dlrun_stream_reached(ev)) return;
  dlrun_stream *s = (dlrun_stream *)ev.handle[0];
  pthread_mutex_lock(&s->mu);
  s->sleepers++;
  while (atomic_load_explicit(&s->completed, memory_order_acquire) < seq_of(ev))
    pthread_cond_wait(&s->done_cv, &s->mu);
  s->sleepers--;
  pthread_mutex_unlock(&s->mu);
}
