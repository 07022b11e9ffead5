/* Box copies as CUDA rect copies on the device's stream.
 *
 * A piece is planned as rects (common/box_plan.h): a contiguous row, rows
 * and slices with positive pitches; a rect of one slice is
 * cuMemcpy2DAsync, of several cuMemcpy3DAsync; more dimensions, and
 * dimensions whose strides no pitch fits (negative on one side only, a
 * transpose), are loops of rects (down to one element per call). Host
 * memory and pinned_host memory are host pointers to the driver.
 *
 * A rect between host memory and another device's memory runs on that
 * device's stream (ordered with ours by events) unless ours is its peer.
 * Between the device memories of two devices: cuMemcpy3DPeerAsync where
 * the destination's device can access the source's as a peer (access
 * enabled once, cuCtxEnablePeerAccess), else staged through pinned host
 * memory (source to a pinned buffer on the source's stream, pinned buffer
 * to the destination on the destination's, ordered by events; the buffer
 * goes when the copy is done). */
#include <stdlib.h>
#include <string.h>

#include "cu.h"
#include "platforms/common/box_plan.h"

/* One end of the copy as the driver sees it. */
typedef struct side {
  cu_device *d; /* NULL: host memory */
  dlrun_memory_kind kind;
  const unsigned char *data;
} side;

static bool on_device(const side *s) { return s->d && s->kind == DLRUN_MEM_DEVICE; }

/* What a staged copy keeps until it is done: pinned buffers, events. */
typedef struct copy_work {
  dlrun_copy_op *op;
  void **staged;
  size_t nstaged;
  dlcu_event *events;
  size_t nevents;
} copy_work;

static void copy_work_free(void *arg) {
  copy_work *w = arg;
  for (size_t i = 0; i < w->nstaged; i++) cu_api.MemFreeHost(w->staged[i]);
  for (size_t i = 0; i < w->nevents; i++) cu_api.EventDestroy(w->events[i]);
  free(w->staged);
  free(w->events);
  free(w);
}

/* A new event kept until the copy is done (current context's). */
static dlcu_result kept_event(copy_work *w, dlcu_event *out) {
  dlcu_event *more = realloc(w->events, (w->nevents + 1) * sizeof *more);
  if (!more) return DLCU_ERROR_OUT_OF_MEMORY;
  w->events = more;
  dlcu_result r = cu_api.EventCreate(out, DLCU_EVENT_DISABLE_TIMING);
  if (!r) w->events[w->nevents++] = *out;
  return r;
}

/* `to` waits for everything enqueued on `from` so far. */
static dlcu_result stream_after(copy_work *w, dlcu_context from_ctx, dlcu_stream from,
                                dlcu_stream to) {
  dlcu_event ev;
  dlcu_result r = cu_make_current(from_ctx);
  if (!r) r = kept_event(w, &ev);
  if (!r) r = cu_api.EventRecord(ev, from);
  if (!r) r = cu_api.StreamWaitEvent(to, ev, 0);
  return r;
}

/* One pass over a copy: checking every place (q NULL-like: enqueue false)
 * or enqueueing on d's stream. */
typedef struct copy_pass {
  cu_device *d;
  copy_work *w;
  bool enqueue;
  bool *enqueued;
  dlcu_result err;
} copy_pass;

/* Where a rect's side starts for the driver, with room for span bytes. */
static dlrun_status place_side(const side *s, int64_t off, size_t span, dlcu_memorytype *type,
                               dlcu_ptr *ptr) {
  if (!on_device(s)) {
    *type = DLCU_MEMORYTYPE_HOST;
    *ptr = (dlcu_ptr)(uintptr_t)(s->data + off);
    return DLRUN_OK;
  }
  uint64_t room;
  *type = DLCU_MEMORYTYPE_DEVICE;
  dlrun_status st = cu_place_of(s->d, s->kind, s->data + off, span, ptr, &room);
  if (!st && room < span)
    return cu_svc->fail(DLRUN_ERR_VALUE,
                        "%s: a copy of %zu bytes at %p would cross the end of a CUDA allocation",
                        s->d->name, span, (const void *)(s->data + off));
  return st;
}

