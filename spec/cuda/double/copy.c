/* Copies: cuMemcpy and cuMemcpyAsync (unified addresses, any direction and
 * any devices, as under unified addressing), cuMemcpyPeer, and the 2-D and
 * 3-D copies with the real struct semantics (X in bytes, Y and Z offsets,
 * pitches, heights; HOST, DEVICE and UNIFIED memory types; ARRAY is
 * refused). Checked when queued, CUDA_ERROR_INVALID_VALUE otherwise: a
 * pitch below the width, a range outside its allocation, device memory of
 * another device in a 2-D or 3-D copy without peer access from the
 * stream's context (the double is stricter than the documentation, which
 * leaves it open: use cuMemcpy3DPeerAsync, which always works). Mapped but
 * inaccessible memory fails when the copy runs (ILLEGAL_ADDRESS). */
#include <stddef.h>
#include <string.h>

#include "double.h"

dlcu_result dbl_transfer(uint64_t dst, bool dst_dev, int dst_acc, uint64_t src, bool src_dev,
                         int src_acc, uint64_t n) {
  while (n) {
    unsigned char *d = (unsigned char *)(uintptr_t)dst, *s = (unsigned char *)(uintptr_t)src;
    uint64_t dn = n, sn = n;
    dlcu_result rc;
    if (dst_dev && (rc = dbl_resolve(dst, n, dst_acc, true, &d, &dn))) return rc;
    if (src_dev && (rc = dbl_resolve(src, n, src_acc, false, &s, &sn))) return rc;
    uint64_t m = dn < sn ? dn : sn;
    memmove(d, s, m);
    dst += m;
    src += m;
    n -= m;
  }
  return DLCU_SUCCESS;
}

/* The address of row (y, z) of an end. */
static uint64_t row(const dbl_end *e, uint64_t y, uint64_t z) {
  return e->base + e->x + (e->y + y) * e->pitch + (e->z + z) * e->pitch * e->height;
}

dlcu_result dbl_copy_run(const dbl_copy *c) {
  for (uint64_t z = 0; z < c->depth; z++)
    for (uint64_t y = 0; y < c->height; y++) {
      dlcu_result rc = dbl_transfer(row(&c->dst, y, z), c->dst.device, c->dst.accessor,
                                    row(&c->src, y, z), c->src.device, c->src.accessor, c->width);
      if (rc) return rc;
    }
  return DLCU_SUCCESS;
}

/* a * b + c without overflow, into *out. */
static bool mul_add(uint64_t a, uint64_t b, uint64_t c, uint64_t *out) {
  uint64_t p;
  return !__builtin_mul_overflow(a, b, &p) && !__builtin_add_overflow(p, c, out);
}

/* Checks one end of a copy of width x height x depth bytes; `device` ends
 * must lie in one known region, host ends inside their pinned allocation
 * when they start in one (other host memory is the caller's). *dev
 * receives the device of a cuMemAlloc end, else -1. */
static dlcu_result check_end(const dbl_end *e, const dbl_copy *c, int *dev) {
  *dev = -1;
  if (c->width == 0 || c->height == 0 || c->depth == 0) return DLCU_SUCCESS;
  if ((c->height > 1 || c->depth > 1) && e->pitch < c->width) return DLCU_ERROR_INVALID_VALUE;
  if (c->depth > 1 && e->height < c->height) return DLCU_ERROR_INVALID_VALUE;
  uint64_t slice, first, last, a, b;
  if (!mul_add(e->pitch, e->height, 0, &slice) || !mul_add(e->y, e->pitch, e->x, &a) ||
      !mul_add(e->z, slice, a, &first) || !mul_add(c->height - 1, e->pitch, c->width - 1, &a) ||
      !mul_add(c->depth - 1, slice, a, &b) || __builtin_add_overflow(first, b, &last) ||
      __builtin_add_overflow(e->base, last, &a))
    return DLCU_ERROR_INVALID_VALUE;
  bool host;
  uint64_t start = e->base + first, n = last - first + 1;
  if (e->device) return dbl_known_range(start, n, dev, &host) ? DLCU_SUCCESS : DLCU_ERROR_INVALID_VALUE;
  if (dbl_in_va(start)) return DLCU_ERROR_INVALID_VALUE; /* device memory as host memory */
  if (dbl_regions_find(&dbl.host, start) && !dbl_known_range(start, n, dev, &host))
    return DLCU_ERROR_INVALID_VALUE;
  *dev = -1;
  return DLCU_SUCCESS;
}

