/* Arrays on one device: metadata, reading, deletion. */
#include <string.h>

#include "array_impl.h"
#include "core/alloc.h"
#include "core/status_impl.h"

dlrun_status dlrun_array_wrap(dlrun_dtype dtype, int ndim, const int64_t *dims,
                              dlrun_buffer *buf, dlrun_array **out) {
  *out = NULL;
  dlrun_array *a = dlrun_calloc(1, sizeof *a);
  if (!a) return dlrun_fail_oom_host(sizeof *a);
  atomic_init(&a->refs, 1);
  a->dtype = dtype;
  a->ndim = ndim;
  if (ndim) memcpy(a->dims, dims, (size_t)ndim * sizeof *dims);
  dlrun_shape_size(ndim, dims, &a->size); /* checked by the caller */
  a->nbytes = buf->nbytes;
  a->device = buf->dev;
  a->buf = buf;
  pthread_mutex_init(&a->mu, NULL);
  *out = a;
  return DLRUN_OK;
}

void dlrun_array_retain(dlrun_array *a) { atomic_fetch_add(&a->refs, 1); }

void dlrun_array_release(dlrun_array *a) {
  if (!a || atomic_fetch_sub(&a->refs, 1) != 1) return;
  dlrun_buffer_release(a->buf);
  pthread_mutex_destroy(&a->mu);
  dlrun_free(a);
}

dlrun_dtype dlrun_array_dtype(const dlrun_array *a) { return a->dtype; }
int dlrun_array_ndim(const dlrun_array *a) { return a->ndim; }
const int64_t *dlrun_array_shape(const dlrun_array *a) { return a->dims; }
int64_t dlrun_array_size(const dlrun_array *a) { return a->size; }
uint64_t dlrun_array_nbytes(const dlrun_array *a) { return a->nbytes; }
dlrun_device *dlrun_array_device(const dlrun_array *a) { return a->device; }

static dlrun_status deleted_error(const dlrun_array *a) {
  char shape[256];
  return dlrun_fail(DLRUN_ERR_RUNTIME, "Array has been deleted with shape=%s.",
                    dlrun_shape_string(a->dtype, a->ndim, a->dims, shape, sizeof shape));
}

dlrun_status dlrun_array_check_live(const dlrun_array *a) {
  return __atomic_load_n(&a->deleted, __ATOMIC_ACQUIRE) ? deleted_error(a) : DLRUN_OK;
}

dlrun_status dlrun_array_acquire_buffer(dlrun_array *a, dlrun_buffer **out) {
  pthread_mutex_lock(&a->mu);
  dlrun_buffer *b = a->buf;
  if (b) dlrun_buffer_retain(b);
  pthread_mutex_unlock(&a->mu);
  if (!b) return deleted_error(a);
  *out = b;
  return DLRUN_OK;
}

dlrun_status dlrun_array_block_until_ready(dlrun_array *a) {
  dlrun_buffer *b;
  dlrun_status st = dlrun_array_acquire_buffer(a, &b);
  if (st) return st;
  dlrun_event_wait(b->ready);
  dlrun_buffer_release(b);
  return DLRUN_OK;
}

dlrun_status dlrun_array_read(dlrun_array *a, uint64_t offset, uint64_t nbytes, void *dst) {
  if (offset > a->nbytes || nbytes > a->nbytes - offset)
    return dlrun_fail(DLRUN_ERR_VALUE,
                      "read of %llu bytes at offset %llu is outside the array's %llu bytes",
                      (unsigned long long)nbytes, (unsigned long long)offset,
                      (unsigned long long)a->nbytes);
  dlrun_buffer *b;
  dlrun_status st = dlrun_array_acquire_buffer(a, &b);
  if (st) return st;
  dlrun_event_wait(b->ready);
  if (nbytes) b->dev->platform->copy(dst, (const char *)b->data + offset, nbytes);
  dlrun_buffer_release(b);
  return DLRUN_OK;
}

void dlrun_array_delete(dlrun_array *a) {
  pthread_mutex_lock(&a->mu);
  dlrun_buffer *b = a->buf;
  a->buf = NULL;
  __atomic_store_n(&a->deleted, true, __ATOMIC_RELEASE);
  pthread_mutex_unlock(&a->mu);
  /* Let the work that writes the buffer finish, so that its memory returns
   * to the pool now rather than whenever that work runs. */
  if (b) dlrun_event_wait(b->ready);
  dlrun_buffer_release(b);
}

bool dlrun_array_is_deleted(const dlrun_array *a) {
  return __atomic_load_n(&a->deleted, __ATOMIC_ACQUIRE);
}
