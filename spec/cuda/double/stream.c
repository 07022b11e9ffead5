/* Streams and events. A stream is an in-order queue run by a worker thread
 * of its own; each operation runs holding dbl.lock (the double serialises
 * all work: it models ordering, not speed). A failing operation (an
 * illegal address, an injected :async failure) marks its stream: the error
 * is returned by the next cuStreamSynchronize (which clears it) and is
 * carried by every event recorded on the stream after it, so that
 * cuEventQuery and cuEventSynchronize of later work report it, and a stream
 * waiting on such an event takes the error too (real CUDA reports most
 * asynchronous errors the same way: later, from the synchronising call).
 * Later operations still run. An event never recorded is complete. */
#include <stdlib.h>

#include "double.h"

static void op_free(dbl_op *op) {
  if (op->kind == DBL_OP_RECORD || op->kind == DBL_OP_WAIT) dbl_event_unref(op->u.ev.event);
  free(op);
}

static void record_done(dbl_op *op, dlcu_result error) {
  dlcu_event e = op->u.ev.event;
  if (op->u.ev.seq < e->done) return;
  e->done = op->u.ev.seq;
  e->error = error;
}

static void op_run(dlcu_stream s, dbl_op *op) {
  dlcu_result rc = s->ctx->sticky ? s->ctx->sticky : op->fail;
  if (op->fail && op->sticky && !s->ctx->sticky) s->ctx->sticky = op->fail;
  if (op->kind == DBL_OP_RECORD) {
    if (rc && !s->error) s->error = rc;
    record_done(op, s->error);
    return;
  }
  if (op->kind == DBL_OP_WAIT) {
    rc = rc ? rc : op->u.ev.event->error;
  } else if (!rc) {
    int dev = s->ctx->device;
    switch (op->kind) {
    case DBL_OP_COPY: rc = dbl_copy_run(&op->u.copy); break;
    case DBL_OP_SET:
      rc = dbl_set_run(op->u.set.dst, op->u.set.n, op->u.set.value, op->u.set.size, dev);
      break;
    case DBL_OP_KERNEL: rc = op->u.kernel.k->run(op->u.kernel.args, dev); break;
    default: break;
    }
  }
  if (rc && !s->error) s->error = rc;
}

static void *worker(void *arg) {
  dlcu_stream s = arg;
  pthread_mutex_lock(&dbl.lock);
  for (;;) {
    dbl_op *op = s->head;
    if (!op) {
      if (s->stop) break;
      pthread_cond_wait(&dbl.changed, &dbl.lock);
      continue;
    }
    if (s->discard) {
      if (op->kind == DBL_OP_RECORD) record_done(op, DLCU_ERROR_DEINITIALIZED); /* no waiter hangs */
    } else if (dbl.hold || (op->kind == DBL_OP_WAIT && op->u.ev.event->done < op->u.ev.seq)) {
      pthread_cond_wait(&dbl.changed, &dbl.lock);
      continue;
    } else {
      op_run(s, op);
    }
    s->head = op->next;
    if (!s->head) s->tail = NULL;
    op_free(op);
    pthread_cond_broadcast(&dbl.changed);
  }
  pthread_mutex_unlock(&dbl.lock);
  return NULL;
}

static dlcu_result stream_new(dlcu_context ctx, dlcu_stream *out) {
  dlcu_stream s = calloc(1, sizeof *s);
  if (!s) return DLCU_ERROR_OUT_OF_MEMORY;
  s->ctx = ctx;
  if (pthread_create(&s->thread, NULL, worker, s)) {
    free(s);
    return DLCU_ERROR_OUT_OF_MEMORY;
  }
  pthread_setname_np(s->thread, "cuda-double"); /* for tests counting workers */
  s->next = dbl.streams;
  dbl.streams = s;
  *out = s;
  return DLCU_SUCCESS;
}

dlcu_stream dbl_stream_of(dlcu_stream s, dlcu_context ctx) {
  if (!s || (uintptr_t)s == 1 || (uintptr_t)s == 2) { /* legacy and per-thread defaults */
    if (!ctx) return NULL;
    if (!ctx->null_stream && stream_new(ctx, &ctx->null_stream)) return NULL;
    return ctx->null_stream;
  }
  for (dlcu_stream t = dbl.streams; t; t = t->next)
    if (t == s) return s;
  return NULL;
}

