/* Collectives over the processes of a job (dlrun/multihost.h): each agrees
 * on the call first, then moves host bytes (process-local data) or runs a
 * device_put between processes (global arrays). */
#include <stdio.h>
#include <string.h>

#include "array_impl.h"
#include "core/alloc.h"
#include "core/dtype_impl.h"
#include "core/status_impl.h"
#include "core/storage_impl.h"
#include "device/buffer_transport.h"
#include "distributed/distributed_impl.h"
#include "dlrun/multihost.h"

static dlrun_runtime *runtime_of(const dlrun_array *x) {
  return dlrun_device_runtime(dlrun_sharding_device(x->sharding, 0));
}

/* A new host array on this process's host device, of x's dtype and shape
 * ndim, dims, to be written through *base (NULL when empty): its one
 * contiguous block. This process's own bytes of x are read in at slot
 * `slot` (of x's size). Made before the call is agreed on, so that its
 * failure reaches every process there, and the exchange after cannot
 * fail on one process alone. */
static dlrun_status host_target(dlrun_array *x, int ndim, const int64_t *dims, size_t slot,
                                dlrun_array **out, unsigned char **base) {
  dlrun_sharding *s;
  *out = NULL;
  *base = NULL;
  dlrun_status st = dlrun_device_sharding(dlrun_host_device(runtime_of(x)), DLRUN_MEM_DEVICE, &s);
  if (st) return st;
  dlrun_array *a;
  st = dlrun_array_alloc(s, x->dtype, ndim, dims, &a);
  dlrun_sharding_release(s);
  if (st) return st;
  if (a->nbytes) {
    int64_t zero[DLRUN_MAX_NDIM] = {0};
    dlrun_transport_message message;
    /* A packed array's memory is that of its uint8 storage. */
    dlrun_storage g;
    st = dlrun_storage_of(dlrun_dtype_get(x->dtype), ndim, dims, &g);
    if (!st)
      st = dlrun_buffer_message(a->bufs[0], g.esize, g.sndim, g.sdims, zero, zero, g.sdims, 0,
                                &message);
    if (!st && message.ndim != 1)
      st = dlrun_fail(DLRUN_ERR_RUNTIME, "a host array's memory is not one block");
    if (!st) *base = message.base;
    if (!st) st = dlrun_array_read(x, 0, x->nbytes, *base + slot * (size_t)x->nbytes);
  }
  if (st) {
    dlrun_array_release(a);
    *base = NULL;
    return st;
  }
  *out = a;
  return DLRUN_OK;
}

/* This process's checks of a call on x: live, and fully addressable when
 * `local` is needed. */
static dlrun_status check_array(const char *call, dlrun_array *x, bool local) {
  if (!x) return dlrun_fail(DLRUN_ERR_VALUE, "%s needs an array", call);
  dlrun_status st = dlrun_array_check_live(x);
  if (!st && local && !dlrun_sharding_is_fully_addressable(x->sharding))
    st = dlrun_fail(DLRUN_ERR_VALUE,
                    "%s needs an array of this process's own devices (fully addressable); "
                    "this one spans other processes' devices",
                    call);
  return st;
}

/* Agree on call(x) with one more field; a NULL x agrees as "no array". */
static dlrun_status agree(const char *call, dlrun_status mine, dlrun_array *x,
                          const char *what, const char *value) {
  char array[320] = "no array";
  if (x) dlrun_shape_string(x->dtype, x->ndim, x->dims, array, sizeof array);
  dlrun_distributed_field fields[] = {{"the array", array}, {what, value}};
  return dlrun_distributed_agree_call(call, mine, value ? 2 : 1, fields);
}

/* Every process's bytes of x into `all`, which holds this process's at its
 * index already; a RuntimeError naming the call on a transport failure. */
static dlrun_status gather_into(dlrun_array *x, const char *call, unsigned char *all) {
  if (!dlrun_distributed_job_transport()) return DLRUN_OK;
  size_t nbytes = (size_t)x->nbytes;
  char err[320] = "";
  if (dlrun_distributed_allgather(all + (size_t)dlrun_process_index() * nbytes, nbytes, all, err,
                                  sizeof err) != DLRUN_TRANSPORT_OK)
    return dlrun_fail(DLRUN_ERR_RUNTIME, "%s: %s", call, err);
  return DLRUN_OK;
}

/* A sharding replicated over every process's host device: where
 * process_allgather gathers a global array; made before the call is agreed
 * on. */
static dlrun_status replicated_on_hosts(dlrun_runtime *rt, dlrun_sharding **out) {
  int n = dlrun_process_count();
  *out = NULL;
  dlrun_device **hosts = dlrun_malloc((size_t)n * sizeof *hosts);
  if (!hosts) return dlrun_fail_oom_host((size_t)n * sizeof *hosts);
  for (int r = 0; r < n; r++) hosts[r] = dlrun_process_host_device(rt, r);
  const char *axis = "processes";
  int64_t size = n;
  dlrun_mesh *mesh = NULL;
  dlrun_partition_spec replicated = {0};
  dlrun_status st = dlrun_mesh_create(hosts, (size_t)n, 1, &axis, &size, &mesh);
  dlrun_free(hosts);
  if (!st) st = dlrun_named_sharding_create(mesh, &replicated, DLRUN_MEM_DEVICE, out);
  dlrun_mesh_release(mesh);
  return st;
}

