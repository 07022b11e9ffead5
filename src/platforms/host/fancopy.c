/* Copies that share sources, as one unit of work (dlrun_hostexec_copy_boxes).
 *
 * A reshard's copies each read a part of every source row (rows to
 * columns over 8 devices: 2 KiB of each 16 KiB row). Copied one
 * destination after another, each source is read 8 times, a short run per
 * row, which memory serves at about 0.86 of memcpy's speed on the
 * machines measured. Cut into bands of the source instead, each copied
 * whole by one worker (every op's part of the band in turn), a source is
 * read from memory once, the band staying in the cache for the later
 * parts: 1.25 of memcpy for the same reshard (256 MiB, 2 threads). */
#include "hostexec.h"
#include "hostexec_impl.h"
#include "host_services.h"

#include <stdlib.h>
#include <string.h>

static const dlrun_platform_services *svc(void) { return dlrun_host_services(); }

/* A band: about this many bytes of a source's pieces (16 rows of 16 KiB
 * measured best, 4 to 32 rows within 5% of it; 64 rows and more fell to
 * 0.9 of it). */
#define BAND_BYTES ((uint64_t)256 << 10)

typedef struct fan_piece {
  const dlrun_copy_op *op;
  const dlrun_copy_piece *p;
  size_t order; /* its place in the ops, which keeps a source's pieces in op order */
} fan_piece;

/* The pieces that read one source block, and its bands. */
typedef struct fan_source {
  size_t first, n;   /* its pieces, in fan_work.pieces */
  int dim;           /* the dimension cut into bands */
  int64_t lo, band;  /* band k: [lo + k * band, lo + (k + 1) * band) along dim */
  size_t first_unit; /* its first band's unit */
} fan_source;

typedef struct fan_work {
  dlrun_task node;
  dlrun_host_queue *q;
  bool inject;
  size_t nops, nsources, nunits;
  dlrun_copy_op **ops;
  fan_piece *pieces;
  fan_source *sources;
} fan_work;

/* The same source block: same device, memory and address (a plan's pieces
 * of one buffer share its origin and strides). */
static int by_source(const void *a, const void *b) {
  const fan_piece *x = a, *y = b;
  const dlrun_box_end *s = &x->p->src, *t = &y->p->src;
  if (s->dev != t->dev) return (uintptr_t)s->dev < (uintptr_t)t->dev ? -1 : 1;
  if (s->kind != t->kind) return s->kind < t->kind ? -1 : 1;
  if (s->data != t->data) return (uintptr_t)s->data < (uintptr_t)t->data ? -1 : 1;
  return x->order < y->order ? -1 : x->order > y->order;
}

static bool same_source(const fan_piece *a, const fan_piece *b) {
  return a->p->src.dev == b->p->src.dev && a->p->src.kind == b->p->src.kind &&
         a->p->src.data == b->p->src.data;
}

/* Source g's bands: along its first dimension that its pieces span more than
 * one index of, each about BAND_BYTES of its pieces. */
static void plan_bands(fan_work *w, fan_source *g, int nd, size_t esize) {
  int64_t ulo[DLRUN_MAX_NDIM], uhi[DLRUN_MAX_NDIM];
  uint64_t bytes = 0;
  for (size_t i = 0; i < g->n; i++) {
    const dlrun_copy_piece *p = w->pieces[g->first + i].p;
    bytes += dlrun_hostexec_box_bytes(esize, nd, p->lo, p->hi);
    for (int d = 0; d < nd; d++) {
      ulo[d] = i == 0 || p->lo[d] < ulo[d] ? p->lo[d] : ulo[d];
      uhi[d] = i == 0 || p->hi[d] > uhi[d] ? p->hi[d] : uhi[d];
    }
  }
  g->dim = 0;
  while (g->dim < nd && uhi[g->dim] - ulo[g->dim] <= 1) g->dim++;
  if (g->dim == nd || bytes == 0) { /* one band: single elements, rank 0 or nothing */
    g->dim = 0;
    g->lo = nd ? ulo[0] : 0;
    g->band = nd ? uhi[0] - ulo[0] : 1;
    w->nunits += bytes != 0;
    return;
  }
  uint64_t extent = (uint64_t)(uhi[g->dim] - ulo[g->dim]), per = bytes / extent;
  uint64_t band = per ? BAND_BYTES / per : extent;
  band = band < 1 ? 1 : band > extent ? extent : band;
  g->lo = ulo[g->dim];
  g->band = (int64_t)band;
  w->nunits += (size_t)((extent + band - 1) / band);
}

