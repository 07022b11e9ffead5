/* Copying N-d boxes between row-major blocks: the one copy loop of dlrun.
 * Inner dimensions that both blocks cover whole merge into one contiguous
 * run, so contiguous data moves with a single memcpy. */
#include "array_impl.h"

void dlrun_copy_box(size_t esize, int ndim, const int64_t *lo, const int64_t *hi, void *dst,
                    const int64_t *dst_origin, const int64_t *dst_shape, const void *src,
                    const int64_t *src_origin, const int64_t *src_shape,
                    void (*copy)(void *, const void *, size_t)) {
  if (ndim == 0) {
    copy(dst, src, esize);
    return;
  }
  int64_t extent[DLRUN_MAX_NDIM] = {0}, dst_stride[DLRUN_MAX_NDIM], src_stride[DLRUN_MAX_NDIM];
  for (int d = 0; d < ndim; d++) {
    extent[d] = hi[d] - lo[d];
    if (extent[d] <= 0) return;
  }
  int64_t ds = (int64_t)esize, ss = (int64_t)esize;
  for (int d = ndim - 1; d >= 0; d--) {
    dst_stride[d] = ds;
    src_stride[d] = ss;
    ds *= dst_shape[d];
    ss *= src_shape[d];
  }
  /* Merge inner dimensions covered whole by the box in both blocks. */
  int k = ndim - 1;
  int64_t run = extent[k] * (int64_t)esize;
  while (k > 0 && extent[k] == dst_shape[k] && extent[k] == src_shape[k]) {
    k--;
    run *= extent[k];
  }
  char *d0 = (char *)dst;
  const char *s0 = (const char *)src;
  for (int d = 0; d <= k; d++) {
    d0 += (lo[d] - dst_origin[d]) * dst_stride[d];
    s0 += (lo[d] - src_origin[d]) * src_stride[d];
  }
  /* Odometer over the outer dimensions 0..k-1. */
  int64_t idx[DLRUN_MAX_NDIM] = {0};
  for (;;) {
    copy(d0, s0, (size_t)run);
    int d = k - 1;
    while (d >= 0) {
      d0 += dst_stride[d];
      s0 += src_stride[d];
      if (++idx[d] < extent[d]) break;
      d0 -= extent[d] * dst_stride[d];
      s0 -= extent[d] * src_stride[d];
      idx[d] = 0;
      d--;
    }
    if (d < 0) return;
  }
}
