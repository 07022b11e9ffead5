/* Box copies as OpenCL rect commands.
 *
 * A piece of a copy is an N-d box with element strides on each side (any
 * sign: imported tensors may run backwards). It is planned as rects of
 * clEnqueue{Read,Write,Copy}BufferRect, which take a contiguous row and two
 * positive pitches per side (common/box_plan.h). Between two
 * buffers, where that would be many commands (a dimension running
 * backwards on one side, a transpose), a kernel copies the box instead. */
#include <stdlib.h>
#include <string.h>

#include "ocl.h"
#include "platforms/common/box_plan.h"

/* One end of the copy as the commands see it. */
typedef struct side {
  ocl_device *d; /* NULL: host memory */
  dlrun_memory_kind kind;
  const unsigned char *data;
  bool buf; /* reached as a cl_mem (else as a host pointer) */
} side;

typedef struct copy_ctx {
  ocl_enqueue *q; /* NULL: the checking pass */
  const side *src, *dst;
  const plan *p;
} copy_ctx;

/* Where a rect's side starts: a host pointer or (cl_mem, offset) with room
 * for the rect. */
static dlrun_status place_side(const side *s, int64_t off, size_t span, ocl_place *pl) {
  if (!s->d) {
    *pl = (ocl_place){.host = (unsigned char *)s->data + off};
    return DLRUN_OK;
  }
  dlrun_status st = ocl_place_of(s->d, s->kind, s->data + off, pl);
  if (st) return st;
  if (s->buf && pl->room < span)
    return ocl_svc->fail(DLRUN_ERR_VALUE,
                         "%s: a copy of %zu bytes at %p would cross the end of an OpenCL "
                         "buffer",
                         s->d->name, span, (const void *)(s->data + off));
  return DLRUN_OK;
}

/* (offset, row pitch, slice pitch) as an OpenCL origin. */
static void origin_of(size_t off, size_t row, size_t slice, size_t o[3]) {
  o[2] = off / slice;
  o[1] = (off % slice) / row;
  o[0] = (off % slice) % row;
}

static cl_int enqueue_rect(ocl_enqueue *q, const plan *p, const ocl_place *s,
                           const ocl_place *d) {
  const size_t *extent = p->extent;
  size_t sr = (size_t)p->srow, ss = (size_t)p->sslice, dr = (size_t)p->drow,
         ds = (size_t)p->dslice;
  size_t so[3], doo[3], zero[3] = {0, 0, 0};
  cl_event ev = NULL;
  cl_int err;
  cl_command_queue cq = q->d->queue;
  if (extent[1] == 1 && extent[2] == 1) /* one run: the plain commands (lane.c) */
    return ocl_plain_copy(q, s, d, extent[0]);
  if (s->mem && s->mem == d->mem && (sr != dr || ss != ds)) {
    /* OpenCL refuses a rect within one buffer whose pitches differ: rows */
    err = CL_SUCCESS;
    for (size_t z = 0; z < extent[2] && !err; z++)
      for (size_t y = 0; y < extent[1] && !err; y++) {
        ev = NULL;
        err = clEnqueueCopyBuffer(cq, s->mem, d->mem, s->offset + z * ss + y * sr,
                                  d->offset + z * ds + y * dr, extent[0], ocl_wait_count(q),
                                  ocl_wait_list(q), &ev);
        ocl_enqueued(q, err, ev);
      }
    return err;
  } else if (s->mem && d->mem) {
    origin_of(s->offset, sr, ss, so);
    origin_of(d->offset, dr, ds, doo);
    err = clEnqueueCopyBufferRect(cq, s->mem, d->mem, so, doo, extent, sr, ss, dr, ds,
                                  ocl_wait_count(q), ocl_wait_list(q), &ev);
  } else if (s->mem) {
    origin_of(s->offset, sr, ss, so);
    err = clEnqueueReadBufferRect(cq, s->mem, CL_FALSE, so, zero, extent, sr, ss, dr, ds,
                                  d->host, ocl_wait_count(q), ocl_wait_list(q), &ev);
  } else {
    origin_of(d->offset, dr, ds, doo);
    err = clEnqueueWriteBufferRect(cq, d->mem, CL_FALSE, doo, zero, extent, dr, ds, sr, ss,
                                   s->host, ocl_wait_count(q), ocl_wait_list(q), &ev);
  }
  ocl_enqueued(q, err, ev);
  return err;
}