dbl_op *dbl_op_new(dbl_op_kind kind, dlcu_result fail) {
  dbl_op *op = calloc(1, sizeof *op);
  if (op) {
    op->kind = kind;
    op->fail = fail & ~DBL_STICKY;
    op->sticky = (fail & DBL_STICKY) != 0;
  }
  return op;
}

void dbl_enqueue(dlcu_stream s, dbl_op *op) {
  if (s->tail)
    s->tail->next = op;
  else
    s->head = op;
  s->tail = op;
  pthread_cond_broadcast(&dbl.changed);
}

/* Drains the queue first, unless `discard` (teardown): then the queued
 * work is dropped. Releases dbl.lock while joining the worker. */
void dbl_stream_destroy_locked(dlcu_stream s, bool discard) {
  for (dlcu_stream *p = &dbl.streams; *p; p = &(*p)->next)
    if (*p == s) {
      *p = s->next;
      break;
    }
  if (s->ctx->null_stream == s) s->ctx->null_stream = NULL;
  s->discard = discard;
  while (s->head && !discard) pthread_cond_wait(&dbl.changed, &dbl.lock);
  s->stop = true;
  pthread_cond_broadcast(&dbl.changed);
  pthread_mutex_unlock(&dbl.lock);
  pthread_join(s->thread, NULL);
  pthread_mutex_lock(&dbl.lock);
  free(s);
}

dlcu_result cuStreamCreate(dlcu_stream *stream, unsigned int flags) {
  DBL_ENTER(StreamCreate);
  dlcu_context ctx = dbl_current();
  if (!ctx) return dbl_leave(DLCU_ERROR_INVALID_CONTEXT);
  if (!stream || flags & ~(unsigned)DLCU_STREAM_NON_BLOCKING)
    return dbl_leave(DLCU_ERROR_INVALID_VALUE);
  return dbl_leave(stream_new(ctx, stream));
}

static bool user_stream(dlcu_stream s) {
  return s && (uintptr_t)s > 2 && dbl_stream_of(s, NULL) == s;
}

dlcu_result cuStreamDestroy_v2(dlcu_stream stream) {
  DBL_ENTER(StreamDestroy);
  if (!user_stream(stream)) return dbl_leave(DLCU_ERROR_INVALID_HANDLE);
  dbl_stream_destroy_locked(stream, false);
  return dbl_leave(DLCU_SUCCESS);
}

dlcu_result dbl_stream_arg(dlcu_stream stream, bool need_context, dlcu_stream *out) {
  dlcu_context ctx = dbl_current();
  bool null = !stream || (uintptr_t)stream <= 2;
  if ((null || need_context) && !ctx) return DLCU_ERROR_INVALID_CONTEXT;
  *out = dbl_stream_of(stream, ctx);
  return *out ? DLCU_SUCCESS : null ? DLCU_ERROR_OUT_OF_MEMORY : DLCU_ERROR_INVALID_HANDLE;
}

dlcu_result cuStreamSynchronize(dlcu_stream stream) {
  DBL_ENTER(StreamSynchronize);
  dlcu_stream s;
  dlcu_result rc = dbl_stream_arg(stream, false, &s);
  if (rc) return dbl_leave(rc);
  while (s->head) pthread_cond_wait(&dbl.changed, &dbl.lock);
  rc = s->ctx->sticky ? s->ctx->sticky : s->error;
  s->error = DLCU_SUCCESS;
  return dbl_leave(rc);
}

void cuda_double_hold(int hold) {
  pthread_mutex_lock(&dbl.lock);
  dbl.hold = hold != 0;
  pthread_cond_broadcast(&dbl.changed);
  pthread_mutex_unlock(&dbl.lock);
}

/* ---- events ---- */

static dlcu_event event_arg(dlcu_event e) {
  for (dlcu_event t = dbl.events; t; t = t->next)
    if (t == e) return e;
  return NULL;
}

void dbl_event_unref(dlcu_event e) {
  if (--e->refs == 0) free(e);
}

static void event_destroy(dlcu_event e) {
  for (dlcu_event *p = &dbl.events; *p; p = &(*p)->next)
    if (*p == e) {
      *p = e->next;
      break;
    }
  e->destroyed = true;
  dbl_event_unref(e);
}