static void set_end3(dlcu_memcpy3d *c, bool src, dlcu_memorytype type, dlcu_ptr p, size_t pitch,
                     size_t height) {
  if (src) {
    c->srcMemoryType = type;
    if (type == DLCU_MEMORYTYPE_HOST) c->srcHost = (const void *)(uintptr_t)p;
    else c->srcDevice = p;
    c->srcPitch = pitch;
    c->srcHeight = height;
  } else {
    c->dstMemoryType = type;
    if (type == DLCU_MEMORYTYPE_HOST) c->dstHost = (void *)(uintptr_t)p;
    else c->dstDevice = p;
    c->dstPitch = pitch;
    c->dstHeight = height;
  }
}

/* A slice pitch that is a multiple of the row pitch: as CUDA's heights. */
static size_t height_of(int64_t slice, int64_t row) { return row ? (size_t)(slice / row) : 1; }

/* A rect within one device's reach: 2-D for one slice, else 3-D. */
static dlcu_result rect_copy(const plan *p, dlcu_memorytype st_, dlcu_ptr sp, dlcu_memorytype dt,
                             dlcu_ptr dp, dlcu_stream stream) {
  if (p->extent[2] == 1) {
    dlcu_memcpy2d c = {.srcMemoryType = st_, .srcPitch = (size_t)p->srow,
                       .dstMemoryType = dt, .dstPitch = (size_t)p->drow,
                       .WidthInBytes = p->extent[0], .Height = p->extent[1]};
    if (st_ == DLCU_MEMORYTYPE_HOST) c.srcHost = (const void *)(uintptr_t)sp;
    else c.srcDevice = sp;
    if (dt == DLCU_MEMORYTYPE_HOST) c.dstHost = (void *)(uintptr_t)dp;
    else c.dstDevice = dp;
    return cu_api.Memcpy2DAsync(&c, stream);
  }
  dlcu_memcpy3d c = {.WidthInBytes = p->extent[0], .Height = p->extent[1], .Depth = p->extent[2]};
  set_end3(&c, true, st_, sp, (size_t)p->srow, height_of(p->sslice, p->srow));
  set_end3(&c, false, dt, dp, (size_t)p->drow, height_of(p->dslice, p->drow));
  return cu_api.Memcpy3DAsync(&c, stream);
}

/* The peer access from d to the source's device: enabled once; false when
 * the devices cannot reach each other (d->q.lock held: the cache). */
static bool peer_reachable(cu_device *d, const cu_device *src) {
  int o = src->cu;
  if (o < 0 || o >= 64) return false;
  if (d->peer[o] < 0) {
    int can = 0;
    if (cu_api.DeviceCanAccessPeer(&can, d->cu, src->cu) || !can) {
      d->peer[o] = 0;
    } else {
      dlcu_result r = cu_api.CtxEnablePeerAccess(src->ctx, 0);
      d->peer[o] = !r || r == DLCU_ERROR_PEER_ACCESS_ALREADY_ENABLED;
    }
  }
  return d->peer[o] == 1;
}

