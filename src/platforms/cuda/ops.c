/* Ops on a device's stream and how their points complete.
 *
 * An op (a copy, a fill, a record) is some driver calls on the device's
 * stream followed by a CUDA event, and one point of the device's timeline.
 * A wait on a pending op of this platform already on a stream is
 * cuStreamWaitEvent; a wait on anything else (another platform's event, or
 * an op of this platform still gated) gates the op: it is kept, unsubmitted,
 * until svc->event_then says the event completed, and every later op of the
 * device waits behind it (the stream's order). No dlrun thread blocks on a
 * gate, and an event_then callback never calls the driver: it only counts
 * and wakes the device's completion thread.
 *
 * The completion thread of each device submits the gated ops whose gates
 * opened, cuEventSynchronize-s the submitted ops in order and completes
 * their points (svc->timeline_complete) once every wait has also reported
 * (a failed wait fails the op with that wait's message). Everything that
 * finishes an op runs on that thread. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cu.h"

typedef enum op_state { OP_GATED, OP_SUBMITTED, OP_WORK_DONE } op_state;

struct cu_op {
  cu_op *next;
  cu_op *live_next; /* the submitted ops of every device (live) */
  cu_device *d;
  const char *what;
  dlrun_event point;
  dlcu_event ev;        /* recorded after its work */
  op_state state;       /* under d->lock, as the fields below */
  int pending;          /* its work, each wait's report, the enqueue's hold */
  int gates;            /* waits that must complete before it is submitted */
  bool injected;
  dlcu_result err;      /* the first driver failure of its work */
  char *wait_msg;       /* the first failed wait's message */
  cu_work_fn work;
  void *arg;
  void (*free_arg)(void *);
  void (*on_complete)(void *);
  void *ctx;
  const dlrun_event *waits; /* the caller's, valid until the point completes */
  size_t nwaits;
};

typedef struct cu_wait {
  cu_op *op;
  dlrun_event ev;
  bool gate;
  int retries;
} cu_wait;

/* The submitted ops of all devices, by point (a wait's native event). */
static pthread_mutex_t live_lock = PTHREAD_MUTEX_INITIALIZER;
static cu_op *live;

static bool same_event(dlrun_event a, dlrun_event b) { return !memcmp(&a, &b, sizeof a); }

/* The submitted op whose point is ev (live_lock held), or NULL. */
static cu_op *live_op(dlrun_event ev) {
  cu_op *op = live;
  while (op && !same_event(op->point, ev)) op = op->live_next;
  return op;
}

static void live_remove(cu_op *op) {
  pthread_mutex_lock(&live_lock);
  cu_op **p = &live;
  while (*p && *p != op) p = &(*p)->live_next;
  if (*p) *p = op->live_next;
  pthread_mutex_unlock(&live_lock);
}

static void op_free(cu_op *op) {
  if (op->ev) cu_api.EventDestroy(op->ev);
  if (op->free_arg) op->free_arg(op->arg);
  free(op->wait_msg);
  free(op);
}

/* The status of the complete event ev, and its failure's message. */
static const char *failure_of(dlrun_event ev, dlrun_status *st) {
  *st = cu_svc->event_status(ev);
  if (*st) *st = cu_svc->event_wait(ev);
  return *st ? cu_svc->last_error() : NULL;
}

static void note_wait_failure(cu_op *op, const char *msg) {
  if (!op->wait_msg) op->wait_msg = strdup(msg && *msg ? msg : "failed");
}

/* One of the things op waits for happened (d->lock held). */
static void op_release(cu_op *op) {
  if (--op->pending == 0) pthread_cond_broadcast(&op->d->wake);
}

/* Submit op on d's stream (d->lock held, d's context current): the native
 * waits, its work, its event. false: nothing was enqueued and err says why
 * (only for an op that was never gated: a gated one fails its point). */
