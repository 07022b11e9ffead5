/* Array creation: every shard is made in place on its own device. Fills run
 * asynchronously on the devices' queues; copies from host data happen
 * during the call (the caller's memory is only borrowed). */
#include <math.h>
#include <string.h>

#include "array_impl.h"
#include "core/alloc.h"
#include "core/status_impl.h"
#include "core/subbyte_impl.h"
#include "device/boxes.h"
#include "device/copy_route.h"
#include "device/fill.h"
#include "storage_view.h"

static const int64_t zero_origin[DLRUN_MAX_NDIM];

/* A packed array (dtype, ndim, dims) under `s` from `data`, its packed
 * bytes (nbytes of them: the run of every element, row-major, the last
 * byte's spare bits zero), borrowed for the call. The layout is checked
 * first: a sharding that splits a byte is the rule's ValueError. */
static dlrun_status packed_from_host(dlrun_sharding *s, dlrun_dtype dtype, int ndim,
                                     const int64_t *dims, const void *data, uint64_t nbytes,
                                     dlrun_array **out) {
  int64_t shard_dims[DLRUN_MAX_NDIM], sdims[DLRUN_MAX_NDIM];
  uint64_t total, shard_nbytes;
  dlrun_status st = dlrun_array_layout(s, dtype, ndim, dims, shard_dims, &total, &shard_nbytes);
  if (st) return st;
  int sndim;
  dlrun_sharding *ss;
  if ((st = dlrun_storage_sharding(s, ndim, dims, dtype, &sndim, sdims, &ss))) return st;
  dlrun_array *v = NULL;
  st = dlrun_array_from_host(ss, DLRUN_UINT8, sndim, sdims, data, nbytes, &v);
  dlrun_sharding_release(ss);
  if (st) return st;
  st = dlrun_array_from_storage_view(v, dtype, ndim, dims, s, out);
  dlrun_array_release(v);
  return st;
}

dlrun_status dlrun_array_from_host(dlrun_sharding *sharding, dlrun_dtype dtype, int ndim,
                                   const int64_t *dims, const void *data, uint64_t nbytes,
                                   dlrun_array **out) {
  DLRUN_NONNULL(out, "dlrun_array_from_host", "out");
  *out = NULL;
  uint64_t want;
  dlrun_status st = dlrun_shape_nbytes(ndim, dims, dtype, &want);
  if (st) return st;
  if (want != nbytes)
    return dlrun_fail(DLRUN_ERR_VALUE, "got %llu bytes of data but the shape needs %llu",
                      (unsigned long long)nbytes, (unsigned long long)want);
  if (nbytes && !data) return dlrun_fail(DLRUN_ERR_VALUE, "data is NULL");
  if (dlrun_dtype_is_packed(dtype))
    return packed_from_host(sharding, dtype, ndim, dims, data, nbytes, out);
  dlrun_array *a;
  if ((st = dlrun_array_alloc(sharding, dtype, ndim, dims, &a))) return st;
  size_t esize = dlrun_dtype_get(dtype)->size;
  int64_t lo[DLRUN_MAX_NDIM], hi[DLRUN_MAX_NDIM], host_strides[DLRUN_MAX_NDIM];
  int64_t shard_strides[DLRUN_MAX_NDIM];
  dlrun_row_major_strides(ndim, dims, host_strides);
  dlrun_row_major_strides(ndim, a->shard_dims, shard_strides);
  for (size_t i = 0; i < a->nshards && a->shard_nbytes; i++) {
    dlrun_buffer *b = a->bufs[i];
    if (!b) continue; /* another process's shard: it fills its own */
    dlrun_sharding_shard_index(sharding, i, ndim, dims, lo, hi);
    dlrun_box_end dst = dlrun_buffer_end(b, lo, shard_strides);
    dlrun_box_end src = dlrun_host_end(data, zero_origin, host_strides);
    if ((st = dlrun_copy_sync(esize, ndim, lo, hi, &dst, &src))) {
      dlrun_array_release(a);
      return st;
    }
  }
  *out = a;
  return DLRUN_OK;
}

