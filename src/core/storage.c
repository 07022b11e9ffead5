/* The storage geometry of arrays (see storage_impl.h). */
#include "storage_impl.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "status_impl.h"
#include "subbyte_impl.h"

dlrun_status dlrun_storage_of(const dlrun_dtype_info *info, int ndim, const int64_t *dims,
                              dlrun_storage *out) {
  DLRUN_NONNULL(out, "dlrun_storage_of", "out");
  DLRUN_NONNULL(info, "dlrun_storage_of", "dtype");
  int64_t size;
  dlrun_status st = dlrun_shape_size(ndim, dims, &size);
  if (st) return st;
  memset(out, 0, sizeof *out);
  out->info = info;
  out->ndim = ndim;
  if (ndim) memcpy(out->dims, dims, (size_t)ndim * sizeof *dims);
  unsigned b = info->dl_bits;
  if (b >= 8) {
    out->sndim = ndim;
    if (ndim) memcpy(out->sdims, dims, (size_t)ndim * sizeof *dims);
    out->esize = info->size;
    out->split = -1;
    out->step = 1;
    out->row_bits = (int64_t)info->size * 8;
    if (__builtin_mul_overflow(size, (int64_t)info->size, &out->nbytes))
      return dlrun_fail(DLRUN_ERR_VALUE, "an array of %" PRId64 " %s elements is too large",
                        size, info->name);
    return DLRUN_OK;
  }
  int64_t total;
  if (__builtin_mul_overflow(size, (int64_t)b, &total) || total > INT64_MAX - 7)
    return dlrun_fail(DLRUN_ERR_VALUE, "an array of %" PRId64 " %s elements is too large",
                      size, info->name);
  /* The shortest run of trailing dims whose bits fill whole bytes. The
   * suffix products never exceed `total` unless a dim before them is 0:
   * then the array holds nothing, every box of it is empty, and a product
   * past int64 counts as 0 (the storage holds nothing either). */
  int k = 0;
  int64_t suffix = b, row = b; /* row: the bits of one index of dim k */
  bool found = false;
  for (int i = ndim - 1; i >= 0; i--) {
    row = suffix;
    if (__builtin_mul_overflow(suffix, dims[i], &suffix)) suffix = 0;
    if (suffix % 8 == 0) {
      k = i;
      found = true;
      break;
    }
  }
  if (!found) { /* k = 0; the last byte is padded (ndim 0: one element) */
    k = 0;
    row = ndim ? (dims[0] == 0 ? 0 : total / dims[0]) : b;
    suffix = total;
  }
  out->split = k;
  out->row_bits = row;
  out->step = row == 0 ? 1 : 8 / dlrun_gcd(row, 8);
  out->sndim = k + 1;
  for (int i = 0; i < k; i++) out->sdims[i] = dims[i];
  out->sdims[k] = (suffix + 7) / 8;
  out->esize = 1;
  out->nbytes = (total + 7) / 8;
  return DLRUN_OK;
}

/* "[0:6, 0:2]": a box as Python slices. */
static const char *box_text(int n, const int64_t *lo, const int64_t *hi, char *buf, size_t size) {
  size_t used = (size_t)snprintf(buf, size, "[");
  for (int i = 0; i < n && used < size; i++)
    used += (size_t)snprintf(buf + used, size - used, "%s%" PRId64 ":%" PRId64, i ? ", " : "",
                             lo[i], hi[i]);
  if (used < size) snprintf(buf + used, size - used, "]");
  return buf;
}

/* "int4[6,3]" */
static const char *array_text(const dlrun_storage *s, char *buf, size_t size) {
  size_t used = (size_t)snprintf(buf, size, "%s[", s->info->name);
  for (int i = 0; i < s->ndim && used < size; i++)
    used += (size_t)snprintf(buf + used, size - used, "%s%" PRId64, i ? "," : "", s->dims[i]);
  if (used < size) snprintf(buf + used, size - used, "]");
  return buf;
}

dlrun_status dlrun_storage_box(const dlrun_storage *s, const int64_t *lo, const int64_t *hi,
                               int64_t *slo, int64_t *shi) {
  DLRUN_NONNULL(s, "dlrun_storage_box", "storage");
  if (s->ndim > 0 && (!lo || !hi || !slo || !shi))
    return dlrun_fail(DLRUN_ERR_VALUE, "dlrun_storage_box: a box bound is NULL");
  if (!slo || !shi) return dlrun_fail(DLRUN_ERR_VALUE, "dlrun_storage_box: output is NULL");
  bool empty = false;
  for (int i = 0; i < s->ndim; i++) {
    if (lo[i] < 0 || lo[i] > hi[i] || hi[i] > s->dims[i]) {
      char b[256], a[256];
      return dlrun_fail(DLRUN_ERR_VALUE, "box %s is not inside %s",
                        box_text(s->ndim, lo, hi, b, sizeof b), array_text(s, a, sizeof a));
    }
    if (lo[i] == hi[i]) empty = true;
  }
  if (s->split < 0) {
    for (int i = 0; i < s->ndim; i++) slo[i] = lo[i], shi[i] = hi[i];
    return DLRUN_OK;
  }
  int k = s->split;
  if (s->ndim == 0) { /* one element: the whole storage */
    slo[0] = 0;
    shi[0] = s->sdims[0];
    return DLRUN_OK;
  }
  if (empty) { /* nothing to move: an empty box of the storage */
    for (int i = 0; i < s->sndim; i++) slo[i] = shi[i] = 0;
    return DLRUN_OK;
  }
  char b[256], a[256];
  const char *name = s->info->name;
  for (int j = k + 1; j < s->ndim; j++) {
    if (lo[j] != 0 || hi[j] != s->dims[j])
      return dlrun_fail(DLRUN_ERR_VALUE,
                        "shard %s of %s does not start and end on a byte: packed %s (%u bits "
                        "each) lays out dims %d to %d as one run of bits, so a shard must hold "
                        "dim %d whole; it may split dim %d at multiples of %" PRId64
                        " (each index of dim %d holds %" PRId64 " bits)%s",
                        box_text(s->ndim, lo, hi, b, sizeof b), array_text(s, a, sizeof a),
                        name, (unsigned)s->info->dl_bits, k, s->ndim - 1, j, k, s->step, k,
                        s->row_bits, k > 0 ? " and the dims before it anywhere" : "");
  }
  int64_t ends[2] = {lo[k], hi[k]};
  for (int e = 0; e < 2; e++) {
    bool on_byte = ends[e] % s->step == 0 || ends[e] == s->dims[k];
    if (!on_byte)
      return dlrun_fail(DLRUN_ERR_VALUE,
                        "shard %s of %s does not start and end on a byte: packed %s (%u bits "
                        "each) holds %" PRId64 " bits in each index of dim %d, so a shard may "
                        "split dim %d only at multiples of %" PRId64 " (index %" PRId64
                        " is not one)%s",
                        box_text(s->ndim, lo, hi, b, sizeof b), array_text(s, a, sizeof a),
                        name, (unsigned)s->info->dl_bits, s->row_bits, k, k, s->step, ends[e],
                        k > 0 ? "; the dims before it may split anywhere" : "");
  }
  for (int i = 0; i < k; i++) slo[i] = lo[i], shi[i] = hi[i];
  /* lo[k] lies on a byte; hi[k] too, or it is the end (then round up). */
  slo[k] = lo[k] * s->row_bits / 8;
  shi[k] = hi[k] == s->dims[k] ? s->sdims[k] : hi[k] * s->row_bits / 8;
  return DLRUN_OK;
}