/* One rect at (soff, doff): checked (q NULL) or enqueued. */
static dlrun_status do_rect(copy_ctx *c, int64_t soff, int64_t doff, cl_int *err) {
  ocl_place s, d;
  dlrun_status st = place_side(c->src, soff, rect_span(c->p, true), &s);
  if (!st) st = place_side(c->dst, doff, rect_span(c->p, false), &d);
  if (st || !c->q) return st;
  *err = enqueue_rect(c->q, c->p, &s, &d);
  return DLRUN_OK;
}

/* Every rect of the plan, the loops' index running like an odometer. */
static dlrun_status each_rect(copy_ctx *c, cl_int *err) {
  const plan *p = c->p;
  int64_t idx[DLRUN_MAX_NDIM] = {0};
  int64_t soff = p->soff, doff = p->doff;
  for (;;) {
    dlrun_status st = do_rect(c, soff, doff, err);
    if (st || *err) return st;
    if (!plan_next_rect(p, idx, &soff, &doff)) return DLRUN_OK;
  }
}

static side side_of(const dlrun_box_end *e) {
  side s = {.kind = e->kind, .data = e->data};
  if (e->dev) {
    s.d = ocl_dev(e->dev);
    s.buf = e->kind == DLRUN_MEM_DEVICE;
  }
  return s;
}

static bool empty_box(int nd, const int64_t *lo, const int64_t *hi) {
  for (int k = 0; k < nd; k++)
    if (hi[k] <= lo[k]) return true;
  return false;
}

/* Both ends host memory (host, pinned_host): the host copies it. */
static bool host_only(const dlrun_copy_op *op, const dlrun_copy_piece *pc) {
  return (!op->dst.dev || op->dst.kind != DLRUN_MEM_DEVICE) &&
         (!pc->src.dev || pc->src.kind != DLRUN_MEM_DEVICE);
}

/* The host's part of a copy, run in the queue's order (ocl_enqueue_host). */
static void host_pieces(void *ctx) {
  const dlrun_copy_op *op = ctx;
  for (size_t i = 0; i < op->npieces; i++) {
    const dlrun_copy_piece *pc = &op->pieces[i];
    if (!host_only(op, pc) || empty_box(op->ndim, pc->lo, pc->hi)) continue;
    ocl_svc->host_copy_box(op->esize, op->ndim, pc->lo, pc->hi, (void *)op->dst.data,
                           op->dst.origin, op->dst.strides, pc->src.data, pc->src.origin,
                           pc->src.strides, op->stream);
  }
}

/* One pass over a copy: checking (q NULL: every place resolved, buffers
 * made, whether the kernel is needed) or enqueueing. */
typedef struct copy_pass {
  ocl_enqueue *q;
  cl_kernel kernel; /* the strided copy, when needed */
  bool need_kernel;
  bool host; /* pieces between host memories */
  cl_int err;
} copy_pass;


/* The strided copy kernel over the box of p, from byte so of smem to byte
 * dof of dmem (the offsets of the box's element 0). */
