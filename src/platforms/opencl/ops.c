/* Ops on a device's queue and how their points complete.
 *
 * An op (a copy, a fill, a record) is a few commands on the device's
 * in-order queue and one point of the device's timeline. It completes when
 * its last command has (a clSetEventCallback) and when every event it waited
 * for has completed (svc->event_then): only then is it known whether it
 * failed, by its commands' status or by a failed wait. Points complete in
 * queue order: ops that complete early wait in the device's list for the ones
 * before them, and one thread at a time drains the list into
 * svc->timeline_complete. No thread ever blocks on the device's work.
 *
 * Failures never travel as negative OpenCL statuses between commands: pocl
 * 3.1 never calls the completion callbacks registered on a command that a
 * failed event terminated, and it terminates every later command of the
 * queue too. So a wait on a failed event, or an injected failure, is kept in
 * the op and makes its point fail; the commands themselves run (a failed
 * op's bytes are undefined). A foreign event gates the queue through a user
 * event that its completion sets to CL_COMPLETE. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ocl.h"

typedef struct ocl_wait {
  ocl_op *op;     /* NULL: a stream_wait's, nothing to tell */
  cl_event user;  /* the user event gating the queue, or NULL */
  dlrun_event ev;
  int retries;    /* called back before ev read as complete (see wait_done) */
} ocl_wait;

struct ocl_op {
  ocl_op *next;
  ocl_device *d;
  const char *what; /* "copy", "fill", "record" */
  dlrun_event point;
  cl_event last;          /* retained: the op's last command */
  atomic_int pending;     /* the enqueue, the last command, the waits */
  bool complete;          /* under d->lock */
  bool abandoned;         /* enqueue failed before any command: no point */
  pthread_mutex_t flock;  /* cl_status and wait_msg */
  cl_int cl_status;       /* a command's failure */
  bool injected;          /* a failure injected by a test (inject_failure) */
  char *wait_msg;         /* the first failed wait's message */
  void (*on_complete)(void *ctx); /* a copy's dlrun_copy_op.complete, or NULL */
  void *on_complete_ctx;
  void **keep;            /* host bytes the commands read, freed at the end */
  size_t nkeep;
};

static void op_free(ocl_op *op) {
  for (size_t i = 0; i < op->nkeep; i++) free(op->keep[i]);
  free(op->keep);
  free(op->wait_msg);
  if (op->last) clReleaseEvent(op->last);
  pthread_mutex_destroy(&op->flock);
  free(op);
}

/* A command of op failed with status (the first one is kept). */
static void note_status(ocl_op *op, cl_int status) {
  pthread_mutex_lock(&op->flock);
  if (op->cl_status >= 0) op->cl_status = status;
  pthread_mutex_unlock(&op->flock);
}

static void note_wait_failure(ocl_op *op, const char *msg) {
  pthread_mutex_lock(&op->flock);
  if (!op->wait_msg) op->wait_msg = strdup(msg && *msg ? msg : "failed");
  pthread_mutex_unlock(&op->flock);
}

/* The status of the complete event ev, and its failure's message. Only a
 * failed event is waited for (complete: returns at once), for the message. */
static const char *failure_of(dlrun_event ev, dlrun_status *st) {
  *st = ocl_svc->event_status(ev);
  if (*st) *st = ocl_svc->event_wait(ev);
  return *st ? ocl_svc->last_error() : NULL;
}

/* Complete op's point: failed with "<device>: copy failed: CL_... (-5)"
 * ("injected device failure" for a test's), or with the message of the
 * failed event it waited on (as every platform does: the first failure is
 * what a reader sees). */
static void op_finish(ocl_op *op) {
  ocl_device *d = op->d;
  char msg[1024];
  dlrun_status st = DLRUN_OK;
  if (op->wait_msg) {
    snprintf(msg, sizeof msg, "%s", op->wait_msg);
    st = DLRUN_ERR_RUNTIME;
  } else if (op->injected) { /* worded as host execution words it */
    snprintf(msg, sizeof msg, "%s: %s failed: injected device failure", d->name, op->what);
    st = DLRUN_ERR_RUNTIME;
  } else if (op->cl_status < 0) {
    snprintf(msg, sizeof msg, "%s: %s failed: %s (%d)", d->name, op->what,
             ocl_error_name(op->cl_status), op->cl_status);
    st = DLRUN_ERR_RUNTIME;
  }
  if (op->on_complete) op->on_complete(op->on_complete_ctx); /* before the point completes */
  ocl_svc->timeline_complete(d->tl, op->point, st, st ? msg : NULL);
}

/* Complete, in order, the ops at the head of d's list that are done. */
static void drain(ocl_device *d) {
  pthread_mutex_lock(&d->lock);
  if (d->draining) {
    pthread_mutex_unlock(&d->lock);
    return;
  }
  d->draining = true;
  while (d->head && d->head->complete) {
    ocl_op *op = d->head;
    d->head = op->next;
    if (!d->head) d->tail = NULL;
    pthread_mutex_unlock(&d->lock);
    op_finish(op);
    op_free(op);
    pthread_mutex_lock(&d->lock);
  }
  d->draining = false;
  if (!d->head) pthread_cond_broadcast(&d->idle);
  pthread_mutex_unlock(&d->lock);
}

/* One of the things op waits for happened. */
static void op_release(ocl_op *op) {
  if (atomic_fetch_sub(&op->pending, 1) != 1) return;
  if (op->abandoned) {
    op_free(op);
    return;
  }
  ocl_device *d = op->d;
  pthread_mutex_lock(&d->lock);
  op->complete = true;
  pthread_mutex_unlock(&d->lock);
  drain(d);
}

