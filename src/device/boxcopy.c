/* Copying N-d boxes between strided blocks of host-addressable memory: the
 * one copy loop of dlrun, used by the platforms whose memory the host (or
 * the platform's own private view) can address. Inner dimensions that are
 * contiguous in both blocks merge into one run, so contiguous data moves
 * with a single memcpy. */
#include <string.h>

#include "boxes.h"
#include "host_loops.h"

uint64_t dlrun_box_bytes(size_t esize, int ndim, const int64_t *lo, const int64_t *hi) {
  uint64_t bytes = esize;
  for (int d = 0; d < ndim; d++) bytes *= (uint64_t)(hi[d] - lo[d]);
  return bytes;
}

void dlrun_row_major_strides(int ndim, const int64_t *dims, int64_t *strides) {
  int64_t s = 1;
  for (int d = ndim - 1; d >= 0; d--) {
    strides[d] = s;
    /* Only a zero-size shape can overflow here (sizes are checked), and it
     * has no element to address: any stride will do. */
    if (__builtin_mul_overflow(s, dims[d], &s)) s = 0;
  }
}

/* Copy n elements of `esize` bytes with the given byte strides: the inner
 * loop when the innermost dimension is not contiguous (a strided slice),
 * with fixed-size copies the compiler turns into plain loads and stores. */
static void strided_elements(char *d, const char *s, int64_t n, int64_t ds, int64_t ss,
                             size_t esize) {
#define STRIDED(bytes)                                                                    \
  for (int64_t i = 0; i < n; i++, d += ds, s += ss) memcpy(d, s, bytes);                  \
  return
  switch (esize) {
  case 1: STRIDED(1);
  case 2: STRIDED(2);
  case 4: STRIDED(4);
  case 8: STRIDED(8);
  case 16: STRIDED(16);
  default: STRIDED(esize);
  }
#undef STRIDED
}

void dlrun_host_copy_box(size_t esize, int ndim, const int64_t *lo, const int64_t *hi, void *dst,
                         const int64_t *dst_origin, const int64_t *dst_strides, const void *src,
                         const int64_t *src_origin, const int64_t *src_strides) {
  int64_t extent[DLRUN_MAX_NDIM] = {0};
  for (int d = 0; d < ndim; d++) {
    extent[d] = hi[d] - lo[d];
    if (extent[d] <= 0) return;
  }
  char *d0 = (char *)dst;
  const char *s0 = (const char *)src;
  for (int d = 0; d < ndim; d++) {
    d0 += (lo[d] - dst_origin[d]) * dst_strides[d] * (int64_t)esize;
    s0 += (lo[d] - src_origin[d]) * src_strides[d] * (int64_t)esize;
  }
  /* The run: the innermost dimensions contiguous in both blocks. */
  int k = ndim; /* dimensions k.. form the run */
  int64_t run = (int64_t)esize;
  if (ndim > 0 && dst_strides[ndim - 1] == 1 && src_strides[ndim - 1] == 1) {
    k = ndim - 1;
    run *= extent[k];
    while (k > 0 && dst_strides[k - 1] == dst_strides[k] * extent[k] &&
           src_strides[k - 1] == src_strides[k] * extent[k]) {
      k--;
      run *= extent[k];
    }
  }
  /* A strided innermost dimension: copy that dimension element by element
   * in one tight loop; so too short runs of a power-of-two size, as
   * elements of that size along the next dimension out. */
  bool strided = k == ndim && ndim > 0;
  if (strided) k = ndim - 1;
  size_t elem = esize;
  int64_t inner = ndim > 0 ? extent[ndim - 1] : 1;
  int64_t dstep = ndim > 0 ? dst_strides[ndim - 1] * (int64_t)esize : 0;
  int64_t sstep = ndim > 0 ? src_strides[ndim - 1] * (int64_t)esize : 0;
  if (!strided && k > 0 && run <= 16 && (run & (run - 1)) == 0) {
    strided = true;
    elem = (size_t)run;
    k--;
    inner = extent[k];
    dstep = dst_strides[k] * (int64_t)esize;
    sstep = src_strides[k] * (int64_t)esize;
  }
  /* Odometer over the outer dimensions 0..k-1. */
  int64_t idx[DLRUN_MAX_NDIM] = {0};
  for (;;) {
    if (strided)
      strided_elements(d0, s0, inner, dstep, sstep, elem);
    else
      memcpy(d0, s0, (size_t)run);
    int d = k - 1;
    while (d >= 0) {
      d0 += dst_strides[d] * (int64_t)esize;
      s0 += src_strides[d] * (int64_t)esize;
      if (++idx[d] < extent[d]) break;
      d0 -= extent[d] * dst_strides[d] * (int64_t)esize;
      s0 -= extent[d] * src_strides[d] * (int64_t)esize;
      idx[d] = 0;
      d--;
    }
    if (d < 0) return;
  }
}