/* The global value of x, replicated on every process's host device (s);
 * this process's copy. The put is a collective of its own; taking this
 * process's copy of its result may still fail here alone, so the outcome
 * is shared once more. */
static dlrun_status gather_global(dlrun_array *x, dlrun_sharding *s, dlrun_array **out) {
  dlrun_array *all = NULL;
  dlrun_status st = dlrun_device_put(x, s, NULL, &all);
  if (!st) st = dlrun_array_shard_data(all, (size_t)dlrun_process_index(), out);
  dlrun_array_release(all);
  if ((st = dlrun_distributed_agree_call("process_allgather (gathered)", st, 0, NULL))) {
    dlrun_array_release(*out);
    *out = NULL;
  }
  return st;
}

dlrun_status dlrun_process_allgather(dlrun_array *x, bool tiled, dlrun_array **out) {
  DLRUN_NONNULL(out, "dlrun_process_allgather", "out");
  *out = NULL;
  dlrun_status st = check_array("process_allgather", x, false);
  bool global = !st && !dlrun_sharding_is_fully_addressable(x->sharding);
  bool stacked = !global && (!tiled || x->ndim == 0); /* a scalar is always stacked */
  if (!st && global && !tiled)
    st = dlrun_fail(DLRUN_ERR_VALUE,
                    "Gathering global non-fully-addressable arrays only supports tiled=True");
  const dlrun_dtype_info *info = st ? NULL : dlrun_dtype_get(x->dtype);
  char shape[128];
  if (!st && !global && info->dl_bits < 8 && x->size * info->dl_bits % 8)
    st = dlrun_fail(DLRUN_ERR_VALUE,
                    "process_allgather: %s takes %lld bits, not whole bytes, so the copies "
                    "gathered would not each start on a byte of the packed result",
                    dlrun_shape_string(x->dtype, x->ndim, x->dims, shape, sizeof shape),
                    (long long)(x->size * info->dl_bits));
  if (!st && stacked && x->ndim == DLRUN_MAX_NDIM)
    st = dlrun_fail(DLRUN_ERR_VALUE,
                    "process_allgather: stacking a %d-d array needs %d dimensions (at most %d)",
                    x->ndim, x->ndim + 1, DLRUN_MAX_NDIM);
  const char *mode = global ? "a global array, tiled" : stacked ? "stacked" : "tiled";
  int64_t n = dlrun_process_count(), dims[DLRUN_MAX_NDIM];
  int ndim = st ? 0 : x->ndim;
  dlrun_array *res = NULL;
  unsigned char *all = NULL;
  dlrun_sharding *hosts = NULL;
  if (!st && global) st = replicated_on_hosts(runtime_of(x), &hosts);
  if (!st && !global) {
    if (stacked) {
      dims[0] = n;
      memcpy(dims + 1, x->dims, (size_t)ndim * sizeof *dims);
      ndim++;
    } else {
      memcpy(dims, x->dims, (size_t)ndim * sizeof *dims);
      dims[0] *= n;
    }
    st = host_target(x, ndim, dims, (size_t)dlrun_process_index(), &res, &all);
  }
  if (!(st = agree("process_allgather", st, st ? NULL : x, "the way to gather", mode)) &&
      global)
    st = gather_global(x, hosts, out);
  dlrun_sharding_release(hosts);
  if (st || global) {
    dlrun_array_release(res);
    return st;
  }
  if ((st = gather_into(x, "process_allgather", all))) {
    dlrun_array_release(res);
    return st;
  }
  *out = res;
  return DLRUN_OK;
}

/* The one process that passed is_source, from every process's flag (into
 * flags, room for one per process, made before the call was agreed on); or
 * a RuntimeError on every process. */
static dlrun_status find_source(int is_source, unsigned char *flags, int *root) {
  *root = 0;
  if (is_source < 0) return DLRUN_OK;
  int n = dlrun_process_count(), me = dlrun_process_index();
  flags[me] = (unsigned char)is_source;
  char err[320] = "";
  if (dlrun_distributed_job_transport() &&
      dlrun_distributed_allgather(&flags[me], 1, flags, err, sizeof err) != DLRUN_TRANSPORT_OK)
    return dlrun_fail(DLRUN_ERR_RUNTIME, "broadcast_one_to_all: %s", err);
  char who[256] = "";
  size_t len = 0;
  int count = 0, total = 0;
  for (int r = 0; r < n; r++) total += flags[r] != 0;
  for (int r = 0; r < n; r++) {
    if (!flags[r]) continue;
    if (count++ == 0) *root = r;
    const char *sep = count == 1 ? "" : count == total ? " and " : ", ";
    if (len < sizeof who) len += (size_t)snprintf(who + len, sizeof who - len, "%s%d", sep, r);
  }
  if (count == 1) return DLRUN_OK;
  if (count == 0)
    return dlrun_fail(DLRUN_ERR_RUNTIME,
                      "broadcast_one_to_all: no process passed is_source=true; exactly one must");
  return dlrun_fail(DLRUN_ERR_RUNTIME,
                    "broadcast_one_to_all: processes %s passed is_source=true; exactly one must",
                    who);
}

