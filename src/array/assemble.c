/* make_array_from_single_device_arrays: assemble a sharded array from one
 * single-device array per device, sharing their buffers. Checks and messages
 * follow JAX's, in JAX's order. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "array_impl.h"
#include "core/alloc.h"
#include "core/status_impl.h"
#include "core/text.h"

/* Set order: platform name, then id (as Devices sort in Lua). */
static int compare_ids(const void *a, const void *b) {
  const dlrun_device *x = *(dlrun_device *const *)a, *y = *(dlrun_device *const *)b;
  int c = strcmp(x->platform->name, y->platform->name);
  return c ? c : (x->id > y->id) - (x->id < y->id);
}

/* Append "[0, 0]" lists (in the given order) or "{0, 3}" sets (sorted, as
 * Python prints small sets) of device ids to buf; with `names`, the device
 * names instead ("{CpuDevice(id=0), SimDevice(id=0)}"), for messages about
 * devices of several platforms, whose ids alone would read alike. */
static size_t append_ids(char *buf, size_t used, size_t n, const char *open, const char *close,
                         dlrun_device **devs, size_t count, bool names) {
  if (open[0] == '{') qsort(devs, count, sizeof *devs, compare_ids);
  used += (size_t)snprintf(buf + used, used < n ? n - used : 0, "%s", open);
  for (size_t i = 0; i < count && used < n; i++) {
    const char *sep = i ? ", " : "";
    if (names) used += (size_t)snprintf(buf + used, n - used, "%s%s", sep, devs[i]->name);
    else used += (size_t)snprintf(buf + used, n - used, "%s%d", sep, devs[i]->id);
  }
  if (used < n) used += (size_t)snprintf(buf + used, n - used, "%s", close);
  return used;
}

static dlrun_status check_each(dlrun_sharding *s, dlrun_array *const *arrays, size_t n) {
  for (size_t k = 0; k < n; k++) {
    if (!arrays[k]) return dlrun_fail(DLRUN_ERR_VALUE, "per-device array %zu is NULL", k + 1);
    dlrun_status st = dlrun_array_check_live(arrays[k]);
    if (st) return st;
    if (arrays[k]->nshards != 1)
      return dlrun_fail(DLRUN_ERR_VALUE,
                        "When making an array from single-device arrays the input arrays must "
                        "have one shard each. An argument array had %zu shard(s).",
                        arrays[k]->nshards);
    if (!dlrun_sharding_is_fully_addressable(arrays[k]->sharding))
      return dlrun_fail(DLRUN_ERR_VALUE,
                        "per-device array %zu is on %s, another process's device: pass the "
                        "arrays on this process's devices",
                        k + 1, dlrun_array_device(arrays[k])->name);
  }
  size_t want = 0;
  for (size_t i = 0; i < dlrun_sharding_device_count(s); i++)
    want += dlrun_sharding_is_addressable(s, i);
  if (want == 0 && n == 0)
    return dlrun_fail(DLRUN_ERR_VALUE,
                      "make_array_from_single_device_arrays: this process holds none of the "
                      "sharding's devices, so no per-device array gives the dtype; create it "
                      "with make_array_from_process_local_data and a global shape, or zeros");
  if (n != want)
    return dlrun_fail(DLRUN_ERR_VALUE,
                      "Expected %zu per-device arrays (this is how many devices are addressable "
                      "by the sharding), but got %zu",
                      want, n);
  return DLRUN_OK;
}

/* Place arrays by device position in the sharding; JAX's messages for
 * duplicates and mismatched device sets. */
static dlrun_status place(dlrun_sharding *s, dlrun_array *const *arrays, size_t n,
                          dlrun_array **by_pos) {
  char msg[1024];
  dlrun_device **devs = dlrun_malloc(2 * n * sizeof *devs + 1);
  if (!devs) return dlrun_fail_oom_host(2 * n * sizeof *devs);
  dlrun_device **missing = devs + n;
  size_t nmissing = 0, nextra = 0;
  bool duplicate = false;
  for (size_t k = 0; k < n; k++) {
    devs[k] = dlrun_array_device(arrays[k]);
    ptrdiff_t pos = dlrun_sharding_device_position(s, devs[k]);
    if (pos < 0) continue;
    if (by_pos[pos]) duplicate = true;
    by_pos[pos] = arrays[k];
  }
  /* Ids as JAX prints them, unless the sharding and the arrays span platforms. */
  const dlrun_platform *first = dlrun_sharding_device(s, 0)->platform;
  bool names = false;
  for (size_t i = 0; i < dlrun_sharding_device_count(s); i++)
    names |= dlrun_sharding_device(s, i)->platform != first;
  for (size_t k = 0; k < n; k++) names |= devs[k]->platform != first;
  dlrun_status st = DLRUN_OK;
  if (duplicate) {
    size_t used = (size_t)snprintf(msg, sizeof msg,
                                   "When making an array from single-device arrays, the input "
                                   "arrays must be from distinct devices, but got %s ",
                                   names ? "devices" : "device IDs");
    append_ids(msg, used, sizeof msg, "[", "]", devs, n, names);
    st = dlrun_fail(DLRUN_ERR_VALUE, "%s", msg);
  } else {
    for (size_t i = 0; i < dlrun_sharding_device_count(s) && nmissing < n; i++)
      if (!by_pos[i] && dlrun_sharding_is_addressable(s, i))
        missing[nmissing++] = dlrun_sharding_device(s, i);
    for (size_t k = 0; k < n; k++)
      if (dlrun_sharding_device_position(s, devs[k]) < 0) devs[nextra++] = devs[k];
    if (nmissing || nextra) {
      size_t used = (size_t)snprintf(msg, sizeof msg,
                                     "Addressable devices and per-device arrays devices do not match.");
      if (nmissing) {
        used += (size_t)snprintf(msg + used, sizeof msg - used, " Sharding contains devices ");
        used = append_ids(msg, used, sizeof msg, "{", "}", missing, nmissing, names);
        used += (size_t)snprintf(msg + used, used < sizeof msg ? sizeof msg - used : 0,
                                 " that are not present in per-device arrays.");
      }
      if (nextra && used < sizeof msg) {
        used += (size_t)snprintf(msg + used, sizeof msg - used, " Per-device arrays contain devices ");
        used = append_ids(msg, used, sizeof msg, "{", "}", devs, nextra, names);
        if (used < sizeof msg)
          snprintf(msg + used, sizeof msg - used, " that are not present in the sharding.");
      }
      st = dlrun_fail(DLRUN_ERR_VALUE, "%s", msg);
    }
  }
  dlrun_free(devs);
  return st;
}