/* One rect at (soff, doff) of plan p. */
static dlrun_status do_rect(copy_pass *cp, const side *s, const side *t, const plan *p,
                            int64_t soff, int64_t doff) {
  dlcu_memorytype st_, dt;
  dlcu_ptr sp, dp;
  dlrun_status st = place_side(s, soff, rect_span(p, true), &st_, &sp);
  if (!st) st = place_side(t, doff, rect_span(p, false), &dt, &dp);
  if (st || !cp->enqueue || cp->err) return st;
  /* placing the source may have made its device's context current */
  if ((cp->err = cu_make_current(cp->d->ctx))) return DLRUN_OK;
  size_t sh = height_of(p->sslice, p->srow), dh = height_of(p->dslice, p->drow);
  dlcu_stream stream = cp->d->stream;
  bool cross = on_device(s) && on_device(t) && s->d != t->d;
  if (cross && peer_reachable(cp->d, s->d)) {
    dlcu_memcpy3d_peer c = {.srcMemoryType = DLCU_MEMORYTYPE_DEVICE, .srcDevice = sp,
                            .srcContext = s->d->ctx, .srcPitch = (size_t)p->srow, .srcHeight = sh,
                            .dstMemoryType = DLCU_MEMORYTYPE_DEVICE, .dstDevice = dp,
                            .dstContext = t->d->ctx, .dstPitch = (size_t)p->drow, .dstHeight = dh,
                            .WidthInBytes = p->extent[0], .Height = p->extent[1],
                            .Depth = p->extent[2]};
    cp->err = cu_api.Memcpy3DPeerAsync(&c, stream);
  } else if (cross) {
    /* Staged: the source's device copies into pinned memory on its own
     * stream (only it may read its memory), after this op's waits (its
     * stream waits for ours); ours copies on after that. */
    size_t bytes = p->extent[0] * p->extent[1] * p->extent[2];
    void *buf = NULL, **more = realloc(cp->w->staged, (cp->w->nstaged + 1) * sizeof *more);
    if (!more) return cu_svc->fail(DLRUN_ERR_RESOURCE_EXHAUSTED, "out of host memory");
    cp->w->staged = more;
    if ((cp->err = cu_api.MemHostAlloc(&buf, bytes, DLCU_MEMHOSTALLOC_PORTABLE))) return DLRUN_OK;
    cp->w->staged[cp->w->nstaged++] = buf;
    cu_device *from = s->d;
    if ((cp->err = stream_after(cp->w, cp->d->ctx, stream, from->stream)) ||
        (cp->err = cu_make_current(from->ctx)))
      return DLRUN_OK;
    *cp->enqueued = true;
    dlcu_memcpy3d c = {.WidthInBytes = p->extent[0], .Height = p->extent[1], .Depth = p->extent[2]};
    set_end3(&c, true, DLCU_MEMORYTYPE_DEVICE, sp, (size_t)p->srow, sh);
    set_end3(&c, false, DLCU_MEMORYTYPE_HOST, (dlcu_ptr)(uintptr_t)buf, p->extent[0],
             p->extent[1]);
    if ((cp->err = cu_api.Memcpy3DAsync(&c, from->stream))) return DLRUN_OK;
    if ((cp->err = stream_after(cp->w, from->ctx, from->stream, stream))) return DLRUN_OK;
    if ((cp->err = cu_make_current(cp->d->ctx))) return DLRUN_OK;
    c = (dlcu_memcpy3d){.WidthInBytes = p->extent[0], .Height = p->extent[1],
                        .Depth = p->extent[2]};
    set_end3(&c, true, DLCU_MEMORYTYPE_HOST, (dlcu_ptr)(uintptr_t)buf, p->extent[0],
             p->extent[1]);
    set_end3(&c, false, DLCU_MEMORYTYPE_DEVICE, dp, (size_t)p->drow, dh);
    cp->err = cu_api.Memcpy3DAsync(&c, stream);
  } else {
    /* One end may be another device's memory (the other host memory): only
     * that device may reach it, unless ours is its peer: on its stream. */
    const side *other = on_device(s) && s->d != cp->d   ? s
                        : on_device(t) && t->d != cp->d ? t
                                                        : NULL;
    if (other && !peer_reachable(cp->d, other->d)) {
      cu_device *by = other->d;
      if ((cp->err = stream_after(cp->w, cp->d->ctx, stream, by->stream))) return DLRUN_OK;
      *cp->enqueued = true;
      if (!(cp->err = cu_make_current(by->ctx)) &&
          !(cp->err = rect_copy(p, st_, sp, dt, dp, by->stream)))
        cp->err = stream_after(cp->w, by->ctx, by->stream, stream);
      if (!cp->err) cp->err = cu_make_current(cp->d->ctx);
    } else {
      cp->err = rect_copy(p, st_, sp, dt, dp, stream);
    }
  }
  if (!cp->err) *cp->enqueued = true;
  return DLRUN_OK;
}