static bool submit(cu_device *d, cu_op *op) {
  const dlrun_event *waits = op->waits;
  size_t nwaits = op->nwaits;
  bool enqueued = false;
  pthread_mutex_lock(&live_lock);
  for (size_t i = 0; i < nwaits && !op->err; i++) {
    cu_op *w = waits[i].platform == &cu_platform ? live_op(waits[i]) : NULL;
    if (w && w->d != d) op->err = cu_api.StreamWaitEvent(d->stream, w->ev, 0);
    enqueued |= w && !op->err;
  }
  pthread_mutex_unlock(&live_lock);
  if (!op->err && op->work && !op->injected && !op->wait_msg) {
    dlcu_result r = op->work(d, op->arg, &enqueued);
    if (r) op->err = r;
  }
  if (op->err && !enqueued) return false;
  dlcu_result r = cu_api.EventRecord(op->ev, d->stream);
  if (r && !op->err) op->err = r;
  op->state = OP_SUBMITTED;
  pthread_mutex_lock(&live_lock);
  op->live_next = live;
  live = op;
  pthread_mutex_unlock(&live_lock);
  pthread_cond_broadcast(&d->wake);
  return true;
}

/* ---- failures from the streams ---- */

dlrun_status cu_usable(cu_device *d, const char *what) {
  dlcu_result b = __atomic_load_n(&d->broken, __ATOMIC_ACQUIRE);
  if (!b) return DLRUN_OK;
  return cu_svc->fail(DLRUN_ERR_RUNTIME,
                      "%s is unusable after %s (%d): the %s is refused; the error is sticky for "
                      "the device's CUDA context, and only a new process can use the device "
                      "again",
                      d->name, cu_error_name(b), b, what);
}

/* Whether d's stream answers without an error once its own is returned: a
 * stream keeps an asynchronous error until cuStreamSynchronize returns it,
 * while a context whose error is sticky (an illegal address on a GPU)
 * answers every call with it: then the device is unusable. */
static void clear_stream(cu_device *d) {
  if (__atomic_load_n(&d->broken, __ATOMIC_ACQUIRE) || cu_make_current(d->ctx)) return;
  cu_api.StreamSynchronize(d->stream);
  dlcu_result again = cu_api.StreamSynchronize(d->stream);
  if (again) __atomic_store_n(&d->broken, again, __ATOMIC_RELEASE);
}

/* Work on d's stream failed (d->lock held): every device's stream is
 * cleared (a staged copy fails on its source's stream too), so that later
 * work succeeds; work queued behind the failure still fails with it. */
static void recover(cu_device *d) {
  pthread_mutex_lock(&cu_devices_lock);
  for (cu_device *o = cu_devices; o; o = o->next)
    if (o != d) clear_stream(o);
  pthread_mutex_unlock(&cu_devices_lock);
  clear_stream(d);
  cu_make_current(d->ctx);
}

/* ---- waits ---- */

/* The wait w is over: failed with msg (NULL: it succeeded). */
static void end_wait(cu_wait *w, const char *msg) {
  cu_device *d = w->op->d;
  pthread_mutex_lock(&d->lock);
  if (msg) note_wait_failure(w->op, msg);
  if (w->gate) w->op->gates--;
  op_release(w->op);
  pthread_cond_broadcast(&d->wake);
  pthread_mutex_unlock(&d->lock);
  free(w);
}

/* An awaited event completed: note its failure, open its gate. A timeline
 * may call back before its point reads as complete: then it is asked
 * again. Never calls the driver. */
static void wait_done(void *ctx) {
  cu_wait *w = ctx;
  bool known = cu_svc->event_query(w->ev);
  if (!known && w->retries++ < 3 && !cu_svc->event_then(w->ev, wait_done, w)) return;
  dlrun_status st = DLRUN_OK;
  const char *msg = known ? failure_of(w->ev, &st) : cu_svc->last_error();
  end_wait(w, st || !known ? msg : NULL);
}

/* Whether d has a gated op (every later op waits behind it). */
static bool has_gated(const cu_device *d) {
  for (const cu_op *op = d->head; op; op = op->next)
    if (op->state == OP_GATED) return true;
  return false;
}