/* Packed dtypes: the host packs the elements (bit for bit on every
 * platform) and the bytes are copied as from host data. */
static dlrun_status full_packed(dlrun_sharding *sharding, dlrun_dtype dtype, int ndim,
                                const int64_t *dims, unsigned pattern, dlrun_array **out) {
  uint64_t nbytes;
  int64_t count;
  dlrun_status st = dlrun_shape_nbytes(ndim, dims, dtype, &nbytes);
  if (!st) st = dlrun_shape_size(ndim, dims, &count);
  if (st) return st;
  unsigned char *host = dlrun_calloc(nbytes ? nbytes : 1, 1);
  if (!host) return dlrun_fail_oom_host(nbytes);
  dlrun_packed_fill(host, dlrun_dtype_get(dtype)->dl_bits, count, pattern);
  st = packed_from_host(sharding, dtype, ndim, dims, host, nbytes, out);
  dlrun_free(host);
  return st;
}

dlrun_status dlrun_array_full(dlrun_sharding *sharding, dlrun_dtype dtype, int ndim,
                              const int64_t *dims, const dlrun_scalar *value, dlrun_array **out) {
  DLRUN_NONNULL(out, "dlrun_array_full", "out");
  *out = NULL;
  DLRUN_NONNULL(value, "dlrun_array_full", "value");
  const dlrun_dtype_info *info = dlrun_dtype_get(dtype);
  if (!info) return dlrun_fail(DLRUN_ERR_VALUE, "invalid dtype %d", (int)dtype);
  unsigned char pattern[16];
  dlrun_status st = dlrun_dtype_store(dtype, pattern, value);
  if (!st && info->dl_bits < 8) return full_packed(sharding, dtype, ndim, dims, pattern[0], out);
  dlrun_array *a = NULL;
  if (!st) st = dlrun_array_alloc(sharding, dtype, ndim, dims, &a);
  dlrun_fill f = {.esize = info->size};
  memcpy(f.pattern, pattern, info->size);
  for (size_t i = 0; !st && a->shard_nbytes && i < a->nshards; i++)
    if (a->bufs[i]) st = dlrun_buffer_fill_async(a->bufs[i], &f);
  if (st) {
    dlrun_array_release(a);
    return st;
  }
  *out = a;
  return DLRUN_OK;
}

/* ---- arange ---- */

static double scalar_as_double(const dlrun_scalar *s) {
  switch (s->kind) {
  case DLRUN_SCALAR_BOOL: return s->b ? 1.0 : 0.0;
  case DLRUN_SCALAR_INT: return (double)s->i;
  default: return s->re;
  }
}

static bool scalar_is_int(const dlrun_scalar *s) {
  return s->kind == DLRUN_SCALAR_INT || s->kind == DLRUN_SCALAR_BOOL;
}

static int64_t scalar_as_int(const dlrun_scalar *s) {
  return s->kind == DLRUN_SCALAR_BOOL ? s->b : s->i;
}

/* Fill start/step so that every value can be computed without overflow and
 * stored without error: endpoints checked, the sequence being monotonic. */