/* Every rect of the plan, the loops' index running like an odometer. */
static dlrun_status each_rect(copy_pass *cp, const side *s, const side *t, const plan *p) {
  int64_t idx[DLRUN_MAX_NDIM] = {0};
  int64_t soff = p->soff, doff = p->doff;
  for (;;) {
    dlrun_status st = do_rect(cp, s, t, p, soff, doff);
    if (st || cp->err) return st;
    if (!plan_next_rect(p, idx, &soff, &doff)) return DLRUN_OK;
  }
}

static side side_of(const dlrun_box_end *e) {
  side s = {.kind = e->kind, .data = e->data};
  if (e->dev) s.d = cu_dev(e->dev);
  return s;
}

static dlrun_status each_piece(copy_pass *cp, const dlrun_copy_op *op) {
  int nd = op->ndim;
  side t = side_of(&op->dst);
  for (size_t i = 0; i < op->npieces; i++) {
    const dlrun_copy_piece *pc = &op->pieces[i];
    int64_t ext[DLRUN_MAX_NDIM], soff = 0, doff = 0;
    bool empty = false;
    for (int k = 0; k < nd; k++) {
      ext[k] = pc->hi[k] - pc->lo[k];
      empty |= ext[k] <= 0;
      soff += (pc->lo[k] - pc->src.origin[k]) * pc->src.strides[k];
      doff += (pc->lo[k] - op->dst.origin[k]) * op->dst.strides[k];
    }
    if (empty) continue;
    side s = side_of(&pc->src);
    plan p;
    plan_piece(op->esize, nd, ext, pc->src.strides, op->dst.strides, soff * (int64_t)op->esize,
               doff * (int64_t)op->esize, &p);
    dlrun_status st = each_rect(cp, &s, &t, &p);
    if (st || cp->err) return st;
  }
  return DLRUN_OK;
}

static dlcu_result copy_run(cu_device *d, void *arg, bool *enqueued) {
  copy_work *w = arg;
  copy_pass cp = {.d = d, .w = w, .enqueue = true, .enqueued = enqueued};
  if (each_piece(&cp, w->op) && !cp.err) cp.err = DLCU_ERROR_OUT_OF_MEMORY;
  return cp.err;
}

dlrun_status cu_copy_box(dlrun_device *dev, dlrun_copy_op *op, const dlrun_event *waits,
                         size_t nwaits, dlrun_event *done) {
  cu_device *d = cu_dev(dev);
  if (op->ndim < 0 || op->ndim > DLRUN_MAX_NDIM)
    return cu_svc->fail(DLRUN_ERR_VALUE, "%s: a copy of rank %d", d->name, op->ndim);
  /* a device unusable after a sticky error: its own, or a source's */
  dlrun_status st = cu_usable(d, "copy");
  for (size_t i = 0; !st && i < op->npieces; i++) {
    side s = side_of(&op->pieces[i].src);
    if (s.d) st = cu_usable(s.d, "copy");
  }
  if (st) return st;
  /* First every place (memory backed now, bounds checked), so that a
   * failure enqueues nothing. */
  bool unused = false;
  copy_pass check = {.d = d, .enqueued = &unused};
  st = each_piece(&check, op);
  if (st) return st;
  copy_work *w = calloc(1, sizeof *w);
  if (!w) return cu_svc->fail(DLRUN_ERR_RESOURCE_EXHAUSTED, "%s: out of host memory", d->name);
  w->op = op;
  return cu_enqueue(d, "copy", DLRUN_WORK_COPY, copy_run, w, copy_work_free, op->complete,
                    op->complete_ctx, waits, nwaits, done);
}
