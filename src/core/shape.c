#include "dlrun/shape.h"

#include <stdarg.h>
#include <stdio.h>

#include "status_impl.h"

dlrun_status dlrun_shape_size(int ndim, const int64_t *dims, int64_t *out) {
  DLRUN_NONNULL(out, "dlrun_shape_size", "out");
  if (ndim < 0 || ndim > DLRUN_MAX_NDIM)
    return dlrun_fail(DLRUN_ERR_VALUE, "ndim %d is out of range (0 to %d)", ndim,
                      DLRUN_MAX_NDIM);
  if (ndim > 0 && !dims)
    return dlrun_fail(DLRUN_ERR_VALUE, "shape is NULL with ndim %d", ndim);
  int64_t size = 1;
  for (int i = 0; i < ndim; i++)
    if (dims[i] < 0) {
      char t[256];
      return dlrun_fail(DLRUN_ERR_VALUE, "negative dimension %lld in shape %s",
                        (long long)dims[i], dlrun_tuple_string(dims, ndim, t, sizeof t));
    }
  int overflow = 0;
  for (int i = 0; i < ndim; i++)
    if (__builtin_mul_overflow(size, dims[i], &size)) overflow = 1;
  /* A zero dimension makes the product 0 even if a partial product overflowed. */
  for (int i = 0; i < ndim; i++)
    if (dims[i] == 0) {
      *out = 0;
      return DLRUN_OK;
    }
  if (overflow) {
    char t[256];
    return dlrun_fail(DLRUN_ERR_VALUE, "shape %s has too many elements (overflows int64)",
                      dlrun_tuple_string(dims, ndim, t, sizeof t));
  }
  *out = size;
  return DLRUN_OK;
}

dlrun_status dlrun_shape_nbytes(int ndim, const int64_t *dims, dlrun_dtype dtype,
                                uint64_t *out) {
  DLRUN_NONNULL(out, "dlrun_shape_nbytes", "out");
  const dlrun_dtype_info *info = dlrun_dtype_get(dtype);
  if (!info) return dlrun_fail(DLRUN_ERR_VALUE, "invalid dtype %d", (int)dtype);
  int64_t size;
  dlrun_status st = dlrun_shape_size(ndim, dims, &size);
  if (st) return st;
  int64_t bytes;
  if (info->dl_bits < 8) { /* packed: ceil(size * bits / 8) */
    uint64_t packed;
    if (dlrun_dtype_nbytes(dtype, size, &packed) == DLRUN_OK) {
      *out = packed;
      return DLRUN_OK;
    }
  }
  if (info->dl_bits < 8 || __builtin_mul_overflow(size, (int64_t)info->size, &bytes)) {
    char t[256];
    return dlrun_fail(DLRUN_ERR_VALUE, "shape %s of %s is too large: its byte size overflows int64",
                      dlrun_tuple_string(dims, ndim, t, sizeof t), info->name);
  }
  *out = (uint64_t)bytes;
  return DLRUN_OK;
}

const char *dlrun_shape_string(dlrun_dtype dtype, int ndim, const int64_t *dims,
                               char *buf, unsigned long n) {
  if (!buf || !n) return buf;
  if (ndim < 0 || ndim > DLRUN_MAX_NDIM || (ndim > 0 && !dims)) ndim = 0;
  const dlrun_dtype_info *info = dlrun_dtype_get(dtype);
  size_t used = (size_t)snprintf(buf, n, "%s[", info ? info->name : "?");
  for (int i = 0; i < ndim && used < n; i++)
    used += (size_t)snprintf(buf + used, n - used, "%s%lld", i ? "," : "", (long long)dims[i]);
  if (used < n) snprintf(buf + used, n - used, "]");
  return buf;
}