dlrun_status dlrun_broadcast_one_to_all(dlrun_array *x, int is_source, dlrun_array **out) {
  DLRUN_NONNULL(out, "dlrun_broadcast_one_to_all", "out");
  *out = NULL;
  dlrun_status st = check_array("broadcast_one_to_all", x, true);
  if (!st && (is_source < -1 || is_source > 1))
    st = dlrun_fail(DLRUN_ERR_VALUE, "broadcast_one_to_all: is_source must be 1, 0 or -1 (the "
                    "default: process 0), got %d", is_source);
  const char *how = is_source < 0 ? "process 0" : "is_source";
  size_t n = (size_t)dlrun_process_count();
  unsigned char *flags = st ? NULL : dlrun_malloc(n);
  if (!st && !flags) st = dlrun_fail_oom_host(n);
  dlrun_array *res = NULL;
  unsigned char *buf = NULL; /* this process's bytes; the source's overwrite them */
  if (!st) st = host_target(x, x->ndim, x->dims, 0, &res, &buf);
  int root;
  if (!(st = agree("broadcast_one_to_all", st, st ? NULL : x, "the source", how)))
    st = find_source(is_source, flags, &root);
  char err[320] = "";
  if (!st && dlrun_distributed_job_transport() &&
      dlrun_distributed_bcast(buf, (size_t)x->nbytes, root, err, sizeof err) != DLRUN_TRANSPORT_OK)
    st = dlrun_fail(DLRUN_ERR_RUNTIME, "broadcast_one_to_all: %s", err);
  dlrun_free(flags);
  if (st) {
    dlrun_array_release(res);
    return st;
  }
  *out = res;
  return DLRUN_OK;
}

/* Whether the element of `dtype` at p is unequal to itself: a NaN. */
static bool is_nan(dlrun_dtype dtype, const unsigned char *p) {
  return dlrun_dtype_first_unequal(dtype, p, p, 1) == 0;
}

dlrun_status dlrun_assert_equal(dlrun_array *x, const char *message) {
  dlrun_status st = check_array("assert_equal", x, true);
  int n = dlrun_process_count();
  size_t nbytes = st ? 0 : (size_t)x->nbytes, esize = st ? 1 : dlrun_dtype_get(x->dtype)->size;
  unsigned char *all = st ? NULL : dlrun_malloc(nbytes * (size_t)n);
  if (!st && !all) st = dlrun_fail_oom_host(nbytes * (size_t)n);
  if (!st) st = dlrun_array_read(x, 0, nbytes, all + (size_t)dlrun_process_index() * nbytes);
  st = agree("assert_equal", st, st ? NULL : x, NULL, NULL);
  if (!st) st = gather_into(x, "assert_equal", all);
  if (st) {
    dlrun_free(all);
    return st;
  }
  /* Every process compares every process's values with process 0's, as
   * np.equal does, so all reach one outcome. Process 0 is compared with
   * itself too: a NaN equals nothing. */
  bool packed = dlrun_dtype_get(x->dtype)->dl_bits < 8; /* elements, not bytes */
  int64_t count = packed ? x->size : (int64_t)(nbytes / esize), at = -1;
  int total = 0, first = -1;
  for (int r = 0; r < n; r++) {
    int64_t i = dlrun_dtype_first_unequal(x->dtype, all, all + (size_t)r * nbytes, count);
    if (i >= 0 && !total++) first = r, at = i;
  }
  if (!total) {
    dlrun_free(all);
    return DLRUN_OK;
  }
  char who[256] = "";
  size_t len = 0;
  for (int r = first, listed = 0; listed < total; r++) {
    if (r > first && dlrun_dtype_first_unequal(x->dtype, all, all + (size_t)r * nbytes, count) < 0)
      continue;
    const char *sep = !listed++ ? "" : listed == total ? " and " : ", ";
    if (len < sizeof who) len += (size_t)snprintf(who + len, sizeof who - len, "%s%d", sep, r);
  }
  const unsigned char *at0 = all + (packed ? 0 : (size_t)at * esize), *at_first = at0 + (size_t)first * nbytes;
  bool nan = !packed && (is_nan(x->dtype, at0) || is_nan(x->dtype, at_first)); /* none packed */
  dlrun_free(all);
  const char *m = message ? message : "";
  return dlrun_fail(DLRUN_ERR_ASSERTION,
                    "%s%s%s %s %s different from process 0's (the first difference is at flat "
                    "element %lld%s).",
                    m, *m ? " " : "", total > 1 ? "Processes" : "Process", who,
                    total > 1 ? "hold values" : "holds a value", (long long)at,
                    nan ? ", a NaN: NaN equals no value, not even NaN" : "");
}
