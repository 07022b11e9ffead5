/* Arrays: metadata, shards, reading, deletion. */
#include <string.h>

#include "array_impl.h"
#include "core/alloc.h"
#include "core/storage_impl.h"
#include "core/status_impl.h"

/* A packed dtype's shards must each be whole bytes of the array's storage
 * (core/storage_impl.h): otherwise the ValueError names the sharding, the
 * first shard that splits a byte and the rule. */
static dlrun_status check_packed_shards(const dlrun_sharding *s, dlrun_dtype dtype, int ndim,
                                        const int64_t *dims) {
  const dlrun_dtype_info *info = dlrun_dtype_get(dtype);
  if (info->dl_bits >= 8) return DLRUN_OK;
  dlrun_storage g;
  dlrun_status st = dlrun_storage_of(info, ndim, dims, &g);
  if (st) return st;
  int64_t lo[DLRUN_MAX_NDIM], hi[DLRUN_MAX_NDIM], slo[DLRUN_MAX_NDIM], shi[DLRUN_MAX_NDIM];
  for (size_t i = 0; i < dlrun_sharding_device_count(s); i++) {
    dlrun_sharding_shard_index(s, i, ndim, dims, lo, hi);
    if ((st = dlrun_storage_box(&g, lo, hi, slo, shi))) {
      char desc[256];
      dlrun_sharding_describe(s, desc, sizeof desc);
      return dlrun_fail_prefix(st, "%s: ", desc);
    }
  }
  return DLRUN_OK;
}

dlrun_status dlrun_array_layout(const dlrun_sharding *s, dlrun_dtype dtype, int ndim,
                                const int64_t *dims, int64_t *shard_dims, uint64_t *nbytes,
                                uint64_t *shard_nbytes) {
  dlrun_status st = dlrun_shape_nbytes(ndim, dims, dtype, nbytes);
  if (st) return st;
  if ((st = dlrun_sharding_check_shape(s, ndim, dims))) return st;
  if (dlrun_sharding_is_fully_replicated(s)) { /* every shard is the whole array */
    if (ndim) memcpy(shard_dims, dims, (size_t)ndim * sizeof *dims);
    *shard_nbytes = *nbytes;
    return DLRUN_OK;
  }
  if ((st = check_packed_shards(s, dtype, ndim, dims))) return st;
  dlrun_sharding_shard_shape(s, ndim, dims, shard_dims);
  return dlrun_shape_nbytes(ndim, shard_dims, dtype, shard_nbytes);
}

void dlrun_buffers_release(dlrun_buffer **bufs, size_t n) {
  if (!bufs) return;
  for (size_t i = 0; i < n; i++) dlrun_buffer_release(bufs[i]);
  dlrun_free(bufs);
}

static void destroy_array(dlrun_ref *ref);

/* Tell the device layer (memory snapshots) that these buffers are held by
 * an array of this shape and sharding, or no longer. */
static void untag_buffers(dlrun_buffer **bufs, size_t n) {
  for (size_t i = 0; bufs && i < n; i++)
    if (bufs[i]) dlrun_buffer_untag_array(bufs[i]);
}

static dlrun_status tag_buffers(dlrun_buffer **bufs, size_t n, dlrun_dtype dtype, int ndim,
                                const int64_t *dims, const dlrun_sharding *sharding) {
  /* The record (a formatted description, an allocation) only when a buffer
   * would keep it: not for an import's outside memory, nor for buffers an
   * array already tagged. */
  bool wanted = false;
  for (size_t i = 0; i < n && !wanted; i++) wanted = bufs[i] && dlrun_buffer_wants_owner(bufs[i]);
  dlrun_buffer_owner *o = NULL;
  if (wanted) {
    char desc[256];
    dlrun_sharding_describe(sharding, desc, sizeof desc);
    dlrun_status st = dlrun_buffer_owner_create(dlrun_dtype_get(dtype)->name, ndim, dims, desc, &o);
    if (st) return st;
  }
  for (size_t i = 0; i < n; i++)
    if (bufs[i]) dlrun_buffer_tag_array(bufs[i], o);
  dlrun_buffer_owner_release(o);
  return DLRUN_OK;
}