/* An end from a struct's memory type and pointers. */
static dlcu_result make_end(dlcu_memorytype type, const void *host, dlcu_ptr device, size_t x,
                            size_t y, size_t z, size_t pitch, size_t height, dbl_end *e) {
  *e = (dbl_end){.x = x, .y = y, .z = z, .pitch = pitch, .height = height, .accessor = -1};
  switch (type) {
  case DLCU_MEMORYTYPE_HOST: e->base = (uint64_t)(uintptr_t)host; break;
  case DLCU_MEMORYTYPE_DEVICE:
    e->base = device;
    e->device = dbl_in_va(device);
    /* a device pointer outside device memory: pinned host memory only */
    if (!e->device && !dbl_regions_find(&dbl.host, device)) return DLCU_ERROR_INVALID_VALUE;
    break;
  case DLCU_MEMORYTYPE_UNIFIED:
    e->base = device;
    e->device = dbl_in_va(device);
    break;
  default: return DLCU_ERROR_INVALID_VALUE; /* arrays are not implemented */
  }
  return DLCU_SUCCESS;
}

/* Queues `c` on `stream` after the checks. `peer_rule` (2-D, 3-D): the
 * stream's device does the copy, and must have peer access to another
 * device's memory; else (1-D unified, peer copies) each end keeps the
 * accessor it has. */
static dlcu_result enqueue_copy(dbl_copy *c, dlcu_stream stream, dlcu_result fail,
                                bool peer_rule) {
  dlcu_stream s;
  dlcu_result rc = dbl_stream_arg(stream, true, &s);
  if (rc) return rc;
  int sdev, ddev;
  if ((rc = check_end(&c->src, c, &sdev)) || (rc = check_end(&c->dst, c, &ddev))) return rc;
  if (peer_rule) {
    int me = s->ctx->device;
    for (int i = 0; i < 2; i++) {
      int d = i ? ddev : sdev;
      if (d >= 0 && d != me && !(s->ctx->peers >> d & 1)) return DLCU_ERROR_INVALID_VALUE;
    }
    c->src.accessor = c->dst.accessor = me;
  }
  dbl_op *op = dbl_op_new(DBL_OP_COPY, fail);
  if (!op) return DLCU_ERROR_OUT_OF_MEMORY;
  op->u.copy = *c;
  dbl_enqueue(s, op);
  return DLCU_SUCCESS;
}

static dbl_copy linear(dlcu_ptr dst, dlcu_ptr src, size_t bytes) {
  dbl_copy c = {.width = bytes, .height = 1, .depth = 1};
  make_end(DLCU_MEMORYTYPE_UNIFIED, NULL, dst, 0, 0, 0, bytes, 1, &c.dst);
  make_end(DLCU_MEMORYTYPE_UNIFIED, NULL, src, 0, 0, 0, bytes, 1, &c.src);
  return c;
}

dlcu_result cuMemcpyAsync(dlcu_ptr dst, dlcu_ptr src, size_t bytes, dlcu_stream stream) {
  dlcu_result fail = DLCU_SUCCESS, rc = dbl_enter(DBL_ID_MemcpyAsync, &fail);
  if (rc) return rc;
  dbl_copy c = linear(dst, src, bytes);
  return dbl_leave(enqueue_copy(&c, stream, fail, false));
}

/* Synchronous copies run on the calling thread, after the context's
 * default stream has drained. */
static dlcu_result run_now(dbl_copy *c) {
  dlcu_context cur = dbl_current();
  if (!cur) return DLCU_ERROR_INVALID_CONTEXT;
  int dev;
  dlcu_result rc;
  if ((rc = check_end(&c->src, c, &dev)) || (rc = check_end(&c->dst, c, &dev))) return rc;
  while (cur->null_stream && cur->null_stream->head) pthread_cond_wait(&dbl.changed, &dbl.lock);
  return dbl_copy_run(c);
}

dlcu_result cuMemcpy(dlcu_ptr dst, dlcu_ptr src, size_t bytes) {
  DBL_ENTER(Memcpy);
  dbl_copy c = linear(dst, src, bytes);
  return dbl_leave(run_now(&c));
}

static bool context_valid(dlcu_context ctx) {
  return ctx >= &dbl.ctx[0] && ctx < &dbl.ctx[dbl.cfg.devices] && ctx->refs > 0;
}

/* A device end of a peer copy: memory of its context's device (or
 * reserved addresses, checked when the copy runs), reached by that device. */
static dlcu_result peer_end(dbl_end *e, dlcu_context ctx) {
  if (!e->device) return DLCU_SUCCESS;
  if (!context_valid(ctx)) return DLCU_ERROR_INVALID_CONTEXT;
  int dev;
  bool host;
  if (dbl_known_range(e->base, 1, &dev, &host) && dev >= 0 && dev != ctx->device)
    return DLCU_ERROR_INVALID_VALUE;
  e->accessor = ctx->device;
  return DLCU_SUCCESS;
}

