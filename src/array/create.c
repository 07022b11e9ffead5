/* Array creation on one device. Fills run asynchronously on the device's
 * stream; copies from host data are done during the call (the caller's
 * memory is only borrowed). */
#include <math.h>
#include <string.h>

#include "array_impl.h"
#include "core/alloc.h"
#include "core/status_impl.h"

/* Check the shape and allocate an array with an uninitialised buffer. */
static dlrun_status new_array(dlrun_device *dev, dlrun_dtype dtype, int ndim,
                              const int64_t *dims, dlrun_array **out) {
  *out = NULL;
  if (!dev) return dlrun_fail(DLRUN_ERR_VALUE, "device is NULL");
  uint64_t nbytes;
  dlrun_status st = dlrun_shape_nbytes(ndim, dims, dtype, &nbytes);
  if (st) return st;
  dlrun_buffer *buf;
  if ((st = dlrun_buffer_create(dev, DLRUN_MEM_DEVICE, nbytes, &buf))) return st;
  if ((st = dlrun_array_wrap(dtype, ndim, dims, buf, out))) dlrun_buffer_release(buf);
  return st;
}

dlrun_status dlrun_array_from_host(dlrun_device *dev, dlrun_dtype dtype, int ndim,
                                   const int64_t *dims, const void *data, uint64_t nbytes,
                                   dlrun_array **out) {
  *out = NULL;
  uint64_t want;
  dlrun_status st = dlrun_shape_nbytes(ndim, dims, dtype, &want);
  if (st) return st;
  if (want != nbytes)
    return dlrun_fail(DLRUN_ERR_VALUE, "got %llu bytes of data but the shape needs %llu",
                      (unsigned long long)nbytes, (unsigned long long)want);
  if (nbytes && !data) return dlrun_fail(DLRUN_ERR_VALUE, "data is NULL");
  if ((st = new_array(dev, dtype, ndim, dims, out))) return st;
  if (nbytes) dev->platform->copy((*out)->buf->data, data, nbytes);
  return DLRUN_OK;
}

/* ---- fill with one repeated element ---- */

typedef struct fill_task {
  dlrun_buffer *buf;
  size_t esize;
  unsigned char pattern[16];
} fill_task;

/* Write the pattern once, then double the filled prefix with memcpy. */
static void run_fill(void *ctx) {
  fill_task *t = ctx;
  unsigned char *p = t->buf->data;
  uint64_t n = t->buf->nbytes;
  bool zero = true;
  for (size_t i = 0; i < t->esize; i++) zero &= t->pattern[i] == 0;
  if (zero) {
    memset(p, 0, n);
  } else {
    memcpy(p, t->pattern, t->esize);
    uint64_t done = t->esize;
    while (done < n) {
      uint64_t chunk = done < n - done ? done : n - done;
      memcpy(p + done, p, chunk);
      done += chunk;
    }
  }
  dlrun_buffer_release(t->buf);
  dlrun_free(t);
}

/* Queue a task on the buffer's device; the task owns ctx and a buffer
 * reference. On failure ctx is freed and the reference dropped. */
static dlrun_status queue_on_buffer(dlrun_buffer *buf, dlrun_task_fn fn, void *ctx) {
  dlrun_buffer_retain(buf);
  dlrun_status st = dlrun_stream_enqueue(&buf->dev->stream, fn, ctx, &buf->ready);
  if (st) {
    dlrun_buffer_release(buf);
    dlrun_free(ctx);
  }
  return st;
}

dlrun_status dlrun_array_full(dlrun_device *dev, dlrun_dtype dtype, int ndim,
                              const int64_t *dims, const dlrun_scalar *value, dlrun_array **out) {
  *out = NULL;
  const dlrun_dtype_info *info = dlrun_dtype_get(dtype);
  if (!info) return dlrun_fail(DLRUN_ERR_VALUE, "invalid dtype %d", (int)dtype);
  fill_task *t = dlrun_calloc(1, sizeof *t);
  if (!t) return dlrun_fail_oom_host(sizeof *t);
  t->esize = info->size;
  dlrun_status st = dlrun_dtype_store(dtype, t->pattern, value);
  if (!st) st = new_array(dev, dtype, ndim, dims, out);
  if (st) {
    dlrun_free(t);
    return st;
  }
  if ((*out)->nbytes == 0) {
    dlrun_free(t);
    return DLRUN_OK;
  }
  t->buf = (*out)->buf;
  if ((st = queue_on_buffer(t->buf, run_fill, t))) {
    dlrun_array_release(*out);
    *out = NULL;
  }
  return st;
}