dlrun_status cu_enqueue(cu_device *d, const char *what, int inject_kind, cu_work_fn work,
                        void *arg, void (*free_arg)(void *), void (*on_complete)(void *),
                        void *ctx, const dlrun_event *waits, size_t nwaits, dlrun_event *done) {
  cu_op *op = calloc(1, sizeof *op);
  cu_wait **ws = calloc(nwaits ? nwaits : 1, sizeof *ws);
  dlcu_result r = DLCU_SUCCESS;
  if (!op || !ws) {
    free(op);
    free(ws);
    if (free_arg) free_arg(arg);
    return cu_svc->fail(DLRUN_ERR_RESOURCE_EXHAUSTED, "%s: out of host memory", d->name);
  }
  *op = (cu_op){.d = d, .what = what, .pending = 2, .work = work, .arg = arg,
                .free_arg = free_arg, .on_complete = on_complete, .ctx = ctx,
                .waits = waits, .nwaits = nwaits};
  dlrun_status refused = cu_usable(d, what);
  if (refused) {
    op_free(op);
    free(ws);
    return refused;
  }
  if ((r = cu_make_current(d->ctx)) ||
      (r = cu_api.EventCreate(&op->ev, DLCU_EVENT_DISABLE_TIMING))) {
    op->ev = NULL;
    op_free(op);
    free(ws);
    return cu_svc->fail(DLRUN_ERR_RUNTIME, "%s: %s failed: cuEventCreate: %s (%d)", d->name, what,
                        cu_error_name(r), r);
  }
  size_t nws = 0;
  pthread_mutex_lock(&d->lock);
  for (size_t i = 0; i < nwaits; i++) {
    dlrun_event ev = waits[i];
    if (!ev.platform) continue;
    if (cu_svc->event_query(ev)) {
      dlrun_status st;
      const char *msg = failure_of(ev, &st);
      if (st) note_wait_failure(op, msg);
      continue;
    }
    cu_wait *w = malloc(sizeof *w);
    if (!w) {
      note_wait_failure(op, "out of host memory");
      continue;
    }
    pthread_mutex_lock(&live_lock);
    bool native = ev.platform == &cu_platform && live_op(ev);
    pthread_mutex_unlock(&live_lock);
    *w = (cu_wait){.op = op, .ev = ev, .gate = !native};
    op->gates += w->gate;
    op->pending++;
    ws[nws++] = w;
  }
  if (inject_kind >= 0 && d->inject[inject_kind]) {
    d->inject[inject_kind]--;
    op->injected = true;
  }
  if (op->gates || has_gated(d)) {
    op->state = OP_GATED; /* the completion thread submits it */
  } else if (!submit(d, op)) {
    pthread_mutex_unlock(&d->lock);
    dlrun_status st = cu_svc->fail(DLRUN_ERR_RUNTIME, "%s: %s failed: %s (%d)", d->name, what,
                                   cu_error_name(op->err), op->err);
    for (size_t i = 0; i < nws; i++) free(ws[i]);
    free(ws);
    op_free(op);
    return st;
  }
  op->point = cu_svc->timeline_begin(d->tl);
  if (d->tail) d->tail->next = op;
  else d->head = op;
  d->tail = op;
  pthread_mutex_unlock(&d->lock);
  if (done) *done = op->point;
  for (size_t i = 0; i < nws; i++)
    if (cu_svc->event_then(ws[i]->ev, wait_done, ws[i]))
      end_wait(ws[i], cu_svc->last_error()); /* no memory to be called back: the op fails,
                                                 even if the event completed meanwhile */
  free(ws);
  pthread_mutex_lock(&d->lock);
  op_release(op); /* the enqueue's hold */
  pthread_mutex_unlock(&d->lock);
  return DLRUN_OK;
}

/* ---- the completion thread ---- */

/* Complete op's point: failed with "<device>: copy failed: CUDA_ERROR_...
 * (700)" ("injected device failure" for a test's), or with the message of
 * the failed event it waited on. */
