/* The runtime's shared worker threads (workers.h). */
#include "workers.h"

#include <pthread.h>
#include <stdatomic.h>

#include "core/alloc.h"
#include "core/status_impl.h"

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
  dlrun_work_item *ready_head, *ready_tail;
  pthread_t *threads;
  int nthreads;
  atomic_int started; /* written under mu; never falls until destroy */
  int idle;        /* threads waiting for work */
  int ready_count; /* items in the ready queue */
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
static void push_ready(dlrun_workers *w, dlrun_work_item *it) {
  it->next = NULL;
  if (w->ready_tail) w->ready_tail->next = it;
  else w->ready_head = it;
  w->ready_tail = it;
  w->ready_count++;
  if (w->idle) pthread_cond_signal(&w->ready_cv);
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
    dlrun_work_item *it = w->ready_head;
    w->ready_count--;
    w->ready_head = it->next;
    if (!w->ready_head) w->ready_tail = NULL;
    pthread_mutex_unlock(&w->mu);
    it->run(it);
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

/* One more thread when the items waiting outnumber the idle threads (a
 * failure just means fewer threads). Called with w->mu held. */
static void grow_threads(dlrun_workers *w) {
  if (w->ready_count > w->idle) start_thread(w);
}

dlrun_status dlrun_workers_start(dlrun_workers *w) {
  if (atomic_load(&w->started) > 0) return DLRUN_OK;
  pthread_mutex_lock(&w->mu);
  bool ok = atomic_load(&w->started) > 0 || start_thread(w);
  pthread_mutex_unlock(&w->mu);
  return ok ? DLRUN_OK : dlrun_fail(DLRUN_ERR_RESOURCE_EXHAUSTED, "cannot start a worker thread");
}

/* Items this thread posted while holding w: handed to the ready queue
 * together, under one lock, when it releases. */
typedef struct held_batch {
  dlrun_workers *w;
  int depth;
  dlrun_work_item *head, *tail;
} held_batch;
static _Thread_local held_batch held;

/* Hand the held items to the ready queue and wake the idle threads once.
 * Called with w->mu held. */
static void flush_held(dlrun_workers *w) {
  if (!held.head) return;
  if (w->ready_tail) w->ready_tail->next = held.head;
  else w->ready_head = held.head;
  w->ready_tail = held.tail;
  for (dlrun_work_item *it = held.head; it; it = it->next) w->ready_count++;
  held.head = held.tail = NULL;
  if (w->idle) pthread_cond_broadcast(&w->ready_cv);
  grow_threads(w);
}

void dlrun_workers_post(dlrun_workers *w, dlrun_work_item *it, bool batch) {
  if (batch && held.w == w) { /* no worker can see it yet: it is this thread's to link */
    it->next = NULL;
    if (held.tail) held.tail->next = it;
    else held.head = it;
    held.tail = it;
    return;
  }
  pthread_mutex_lock(&w->mu);
  push_ready(w, it);
  grow_threads(w);
  pthread_mutex_unlock(&w->mu);
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
  dlrun_status st = dlrun_workers_start(w);
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
