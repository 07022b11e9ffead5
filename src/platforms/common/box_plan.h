/* Planning a box copy as rects of up to three dimensions (a contiguous row,
 * rows and slices with positive pitches), shared by the platform modules
 * whose drivers copy rects (OpenCL's clEnqueue*BufferRect, CUDA's
 * cuMemcpy3D): dimensions of extent 1 go, a dimension that runs backwards
 * on both sides is turned round, dimensions are ordered by the
 * destination's stride and merged where contiguous on both sides; the
 * innermost contiguous run is the row (one element when none is), the next
 * two dimensions whose pitches are valid on both sides are the rect's rows
 * and slices, and any other dimension is a loop of rects. Header-only
 * (static functions): each module is built on the public headers alone. */
#ifndef DLRUN_PLATFORMS_BOX_PLAN_H
#define DLRUN_PLATFORMS_BOX_PLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "dlrun/platform.h"

typedef struct dim {
  int64_t ext, s, d; /* extent; source and destination strides in bytes */
} dim;

/* A planned piece: rects of extent[0] bytes x n1 rows x n2 slices, starting
 * at (soff, doff) plus the loops' offsets. */
typedef struct plan {
  int64_t soff, doff;
  size_t extent[3];
  int64_t srow, sslice, drow, dslice;
  int nloops;
  dim loops[DLRUN_MAX_NDIM];
  int ndims; /* the merged dimensions, outermost first (the kernel's) */
  dim dims[DLRUN_MAX_NDIM];
} plan;

static inline int64_t abs64(int64_t v) { return v < 0 ? -v : v; }

/* Whether dimension c can be the pitch dimension after one of `inner`
 * bytes (pitch >= inner and a multiple of the pitch below, on both sides). */
static inline bool pitch_fits(const dim *c, int64_t sinner, int64_t dinner, int64_t sunit,
                       int64_t dunit) {
  return c->s > 0 && c->d > 0 && c->s >= sinner && c->d >= dinner && c->s % sunit == 0 &&
         c->d % dunit == 0;
}

static inline void plan_piece(size_t esize, int ndim, const int64_t *ext, const int64_t *ss,
                       const int64_t *ds, int64_t soff, int64_t doff, plan *p) {
  dim dims[DLRUN_MAX_NDIM];
  int n = 0;
  for (int k = 0; k < ndim; k++) {
    if (ext[k] == 1) continue;
    dim c = {ext[k], ss[k] * (int64_t)esize, ds[k] * (int64_t)esize};
    if (c.s < 0 && c.d < 0) { /* backwards on both sides: turn it round */
      soff += (c.ext - 1) * c.s;
      doff += (c.ext - 1) * c.d;
      c.s = -c.s;
      c.d = -c.d;
    }
    dims[n++] = c;
  }
  /* outermost first: by destination stride, then source stride */
  for (int i = 1; i < n; i++)
    for (int j = i; j > 0; j--) {
      dim *a = &dims[j - 1], *b = &dims[j];
      if (abs64(a->d) > abs64(b->d) || (abs64(a->d) == abs64(b->d) && abs64(a->s) >= abs64(b->s)))
        break;
      dim t = *a;
      *a = *b;
      *b = t;
    }
  /* merge a dimension into the one inside it where both sides are contiguous */
  int m = 0;
  for (int i = 0; i < n; i++) {
    if (m > 0) {
      dim *o = &dims[m - 1];
      if (o->s == dims[i].ext * dims[i].s && o->d == dims[i].ext * dims[i].d) {
        *o = (dim){o->ext * dims[i].ext, dims[i].s, dims[i].d};
        continue;
      }
    }
    dims[m++] = dims[i];
  }
  n = m;
  p->ndims = n;
  memcpy(p->dims, dims, sizeof(dim) * (size_t)n);
  int64_t row = (int64_t)esize;
  if (n > 0 && dims[n - 1].s == (int64_t)esize && dims[n - 1].d == (int64_t)esize)
    row = dims[--n].ext * (int64_t)esize;
  p->soff = soff;
  p->doff = doff;
  p->extent[0] = (size_t)row;
  p->extent[1] = p->extent[2] = 1;
  p->srow = p->drow = row;
  p->nloops = 0;
  int r1 = -1, r2 = -1;
  for (int i = n - 1; i >= 0 && r1 < 0; i--)
    if (pitch_fits(&dims[i], row, row, 1, 1)) r1 = i;
  if (r1 >= 0) {
    p->extent[1] = (size_t)dims[r1].ext;
    p->srow = dims[r1].s;
    p->drow = dims[r1].d;
    for (int i = n - 1; i >= 0 && r2 < 0; i--)
      if (i != r1 && pitch_fits(&dims[i], p->srow * dims[r1].ext, p->drow * dims[r1].ext,
                                p->srow, p->drow))
        r2 = i;
  }
  p->sslice = p->srow * (int64_t)p->extent[1];
  p->dslice = p->drow * (int64_t)p->extent[1];
  if (r2 >= 0) {
    p->extent[2] = (size_t)dims[r2].ext;
    p->sslice = dims[r2].s;
    p->dslice = dims[r2].d;
  }
  for (int i = 0; i < n; i++)
    if (i != r1 && i != r2) p->loops[p->nloops++] = dims[i];
}

/* The bytes one rect spans from its start, on the source or the destination. */
static inline size_t rect_span(const plan *p, bool src) {
  int64_t row = src ? p->srow : p->drow, slice = src ? p->sslice : p->dslice;
  return (size_t)(((int64_t)p->extent[2] - 1) * slice + ((int64_t)p->extent[1] - 1) * row +
                  (int64_t)p->extent[0]);
}

static inline int64_t rect_count(const plan *p) {
  int64_t n = 1;
  for (int i = 0; i < p->nloops; i++) n *= p->loops[i].ext;
  return n;
}

/* The lowest and one past the highest byte of the box from its element 0. */
static inline void box_reach(const plan *p, size_t esize, bool src, int64_t *lo, int64_t *hi) {
  *lo = 0;
  *hi = (int64_t)esize;
  for (int i = 0; i < p->ndims; i++) {
    int64_t r = (p->dims[i].ext - 1) * (src ? p->dims[i].s : p->dims[i].d);
    if (r < 0) *lo += r;
    else *hi += r;
  }
}

/* The next rect of the plan's loops, its index idx (zeroed before the
 * first) running like an odometer: soff and doff advance to it; false after
 * the last rect. */
static inline bool plan_next_rect(const plan *p, int64_t *idx, int64_t *soff, int64_t *doff) {
  for (int k = p->nloops - 1; k >= 0; k--) {
    *soff += p->loops[k].s;
    *doff += p->loops[k].d;
    if (++idx[k] < p->loops[k].ext) return true;
    *soff -= p->loops[k].ext * p->loops[k].s;
    *doff -= p->loops[k].ext * p->loops[k].d;
    idx[k] = 0;
  }
  return false;
}

#endif