static void op_finish(cu_op *op) {
  cu_device *d = op->d;
  char msg[1024];
  dlrun_status st = DLRUN_ERR_RUNTIME;
  if (op->wait_msg)
    snprintf(msg, sizeof msg, "%s", op->wait_msg);
  else if (op->injected)
    snprintf(msg, sizeof msg, "%s: %s failed: injected device failure", d->name, op->what);
  else if (op->err)
    snprintf(msg, sizeof msg, "%s: %s failed: %s (%d)", d->name, op->what,
             cu_error_name(op->err), op->err);
  else
    st = DLRUN_OK;
  if (op->on_complete) op->on_complete(op->ctx);
  cu_svc->timeline_complete(d->tl, op->point, st, st ? msg : NULL);
}

/* The first op of d in `state`, or NULL. */
static cu_op *first_in(cu_device *d, op_state state) {
  cu_op *op = d->head;
  while (op && op->state != state) op = op->next;
  return op;
}

/* Submit the gated ops whose gates opened, in order (their native waits,
 * ops of other devices on their streams, are still cuStreamWaitEvent). */
static void submit_gated(cu_device *d) {
  cu_op *op = first_in(d, OP_GATED);
  while (op && op->state == OP_GATED && op->gates == 0) {
    cu_make_current(d->ctx);
    if (!submit(d, op)) { /* nothing enqueued: its point fails */
      op->state = OP_WORK_DONE;
      op_release(op);
    }
    op = op->next;
  }
}

void *cu_completion_main(void *arg) {
  cu_device *d = arg;
  pthread_mutex_lock(&d->lock);
  for (;;) {
    submit_gated(d);
    if (d->head && d->head->state == OP_WORK_DONE && d->head->pending == 0) {
      cu_op *op = d->head;
      d->head = op->next;
      if (!d->head) d->tail = NULL;
      d->draining = true;
      pthread_mutex_unlock(&d->lock);
      live_remove(op);
      op_finish(op);
      cu_make_current(d->ctx);
      op_free(op);
      pthread_mutex_lock(&d->lock);
      d->draining = false;
      if (!d->head) pthread_cond_broadcast(&d->idle);
      continue;
    }
    cu_op *op = first_in(d, OP_SUBMITTED);
    if (op) {
      pthread_mutex_unlock(&d->lock);
      cu_make_current(d->ctx);
      dlcu_result r = cu_api.EventSynchronize(op->ev);
      pthread_mutex_lock(&d->lock);
      if (r && !op->err) op->err = r;
      if (r) recover(d);
      op->state = OP_WORK_DONE;
      op_release(op);
      continue;
    }
    if (d->stop && !d->head) break;
    pthread_cond_wait(&d->wake, &d->lock);
  }
  pthread_mutex_unlock(&d->lock);
  return NULL;
}

/* ---- the stream protocol ---- */

/* The consumer's stream is always handed to the driver, so that an unknown
 * handle is refused whether or not the array is still being written (a
 * written array's wait is one on an event never recorded: nothing). */
dlrun_status cu_stream_wait_event(cu_device *d, dlcu_stream stream, dlrun_event ev) {
  dlrun_status st = cu_usable(d, "wait for the consumer's stream");
  if (st) return st;
  if (ev.platform && cu_svc->event_query(ev)) {
    failure_of(ev, &st);
    if (st) return st;
    ev.platform = NULL;
  }
  dlcu_result r = cu_make_current(d->ctx);
  bool native = !ev.platform;
  pthread_mutex_lock(&live_lock);
  cu_op *op = ev.platform == &cu_platform ? live_op(ev) : NULL;
  native |= op != NULL;
  if (!r) r = cu_api.StreamWaitEvent(stream, op ? op->ev : d->unrecorded, 0);
  pthread_mutex_unlock(&live_lock);
  if (r)
    return cu_svc->fail(DLRUN_ERR_BUFFER, "%s: the consumer's stream %p cannot wait: "
                        "cuStreamWaitEvent: %s (%d)", d->name, (void *)stream, cu_error_name(r), r);
  /* Not on a stream yet (gated) or another platform's: wait here. */
  return native ? DLRUN_OK : cu_svc->event_wait(ev);
}
