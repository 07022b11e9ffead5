/* Ops on a device's queue: the driver's part of the operation protocol
 * (common/op_queue.h), which keeps the op list, the waits and how points
 * complete and fail.
 *
 * An op (a copy, a fill, a record) is a few commands on the device's
 * in-order queue. Its last command's completion (a clSetEventCallback)
 * releases it; so does each event it waited for (svc->event_then). No
 * thread ever blocks on the device's work: whichever thread releases an op
 * last completes the points that are due.
 *
 * Failures never travel as negative OpenCL statuses between commands: pocl
 * 3.1 never calls the completion callbacks registered on a command that a
 * failed event terminated, and it terminates every later command of the
 * queue too. So a wait on a failed event, or an injected failure, is kept in
 * the op and makes its point fail; the commands themselves run (a failed
 * op's bytes are undefined). A foreign event gates the queue through a user
 * event that its completion sets to CL_COMPLETE. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ocl.h"

typedef struct ocl_wait {
  opq_wait base;  /* base.op NULL: a stream_wait's, nothing to tell */
  cl_event user;  /* the user event gating the queue, or NULL */
} ocl_wait;

/* Holds (base.pending): the enqueue, the last command, the waits. */
struct ocl_op {
  opq_op base;
  ocl_device *d;
  cl_event last;          /* retained: the op's last command */
  void **keep;            /* host bytes the commands read, freed at the end */
  size_t nkeep;
};

static void op_free(ocl_op *op) {
  for (size_t i = 0; i < op->nkeep; i++) free(op->keep[i]);
  free(op->keep);
  if (op->last) clReleaseEvent(op->last);
  opq_op_destroy(&op->base);
  free(op);
}

static const char *error_text(int code) { return ocl_error_name(code); }
static void op_destroy(opq_op *o) { op_free((ocl_op *)o); }

/* Points complete on the thread that releases an op last. */
const opq_driver ocl_op_driver = {.error_name = error_text, .free_op = op_destroy};

static void CL_CALLBACK command_done(cl_event ev, cl_int status, void *ctx) {
  (void)ev;
  ocl_op *op = ctx;
  if (status < 0) opq_note_error(&op->base, status);
  opq_release(&op->base);
}

/* An awaited event completed (its failure noted): open the gate. */
static void wait_opened(opq_wait *base) {
  ocl_wait *w = (ocl_wait *)base;
  if (w->user) {
    clSetUserEventStatus(w->user, CL_COMPLETE);
    clReleaseEvent(w->user);
  }
  free(w);
}

/* The retained last command of this platform's pending point ev, or NULL
 * when it is complete (no op of any device has it). */
static cl_event native_event(dlrun_event ev) {
  cl_event found = NULL;
  pthread_mutex_lock(&ocl_state.lock);
  for (ocl_device *d = ocl_state.devices; d && !found; d = d->next) {
    pthread_mutex_lock(&d->q.lock);
    for (opq_op *op = d->q.head; op && !found; op = op->next)
      if (!memcmp(&op->point, &ev, sizeof ev)) {
        found = ((ocl_op *)op)->last;
        clRetainEvent(found);
      }
    pthread_mutex_unlock(&d->q.lock);
  }
  pthread_mutex_unlock(&ocl_state.lock);
  return found;
}

/* What the queue waits for to be after the pending event ev: *out its
 * native event, or a user event released when ev completes, or NULL (it
 * completed meanwhile). op (may be NULL) is told when ev completes, with its
 * failure. */
