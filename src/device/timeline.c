/* Timelines (timeline.h): the events of an in-order queue. */
#include "timeline.h"

#include <string.h>

#include "core/alloc.h"
#include "core/status_impl.h"

struct dlrun_failure {
  uint64_t seq;
  dlrun_status status;
  dlrun_failure *next;
  char msg[];
};

void dlrun_timeline_init(dlrun_timeline *tl, const dlrun_platform *pl) {
  *tl = (dlrun_timeline){.platform = pl};
  atomic_init(&tl->begun, 0);
  atomic_init(&tl->completed, 0);
  pthread_mutex_init(&tl->mu, NULL);
  pthread_cond_init(&tl->cv, NULL);
}

void dlrun_timeline_fini(dlrun_timeline *tl) {
  dlrun_timeline_wait(dlrun_timeline_last(tl));
  /* The thread that completed the last point may still hold the lock. */
  pthread_mutex_lock(&tl->mu);
  pthread_mutex_unlock(&tl->mu);
  for (dlrun_failure *f = tl->failures, *next; f; f = next) {
    next = f->next;
    dlrun_free(f);
  }
  pthread_cond_destroy(&tl->cv);
  pthread_mutex_destroy(&tl->mu);
}

dlrun_status dlrun_timeline_create(const dlrun_platform *pl, dlrun_timeline **out) {
  *out = dlrun_malloc(sizeof **out);
  if (!*out) return dlrun_fail_oom_host(sizeof **out);
  dlrun_timeline_init(*out, pl);
  return DLRUN_OK;
}

void dlrun_timeline_destroy(dlrun_timeline *tl) {
  if (!tl) return;
  dlrun_timeline_fini(tl);
  dlrun_free(tl);
}

static dlrun_event point(dlrun_timeline *tl, uint64_t seq) {
  return (dlrun_event){.platform = tl->platform, .handle = {(uintptr_t)tl, (uintptr_t)seq}};
}

static dlrun_timeline *timeline_of(dlrun_event ev) { return (dlrun_timeline *)ev.handle[0]; }

/* Points are begun in queue order by the queue's own serialisation (a
 * work queue's lock, a driver queue's): counting them needs no lock here. */
dlrun_event dlrun_timeline_begin(dlrun_timeline *tl) {
  return point(tl, atomic_fetch_add_explicit(&tl->begun, 1, memory_order_relaxed) + 1);
}

dlrun_event dlrun_timeline_last(dlrun_timeline *tl) {
  return point(tl, atomic_load_explicit(&tl->begun, memory_order_relaxed));
}

/* Detach the waiters whose point is now complete (only the early ones when
 * `early_only`). Called with tl->mu. */
static dlrun_waiter *take_released(dlrun_timeline *tl, uint64_t completed, bool early_only) {
  dlrun_waiter *ready = NULL, **link = &tl->waiters;
  while (*link) {
    dlrun_waiter *w = *link;
    if (w->seq <= completed && (w->early || !early_only)) {
      *link = w->next;
      w->next = ready;
      ready = w;
    } else {
      link = &w->next;
    }
  }
  return ready;
}

static _Thread_local int in_callbacks;

bool dlrun_in_event_callback(void) { return in_callbacks > 0; }

void dlrun_timeline_run_as_callback(void (*fn)(void *ctx), void *ctx) {
  in_callbacks++;
  fn(ctx);
  in_callbacks--;
}

static void run_waiters(dlrun_waiter *w) {
  if (!w) return;
  in_callbacks++;
  for (dlrun_waiter *next; w; w = next) {
    next = w->next; /* fn may free w */
    w->fn(w);
  }
  in_callbacks--;
}

/* The early waiters of points up to seq run before the points are seen
 * complete (they release what the work held), then every other one. */
void dlrun_timeline_complete(dlrun_timeline *tl, dlrun_event at, dlrun_status st,
                             const char *msg) {
  uint64_t seq = (uint64_t)at.handle[1];
  dlrun_failure *f = NULL;
  if (st) { /* recorded before the point is seen complete */
    size_t len = strlen(msg ? msg : "");
    if ((f = dlrun_malloc(sizeof *f + len + 1))) {
      *f = (dlrun_failure){.seq = seq, .status = st};
      memcpy(f->msg, msg ? msg : "", len + 1);
    }
  }
  pthread_mutex_lock(&tl->mu);
  if (f) {
    f->next = tl->failures;
    tl->failures = f;
  } else if (st) { /* no memory for the message: the point still fails */
    tl->lost_seq = seq;
    tl->lost_status = st;
  }
  dlrun_waiter *first = tl->waiters ? take_released(tl, seq, true) : NULL;
  if (first) { /* they run unlocked, before the point reads complete */
    pthread_mutex_unlock(&tl->mu);
    run_waiters(first);
    pthread_mutex_lock(&tl->mu);
  }
  uint64_t completed = atomic_load_explicit(&tl->completed, memory_order_relaxed);
  if (seq > completed) atomic_store_explicit(&tl->completed, completed = seq, memory_order_release);
  if (tl->sleepers) pthread_cond_broadcast(&tl->cv);
  dlrun_waiter *late = tl->waiters ? take_released(tl, completed, false) : NULL;
  pthread_mutex_unlock(&tl->mu);
  run_waiters(late);
}

