/* Host execution (hostexec.h): the queue of the cpu and sim platforms. */
#include "hostexec.h"
#include "hostexec_impl.h"
#include "host_services.h"

#include <string.h>

/* Host execution is built into libdlrun: its services are the library's. */
static const dlrun_platform_services *svc(void) { return dlrun_host_services(); }

dlrun_status dlrun_host_queue_init(dlrun_host_queue *q, dlrun_device *dev,
                                   void *(*view)(const dlrun_device *, dlrun_memory_kind,
                                                 const void *)) {
  q->dev = dev;
  q->view = view;
  atomic_init(&q->inject[0], 0);
  atomic_init(&q->inject[1], 0);
  return dlrun_work_queue_init(&q->work, svc()->device_workers(dev), svc()->device_platform(dev));
}

void dlrun_host_queue_fini(dlrun_host_queue *q) { dlrun_work_queue_destroy(&q->work); }

void dlrun_hostexec_use_timelines(dlrun_platform *pl) {
  pl->event_query = svc()->timeline_query;
  pl->event_wait = svc()->timeline_wait;
  pl->event_then = svc()->timeline_then;
  pl->traces_own_work = true;
}

dlrun_host_queue *dlrun_hostexec_queue(const dlrun_device *dev) { return svc()->device_impl(dev); }

bool dlrun_hostexec_take_injected(dlrun_host_queue *q, dlrun_work_kind what) {
  unsigned n = atomic_load(&q->inject[what]);
  while (n && !atomic_compare_exchange_weak(&q->inject[what], &n, n - 1)) {
  }
  return n > 0;
}

dlrun_status dlrun_hostexec_inject(dlrun_device *dev, dlrun_work_kind what, unsigned count) {
  atomic_store(&dlrun_hostexec_queue(dev)->inject[what], count);
  return DLRUN_OK;
}

dlrun_status dlrun_hostexec_injected(const dlrun_host_queue *q, const char *op) {
  return svc()->fail(DLRUN_ERR_RUNTIME, "%s: %s failed: injected device failure",
                     svc()->device_name(q->dev), op);
}

/* Pieces of a copy cut into units at most (above, each goes whole). */
#define MAX_CUT_PIECES 6

void *dlrun_hostexec_view(const dlrun_box_end *e) {
  return e->dev ? dlrun_hostexec_queue(e->dev)->view(e->dev, e->kind, e->data) : (void *)e->data;
}

uint64_t dlrun_hostexec_box_bytes(size_t esize, int ndim, const int64_t *lo, const int64_t *hi) {
  uint64_t bytes = esize;
  for (int d = 0; d < ndim; d++) bytes *= (uint64_t)(hi[d] - lo[d]);
  return bytes;
}

/* ---- copies ---- */

/* A copy's bookkeeping, kept in its op's reserved room (nothing is
 * allocated to enqueue or run it). */
typedef struct copy_work {
  dlrun_task node;
  dlrun_host_queue *q;
  const dlrun_copy_op *op;
  bool inject;
  bool per_piece; /* one work item per piece; else the pieces are cut into units */
  size_t nunits;
  size_t first[MAX_CUT_PIECES + 1]; /* pieces cut: the first unit of each */
} copy_work;

/* Large pieces are cut along their outermost splittable dimension into
 * units of about this many bytes, so that idle workers can share one
 * device's copy. A task of more pieces than MAX_CUT_PIECES shares them out
 * whole, one per item. */
#define UNIT_BYTES ((uint64_t)4 << 20)

/* How many units piece p is cut into, and along which dimension. */
static size_t unit_count(const dlrun_copy_op *op, const dlrun_copy_piece *p, int *dim) {
  int nd = op->ndim;
  *dim = 0;
  while (*dim < nd && p->hi[*dim] - p->lo[*dim] == 1) (*dim)++;
  if (*dim == nd) { /* one element (or rank 0): a single unit */
    *dim = 0;
    return 1;
  }
  uint64_t bytes = dlrun_hostexec_box_bytes(op->esize, nd, p->lo, p->hi);
  uint64_t want = (bytes + UNIT_BYTES - 1) / UNIT_BYTES;
  uint64_t extent = (uint64_t)(p->hi[*dim] - p->lo[*dim]);
  return want < 1 ? 1 : want > extent ? extent : want;
}

static void plan_units(copy_work *w) {
  const dlrun_copy_op *op = w->op;
  w->per_piece = op->npieces > MAX_CUT_PIECES;
  if (w->per_piece) {
    w->nunits = op->npieces;
    return;
  }
  int dim;
  w->first[0] = 0;
  for (size_t i = 0; i < op->npieces; i++)
    w->first[i + 1] = w->first[i] + unit_count(op, &op->pieces[i], &dim);
  w->nunits = w->first[op->npieces];
}

static void copy_one_unit(void *ctx, size_t i) {
  copy_work *w = ctx;
  const dlrun_copy_op *op = w->op;
  size_t piece = i, part = 0, parts = 1;
  if (!w->per_piece) { /* the piece whose units hold i */
    piece = 0;
    while (w->first[piece + 1] <= i) piece++;
    part = i - w->first[piece];
    parts = w->first[piece + 1] - w->first[piece];
  }
  const dlrun_copy_piece *p = &op->pieces[piece];
  int nd = op->ndim, dim = 0;
  while (parts > 1 && p->hi[dim] - p->lo[dim] == 1) dim++; /* as unit_count cut it */
  int64_t lo[DLRUN_MAX_NDIM], hi[DLRUN_MAX_NDIM];
  memcpy(lo, p->lo, (size_t)nd * sizeof *lo);
  memcpy(hi, p->hi, (size_t)nd * sizeof *hi);
  if (nd && parts > 1) {
    int64_t lo0 = p->lo[dim], extent = p->hi[dim] - lo0;
    lo[dim] = lo0 + extent * (int64_t)part / (int64_t)parts;
    hi[dim] = lo0 + extent * (int64_t)(part + 1) / (int64_t)parts;
  }
  dlrun_hostexec_copy_part(w->q->dev, op, p, lo, hi);
}

