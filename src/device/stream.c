#include "stream.h"

#include <stdatomic.h>
#include <stdlib.h>

#include "core/alloc.h"
#include "core/status_impl.h"

struct dlrun_task {
  dlrun_task_fn fn;
  void *ctx;
  dlrun_task *next;
  dlrun_stream *owner;
  uint64_t wait_seq;       /* while parked: the seq awaited */
  dlrun_task *next_waiter; /* while parked: link in the other stream's waiters */
  size_t ndeps, next_dep;
  dlrun_event deps[];
};

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
  int nthreads, started;
  int idle;        /* threads waiting for work */
  int holding;     /* batches being queued: wake the threads once, at the end */
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
  for (int i = 0; i < w->started; i++) pthread_join(w->threads[i], NULL);
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
  if (!w->holding) pthread_cond_signal(&w->ready_cv);
}

/* Park t on the first of its dependencies not yet done. Returns false when
 * all are done. A dependency on t's own stream is done: t is at its head. */
static bool park_on_dependency(dlrun_task *t) {
  while (t->next_dep < t->ndeps) {
    dlrun_event ev = t->deps[t->next_dep];
    if (ev.stream && ev.stream != t->owner) {
      pthread_mutex_lock(&ev.stream->mu);
      if (ev.stream->completed < ev.seq) {
        t->wait_seq = ev.seq;
        t->next_waiter = ev.stream->waiters;
        ev.stream->waiters = t;
        pthread_mutex_unlock(&ev.stream->mu);
        return true;
      }
      pthread_mutex_unlock(&ev.stream->mu);
    }
    t->next_dep++;
  }
  return false;
}

/* Detach the waiters whose awaited seq is now complete. Called with s->mu. */
static dlrun_task *take_ready_waiters(dlrun_stream *s) {
  dlrun_task *ready = NULL, **link = &s->waiters;
  while (*link) {
    dlrun_task *t = *link;
    if (t->wait_seq <= s->completed) {
      *link = t->next_waiter;
      t->next_waiter = ready;
      ready = t;
    } else {
      link = &t->next_waiter;
    }
  }
  return ready;
}

/* Run one task of s, then hand s back to the ready queue if more are queued,
 * so that many busy streams share the workers fairly. A head task whose
 * dependencies are pending parks s instead (it stays scheduled, off the
 * queue) until the stream it waits on wakes it. */
static void run_one(dlrun_workers *w, dlrun_stream *s) {
  pthread_mutex_lock(&s->mu);
  dlrun_task *t = s->head;
  pthread_mutex_unlock(&s->mu);
  if (park_on_dependency(t)) return;

  pthread_mutex_lock(&s->mu);
  s->head = t->next;
  if (!s->head) s->tail = NULL;
  pthread_mutex_unlock(&s->mu);

  t->fn(t->ctx);
  dlrun_free(t);

  pthread_mutex_lock(&s->mu);
  s->completed++;
  pthread_cond_broadcast(&s->done_cv);
  bool more = s->head != NULL;
  if (!more) s->scheduled = false;
  dlrun_task *woken = take_ready_waiters(s);
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
  if (w->started >= w->nthreads ||
      pthread_create(&w->threads[w->started], NULL, worker_main, w) != 0)
    return false;
  w->started++;
  return true;
}

/* Start threads as work appears, up to nthreads: one more whenever the
 * streams waiting (with the one about to be queued) outnumber the idle
 * threads. Called with w->mu held. */
static dlrun_status ensure_threads(dlrun_workers *w) {
  if (w->ready_count + 1 <= w->idle || start_thread(w) || w->started > 0)
    return DLRUN_OK; /* enough idle threads, one more, or the running ones will do */
  return dlrun_fail(DLRUN_ERR_RESOURCE_EXHAUSTED, "cannot start a worker thread");
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

void dlrun_workers_hold(dlrun_workers *w) {
  pthread_mutex_lock(&w->mu);
  w->holding++;
  pthread_mutex_unlock(&w->mu);
}

void dlrun_workers_release(dlrun_workers *w) {
  pthread_mutex_lock(&w->mu);
  if (--w->holding == 0 && w->ready_head) pthread_cond_broadcast(&w->ready_cv);
  pthread_mutex_unlock(&w->mu);
}

dlrun_status dlrun_stream_init(dlrun_stream *s, dlrun_workers *w) {
  *s = (dlrun_stream){.workers = w};
  pthread_mutex_init(&s->mu, NULL);
  pthread_cond_init(&s->done_cv, NULL);
  return DLRUN_OK;
}

void dlrun_stream_destroy(dlrun_stream *s) {
  dlrun_event_wait(dlrun_stream_record(s));
  pthread_cond_destroy(&s->done_cv);
  pthread_mutex_destroy(&s->mu);
}

dlrun_status dlrun_stream_enqueue_after(dlrun_stream *s, const dlrun_event *deps, size_t ndeps,
                                        dlrun_task_fn fn, void *ctx, dlrun_event *out_event) {
  dlrun_workers *w = s->workers;
  size_t size = sizeof(dlrun_task) + ndeps * sizeof(dlrun_event);
  dlrun_task *t = dlrun_malloc(size);
  if (!t) return dlrun_fail_oom_host(size);
  *t = (dlrun_task){.fn = fn, .ctx = ctx, .owner = s, .ndeps = ndeps};
  for (size_t i = 0; i < ndeps; i++) t->deps[i] = deps[i];

  pthread_mutex_lock(&w->mu);
  dlrun_status st = ensure_threads(w);
  if (st) {
    pthread_mutex_unlock(&w->mu);
    dlrun_free(t);
    return st;
  }
  pthread_mutex_lock(&s->mu);
  if (s->tail) s->tail->next = t;
  else s->head = t;
  s->tail = t;
  uint64_t seq = ++s->enqueued;
  bool schedule = !s->scheduled;
  s->scheduled = true;
  pthread_mutex_unlock(&s->mu);
  if (schedule) push_ready(w, s);
  pthread_mutex_unlock(&w->mu);

  if (out_event) *out_event = (dlrun_event){.stream = s, .seq = seq};
  return DLRUN_OK;
}

dlrun_status dlrun_stream_enqueue(dlrun_stream *s, dlrun_task_fn fn, void *ctx,
                                  dlrun_event *out_event) {
  return dlrun_stream_enqueue_after(s, NULL, 0, fn, ctx, out_event);
}

dlrun_event dlrun_stream_record(dlrun_stream *s) {
  pthread_mutex_lock(&s->mu);
  dlrun_event ev = {.stream = s, .seq = s->enqueued};
  pthread_mutex_unlock(&s->mu);
  return ev;
}

void dlrun_event_wait(dlrun_event ev) {
  if (!ev.stream) return;
  pthread_mutex_lock(&ev.stream->mu);
  while (ev.stream->completed < ev.seq) pthread_cond_wait(&ev.stream->done_cv, &ev.stream->mu);
  pthread_mutex_unlock(&ev.stream->mu);
}

bool dlrun_event_done(dlrun_event ev) {
  if (!ev.stream) return true;
  pthread_mutex_lock(&ev.stream->mu);
  bool done = ev.stream->completed >= ev.seq;
  pthread_mutex_unlock(&ev.stream->mu);
  return done;
}