dlrun_status dlrun_array_wrap(dlrun_dtype dtype, int ndim, const int64_t *dims,
                              dlrun_sharding *sharding, dlrun_buffer **bufs, dlrun_array **out) {
  *out = NULL;
  size_t n = dlrun_sharding_device_count(sharding);
  dlrun_array *a = dlrun_calloc(1, sizeof *a);
  dlrun_status st = a ? tag_buffers(bufs, n, dtype, ndim, dims, sharding)
                      : dlrun_fail_oom_host(sizeof *a);
  if (st) {
    dlrun_free(a);
    dlrun_buffers_release(bufs, n);
    return st;
  }
  dlrun_ref_init(&a->ref, destroy_array);
  a->dtype = dtype;
  a->ndim = ndim;
  if (ndim) memcpy(a->dims, dims, (size_t)ndim * sizeof *dims);
  /* The caller checked the layout. */
  dlrun_array_layout(sharding, dtype, ndim, dims, a->shard_dims, &a->nbytes, &a->shard_nbytes);
  dlrun_shape_size(ndim, dims, &a->size); /* elements, not bytes: packed dtypes differ */
  a->sharding = sharding;
  dlrun_sharding_retain(sharding);
  a->nshards = n;
  a->bufs = bufs;
  pthread_mutex_init(&a->mu, NULL);
  *out = a;
  return DLRUN_OK;
}

dlrun_status dlrun_array_check_addressable(const dlrun_array *a) {
  if (dlrun_sharding_is_fully_addressable(a->sharding)) return DLRUN_OK;
  return dlrun_fail(DLRUN_ERR_RUNTIME,
                    "Fetching value for an Array that spans non-addressable (non process local) "
                    "devices is not possible. You can use `dl.process_allgather` to print the "
                    "global array or use `.addressable_shards` of the Array to inspect the "
                    "addressable (process local) shards.");
}

dlrun_status dlrun_array_alloc(dlrun_sharding *sharding, dlrun_dtype dtype, int ndim,
                               const int64_t *dims, dlrun_array **out) {
  *out = NULL;
  if (!sharding) return dlrun_fail(DLRUN_ERR_VALUE, "sharding is NULL");
  if (!dlrun_dtype_get(dtype)) return dlrun_fail(DLRUN_ERR_VALUE, "invalid dtype %d", (int)dtype);
  int64_t shard_dims[DLRUN_MAX_NDIM];
  uint64_t nbytes, shard_nbytes;
  dlrun_status st = dlrun_array_layout(sharding, dtype, ndim, dims, shard_dims, &nbytes,
                                       &shard_nbytes);
  if (st) return st;
  size_t n = dlrun_sharding_device_count(sharding);
  dlrun_buffer **bufs = dlrun_calloc(n, sizeof *bufs);
  if (!bufs) return dlrun_fail_oom_host(n * sizeof *bufs);
  for (size_t i = 0; i < n; i++) {
    if (!dlrun_sharding_is_addressable(sharding, i)) continue; /* another process's shard */
    st = dlrun_buffer_create(dlrun_sharding_device(sharding, i),
                             dlrun_sharding_memory_kind(sharding), shard_nbytes, &bufs[i]);
    if (st) {
      dlrun_buffers_release(bufs, i);
      return st;
    }
  }
  return dlrun_array_wrap(dtype, ndim, dims, sharding, bufs, out);
}

void dlrun_array_retain(dlrun_array *a) {
  if (a) dlrun_ref_retain(&a->ref);
}

void dlrun_array_release(dlrun_array *a) {
  if (a) dlrun_ref_release(&a->ref);
}

static void destroy_array(dlrun_ref *ref) {
  dlrun_array *a = (dlrun_array *)ref;
  untag_buffers(a->bufs, a->nshards);
  dlrun_buffers_release(a->bufs, a->nshards);
  dlrun_sharding_release(a->sharding);
  pthread_mutex_destroy(&a->mu);
  dlrun_free(a);
}

/* Getters given NULL answer NULL, 0 or DLRUN_DTYPE_COUNT (no dtype). */
dlrun_dtype dlrun_array_dtype(const dlrun_array *a) { return a ? a->dtype : DLRUN_DTYPE_COUNT; }
int dlrun_array_ndim(const dlrun_array *a) { return a ? a->ndim : 0; }
const int64_t *dlrun_array_shape(const dlrun_array *a) { return a ? a->dims : NULL; }
int64_t dlrun_array_size(const dlrun_array *a) { return a ? a->size : 0; }
uint64_t dlrun_array_nbytes(const dlrun_array *a) { return a ? a->nbytes : 0; }
dlrun_sharding *dlrun_array_sharding(const dlrun_array *a) { return a ? a->sharding : NULL; }
dlrun_device *dlrun_array_device(const dlrun_array *a) {
  return a ? dlrun_sharding_device(a->sharding, 0) : NULL;
}
size_t dlrun_array_shard_count(const dlrun_array *a) { return a ? a->nshards : 0; }

static dlrun_status deleted_error(const dlrun_array *a) {
  char shape[256];
  return dlrun_fail(DLRUN_ERR_RUNTIME, "Array has been deleted with shape=%s.",
                    dlrun_shape_string(a->dtype, a->ndim, a->dims, shape, sizeof shape));
}