static dlrun_status prepare_arange(dlrun_fill *p, const dlrun_scalar *start,
                                   const dlrun_scalar *step, int64_t n) {
  const dlrun_dtype_info *info = dlrun_dtype_get(p->dtype);
  if (start->kind == DLRUN_SCALAR_COMPLEX || step->kind == DLRUN_SCALAR_COMPLEX)
    return dlrun_fail(DLRUN_ERR_VALUE, "arange does not take complex start or step");
  bool int_dtype = info->kind == DLRUN_KIND_INT || info->kind == DLRUN_KIND_UINT ||
                   info->kind == DLRUN_KIND_BOOL;
  p->integral = int_dtype && scalar_is_int(start) && scalar_is_int(step);
  if (p->integral) {
    p->start = (dlrun_scalar){.kind = DLRUN_SCALAR_INT, .i = scalar_as_int(start)};
    p->step = (dlrun_scalar){.kind = DLRUN_SCALAR_INT, .i = scalar_as_int(step)};
    int64_t span, last;
    if (n > 0 && (__builtin_mul_overflow(n - 1, p->step.i, &span) ||
                  __builtin_add_overflow(p->start.i, span, &last)))
      return dlrun_fail(DLRUN_ERR_VALUE, "arange values overflow int64");
  } else {
    double s0 = scalar_as_double(start), d = scalar_as_double(step);
    if (!isfinite(s0) || !isfinite(d))
      return dlrun_fail(DLRUN_ERR_VALUE, "arange start and step must be finite");
    if (int_dtype && (s0 != floor(s0) || d != floor(d)))
      return dlrun_fail(DLRUN_ERR_VALUE,
                        "arange: integer dtype %s needs integral start and step, got "
                        "start=%.17g step=%.17g",
                        info->name, s0, d);
    p->start = (dlrun_scalar){.kind = DLRUN_SCALAR_FLOAT, .re = s0};
    p->step = (dlrun_scalar){.kind = DLRUN_SCALAR_FLOAT, .re = d};
  }
  if (n <= 0) return DLRUN_OK;
  unsigned char scratch[16];
  dlrun_scalar first = dlrun_fill_value(p, 0), last = dlrun_fill_value(p, n - 1);
  dlrun_status st = dlrun_dtype_store(p->dtype, scratch, &first);
  if (!st) st = dlrun_dtype_store(p->dtype, scratch, &last);
  if (st) return dlrun_fail_prefix(st, "arange: ");
  return DLRUN_OK;
}

/* Packed dtypes: the host computes and packs the sequence (every value was
 * checked by prepare_arange), then copies it as host data. */
static dlrun_status arange_packed(dlrun_sharding *sharding, const dlrun_fill *p, int64_t n,
                                  dlrun_array **out) {
  uint64_t nbytes;
  dlrun_status st = dlrun_shape_nbytes(1, &n, p->dtype, &nbytes);
  if (st) return st;
  unsigned char *host = dlrun_calloc(nbytes ? nbytes : 1, 1);
  if (!host) return dlrun_fail_oom_host(nbytes);
  for (int64_t i = 0; i < n && !st; i++) {
    dlrun_scalar v = dlrun_fill_value(p, i);
    st = dlrun_dtype_store_at(p->dtype, host, i, &v);
  }
  if (!st) st = packed_from_host(sharding, p->dtype, 1, &n, host, nbytes, out);
  dlrun_free(host);
  return st;
}

dlrun_status dlrun_array_arange(dlrun_sharding *sharding, dlrun_dtype dtype,
                                const dlrun_scalar *start, const dlrun_scalar *step, int64_t n,
                                dlrun_array **out) {
  DLRUN_NONNULL(out, "dlrun_array_arange", "out");
  *out = NULL;
  DLRUN_NONNULL(start, "dlrun_array_arange", "start");
  DLRUN_NONNULL(step, "dlrun_array_arange", "step");
  const dlrun_dtype_info *info = dlrun_dtype_get(dtype);
  if (!info) return dlrun_fail(DLRUN_ERR_VALUE, "invalid dtype %d", (int)dtype);
  if (n < 0) return dlrun_fail(DLRUN_ERR_VALUE, "arange length %lld is negative", (long long)n);
  dlrun_fill p = {.sequence = true, .dtype = dtype, .esize = info->size};
  dlrun_status st = prepare_arange(&p, start, step, n);
  if (!st && info->dl_bits < 8) return arange_packed(sharding, &p, n, out);
  dlrun_array *a = NULL;
  if (!st) st = dlrun_array_alloc(sharding, dtype, 1, &n, &a);
  int64_t lo, hi;
  for (size_t i = 0; !st && a->shard_nbytes && i < a->nshards; i++) {
    if (!a->bufs[i]) continue; /* another process's shard */
    dlrun_sharding_shard_index(sharding, i, 1, &n, &lo, &hi);
    p.first = lo;
    st = dlrun_buffer_fill_async(a->bufs[i], &p);
  }
  if (st) {
    dlrun_array_release(a);
    return st;
  }
  *out = a;
  return DLRUN_OK;
}
