/* The operation protocol of a platform with a queue of its own (see
 * op_queue.h). */
#include "platforms/common/op_queue.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the queue ---- */

void opq_queue_init(opq_queue *q, const dlrun_platform_services *svc, const opq_driver *drv,
                    void *owner, const char *name) {
  *q = (opq_queue){.svc = svc, .drv = drv, .owner = owner, .name = name};
  pthread_mutex_init(&q->lock, NULL);
  pthread_cond_init(&q->idle, NULL);
}

void opq_queue_wait_idle(opq_queue *q) {
  while (q->head || q->draining) pthread_cond_wait(&q->idle, &q->lock);
}

void opq_queue_destroy(opq_queue *q) {
  pthread_mutex_destroy(&q->lock);
  pthread_cond_destroy(&q->idle);
}

/* ---- an op ---- */

void opq_op_init(opq_op *op, opq_queue *q, const char *what, int holds) {
  op->q = q;
  op->what = what;
  pthread_mutex_init(&op->flock, NULL);
  atomic_init(&op->pending, holds);
}

void opq_op_destroy(opq_op *op) {
  free(op->wait_msg);
  pthread_mutex_destroy(&op->flock);
}

bool opq_take_injected(opq_queue *q, int inject_kind) {
  if (inject_kind < 0 || !q->inject[inject_kind]) return false;
  q->inject[inject_kind]--;
  return true;
}

void opq_note_error(opq_op *op, int code) {
  if (!code) return;
  pthread_mutex_lock(&op->flock);
  if (!op->err) op->err = code;
  pthread_mutex_unlock(&op->flock);
}

void opq_note_wait_failure(opq_op *op, const char *msg) {
  pthread_mutex_lock(&op->flock);
  if (!op->wait_msg) op->wait_msg = strdup(msg && *msg ? msg : "failed");
  pthread_mutex_unlock(&op->flock);
}

bool opq_failing(opq_op *op) {
  pthread_mutex_lock(&op->flock);
  bool failing = op->wait_msg || op->injected;
  pthread_mutex_unlock(&op->flock);
  return failing;
}

void opq_push(opq_op *op) {
  opq_queue *q = op->q;
  op->point = q->drv->begin_point ? q->drv->begin_point(q) : q->svc->timeline_begin(q->tl);
  if (q->tail)
    q->tail->next = op;
  else
    q->head = op;
  q->tail = op;
}

/* Complete op's point: failed with "<device>: copy failed: <driver error>
 * (<code>)" ("injected device failure" for a test's, worded as host
 * execution words it), or with the message of the failed event it waited
 * on (as every platform does: the first failure is what a reader sees).
 * Its completion callback runs first, so that whoever waits for the point
 * finds what the op held released. */
static void finish(opq_op *op) {
  opq_queue *q = op->q;
  char msg[1024];
  dlrun_status st = DLRUN_ERR_RUNTIME;
  if (op->wait_msg)
    snprintf(msg, sizeof msg, "%s", op->wait_msg);
  else if (op->injected)
    snprintf(msg, sizeof msg, "%s: %s failed: injected device failure", q->name, op->what);
  else if (op->err)
    snprintf(msg, sizeof msg, "%s: %s failed: %s (%d)", q->name, op->what,
             q->drv->error_name(op->err), op->err);
  else
    st = DLRUN_OK;
  if (op->on_complete) op->on_complete(op->ctx);
  if (q->drv->complete_point)
    q->drv->complete_point(q, op->point, st, st ? msg : NULL);
  else
    q->svc->timeline_complete(q->tl, op->point, st, st ? msg : NULL);
}

void opq_drain(opq_queue *q) {
  pthread_mutex_lock(&q->lock);
  if (q->draining) { /* that thread completes ours too */
    pthread_mutex_unlock(&q->lock);
    return;
  }
  q->draining = true;
  while (q->head && q->head->complete) {
    opq_op *op = q->head;
    q->head = op->next;
    if (!q->head) q->tail = NULL;
    pthread_mutex_unlock(&q->lock);
    if (q->drv->retire) q->drv->retire(op);
    finish(op);
    q->drv->free_op(op);
    pthread_mutex_lock(&q->lock);
  }
  q->draining = false;
  if (!q->head) pthread_cond_broadcast(&q->idle);
  pthread_mutex_unlock(&q->lock);
}