static void CL_CALLBACK command_done(cl_event ev, cl_int status, void *ctx) {
  (void)ev;
  ocl_op *op = ctx;
  if (status < 0) note_status(op, status);
  op_release(op);
}

/* An awaited event completed: note its failure, open the gate. A
 * timeline may call back before its point reads as complete (the library's
 * runs the callbacks it releases, then marks the point): then the status
 * is not known yet, and asking again is answered once it is. */
static void wait_done(void *ctx) {
  ocl_wait *w = ctx;
  bool known = ocl_svc->event_query(w->ev);
  if (!known && w->retries++ < 3) {
    if (!ocl_svc->event_then(w->ev, wait_done, w)) return;
    if (w->op) note_wait_failure(w->op, ocl_svc->last_error()); /* no memory to ask again */
  } else if (w->op && known) {
    dlrun_status st;
    const char *msg = failure_of(w->ev, &st);
    if (st) note_wait_failure(w->op, msg);
  }
  if (w->user) {
    clSetUserEventStatus(w->user, CL_COMPLETE);
    clReleaseEvent(w->user);
  }
  ocl_op *op = w->op;
  free(w);
  if (op) op_release(op);
}

/* The retained last command of this platform's pending point ev, or NULL
 * when it is complete (no op of any device has it). */
static cl_event native_event(dlrun_event ev) {
  cl_event found = NULL;
  pthread_mutex_lock(&ocl_state.lock);
  for (ocl_device *d = ocl_state.devices; d && !found; d = d->next) {
    pthread_mutex_lock(&d->lock);
    for (ocl_op *op = d->head; op && !found; op = op->next)
      if (!memcmp(&op->point, &ev, sizeof ev)) {
        found = op->last;
        clRetainEvent(found);
      }
    pthread_mutex_unlock(&d->lock);
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
  *w = (ocl_wait){.op = op, .ev = ev};
  if (!own) {
    cl_int err;
    w->user = clCreateUserEvent(ocl_state.context, &err);
    if (!w->user) {
      free(w);
      return ocl_svc->fail(DLRUN_ERR_RUNTIME, "%s: clCreateUserEvent failed: %s (%d)", d->name,
                           ocl_error_name(err), err);
    }
    clRetainEvent(w->user); /* the queue's reference; wait_done drops the other */
    *out = w->user;
  }
  if (op) atomic_fetch_add(&op->pending, 1);
  cl_event user = w->user;
  dlrun_status st = ocl_svc->event_then(ev, wait_done, w);
  if (st) {
    if (op) atomic_fetch_sub(&op->pending, 1);
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
    failure_of(ev, &st);
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
  q->op->abandoned = true;
  op_release(q->op);
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
  op->what = what;
  pthread_mutex_init(&op->flock, NULL);
  atomic_init(&op->pending, 1); /* released by ocl_end */
  q->op = op;
  q->waits = list;
  for (size_t i = 0; i < nwaits; i++) {
    dlrun_event ev = waits[i];
    if (!ev.platform) continue;
    if (ocl_svc->event_query(ev)) {
      dlrun_status st;
      const char *msg = failure_of(ev, &st);
      if (st) {
        note_wait_failure(op, msg);
        q->failed = true;
      }
      continue;
    }
    cl_event e;
    dlrun_status st = gate_on(d, ev, op, &e);
    if (st) {
      abandon(q);
      return st;
    }
    if (e) list[q->nwaits++] = e;
  }
  pthread_mutex_lock(&d->lock);
  if (inject_kind >= 0 && d->inject[inject_kind]) {
    d->inject[inject_kind]--;
    op->injected = true; /* its marker's completion fails it, as a driver's error would */
    q->failed = true;
  }
  return DLRUN_OK;
}

bool ocl_op_runs(const ocl_enqueue *q) { return !q->failed; }

void ocl_on_complete(ocl_enqueue *q, void (*fn)(void *ctx), void *ctx) {
  q->op->on_complete = fn;
  q->op->on_complete_ctx = ctx;
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
    note_status(h->op, status);
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
    pthread_mutex_unlock(&d->lock);
    dlrun_status st = ocl_svc->fail(DLRUN_ERR_RUNTIME, "%s: %s failed: %s (%d)", d->name,
                                    op->what, ocl_error_name(err), err);
    abandon(q);
    return st;
  }
  for (cl_uint i = 0; i < q->nwaits; i++) clReleaseEvent(q->waits[i]);
  free(q->waits);
  q->waits = NULL;
  if (err) op->cl_status = err; /* some commands were enqueued: the point fails */
  op->last = q->last;
  op->point = ocl_svc->timeline_begin(d->tl);
  if (d->tail)
    d->tail->next = op;
  else
    d->head = op;
  d->tail = op;
  pthread_mutex_unlock(&d->lock);
  if (q->host && clSetEventCallback(q->host->before, CL_COMPLETE, host_step_run, q->host))
    host_step_run(q->host->before, CL_OUT_OF_RESOURCES, q->host); /* the op fails */
  q->host = NULL;
  atomic_fetch_add(&op->pending, 1);
  cl_int cerr = clSetEventCallback(op->last, CL_COMPLETE, command_done, op);
  if (cerr != CL_SUCCESS) command_done(op->last, cerr, op);
  if (done) *done = op->point;
  op_release(op); /* the enqueue's own hold */
  return DLRUN_OK;
}