dlcu_result cuEventCreate(dlcu_event *event, unsigned int flags) {
  DBL_ENTER(EventCreate);
  dlcu_context ctx = dbl_current();
  if (!ctx) return dbl_leave(DLCU_ERROR_INVALID_CONTEXT);
  /* default 0, blocking sync 1, disable timing 2, interprocess 4 (with 2) */
  if (!event || flags & ~7u || ((flags & 4) && !(flags & DLCU_EVENT_DISABLE_TIMING)))
    return dbl_leave(DLCU_ERROR_INVALID_VALUE);
  dlcu_event e = calloc(1, sizeof *e);
  if (!e) return dbl_leave(DLCU_ERROR_OUT_OF_MEMORY);
  e->ctx = ctx;
  e->refs = 1;
  e->next = dbl.events;
  dbl.events = e;
  *event = e;
  return dbl_leave(DLCU_SUCCESS);
}

dlcu_result cuEventRecord(dlcu_event event, dlcu_stream stream) {
  dlcu_result fail = DLCU_SUCCESS, rc = dbl_enter(DBL_ID_EventRecord, &fail);
  if (rc) return rc;
  dlcu_stream s;
  if ((rc = dbl_stream_arg(stream, true, &s))) return dbl_leave(rc);
  dlcu_event e = event_arg(event);
  if (!e || e->ctx != s->ctx) return dbl_leave(DLCU_ERROR_INVALID_HANDLE);
  dbl_op *op = dbl_op_new(DBL_OP_RECORD, fail);
  if (!op) return dbl_leave(DLCU_ERROR_OUT_OF_MEMORY);
  op->u.ev.event = e;
  op->u.ev.seq = ++e->recorded;
  e->refs++;
  dbl_enqueue(s, op);
  return dbl_leave(DLCU_SUCCESS);
}

/* Waits for the event's latest record at the time of the call (none: no
 * wait); any stream, any context. */
dlcu_result cuStreamWaitEvent(dlcu_stream stream, dlcu_event event, unsigned int flags) {
  dlcu_result fail = DLCU_SUCCESS, rc = dbl_enter(DBL_ID_StreamWaitEvent, &fail);
  if (rc) return rc;
  dlcu_stream s;
  if ((rc = dbl_stream_arg(stream, true, &s))) return dbl_leave(rc);
  dlcu_event e = event_arg(event);
  if (!e) return dbl_leave(DLCU_ERROR_INVALID_HANDLE);
  if (flags) return dbl_leave(DLCU_ERROR_INVALID_VALUE);
  if (!e->recorded && !fail) return dbl_leave(DLCU_SUCCESS);
  dbl_op *op = dbl_op_new(DBL_OP_WAIT, fail);
  if (!op) return dbl_leave(DLCU_ERROR_OUT_OF_MEMORY);
  op->u.ev.event = e;
  op->u.ev.seq = e->recorded;
  e->refs++;
  dbl_enqueue(s, op);
  return dbl_leave(DLCU_SUCCESS);
}

dlcu_result cuEventQuery(dlcu_event event) {
  DBL_ENTER(EventQuery);
  dlcu_event e = event_arg(event);
  if (!e) return dbl_leave(DLCU_ERROR_INVALID_HANDLE);
  if (e->ctx->sticky) return dbl_leave(e->ctx->sticky);
  return dbl_leave(e->done >= e->recorded ? e->error : DLCU_ERROR_NOT_READY);
}

dlcu_result cuEventSynchronize(dlcu_event event) {
  DBL_ENTER(EventSynchronize);
  dlcu_event e = event_arg(event);
  if (!e) return dbl_leave(DLCU_ERROR_INVALID_HANDLE);
  e->refs++; /* destroyed meanwhile by another thread: still ours */
  while (e->done < e->recorded) pthread_cond_wait(&dbl.changed, &dbl.lock);
  dlcu_result rc = e->ctx->sticky ? e->ctx->sticky : e->error;
  dbl_event_unref(e);
  return dbl_leave(rc);
}

dlcu_result cuEventDestroy_v2(dlcu_event event) {
  DBL_ENTER(EventDestroy);
  dlcu_event e = event_arg(event);
  if (!e) return dbl_leave(DLCU_ERROR_INVALID_HANDLE);
  event_destroy(e);
  return dbl_leave(DLCU_SUCCESS);
}

/* Streams drop their queued work (records complete, so no waiter hangs). */
void dbl_streams_teardown(dlcu_context ctx) {
  for (;;) {
    dlcu_stream s = dbl.streams;
    while (s && ctx && s->ctx != ctx) s = s->next;
    if (!s) break;
    dbl_stream_destroy_locked(s, true);
  }
  for (dlcu_event e = dbl.events, next; e; e = next) {
    next = e->next;
    if (ctx && e->ctx != ctx) continue;
    e->done = e->recorded;
    event_destroy(e);
    next = dbl.events; /* the list changed: start over */
  }
}