dlrun_status dlrun_array_check_live(const dlrun_array *a) {
  DLRUN_NONNULL(a, "dlrun_array_check_live", "array");
  return __atomic_load_n(&a->deleted, __ATOMIC_ACQUIRE) ? deleted_error(a) : DLRUN_OK;
}

dlrun_status dlrun_array_acquire_buffers(dlrun_array *a, dlrun_buffer **out) {
  pthread_mutex_lock(&a->mu);
  bool live = a->bufs != NULL;
  if (live)
    for (size_t i = 0; i < a->nshards; i++) {
      out[i] = a->bufs[i];
      if (out[i]) dlrun_buffer_retain(out[i]);
    }
  pthread_mutex_unlock(&a->mu);
  return live ? DLRUN_OK : deleted_error(a);
}

/* The ready events are copied under the lock rather than the buffers
 * retained: waiting needs only the events (whose queues live as long as
 * the runtime `a` holds), and a reference per shard would contend with the
 * workers releasing theirs. */
dlrun_status dlrun_array_block_until_ready(dlrun_array *a) {
  DLRUN_NONNULL(a, "dlrun_array_block_until_ready", "array");
  dlrun_event *events = dlrun_malloc(a->nshards * sizeof *events);
  if (!events) return dlrun_fail_oom_host(a->nshards * sizeof *events);
  pthread_mutex_lock(&a->mu);
  bool live = a->bufs != NULL;
  for (size_t i = 0; live && i < a->nshards; i++)
    events[i] = a->bufs[i] ? a->bufs[i]->ready : (dlrun_event){0};
  pthread_mutex_unlock(&a->mu);
  dlrun_status st = live ? dlrun_events_wait(events, a->nshards) : deleted_error(a);
  dlrun_free(events);
  return st;
}

void dlrun_array_shard_index(const dlrun_array *a, size_t i, dlrun_device **device, int64_t *lo,
                             int64_t *hi, int64_t *replica_id) {
  if (!a || i >= a->nshards) return;
  if (device) *device = dlrun_sharding_device(a->sharding, i);
  if (lo && hi) dlrun_sharding_shard_index(a->sharding, i, a->ndim, a->dims, lo, hi);
  if (replica_id) *replica_id = dlrun_sharding_replica_id(a->sharding, i, a->ndim, a->dims);
}

dlrun_status dlrun_array_shard_data(dlrun_array *a, size_t i, dlrun_array **out) {
  DLRUN_NONNULL(out, "dlrun_array_shard_data", "out");
  *out = NULL;
  DLRUN_NONNULL(a, "dlrun_array_shard_data", "array");
  if (i >= a->nshards)
    return dlrun_fail(DLRUN_ERR_VALUE, "shard index %zu is out of range (the array has %zu)", i,
                      a->nshards);
  dlrun_sharding *single;
  dlrun_status st = dlrun_device_sharding(dlrun_sharding_device(a->sharding, i),
                                         dlrun_sharding_memory_kind(a->sharding), &single);
  if (st) return st;
  dlrun_buffer **bufs = dlrun_malloc(sizeof *bufs);
  if (!bufs) st = dlrun_fail_oom_host(sizeof *bufs);
  if (!st) {
    pthread_mutex_lock(&a->mu);
    bool live = a->bufs != NULL; /* decided under the lock: delete may race */
    bool here = live && a->bufs[i];
    if (here) {
      bufs[0] = a->bufs[i];
      dlrun_buffer_retain(bufs[0]);
    }
    pthread_mutex_unlock(&a->mu);
    if (!here) {
      dlrun_free(bufs);
      st = live ? dlrun_not_local(dlrun_sharding_device(a->sharding, i)) : deleted_error(a);
    }
  }
  if (!st) st = dlrun_array_wrap(a->dtype, a->ndim, a->shard_dims, single, bufs, out);
  dlrun_sharding_release(single);
  return st;
}

void dlrun_array_delete(dlrun_array *a) {
  if (!a) return;
  pthread_mutex_lock(&a->mu);
  dlrun_buffer **bufs = a->bufs;
  a->bufs = NULL;
  __atomic_store_n(&a->deleted, true, __ATOMIC_RELEASE);
  pthread_mutex_unlock(&a->mu);
  if (!bufs) return;
  /* Let the work that writes the buffers finish, so that their memory
   * returns to the pools now rather than whenever that work runs. */
  for (size_t i = a->nshards; i-- > 0;) /* as events_wait */
    if (bufs[i]) dlrun_event_wait(bufs[i]->ready);
  untag_buffers(bufs, a->nshards);
  dlrun_buffers_release(bufs, a->nshards);
}

bool dlrun_array_is_deleted(const dlrun_array *a) {
  if (!a) return false;
  return __atomic_load_n(&a->deleted, __ATOMIC_ACQUIRE);
}