bool dlrun_timeline_query(dlrun_event ev) {
  dlrun_timeline *tl = timeline_of(ev);
  return !tl || atomic_load_explicit(&tl->completed, memory_order_acquire) >= ev.handle[1];
}

/* A failed point's record, or NULL. Called with tl->mu. */
static const dlrun_failure *failure_of(const dlrun_timeline *tl, uint64_t seq) {
  for (const dlrun_failure *f = tl->failures; f; f = f->next)
    if (f->seq == seq) return f;
  return NULL;
}

dlrun_status dlrun_timeline_status(dlrun_event ev) {
  dlrun_timeline *tl = timeline_of(ev);
  /* A failure is recorded before its point completes: early waiters see it. */
  if (!tl || (!tl->failures && !tl->lost_seq)) return DLRUN_OK;
  pthread_mutex_lock(&tl->mu);
  const dlrun_failure *f = failure_of(tl, (uint64_t)ev.handle[1]);
  dlrun_status st = f ? dlrun_fail(f->status, "%s", f->msg) : DLRUN_OK;
  if (!f && tl->lost_seq == ev.handle[1])
    st = dlrun_fail(tl->lost_status, "work on a device failed; its message was lost for lack "
                    "of host memory");
  pthread_mutex_unlock(&tl->mu);
  return st;
}

dlrun_status dlrun_timeline_wait(dlrun_event ev) {
  dlrun_timeline *tl = timeline_of(ev);
  if (!tl) return DLRUN_OK;
  if (!dlrun_timeline_query(ev)) {
    pthread_mutex_lock(&tl->mu);
    tl->sleepers++;
    while (atomic_load_explicit(&tl->completed, memory_order_acquire) < ev.handle[1])
      pthread_cond_wait(&tl->cv, &tl->mu);
    tl->sleepers--;
    pthread_mutex_unlock(&tl->mu);
  }
  return dlrun_timeline_status(ev);
}

bool dlrun_timeline_park(dlrun_event ev, dlrun_waiter *w) {
  dlrun_timeline *tl = timeline_of(ev);
  if (!tl || dlrun_timeline_query(ev)) return false;
  pthread_mutex_lock(&tl->mu);
  bool parked = atomic_load_explicit(&tl->completed, memory_order_relaxed) < ev.handle[1];
  if (parked) {
    w->seq = (uint64_t)ev.handle[1];
    w->next = tl->waiters;
    tl->waiters = w;
  }
  pthread_mutex_unlock(&tl->mu);
  return parked;
}

typedef struct callback {
  dlrun_waiter w; /* first: the waiter is the callback */
  void (*fn)(void *ctx);
  void *ctx;
} callback;

static void run_callback(dlrun_waiter *w) {
  callback *c = (callback *)w;
  in_callbacks++;
  c->fn(c->ctx);
  in_callbacks--;
  dlrun_free(c);
}

static dlrun_status then(dlrun_event ev, void (*fn)(void *ctx), void *ctx, bool early) {
  if (dlrun_timeline_query(ev)) {
    fn(ctx);
    return DLRUN_OK;
  }
  callback *c = dlrun_malloc(sizeof *c);
  if (!c) return dlrun_fail_oom_host(sizeof *c);
  *c = (callback){.w = {.fn = run_callback, .early = early}, .fn = fn, .ctx = ctx};
  if (!dlrun_timeline_park(ev, &c->w)) run_callback(&c->w); /* completed meanwhile */
  return DLRUN_OK;
}

dlrun_status dlrun_timeline_then(dlrun_event ev, void (*fn)(void *ctx), void *ctx) {
  return then(ev, fn, ctx, false);
}

dlrun_status dlrun_timeline_then_early(dlrun_event ev, void (*fn)(void *ctx), void *ctx) {
  return then(ev, fn, ctx, true);
}

bool dlrun_event_is_timeline(dlrun_event ev) {
  return ev.platform && ev.platform->event_query == dlrun_timeline_query;
}
