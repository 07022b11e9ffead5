/* Elements by index (see include/dlrun/dtype.h): whole-byte dtypes go
 * through dlrun_dtype_store/load at their offset; packed sub-byte dtypes
 * through subbyte.c, which reads and writes only the element's bits. */
#include <inttypes.h>
#include <string.h>

#include "dlrun/dtype.h"
#include "status_impl.h"
#include "subbyte_impl.h"

dlrun_status dlrun_dtype_store_at(dlrun_dtype dtype, void *base, int64_t index,
                                  const dlrun_scalar *value) {
  const dlrun_dtype_info *info = dlrun_dtype_get(dtype);
  if (!info) return dlrun_fail(DLRUN_ERR_VALUE, "invalid dtype %d", (int)dtype);
  if (index < 0)
    return dlrun_fail(DLRUN_ERR_VALUE, "cannot store in %s: element index %" PRId64
                      " is negative", info->name, index);
  if (info->dl_bits < 8) return dlrun_subbyte_store_at(info, base, index, value);
  if (!base) return dlrun_dtype_store(dtype, NULL, value); /* names what is NULL */
  return dlrun_dtype_store(dtype, (unsigned char *)base + (size_t)index * info->size, value);
}

void dlrun_dtype_load_at(dlrun_dtype dtype, const void *base, int64_t index,
                         dlrun_scalar *out) {
  if (!out) return;
  const dlrun_dtype_info *info = dlrun_dtype_get(dtype);
  if (!info || !base || index < 0) {
    memset(out, 0, sizeof *out); /* misuse: a zeroed scalar (false) */
    return;
  }
  if (info->dl_bits < 8) {
    dlrun_subbyte_load_at(info, base, index, out);
    return;
  }
  dlrun_dtype_load(dtype, (const unsigned char *)base + (size_t)index * info->size, out);
}

dlrun_status dlrun_dtype_nbytes(dlrun_dtype dtype, int64_t count, uint64_t *out) {
  const dlrun_dtype_info *info = dlrun_dtype_get(dtype);
  if (!info) return dlrun_fail(DLRUN_ERR_VALUE, "invalid dtype %d", (int)dtype);
  if (!out) return dlrun_fail(DLRUN_ERR_VALUE, "dlrun_dtype_nbytes: out is NULL");
  int64_t bytes;
  if (info->dl_bits < 8) {
    dlrun_status st = dlrun_packed_nbytes(info->dl_bits, count, &bytes);
    if (st) return st;
  } else if (count < 0 || __builtin_mul_overflow(count, (int64_t)info->size, &bytes)) {
    return dlrun_fail(DLRUN_ERR_VALUE, "%" PRId64 " elements of %s: the byte size is out of range",
                      count, info->name);
  }
  *out = (uint64_t)bytes;
  return DLRUN_OK;
}