/* Unit u: one band of one source, every op's part of it in turn. */
static void copy_band(void *ctx, size_t u) {
  fan_work *w = ctx;
  size_t a = 0, b = w->nsources; /* the last source whose first unit is <= u */
  while (b - a > 1) {
    size_t m = a + (b - a) / 2;
    if (w->sources[m].first_unit <= u) a = m;
    else b = m;
  }
  const fan_source *g = &w->sources[a];
  int64_t blo = g->lo + (int64_t)(u - g->first_unit) * g->band, bhi = blo + g->band;
  for (size_t i = 0; i < g->n; i++) {
    const fan_piece *fp = &w->pieces[g->first + i];
    int nd = fp->op->ndim;
    int64_t lo[DLRUN_MAX_NDIM], hi[DLRUN_MAX_NDIM];
    memcpy(lo, fp->p->lo, (size_t)nd * sizeof *lo);
    memcpy(hi, fp->p->hi, (size_t)nd * sizeof *hi);
    if (nd) {
      lo[g->dim] = lo[g->dim] > blo ? lo[g->dim] : blo;
      hi[g->dim] = hi[g->dim] < bhi ? hi[g->dim] : bhi;
      if (lo[g->dim] >= hi[g->dim]) continue;
    }
    /* traced on its destination's track, where its own queue would have run it */
    const dlrun_device *track = fp->op->dst.dev ? fp->op->dst.dev : w->q->dev;
    dlrun_hostexec_copy_part(track, fp->op, fp->p, lo, hi);
  }
}

static dlrun_status run_fan(void *ctx, dlrun_status prior) {
  fan_work *w = ctx;
  dlrun_status st = prior ? prior : w->inject ? dlrun_hostexec_injected(w->q, "copy") : DLRUN_OK;
  if (!st && w->nunits == 1) copy_band(w, 0);
  else if (!st && w->nunits)
    svc()->workers_parallel(w->q->work.workers, w->nunits, copy_band, w);
  for (size_t i = 0; i < w->nops; i++) /* each may free its op */
    if (w->ops[i]->complete) w->ops[i]->complete(w->ops[i]->complete_ctx);
  svc()->free(w);
  return st;
}

/* The work, its ops, pieces and sources in one block; NULL without memory. */
static fan_work *fan_new(dlrun_copy_op *const *ops, size_t nops) {
  size_t npieces = 0;
  for (size_t i = 0; i < nops; i++) npieces += ops[i]->npieces;
  size_t per = sizeof(dlrun_copy_op *) + sizeof(fan_piece) + sizeof(fan_source);
  if (nops + npieces > (SIZE_MAX - sizeof(fan_work)) / per) return NULL;
  fan_work *w = svc()->alloc(sizeof *w + nops * sizeof *w->ops +
                             npieces * (sizeof *w->pieces + sizeof *w->sources));
  if (!w) return NULL;
  *w = (fan_work){.nops = nops};
  w->pieces = (fan_piece *)(void *)(w + 1);
  w->sources = (fan_source *)(void *)(w->pieces + npieces);
  w->ops = (dlrun_copy_op **)(void *)(w->sources + npieces);
  size_t n = 0;
  for (size_t i = 0; i < nops; i++) {
    w->ops[i] = ops[i];
    for (size_t k = 0; k < ops[i]->npieces; k++, n++)
      w->pieces[n] = (fan_piece){.op = ops[i], .p = &ops[i]->pieces[k], .order = n};
  }
  qsort(w->pieces, n, sizeof *w->pieces, by_source);
  for (size_t i = 0; i < n; i++) {
    if (i == 0 || !same_source(&w->pieces[i - 1], &w->pieces[i]))
      w->sources[w->nsources++] = (fan_source){.first = i};
    w->sources[w->nsources - 1].n++;
  }
  for (size_t s = 0; s < w->nsources; s++) {
    w->sources[s].first_unit = w->nunits;
    plan_bands(w, &w->sources[s], ops[0]->ndim, ops[0]->esize);
  }
  return w;
}

dlrun_status dlrun_hostexec_copy_boxes(dlrun_device *dev, dlrun_copy_op *const *ops, size_t nops,
                                       const dlrun_event *waits, size_t nwaits,
                                       dlrun_event *done) {
  dlrun_host_queue *q = dlrun_hostexec_queue(dev);
  for (size_t i = 1; i < nops; i++)
    if (ops[i]->ndim != ops[0]->ndim || ops[i]->esize != ops[0]->esize)
      return svc()->fail(DLRUN_ERR_VALUE, "%s: copy_boxes needs ops of one rank and element size",
                         svc()->device_name(dev));
  if (nops == 0) return dlrun_hostexec_record(dev, waits, nwaits, done);
  fan_work *w = fan_new(ops, nops);
  if (!w)
    return svc()->fail(DLRUN_ERR_RESOURCE_EXHAUSTED, "%s: out of host memory for %zu copies",
                       svc()->device_name(dev), nops);
  w->q = q;
  w->inject = dlrun_hostexec_take_injected(q, DLRUN_WORK_COPY);
  dlrun_status st =
      ops[0]->sync ? dlrun_work_queue_run(&q->work, &w->node, waits, nwaits, run_fan, w, done)
                   : dlrun_work_queue_submit(&q->work, &w->node, waits, nwaits, run_fan, w, done);
  if (st) svc()->free(w);
  return st;
}
