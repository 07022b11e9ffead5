/* Ops on a device's stream: the driver's part of the operation protocol
 * (common/op_queue.h), which keeps the op list, the waits and how points
 * complete and fail.
 *
 * An op (a copy, a fill, a record) is some driver calls on the device's
 * stream followed by a CUDA event. A wait on a pending op of this platform
 * already on a stream is cuStreamWaitEvent; a wait on anything else
 * (another platform's event, or an op of this platform still gated) gates
 * the op: it is kept, unsubmitted, until svc->event_then says the event
 * completed, and every later op of the device waits behind it (the
 * stream's order). No dlrun thread blocks on a gate, and a wait's callback
 * never calls the driver: it only counts and wakes the device's completion
 * thread.
 *
 * The completion thread of each device submits the gated ops whose gates
 * opened, cuEventSynchronize-s the submitted ops in order and completes
 * their points (opq_drain) once every wait has also reported. A thread
 * that waits for a submitted op's point does the same for that op itself
 * (cu_event_wait): a small operation then costs no hand-off between
 * threads. Whichever comes first ends the op's work; each pins the op
 * while it synchronises. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cu.h"

typedef enum op_state { OP_GATED, OP_SUBMITTED, OP_WORK_DONE } op_state;

/* Holds (base.pending): its work, each wait's report, the enqueue's. */
struct cu_op {
  opq_op base;
  cu_op *live_next; /* the submitted ops of every device (live) */
  cu_device *d;
  dlcu_event ev;    /* recorded after its work */
  op_state state;   /* under d->q.lock; submitted once base.gates is 0 */
  cu_work_fn work;
  void *arg;
  void (*free_arg)(void *);
  const dlrun_event *waits; /* the caller's, valid until the point completes */
  size_t nwaits;
  atomic_int pins; /* the protocol's hold (1) and each thread synchronising on ev */
  int waiters;     /* under d->q.lock: threads in cu_event_wait for its point */
};

/* The submitted ops of all devices, by point (a wait's native event). */
static pthread_mutex_t live_lock = PTHREAD_MUTEX_INITIALIZER;
static cu_op *live;

static bool same_event(dlrun_event a, dlrun_event b) { return !memcmp(&a, &b, sizeof a); }

/* The submitted op whose point is ev (live_lock held), or NULL. */
static cu_op *live_op(dlrun_event ev) {
  cu_op *op = live;
  while (op && !same_event(op->base.point, ev)) op = op->live_next;
  return op;
}

/* Creating and destroying an event per op costs driver calls a small op
 * need not pay: an ended op's event is kept for the next (a record
 * replaces what an event held). */
static dlcu_result event_get(cu_device *d, dlcu_event *ev) {
  pthread_mutex_lock(&d->ev_lock);
  *ev = d->nspare ? d->spare[--d->nspare] : NULL;
  pthread_mutex_unlock(&d->ev_lock);
  return *ev ? DLCU_SUCCESS : cu_api.EventCreate(ev, DLCU_EVENT_DISABLE_TIMING);
}

static void event_put(cu_device *d, dlcu_event ev) {
  pthread_mutex_lock(&d->ev_lock);
  bool kept = d->nspare < CU_SPARE_EVENTS;
  if (kept) d->spare[d->nspare++] = ev;
  pthread_mutex_unlock(&d->ev_lock);
  if (!kept) cu_api.EventDestroy(ev);
}

void cu_spare_events_destroy(cu_device *d) {
  for (size_t i = 0; i < d->nspare; i++) cu_api.EventDestroy(d->spare[i]);
  d->nspare = 0;
}

static void op_free(cu_op *op) {
  if (op->ev) event_put(op->d, op->ev);
  if (op->free_arg) op->free_arg(op->arg);
  opq_op_destroy(&op->base);
  free(op);
}

/* Keep op while this thread synchronises on its event (it is live, or
 * submitted with d->q.lock held: its point is not complete). */
static void op_pin(cu_op *op) { atomic_fetch_add(&op->pins, 1); }

static void op_unpin(cu_op *op) {
  if (atomic_fetch_sub(&op->pins, 1) != 1) return;
  cu_make_current(op->d->ctx);
  op_free(op);
}

/* ---- the driver's hooks ---- */

static const char *error_text(int code) { return cu_error_name(code); }

static void op_retire(opq_op *o) {
  pthread_mutex_lock(&live_lock);
  cu_op **p = &live;
  while (*p && *p != (cu_op *)o) p = &(*p)->live_next;
  if (*p) *p = (*p)->live_next;
  pthread_mutex_unlock(&live_lock);
}