static dlrun_status gate_on(ocl_device *d, dlrun_event ev, ocl_op *op, cl_event *out) {
  *out = NULL;
  bool own = ev.platform == &ocl_platform;
  if (own) *out = native_event(ev);
  if (own && !op) return DLRUN_OK;
  ocl_wait *w = calloc(1, sizeof *w);
  if (!w) {
    if (*out) clReleaseEvent(*out);
    *out = NULL;
    return ocl_svc->fail(DLRUN_ERR_RESOURCE_EXHAUSTED, "%s: out of host memory", d->name);
  }
  *w = (ocl_wait){.base = {.op = op ? &op->base : NULL, .ev = ev, .opened = wait_opened}};
  if (!own) {
    cl_int err;
    w->user = clCreateUserEvent(ocl_state.context, &err);
    if (!w->user) {
      free(w);
      return ocl_svc->fail(DLRUN_ERR_RUNTIME, "%s: clCreateUserEvent failed: %s (%d)", d->name,
                           ocl_error_name(err), err);
    }
    clRetainEvent(w->user); /* the queue's reference; wait_opened drops the other */
    *out = w->user;
  }
  if (op) atomic_fetch_add(&op->base.pending, 1);
  cl_event user = w->user;
  dlrun_status st = opq_wait_then(ocl_svc, &w->base);
  if (st) {
    if (op) atomic_fetch_sub(&op->base.pending, 1);
    if (user) {
      clSetUserEventStatus(user, CL_COMPLETE);
      clReleaseEvent(user);
    }
    if (*out) clReleaseEvent(*out);
    *out = NULL;
    free(w);
  }
  return st;
}

dlrun_status ocl_wait_event(ocl_device *d, dlrun_event ev, cl_event *out) {
  *out = NULL;
  if (!ev.platform) return DLRUN_OK;
  if (ocl_svc->event_query(ev)) {
    dlrun_status st;
    opq_failure_of(ocl_svc, ev, &st);
    return st; /* its message is set */
  }
  return gate_on(d, ev, NULL, out);
}

/* ---- enqueueing an op ---- */

/* Drop an op that enqueued nothing: it has no point; the waits it is
 * registered with free it when the last of them completes. */
static void abandon(ocl_enqueue *q) {
  for (cl_uint i = 0; i < q->nwaits; i++) clReleaseEvent(q->waits[i]);
  free(q->waits);
  q->waits = NULL;
  q->op->base.abandoned = true;
  opq_release(&q->op->base);
}

dlrun_status ocl_begin(ocl_device *d, const char *what, int inject_kind, const dlrun_event *waits,
                       size_t nwaits, ocl_enqueue *q) {
  *q = (ocl_enqueue){.d = d};
  ocl_op *op = calloc(1, sizeof *op);
  cl_event *list = calloc(nwaits ? nwaits : 1, sizeof *list);
  if (!op || !list) {
    free(op);
    free(list);
    return ocl_svc->fail(DLRUN_ERR_RESOURCE_EXHAUSTED, "%s: out of host memory", d->name);
  }
  op->d = d;
  opq_op_init(&op->base, &d->q, what, 1); /* released by ocl_end */
  q->op = op;
  q->waits = list;
  for (size_t i = 0; i < nwaits; i++) {
    dlrun_event ev = waits[i];
    if (opq_settled(&op->base, ev, &q->failed)) continue;
    cl_event e;
    dlrun_status st = gate_on(d, ev, op, &e);
    if (st) {
      abandon(q);
      return st;
    }
    if (e) list[q->nwaits++] = e;
  }
  pthread_mutex_lock(&d->q.lock);
  if (opq_take_injected(&d->q, inject_kind)) {
    op->base.injected = true; /* its point fails, as by a driver's error */
    q->failed = true;
  }
  return DLRUN_OK;
}

bool ocl_op_runs(const ocl_enqueue *q) { return !q->failed; }

void ocl_on_complete(ocl_enqueue *q, void (*fn)(void *ctx), void *ctx) {
  q->op->base.on_complete = fn;
  q->op->base.ctx = ctx;
}

cl_uint ocl_wait_count(const ocl_enqueue *q) { return q->last ? 0 : q->nwaits; }

const cl_event *ocl_wait_list(const ocl_enqueue *q) {
  return q->last || !q->nwaits ? NULL : q->waits;
}

void ocl_enqueued(ocl_enqueue *q, cl_int err, cl_event ev) {
  if (err != CL_SUCCESS) return;
  if (q->last) clReleaseEvent(q->last);
  q->last = ev;
}