static cl_int launch_kernel(copy_pass *cp, cl_mem smem, cl_ulong so, cl_mem dmem, cl_ulong dof,
                            const plan *p, size_t esize) {
  cl_uint es = (cl_uint)esize;
  cl_long4 ext = {{1, 1, 1, 1}}, ss = {{0, 0, 0, 0}}, ds = {{0, 0, 0, 0}};
  size_t n = 1;
  for (int i = 0; i < p->ndims; i++) {
    int at = 4 - p->ndims + i;
    ext.s[at] = p->dims[i].ext;
    ss.s[at] = p->dims[i].s;
    ds.s[at] = p->dims[i].d;
    n *= (size_t)p->dims[i].ext;
  }
  cl_kernel k = cp->kernel;
  cl_int err = clSetKernelArg(k, 0, sizeof smem, &smem);
  if (!err) err = clSetKernelArg(k, 1, sizeof so, &so);
  if (!err) err = clSetKernelArg(k, 2, sizeof dmem, &dmem);
  if (!err) err = clSetKernelArg(k, 3, sizeof dof, &dof);
  if (!err) err = clSetKernelArg(k, 4, sizeof es, &es);
  if (!err) err = clSetKernelArg(k, 5, sizeof ext, &ext);
  if (!err) err = clSetKernelArg(k, 6, sizeof ss, &ss);
  if (!err) err = clSetKernelArg(k, 7, sizeof ds, &ds);
  cl_event ev = NULL;
  ocl_enqueue *q = cp->q;
  if (!err)
    err = clEnqueueNDRangeKernel(q->d->queue, k, 1, NULL, &n, NULL, ocl_wait_count(q),
                                 ocl_wait_list(q), &ev);
  ocl_enqueued(q, err, ev);
  return err;
}

/* A piece by the kernel: between buffers directly; from host memory
 * through a buffer holding the bytes the box spans there (one write), into
 * host memory through one the kernel fills (one read). A staging buffer goes
 * when the commands using it are done. */
static dlrun_status kernel_piece(copy_pass *cp, const side *src, const side *dst, const plan *p,
                                 size_t esize) {
  int64_t slo, shi, dlo, dhi;
  box_reach(p, esize, true, &slo, &shi);
  box_reach(p, esize, false, &dlo, &dhi);
  ocl_place sp, dp;
  dlrun_status st = place_side(src, p->soff + slo, (size_t)(shi - slo), &sp);
  if (!st) st = place_side(dst, p->doff + dlo, (size_t)(dhi - dlo), &dp);
  if (st || !cp->q) {
    cp->need_kernel = true;
    return st;
  }
  cl_ulong dof = (cl_ulong)((int64_t)dp.offset - dlo);
  if (src->buf && dst->buf) {
    cp->err = launch_kernel(cp, sp.mem, (cl_ulong)((int64_t)sp.offset - slo), dp.mem, dof, p,
                            esize);
    return DLRUN_OK;
  }
  if (src->buf) { /* into host memory the box fills exactly: kernel, then one read */
    size_t span = (size_t)(dhi - dlo);
    cl_mem staged = clCreateBuffer(ocl_state.context, CL_MEM_READ_WRITE, span, NULL, &cp->err);
    if (!staged) return DLRUN_OK;
    cp->err = launch_kernel(cp, sp.mem, (cl_ulong)((int64_t)sp.offset - slo), staged,
                            (cl_ulong)-dlo, p, esize);
    cl_event ev = NULL;
    if (!cp->err)
      cp->err = clEnqueueReadBuffer(cp->q->d->queue, staged, CL_FALSE, 0, span, dp.host, 0, NULL,
                                    &ev);
    ocl_enqueued(cp->q, cp->err, ev);
    clReleaseMemObject(staged);
    return DLRUN_OK;
  }
  size_t span = (size_t)(shi - slo);
  cl_mem staged = clCreateBuffer(ocl_state.context, CL_MEM_READ_ONLY, span, NULL, &cp->err);
  if (!staged) return DLRUN_OK;
  cl_event ev = NULL;
  cp->err = clEnqueueWriteBuffer(cp->q->d->queue, staged, CL_FALSE, 0, span, sp.host,
                                 ocl_wait_count(cp->q), ocl_wait_list(cp->q), &ev);
  ocl_enqueued(cp->q, cp->err, ev);
  if (!cp->err) cp->err = launch_kernel(cp, staged, (cl_ulong)-slo, dp.mem, dof, p, esize);
  clReleaseMemObject(staged);
  return DLRUN_OK;
}

/* Whether the kernel copies p rather than rects, where rects would be many
 * commands: between buffers; from host memory when the bytes the box spans
 * there are few more than it has (they are all written to a buffer); into
 * host memory only when the box fills the bytes it spans there (they are
 * all read back). */