static void op_destroy(opq_op *o) { op_unpin((cu_op *)o); }

/* Points complete, and gated ops are submitted, on the completion thread. */
static void op_wake(opq_queue *q) { pthread_cond_broadcast(&((cu_device *)q->owner)->wake); }

const opq_driver cu_op_driver = {
    .error_name = error_text, .free_op = op_destroy, .retire = op_retire, .wake = op_wake};

/* Submit op on d's stream (d->q.lock held, d's context current): the
 * native waits, its work, its event. false: nothing was enqueued and *err
 * says why (for an op that was gated, its point fails with it). */
static bool submit(cu_device *d, cu_op *op, dlcu_result *err) {
  const dlrun_event *waits = op->waits;
  size_t nwaits = op->nwaits;
  bool enqueued = false;
  dlcu_result e = DLCU_SUCCESS;
  if (nwaits) pthread_mutex_lock(&live_lock);
  for (size_t i = 0; i < nwaits && !e; i++) {
    cu_op *w = waits[i].platform == &cu_platform ? live_op(waits[i]) : NULL;
    if (w && w->d != d) e = cu_api.StreamWaitEvent(d->stream, w->ev, 0);
    enqueued |= w && !e;
  }
  if (nwaits) pthread_mutex_unlock(&live_lock);
  if (!e && op->work && !opq_failing(&op->base)) e = op->work(d, op->arg, &enqueued);
  *err = e;
  opq_note_error(&op->base, e);
  if (e && !enqueued) return false;
  dlcu_result r = cu_api.EventRecord(op->ev, d->stream);
  if (r) opq_note_error(&op->base, r);
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

/* Work on d's stream failed (d->q.lock held): every device's stream is
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

/* Whether the stream orders op after ev already: a submitted op of this
 * platform (cuStreamWaitEvent on another device's stream). */
static bool on_a_stream(opq_op *op, dlrun_event ev) {
  (void)op;
  pthread_mutex_lock(&live_lock);
  bool native = ev.platform == &cu_platform && live_op(ev);
  pthread_mutex_unlock(&live_lock);
  return native;
}

/* Whether d has a gated op (every later op waits behind it). */
static bool has_gated(const cu_device *d) {
  for (const opq_op *o = d->q.head; o; o = o->next)
    if (((const cu_op *)o)->state == OP_GATED) return true;
  return false;
}

dlrun_status cu_enqueue(cu_device *d, const char *what, int inject_kind, cu_work_fn work,
                        void *arg, void (*free_arg)(void *), void (*on_complete)(void *),
                        void *ctx, const dlrun_event *waits, size_t nwaits, dlrun_event *done) {
  cu_op *op = calloc(1, sizeof *op);
  opq_wait *few[4] = {0}; /* most ops wait for few events: no allocation */
  opq_wait **ws = nwaits <= 4 ? few : calloc(nwaits, sizeof *ws);
  dlcu_result r = DLCU_SUCCESS;
  if (!op || !ws) {
    free(op);
    if (ws != few) free(ws);
    if (free_arg) free_arg(arg);
    return cu_svc->fail(DLRUN_ERR_RESOURCE_EXHAUSTED, "%s: out of host memory", d->name);
  }
  opq_op_init(&op->base, &d->q, what, 2); /* its work, the enqueue's hold */
  op->base.on_complete = on_complete;
  op->base.ctx = ctx;
  op->d = d;
  op->work = work;
  op->arg = arg;
  op->free_arg = free_arg;
  op->waits = waits;
  op->nwaits = nwaits;
  atomic_init(&op->pins, 1);
  dlrun_status refused = cu_usable(d, what);
  if (refused) {
    op_free(op);
    if (ws != few) free(ws);
    return refused;
  }
  if ((r = cu_make_current(d->ctx)) || (r = event_get(d, &op->ev))) {
    op->ev = NULL;
    op_free(op);
    if (ws != few) free(ws);
    return cu_svc->fail(DLRUN_ERR_RUNTIME, "%s: %s failed: cuEventCreate: %s (%d)", d->name, what,
                        cu_error_name(r), r);
  }
  pthread_mutex_lock(&d->q.lock);
  size_t nws = opq_waits_gate(&op->base, waits, nwaits, on_a_stream, ws);
  op->base.injected = opq_take_injected(&d->q, inject_kind);
  if (op->base.gates || has_gated(d)) {
    op->state = OP_GATED; /* the completion thread submits it */
  } else if (!submit(d, op, &r)) {
    pthread_mutex_unlock(&d->q.lock);
    dlrun_status st = opq_fail_enqueue(&d->q, what, r);
    for (size_t i = 0; i < nws; i++) free(ws[i]);
    if (ws != few) free(ws);
    op_free(op);
    return st;
  }
  opq_push(&op->base);
  pthread_mutex_unlock(&d->q.lock);
  if (done) *done = op->base.point;
  opq_waits_then(ws, nws);
  if (ws != few) free(ws);
  opq_release(&op->base); /* the enqueue's hold */
  return DLRUN_OK;
}

/* ---- the end of an op's work ---- */

/* Synchronise on the pinned, submitted op's event and end its work, unless
 * another thread did first (the completion thread, a waiter). */
static void work_done(cu_op *op) {
  cu_device *d = op->d;
  cu_make_current(d->ctx);
  dlcu_result r = cu_api.EventSynchronize(op->ev);
  pthread_mutex_lock(&d->q.lock);
  if (op->state == OP_SUBMITTED) {
    if (r) {
      opq_note_error(&op->base, r);
      recover(d);
    }
    op->state = OP_WORK_DONE;
    opq_release_locked(&op->base);
  }
  pthread_mutex_unlock(&d->q.lock);
}

/* The platform's event_wait: a submitted op's point is waited for on this
 * thread, its work ended and the queue drained here (the op's `waiters`
 * keep the completion thread from doing either for it: that would leave
 * this thread asleep until it had); anything else (an op still gated, or
 * complete) the timeline's way. */
dlrun_status cu_event_wait(dlrun_event ev) {
  if (cu_svc->timeline_query(ev)) return cu_svc->timeline_wait(ev);
  pthread_mutex_lock(&live_lock);
  cu_op *op = live_op(ev);
  if (op) op_pin(op);
  pthread_mutex_unlock(&live_lock);
  if (!op) return cu_svc->timeline_wait(ev);
  opq_queue *q = &op->d->q;
  pthread_mutex_lock(&q->lock);
  op->waiters++;
  pthread_mutex_unlock(&q->lock);
  work_done(op);
  opq_drain(q);
  pthread_mutex_lock(&q->lock);
  op->waiters--;
  /* Its waits may have reported since, and the completion thread let it be. */
  bool more = q->head && q->head->complete;
  pthread_mutex_unlock(&q->lock);
  if (more) opq_drain(q);
  op_unpin(op);
  return cu_svc->timeline_wait(ev);
}

/* ---- the completion thread ---- */

/* The first op of d in `state`, or NULL. */
static cu_op *first_in(cu_device *d, op_state state) {
  opq_op *o = d->q.head;
  while (o && ((cu_op *)o)->state != state) o = o->next;
  return (cu_op *)o;
}

/* The first submitted op no thread waits for (cu_event_wait ends those). */
static cu_op *first_unwaited(cu_device *d) {
  cu_op *op = first_in(d, OP_SUBMITTED);
  while (op && (op->state != OP_SUBMITTED || op->waiters)) op = (cu_op *)op->base.next;
  return op;
}

/* Submit the gated ops whose gates opened, in order (their native waits,
 * ops of other devices on their streams, are still cuStreamWaitEvent). */
static void submit_gated(cu_device *d) {
  cu_op *op = first_in(d, OP_GATED);
  while (op && op->state == OP_GATED && op->base.gates == 0) {
    cu_make_current(d->ctx);
    dlcu_result err;
    if (!submit(d, op, &err)) { /* nothing enqueued: its point fails */
      op->state = OP_WORK_DONE;
      opq_release_locked(&op->base);
    }
    op = (cu_op *)op->base.next;
  }
}

void *cu_completion_main(void *arg) {
  cu_device *d = arg;
  pthread_mutex_lock(&d->q.lock);
  for (;;) {
    submit_gated(d);
    if (d->q.head && d->q.head->complete && !((cu_op *)d->q.head)->waiters) {
      pthread_mutex_unlock(&d->q.lock);
      opq_drain(&d->q);
      pthread_mutex_lock(&d->q.lock);
      continue;
    }
    cu_op *op = first_unwaited(d);
    if (op) {
      op_pin(op);
      pthread_mutex_unlock(&d->q.lock);
      work_done(op);
      op_unpin(op);
      pthread_mutex_lock(&d->q.lock);
      continue;
    }
    if (d->stop && !d->q.head) break;
    pthread_cond_wait(&d->wake, &d->q.lock);
  }
  pthread_mutex_unlock(&d->q.lock);
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
    opq_failure_of(cu_svc, ev, &st);
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