/* ---- arange ---- */

typedef struct arange_task {
  dlrun_buffer *buf;
  dlrun_dtype dtype;
  size_t esize;
  bool integral; /* exact int64 arithmetic */
  dlrun_scalar start, step;
  int64_t n;
} arange_task;

static dlrun_scalar arange_value(const arange_task *t, int64_t i) {
  if (t->integral) return (dlrun_scalar){.kind = DLRUN_SCALAR_INT, .i = t->start.i + i * t->step.i};
  return (dlrun_scalar){.kind = DLRUN_SCALAR_FLOAT, .re = t->start.re + (double)i * t->step.re};
}

static void run_arange(void *ctx) {
  arange_task *t = ctx;
  unsigned char *p = t->buf->data;
  for (int64_t i = 0; i < t->n; i++) {
    dlrun_scalar v = arange_value(t, i);
    dlrun_dtype_store(t->dtype, p + (size_t)i * t->esize, &v); /* validated up front */
  }
  dlrun_buffer_release(t->buf);
  dlrun_free(t);
}

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

/* Fill start/step so that every value can be computed without overflow and
 * stored without error: endpoints checked, the sequence being monotonic. */
static dlrun_status prepare_arange(arange_task *t, const dlrun_scalar *start,
                                   const dlrun_scalar *step) {
  const dlrun_dtype_info *info = dlrun_dtype_get(t->dtype);
  if (start->kind == DLRUN_SCALAR_COMPLEX || step->kind == DLRUN_SCALAR_COMPLEX)
    return dlrun_fail(DLRUN_ERR_VALUE, "arange does not take complex start or step");
  bool int_dtype = info->kind == DLRUN_KIND_INT || info->kind == DLRUN_KIND_UINT ||
                   info->kind == DLRUN_KIND_BOOL;
  t->integral = int_dtype && scalar_is_int(start) && scalar_is_int(step);
  if (t->integral) {
    t->start = (dlrun_scalar){.kind = DLRUN_SCALAR_INT, .i = start->kind == DLRUN_SCALAR_BOOL ? start->b : start->i};
    t->step = (dlrun_scalar){.kind = DLRUN_SCALAR_INT, .i = step->kind == DLRUN_SCALAR_BOOL ? step->b : step->i};
    int64_t span, last;
    if (t->n > 0 && (__builtin_mul_overflow(t->n - 1, t->step.i, &span) ||
                     __builtin_add_overflow(t->start.i, span, &last)))
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
    t->start = (dlrun_scalar){.kind = DLRUN_SCALAR_FLOAT, .re = s0};
    t->step = (dlrun_scalar){.kind = DLRUN_SCALAR_FLOAT, .re = d};
  }
  if (t->n <= 0) return DLRUN_OK;
  unsigned char scratch[16];
  dlrun_scalar first = arange_value(t, 0), last = arange_value(t, t->n - 1);
  dlrun_status st = dlrun_dtype_store(t->dtype, scratch, &first);
  if (!st) st = dlrun_dtype_store(t->dtype, scratch, &last);
  if (st) return dlrun_fail_prefix(st, "arange: ");
  return DLRUN_OK;
}

dlrun_status dlrun_array_arange(dlrun_device *dev, dlrun_dtype dtype, const dlrun_scalar *start,
                                const dlrun_scalar *step, int64_t n, dlrun_array **out) {
  *out = NULL;
  const dlrun_dtype_info *info = dlrun_dtype_get(dtype);
  if (!info) return dlrun_fail(DLRUN_ERR_VALUE, "invalid dtype %d", (int)dtype);
  if (n < 0) return dlrun_fail(DLRUN_ERR_VALUE, "arange length %lld is negative", (long long)n);
  arange_task *t = dlrun_calloc(1, sizeof *t);
  if (!t) return dlrun_fail_oom_host(sizeof *t);
  *t = (arange_task){.dtype = dtype, .esize = info->size, .n = n};
  dlrun_status st = prepare_arange(t, start, step);
  if (!st) st = new_array(dev, dtype, 1, &n, out);
  if (st || n == 0) {
    dlrun_free(t);
    return st;
  }
  t->buf = (*out)->buf;
  if ((st = queue_on_buffer(t->buf, run_arange, t))) {
    dlrun_array_release(*out);
    *out = NULL;
  }
  return st;
}