void dlrun_hostexec_copy_part(const dlrun_device *track, const dlrun_copy_op *op,
                              const dlrun_copy_piece *p, const int64_t *lo, const int64_t *hi) {
  const dlrun_platform_services *s = svc();
  uint64_t start = s->trace_enabled() ? s->trace_now() : 0;
  s->host_copy_box(op->esize, op->ndim, lo, hi, dlrun_hostexec_view(&op->dst), op->dst.origin,
                   op->dst.strides, dlrun_hostexec_view(&p->src), p->src.origin, p->src.strides,
                   op->stream);
  if (s->trace_enabled())
    s->trace_copy(track, start, dlrun_hostexec_box_bytes(op->esize, op->ndim, lo, hi), &p->src,
                  &op->dst);
}

static dlrun_status run_copy(void *ctx, dlrun_status prior) {
  copy_work *w = ctx;
  const dlrun_copy_op *op = w->op;
  dlrun_status st = prior ? prior : w->inject ? dlrun_hostexec_injected(w->q, "copy") : DLRUN_OK;
  if (!st && w->nunits == 1) copy_one_unit(w, 0); /* nothing to share */
  else if (!st && w->nunits)
    svc()->workers_parallel(w->q->work.workers, w->nunits, copy_one_unit, w);
  if (op->complete) op->complete(op->complete_ctx); /* may free op */
  return st;
}

_Static_assert(sizeof(copy_work) <= DLRUN_COPY_OP_RESERVED, "copy_work outgrows its room");

dlrun_status dlrun_hostexec_copy(dlrun_device *dev, dlrun_copy_op *op, const dlrun_event *waits,
                                 size_t nwaits, dlrun_event *done) {
  dlrun_host_queue *q = dlrun_hostexec_queue(dev);
  copy_work *w = (copy_work *)(void *)op->reserved.bytes;
  *w = (copy_work){.q = q, .op = op};
  w->inject = dlrun_hostexec_take_injected(q, DLRUN_WORK_COPY);
  plan_units(w);
  return op->sync ? dlrun_work_queue_run(&q->work, &w->node, waits, nwaits, run_copy, w, done)
                  : dlrun_work_queue_submit(&q->work, &w->node, waits, nwaits, run_copy, w, done);
}

/* ---- fills and points ---- */

typedef struct fill_work {
  dlrun_task node;
  dlrun_host_queue *q;
  dlrun_memory_kind kind;
  void *data;
  uint64_t nbytes;
  dlrun_fill fill;
  bool inject;
} fill_work;

static dlrun_status run_fill(void *ctx, dlrun_status prior) {
  fill_work *w = ctx;
  dlrun_status st = prior ? prior : w->inject ? dlrun_hostexec_injected(w->q, "fill") : DLRUN_OK;
  if (!st && w->nbytes) {
    const dlrun_platform_services *s = svc();
    uint64_t start = s->trace_enabled() ? s->trace_now() : 0;
    s->host_fill(w->q->view(w->q->dev, w->kind, w->data), w->nbytes, &w->fill);
    s->trace_work(w->q->dev, w->fill.sequence ? "arange" : "fill", start, w->nbytes);
  }
  svc()->free(w);
  return st;
}

dlrun_status dlrun_hostexec_fill(dlrun_device *dev, dlrun_memory_kind kind, void *data,
                                 uint64_t nbytes, const dlrun_fill *f, const dlrun_event *waits,
                                 size_t nwaits, dlrun_event *done) {
  dlrun_host_queue *q = dlrun_hostexec_queue(dev);
  fill_work *w = svc()->alloc(sizeof *w);
  if (!w) return DLRUN_ERR_RESOURCE_EXHAUSTED;
  *w = (fill_work){.q = q, .kind = kind, .data = data, .nbytes = nbytes, .fill = *f};
  w->inject = dlrun_hostexec_take_injected(q, DLRUN_WORK_FILL);
  dlrun_status st = dlrun_work_queue_submit(&q->work, &w->node, waits, nwaits, run_fill, w, done);
  if (st) svc()->free(w);
  return st;
}

static dlrun_status run_marker(void *ctx, dlrun_status prior) {
  svc()->free(ctx);
  return prior;
}

dlrun_status dlrun_hostexec_record(dlrun_device *dev, const dlrun_event *waits, size_t nwaits,
                                   dlrun_event *done) {
  dlrun_host_queue *q = dlrun_hostexec_queue(dev);
  if (nwaits == 0) { /* the point after everything queued: the work queue's last */
    if (done) *done = dlrun_work_queue_last(&q->work);
    return DLRUN_OK;
  }
  dlrun_task *t = svc()->alloc(sizeof *t);
  if (!t) return DLRUN_ERR_RESOURCE_EXHAUSTED;
  dlrun_status st = dlrun_work_queue_submit(&q->work, t, waits, nwaits, run_marker, t, done);
  if (st) svc()->free(t);
  return st;
}