static bool by_kernel(const side *src, const side *dst, const plan *p, size_t esize) {
  if ((!src->buf && !dst->buf) || p->ndims > 4) return false;
  bool one_memory = src->buf && dst->buf && src->d == dst->d && src->kind == dst->kind;
  if (one_memory && p->extent[0] * p->extent[1] * p->extent[2] > p->extent[0] &&
      (p->srow != p->drow || p->sslice != p->dslice))
    return true; /* rects within one buffer need equal pitches: rows, or the kernel */
  if (rect_count(p) <= 8) return false;
  if (src->buf && dst->buf) return true;
  int64_t lo, hi, n = 1;
  box_reach(p, esize, !src->buf, &lo, &hi);
  for (int i = 0; i < p->ndims; i++) n *= p->dims[i].ext;
  uint64_t span = (uint64_t)(hi - lo), bytes = (uint64_t)n * esize;
  uint64_t room = (src->buf ? src->d : dst->d)->max_alloc;
  return span <= room && (src->buf ? span == bytes : span <= 2 * bytes + 4096);
}

/* Run every piece through one pass: rects, or the kernel between two
 * buffers when rects would be many small commands. */
static dlrun_status each_piece(const dlrun_copy_op *op, side *dst, copy_pass *cp) {
  int nd = op->ndim;
  for (size_t i = 0; i < op->npieces; i++) {
    const dlrun_copy_piece *pc = &op->pieces[i];
    if (empty_box(nd, pc->lo, pc->hi)) continue;
    if (host_only(op, pc)) {
      cp->host = true;
      continue;
    }
    int64_t ext[DLRUN_MAX_NDIM], soff = 0, doff = 0;
    for (int k = 0; k < nd; k++) {
      ext[k] = pc->hi[k] - pc->lo[k];
      soff += (pc->lo[k] - pc->src.origin[k]) * pc->src.strides[k];
      doff += (pc->lo[k] - op->dst.origin[k]) * op->dst.strides[k];
    }
    side src = side_of(&pc->src), d = *dst;
    dlrun_status st;
    plan p;
    plan_piece(op->esize, nd, ext, pc->src.strides, op->dst.strides,
               soff * (int64_t)op->esize, doff * (int64_t)op->esize, &p);
    if (by_kernel(&src, &d, &p, op->esize)) {
      st = kernel_piece(cp, &src, &d, &p, op->esize);
    } else {
      copy_ctx c = {.q = cp->q, .src = &src, .dst = &d, .p = &p};
      st = each_rect(&c, &cp->err);
    }
    if (st || cp->err) return st;
  }
  return DLRUN_OK;
}

dlrun_status ocl_copy_box(dlrun_device *dev, dlrun_copy_op *op, const dlrun_event *waits,
                          size_t nwaits, dlrun_event *done) {
  ocl_device *d = ocl_dev(dev);
  if (op->ndim < 0 || op->ndim > DLRUN_MAX_NDIM)
    return ocl_svc->fail(DLRUN_ERR_VALUE, "%s: a copy of rank %d", d->name, op->ndim);
  side dst = side_of(&op->dst);
  /* First every place (buffers made now, bounds checked) and the kernel, so
   * that a failure enqueues nothing. */
  copy_pass cp = {0};
  dlrun_status st = each_piece(op, &dst, &cp);
  if (!st && cp.need_kernel) st = ocl_kernel_of(d, OCL_COPY_STRIDED, &cp.kernel);
  ocl_enqueue q;
  if (!st) st = ocl_begin(d, "copy", DLRUN_WORK_COPY, waits, nwaits, &q);
  if (st) return st;
  ocl_on_complete(&q, op->complete, op->complete_ctx);
  cp.q = &q;
  if (ocl_op_runs(&q)) {
    each_piece(op, &dst, &cp);
    if (cp.host && !cp.err) cp.err = ocl_enqueue_host(&q, host_pieces, op);
  }
  return ocl_end(&q, cp.err, done);
}