dlcu_result cuMemcpyPeer(dlcu_ptr dst, dlcu_context dst_ctx, dlcu_ptr src, dlcu_context src_ctx,
                         size_t bytes) {
  DBL_ENTER(MemcpyPeer);
  dbl_copy c = {.width = bytes, .height = 1, .depth = 1};
  dlcu_result rc;
  if ((rc = make_end(DLCU_MEMORYTYPE_DEVICE, NULL, dst, 0, 0, 0, bytes, 1, &c.dst)) ||
      (rc = make_end(DLCU_MEMORYTYPE_DEVICE, NULL, src, 0, 0, 0, bytes, 1, &c.src)) ||
      (rc = peer_end(&c.dst, dst_ctx)) || (rc = peer_end(&c.src, src_ctx)))
    return dbl_leave(rc);
  return dbl_leave(run_now(&c));
}

dlcu_result cuMemcpy2DAsync_v2(const dlcu_memcpy2d *p, dlcu_stream stream) {
  dlcu_result fail = DLCU_SUCCESS, rc = dbl_enter(DBL_ID_Memcpy2DAsync, &fail);
  if (rc) return rc;
  if (!p) return dbl_leave(DLCU_ERROR_INVALID_VALUE);
  dbl_copy c = {.width = p->WidthInBytes, .height = p->Height, .depth = 1};
  if ((rc = make_end(p->srcMemoryType, p->srcHost, p->srcDevice, p->srcXInBytes, p->srcY, 0,
                     p->srcPitch, p->Height, &c.src)) ||
      (rc = make_end(p->dstMemoryType, p->dstHost, p->dstDevice, p->dstXInBytes, p->dstY, 0,
                     p->dstPitch, p->Height, &c.dst)))
    return dbl_leave(rc);
  return dbl_leave(enqueue_copy(&c, stream, fail, true));
}

/* The two 3-D structs share their layout; a CUDA_MEMCPY3D is a peer copy
 * without contexts. */
_Static_assert(sizeof(dlcu_memcpy3d) == sizeof(dlcu_memcpy3d_peer) &&
                   offsetof(dlcu_memcpy3d, reserved0) == offsetof(dlcu_memcpy3d_peer, srcContext) &&
                   offsetof(dlcu_memcpy3d, reserved1) == offsetof(dlcu_memcpy3d_peer, dstContext) &&
                   offsetof(dlcu_memcpy3d, Depth) == offsetof(dlcu_memcpy3d_peer, Depth),
               "CUDA_MEMCPY3D and CUDA_MEMCPY3D_PEER differ");

static dlcu_result copy_3d(const dlcu_memcpy3d_peer *p, dlcu_stream stream, dlcu_result fail,
                           bool peer) {
  if (!p || p->srcLOD || p->dstLOD) return DLCU_ERROR_INVALID_VALUE;
  dbl_copy c = {.width = p->WidthInBytes, .height = p->Height, .depth = p->Depth};
  dlcu_result rc;
  if ((rc = make_end(p->srcMemoryType, p->srcHost, p->srcDevice, p->srcXInBytes, p->srcY,
                     p->srcZ, p->srcPitch, p->srcHeight, &c.src)) ||
      (rc = make_end(p->dstMemoryType, p->dstHost, p->dstDevice, p->dstXInBytes, p->dstY,
                     p->dstZ, p->dstPitch, p->dstHeight, &c.dst)) ||
      (peer && ((rc = peer_end(&c.src, p->srcContext)) || (rc = peer_end(&c.dst, p->dstContext)))))
    return rc;
  return enqueue_copy(&c, stream, fail, !peer);
}

dlcu_result cuMemcpy3DAsync_v2(const dlcu_memcpy3d *p, dlcu_stream stream) {
  dlcu_result fail = DLCU_SUCCESS, rc = dbl_enter(DBL_ID_Memcpy3DAsync, &fail);
  if (rc) return rc;
  dlcu_memcpy3d_peer q;
  if (p) memcpy(&q, p, sizeof q);
  return dbl_leave(copy_3d(p ? &q : NULL, stream, fail, false));
}

dlcu_result cuMemcpy3DPeerAsync(const dlcu_memcpy3d_peer *p, dlcu_stream stream) {
  dlcu_result fail = DLCU_SUCCESS, rc = dbl_enter(DBL_ID_Memcpy3DPeerAsync, &fail);
  if (rc) return rc;
  return dbl_leave(copy_3d(p, stream, fail, true));
}