bool ocl_keep(ocl_enqueue *q, void *p) {
  ocl_op *op = q->op;
  void **k = realloc(op->keep, (op->nkeep + 1) * sizeof *k);
  if (!k) return false;
  op->keep = k;
  op->keep[op->nkeep++] = p;
  return true;
}

struct ocl_host_step {
  void (*fn)(void *ctx);
  void *ctx;
  ocl_op *op;
  cl_event before; /* the marker it runs after */
  cl_event gate;   /* the user event the commands after it wait for */
};

/* The marker before a host step is done: run it, then open the gate. Not
 * run (a failed marker): the op fails. */
static void CL_CALLBACK host_step_run(cl_event ev, cl_int status, void *arg) {
  (void)ev;
  ocl_host_step *h = arg;
  if (status >= 0)
    h->fn(h->ctx);
  else
    opq_note_error(&h->op->base, status);
  clSetUserEventStatus(h->gate, CL_COMPLETE);
  clReleaseEvent(h->gate);
  clReleaseEvent(h->before);
  free(h);
}

cl_int ocl_enqueue_host(ocl_enqueue *q, void (*fn)(void *ctx), void *ctx) {
  ocl_host_step *h = calloc(1, sizeof *h);
  if (!h) return CL_OUT_OF_HOST_MEMORY;
  *h = (ocl_host_step){.fn = fn, .ctx = ctx, .op = q->op};
  cl_int err;
  h->gate = clCreateUserEvent(ocl_state.context, &err);
  if (!h->gate) {
    free(h);
    return err;
  }
  err = clEnqueueMarkerWithWaitList(q->d->queue, ocl_wait_count(q), ocl_wait_list(q), &h->before);
  cl_event after = NULL;
  if (!err) {
    ocl_enqueued(q, err, h->before);
    clRetainEvent(h->before);
    err = clEnqueueMarkerWithWaitList(q->d->queue, 1, &h->gate, &after);
    ocl_enqueued(q, err, after);
  }
  if (err) { /* nothing waits for the gate: open it */
    clSetUserEventStatus(h->gate, CL_COMPLETE);
    clReleaseEvent(h->gate);
    if (h->before) clReleaseEvent(h->before);
    free(h);
    return err;
  }
  q->host = h; /* its callback is set once the queue's lock is let go */
  return CL_SUCCESS;
}

dlrun_status ocl_end(ocl_enqueue *q, cl_int err, dlrun_event *done) {
  ocl_device *d = q->d;
  ocl_op *op = q->op;
  if (!err && !q->last) {
    /* nothing enqueued (a record, an empty copy, a failed wait): a marker */
    cl_event ev = NULL;
    err = clEnqueueMarkerWithWaitList(d->queue, q->nwaits, q->nwaits ? q->waits : NULL, &ev);
    ocl_enqueued(q, err, ev);
  }
  if (!q->last) {
    pthread_mutex_unlock(&d->q.lock);
    dlrun_status st = opq_fail_enqueue(&d->q, op->base.what, err);
    abandon(q);
    return st;
  }
  for (cl_uint i = 0; i < q->nwaits; i++) clReleaseEvent(q->waits[i]);
  free(q->waits);
  q->waits = NULL;
  if (err) opq_note_error(&op->base, err); /* some commands were enqueued: the point fails */
  op->last = q->last;
  opq_push(&op->base);
  pthread_mutex_unlock(&d->q.lock);
  if (q->host && clSetEventCallback(q->host->before, CL_COMPLETE, host_step_run, q->host))
    host_step_run(q->host->before, CL_OUT_OF_RESOURCES, q->host); /* the op fails */
  q->host = NULL;
  atomic_fetch_add(&op->base.pending, 1);
  cl_int cerr = clSetEventCallback(op->last, CL_COMPLETE, command_done, op);
  if (cerr != CL_SUCCESS) command_done(op->last, cerr, op);
  if (done) *done = op->base.point;
  opq_release(&op->base); /* the enqueue's own hold */
  return DLRUN_OK;
}