/* JAX's per-array checks, in input order: dtype (against the first array),
 * then shard shape; then dlrun's memory-kind check. */
static dlrun_status check_shards(dlrun_sharding *s, int ndim, const int64_t *dims,
                                 dlrun_array *const *arrays, size_t n, const int64_t *shard_dims) {
  dlrun_dtype dtype = arrays[0]->dtype;
  char want[256], got[256], shape[256], text[768];
  for (size_t i = 0; i < n; i++) {
    dlrun_array *x = arrays[i];
    if (x->dtype != dtype)
      return dlrun_fail(DLRUN_ERR_VALUE,
                        "Input buffers to `Array` must have matching dtypes. Got %s, expected %s "
                        "for buffer: the array on %s",
                        dlrun_dtype_get(x->dtype)->name, dlrun_dtype_get(dtype)->name,
                        dlrun_array_device(x)->name);
    bool same = x->ndim == ndim;
    for (int d = 0; same && d < ndim; d++) same = x->dims[d] == shard_dims[d];
    if (!same)
      return dlrun_fail(DLRUN_ERR_VALUE,
                        "Expected shard shape %s doesn't match the single device array shape %s. "
                        "Shape of Array is %s with sharding %s",
                        dlrun_tuple_string(shard_dims, ndim, want, sizeof want),
                        dlrun_tuple_string(x->dims, x->ndim, got, sizeof got),
                        dlrun_shape_string(dtype, ndim, dims, shape, sizeof shape),
                        dlrun_sharding_describe(s, text, sizeof text));
    if (dlrun_sharding_memory_kind(x->sharding) != dlrun_sharding_memory_kind(s))
      return dlrun_fail(DLRUN_ERR_VALUE,
                        "the array on %s is in %s memory but the sharding asks for %s memory",
                        dlrun_array_device(x)->name,
                        dlrun_memory_kind_name(dlrun_sharding_memory_kind(x->sharding)),
                        dlrun_memory_kind_name(dlrun_sharding_memory_kind(s)));
  }
  return DLRUN_OK;
}

dlrun_status dlrun_array_from_single_device_arrays(dlrun_sharding *s, int ndim,
                                                   const int64_t *dims,
                                                   dlrun_array *const *arrays, size_t n,
                                                   dlrun_array **out) {
  DLRUN_NONNULL(out, "dlrun_array_from_single_device_arrays", "out");
  *out = NULL;
  DLRUN_NONNULL(s, "dlrun_array_from_single_device_arrays", "sharding");
  if (n) DLRUN_NONNULL(arrays, "dlrun_array_from_single_device_arrays", "arrays");
  dlrun_status st = check_each(s, arrays, n);
  if (st) return st;
  int64_t shard_dims[DLRUN_MAX_NDIM];
  uint64_t nbytes, shard_nbytes;
  if ((st = dlrun_array_layout(s, arrays[0]->dtype, ndim, dims, shard_dims, &nbytes,
                               &shard_nbytes)))
    return st;
  /* By position in the sharding; other processes' positions stay NULL. */
  size_t total = dlrun_sharding_device_count(s);
  dlrun_array **by_pos = dlrun_calloc(total, sizeof *by_pos);
  dlrun_buffer **bufs = dlrun_calloc(total, sizeof *bufs);
  if (!by_pos || !bufs) st = dlrun_fail_oom_host(2 * total * sizeof(void *));
  if (!st) st = place(s, arrays, n, by_pos);
  if (!st) st = check_shards(s, ndim, dims, arrays, n, shard_dims);
  for (size_t i = 0; !st && i < total; i++) {
    dlrun_buffer *b[1];
    if (!by_pos[i]) continue;
    if ((st = dlrun_array_acquire_buffers(by_pos[i], b))) break;
    bufs[i] = b[0];
  }
  dlrun_free(by_pos);
  if (st) {
    dlrun_buffers_release(bufs, total);
    return st;
  }
  return dlrun_array_wrap(arrays[0]->dtype, ndim, dims, s, bufs, out);
}
