/* Enqueueing copies and fills (enqueue.h), traced where the platform's
 * queue does not trace its own work (traces_own_work). */
#include "enqueue.h"

#include "buffer.h"
#include "core/alloc.h"
#include "core/trace_impl.h"
#include "work_trace.h"
#include "boxes.h"

/* One event to record once the work completes: what it was, and when it
 * was enqueued. Names are devices' (they outlive their queued work). */
typedef struct traced_piece {
  const char *track, *category, *name, *src, *dst;
  uint64_t start, bytes;
  int src_process;
  bool copy;
} traced_piece;

typedef struct traced_work {
  size_t n;
  traced_piece pieces[];
} traced_work;

static void record(void *ctx) {
  traced_work *w = ctx;
  for (size_t i = 0; i < w->n; i++) {
    const traced_piece *p = &w->pieces[i];
    if (p->copy)
      dlrun_trace_transfer(p->track, p->name, p->start, p->bytes, p->src, p->src_process, p->dst);
    else
      dlrun_trace_event(p->track, p->category, p->name, p->start, "\"bytes\": %llu",
                        (unsigned long long)p->bytes);
  }
  dlrun_free(w);
  dlrun_trace_pending(-1);
}

/* Record w's pieces when `done` completes; without memory for that, the
 * work goes unrecorded (tracing never fails the work). */
static void record_when_done(traced_work *w, dlrun_event done) {
  dlrun_trace_pending(1);
  if (dlrun_event_then(done, record, w)) {
    dlrun_free(w);
    dlrun_trace_pending(-1);
  }
}

static traced_work *traced_new(size_t n) {
  traced_work *w = dlrun_malloc(sizeof *w + n * sizeof w->pieces[0]);
  if (w) w->n = n;
  return w;
}

/* The pieces of ops[0..nops) to record once they are copied, NULL when
 * tracing is off, the queue traces its own work, or memory is short. Read
 * before enqueueing: the ops may be gone once enqueued. `on_destinations`:
 * each on its destination's track (copies taken together, as host
 * execution traces them), else on the queue's. */
static traced_work *traced_copies(const dlrun_device *queue, dlrun_copy_op *const *ops,
                                  size_t nops, bool on_destinations) {
  size_t n = 0;
  for (size_t k = 0; k < nops; k++) n += ops[k]->npieces;
  traced_work *w;
  if (!dlrun_trace_enabled() || queue->platform->traces_own_work || !n || !(w = traced_new(n)))
    return NULL;
  uint64_t start = dlrun_trace_now();
  n = 0;
  for (size_t k = 0; k < nops; k++) {
    const dlrun_copy_op *op = ops[k];
    for (size_t i = 0; i < op->npieces; i++, n++) {
      const dlrun_copy_piece *p = &op->pieces[i];
      int ignored;
      const dlrun_device *track = on_destinations && op->dst.dev ? op->dst.dev : queue;
      w->pieces[n] = (traced_piece){
          .track = track->name, .category = "transfer", .name = "copy", .start = start,
          .bytes = dlrun_box_bytes(op->esize, op->ndim, p->lo, p->hi), .copy = true};
      w->pieces[n].src = dlrun_trace_end(&p->src, &w->pieces[n].src_process);
      w->pieces[n].dst = dlrun_trace_end(&op->dst, &ignored);
    }
  }
  return w;
}

static dlrun_status traced_result(traced_work *w, dlrun_status st, const dlrun_event *done) {
  if (!w) return st;
  if (st) dlrun_free(w);
  else record_when_done(w, *done);
  return st;
}

dlrun_status dlrun_queue_copy_box(dlrun_device *queue, dlrun_copy_op *op, const dlrun_event *waits,
                                  size_t nwaits, dlrun_event *done) {
  traced_work *w = traced_copies(queue, &op, 1, false);
  return traced_result(w, queue->platform->copy_box(queue, op, waits, nwaits, done), done);
}

dlrun_status dlrun_queue_copy_boxes(dlrun_device *queue, dlrun_copy_op *const *ops, size_t nops,
                                    const dlrun_event *waits, size_t nwaits, dlrun_event *done) {
  traced_work *w = traced_copies(queue, ops, nops, true);
  dlrun_status st = queue->platform->copy_boxes(queue, ops, nops, waits, nwaits, done);
  return traced_result(w, st, done);
}

dlrun_status dlrun_queue_fill(dlrun_device *dev, dlrun_memory_kind kind, void *data,
                              uint64_t nbytes, const dlrun_fill *f, const dlrun_event *waits,
                              size_t nwaits, dlrun_event *done) {
  traced_work *w = NULL;
  if (dlrun_trace_enabled() && !dev->platform->traces_own_work && nbytes &&
      (w = traced_new(1)))
    w->pieces[0] = (traced_piece){.track = dev->name, .category = "compute",
                                  .name = f->sequence ? "arange" : "fill",
                                  .start = dlrun_trace_now(), .bytes = nbytes};
  return traced_result(w, dev->platform->fill(dev, kind, data, nbytes, f, waits, nwaits, done),
                       done);
}