void opq_release_locked(opq_op *op) {
  if (atomic_fetch_sub(&op->pending, 1) != 1) return;
  if (op->abandoned) {
    op->q->drv->free_op(op);
    return;
  }
  op->complete = true;
  if (op->q->drv->wake) op->q->drv->wake(op->q);
}

void opq_release(opq_op *op) {
  if (atomic_fetch_sub(&op->pending, 1) != 1) return;
  if (op->abandoned) {
    op->q->drv->free_op(op);
    return;
  }
  opq_queue *q = op->q; /* op may go once it reads complete */
  pthread_mutex_lock(&q->lock);
  op->complete = true;
  if (q->drv->wake) q->drv->wake(q);
  pthread_mutex_unlock(&q->lock);
  if (!q->drv->wake) opq_drain(q);
}

dlrun_status opq_fail_enqueue(opq_queue *q, const char *what, int code) {
  return q->svc->fail(DLRUN_ERR_RUNTIME, "%s: %s failed: %s (%d)", q->name, what,
                      q->drv->error_name(code), code);
}

/* ---- waits on events ---- */

/* Only a failed event is waited for (complete: returns at once), for the
 * message. */
const char *opq_failure_of(const dlrun_platform_services *svc, dlrun_event ev, dlrun_status *st) {
  *st = svc->event_status(ev);
  if (*st) *st = svc->event_wait(ev);
  return *st ? svc->last_error() : NULL;
}

bool opq_settled(opq_op *op, dlrun_event ev, bool *failed) {
  const dlrun_platform_services *svc = op->q->svc;
  if (!ev.platform) return true;
  if (!svc->event_query(ev)) return false;
  dlrun_status st;
  const char *msg = opq_failure_of(svc, ev, &st);
  if (st) {
    opq_note_wait_failure(op, msg);
    if (failed) *failed = true;
  }
  return true;
}

void opq_wait_end(opq_wait *w, const char *msg) {
  opq_op *op = w->op;
  if (op && msg) opq_note_wait_failure(op, msg);
  w->opened(w);
  if (op) opq_release(op);
}

/* An awaited event completed: note its failure, open the gate. A timeline
 * may call back before its point reads as complete (the library's runs the
 * callbacks it releases, then marks the point): then it is asked again,
 * and answered once it is. Not known after that (or no memory to ask
 * again): the op fails. Never calls the driver. */
static void wait_done(void *ctx) {
  opq_wait *w = ctx;
  const dlrun_platform_services *svc = w->svc;
  bool known = svc->event_query(w->ev);
  if (!known && w->retries++ < 3 && !svc->event_then(w->ev, wait_done, w)) return;
  dlrun_status st = DLRUN_OK;
  const char *msg = NULL;
  if (w->op) msg = known ? opq_failure_of(svc, w->ev, &st) : svc->last_error();
  opq_wait_end(w, st || !known ? msg : NULL);
}

dlrun_status opq_wait_then(const dlrun_platform_services *svc, opq_wait *w) {
  w->svc = svc;
  return svc->event_then(w->ev, wait_done, w);
}

/* ---- waits that gate an op ---- */

/* A gated wait's event completed (its failure noted): open its gate. */
static void gate_opened(opq_wait *w) {
  opq_queue *q = w->op->q;
  pthread_mutex_lock(&q->lock);
  if (w->gate) w->op->gates--;
  q->drv->wake(q);
  pthread_mutex_unlock(&q->lock);
  free(w);
}

size_t opq_waits_gate(opq_op *op, const dlrun_event *waits, size_t n,
                      bool (*ordered)(opq_op *op, dlrun_event ev), opq_wait **ws) {
  size_t nws = 0;
  for (size_t i = 0; i < n; i++) {
    dlrun_event ev = waits[i];
    if (opq_settled(op, ev, NULL)) continue;
    opq_wait *w = malloc(sizeof *w);
    if (!w) {
      opq_note_wait_failure(op, "out of host memory");
      continue;
    }
    *w = (opq_wait){.op = op, .ev = ev, .gate = !ordered(op, ev), .opened = gate_opened};
    op->gates += w->gate;
    atomic_fetch_add(&op->pending, 1);
    ws[nws++] = w;
  }
  return nws;
}

void opq_waits_then(opq_wait **ws, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (opq_wait_then(ws[i]->op->q->svc, ws[i]))
      opq_wait_end(ws[i], ws[i]->op->q->svc->last_error());
}
