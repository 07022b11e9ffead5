/* DLPack 1.3's exchange table for C hosts (include/dlrun/exchange.h): an
 * allocator and a work stream on the pools and queues of one bound runtime.
 *
 * An allocated tensor is an export of a fresh buffer (export.c builds it):
 * its deleter, the live count and dlrun_import's recognition are the
 * exports', so nothing here outlives the call. */
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "core/dlpack_names.h"
#include "core/status_impl.h"
#include "device/dlpack_codes.h"
#include "device/memory_place.h"
#include "dlpack_impl.h"
#include "dlrun/exchange.h"

_Static_assert(sizeof(DLPackExchangeAPI) == 56 &&
                   offsetof(DLPackExchangeAPI, managed_tensor_allocator) == 16 &&
                   offsetof(DLPackExchangeAPI, current_work_stream) == 48,
               "DLPackExchangeAPI layout (DLPack 1.3)");

/* The bound runtime (one reference of the binding's own). */
static pthread_mutex_t bound_mu = PTHREAD_MUTEX_INITIALIZER;
static dlrun_runtime *bound;

void dlrun_exchange_bind(dlrun_runtime *rt) {
  if (rt) dlrun_runtime_retain(rt);
  pthread_mutex_lock(&bound_mu);
  dlrun_runtime *old = bound;
  bound = rt;
  pthread_mutex_unlock(&bound_mu);
  dlrun_runtime_release(old); /* NULL: nothing */
}

/* The bound runtime, with a reference for the caller; NULL (and the
 * failure recorded) when none is bound. */
static dlrun_runtime *take_bound(const char *fn) {
  pthread_mutex_lock(&bound_mu);
  dlrun_runtime *rt = bound;
  if (rt) dlrun_runtime_retain(rt);
  pthread_mutex_unlock(&bound_mu);
  if (!rt)
    dlrun_fail(DLRUN_ERR_RUNTIME,
               "%s: no runtime is bound: call dlrun_exchange_bind(rt) before handing dlrun's "
               "exchange functions to a library",
               fn);
  return rt;
}

/* "kDLCUDA:1", or "DLDeviceType 99:1" for a code DLPack does not name. */
static const char *device_text(int32_t type, int32_t id, char *buf, size_t n) {
  const char *name = dlrun_dlpack_device_type_name(type);
  if (name) snprintf(buf, n, "%s:%d", name, (int)id);
  else snprintf(buf, n, "DLDeviceType %d:%d", (int)type, (int)id);
  return buf;
}

/* The memory of rt that exports as exactly (type, id): a device and kind
 * whose platform names it so (a label never says more than the memory is:
 * (kDLCPU, 3) or (kDLCUDAHost, 0) is not the host device's plain memory). */
static dlrun_device *memory_named(dlrun_runtime *rt, int32_t type, int32_t id,
                                  dlrun_memory_kind *kind) {
  dlrun_device *dev = dlrun_device_from_dlpack(rt, type, id, kind);
  if (!dev) return NULL;
  int32_t t, i;
  dlrun_memory_dlpack_device(dev, *kind, &t, &i);
  return t == type && i == id ? dev : NULL;
}

/* The (type, id) of every memory of rt an allocation can name, as text:
 * "kDLExtDev:0..7, kDLCPU:0" (consecutive ids of one type as a range). */
static const char *memories_text(dlrun_runtime *rt, char *buf, size_t n) {
  int32_t types[64], lo[64], hi[64];
  size_t count = 0;
  for (size_t d = 0; d < rt->ndevices; d++) {
    dlrun_device *dev = &rt->devices[d];
    if (!dev->local) continue;
    for (int k = 0; k < DLRUN_MEM_KIND_COUNT; k++) {
      if (!dev->pools[k]) continue;
      int32_t t, i;
      dlrun_memory_kind kind;
      dlrun_memory_dlpack_device(dev, (dlrun_memory_kind)k, &t, &i);
      if (memory_named(rt, t, i, &kind) != dev || kind != (dlrun_memory_kind)k) continue;
      size_t j = 0;
      while (j < count && !(types[j] == t && i >= lo[j] - 1 && i <= hi[j] + 1)) j++;
      if (j < count) {
        if (i < lo[j]) lo[j] = i;
        if (i > hi[j]) hi[j] = i;
      } else if (count < 64) {
        types[count] = t;
        lo[count] = hi[count] = i;
        count++;
      }
    }
  }
  size_t used = 0;
  buf[0] = '\0';
  for (size_t j = 0; j < count && used < n; j++) {
    char one[48];
    device_text(types[j], lo[j], one, sizeof one);
    int w = lo[j] == hi[j]
                ? snprintf(buf + used, n - used, "%s%s", j ? ", " : "", one)
                : snprintf(buf + used, n - used, "%s%s..%d", j ? ", " : "", one, (int)hi[j]);
    if (w < 0) break;
    used += (size_t)w;
  }
  return buf;
}

/* The memory (type, id) names, or BufferError naming it and what rt has. */
static dlrun_status resolve(dlrun_runtime *rt, const char *fn, int32_t type, int32_t id,
                            dlrun_device **dev, dlrun_memory_kind *kind) {
  *dev = memory_named(rt, type, id, kind);
  if (*dev) return DLRUN_OK;
  char want[48], have[512];
  return dlrun_fail(DLRUN_ERR_BUFFER,
                    "%s: this runtime has no memory for device %s; it has %s", fn,
                    device_text(type, id, want, sizeof want),
                    memories_text(rt, have, sizeof have));
}

/* The checks of a prototype: its dtype, and its size in bytes (the shape's
 * rules and messages are dlrun_shape_nbytes's: ndim 0 to DLRUN_MAX_NDIM,
 * a shape, no negative dimension, at most 2^63 - 1 bytes). */
static dlrun_status check_prototype(const DLTensor *p, dlrun_dtype *dtype, uint64_t *nbytes) {
  dlrun_status st = dlrun_dtype_from_dlpack(p->dtype.code, p->dtype.bits, p->dtype.lanes, dtype);
  if (!st) st = dlrun_shape_nbytes(p->ndim, p->shape, *dtype, nbytes);
  return st ? dlrun_fail_prefix(st, "dlrun_exchange_allocator: prototype: ") : st;
}

/* A status as the Python exception a SetError kind names. */
static const char *kind_of(dlrun_status st) {
  switch (st) {
  case DLRUN_ERR_TYPE: return "TypeError";
  case DLRUN_ERR_BUFFER: return "BufferError";
  case DLRUN_ERR_RESOURCE_EXHAUSTED: return "MemoryError";
  case DLRUN_ERR_VALUE:
  case DLRUN_ERR_INDIVISIBLE:
  case DLRUN_ERR_DUPLICATE_SPEC: return "ValueError";
  default: return "RuntimeError";
  }
}

static dlrun_status allocate(DLTensor *prototype, DLManagedTensorVersioned **out) {
  static const char fn[] = "dlrun_exchange_allocator";
  DLRUN_NONNULL(out, fn, "out");
  DLRUN_NONNULL(prototype, fn, "prototype");
  dlrun_dtype dtype;
  uint64_t nbytes;
  dlrun_status st = check_prototype(prototype, &dtype, &nbytes);
  if (st) return st;
  dlrun_runtime *rt = take_bound(fn);
  if (!rt) return DLRUN_ERR_RUNTIME;
  dlrun_device *dev;
  dlrun_memory_kind kind;
  dlrun_buffer *b = NULL;
  st = resolve(rt, fn, prototype->device.device_type, prototype->device.device_id, &dev, &kind);
  if (!st && ((st = dlrun_buffer_create(dev, kind, nbytes, &b)) ||
              (st = dlrun_export_fresh(b, prototype->ndim, prototype->shape, dtype, out)))) {
    dlrun_buffer_release(b); /* NULL: nothing */
    dlrun_fail_prefix(st, "%s: ", fn);
  }
  /* On success the buffer holds the runtime: this is never the last. */
  dlrun_runtime_release(rt);
  return st;
}

int dlrun_exchange_allocator(DLTensor *prototype, DLManagedTensorVersioned **out, void *error_ctx,
                             void (*SetError)(void *error_ctx, const char *kind,
                                              const char *message)) {
  if (out) *out = NULL;
  dlrun_status st = allocate(prototype, out);
  if (!st) return 0;
  if (SetError) SetError(error_ctx, kind_of(st), dlrun_last_error());
  return -1;
}

int dlrun_exchange_work_stream(DLDeviceType device_type, int32_t device_id,
                               void **out_current_stream) {
  static const char fn[] = "dlrun_exchange_work_stream";
  if (!out_current_stream) {
    dlrun_fail(DLRUN_ERR_VALUE, "%s: out_current_stream is NULL", fn);
    return -1;
  }
  *out_current_stream = NULL;
  dlrun_runtime *rt = take_bound(fn);
  if (!rt) return -1;
  dlrun_device *dev;
  dlrun_memory_kind kind;
  dlrun_status st = resolve(rt, fn, (int32_t)device_type, device_id, &dev, &kind);
  /* Host memory has no queue; nor has a platform whose queues no library
   * can name (sim's). The handle is the one the DLPack stream protocol
   * hands producers for this device. */
  if (!st && !dlrun_memory_is_host(dev, kind) && dlrun_device_has_streams(dev))
    *out_current_stream = (void *)(intptr_t)dlrun_device_consumer_stream(dev);
  dlrun_runtime_release(rt);
  return st ? -1 : 0;
}

static int no_py_object_from(void *py_object, DLManagedTensorVersioned **out) {
  (void)py_object;
  if (out) *out = NULL;
  dlrun_fail(DLRUN_ERR_TYPE,
             "managed_tensor_from_py_object_no_sync: dlrun's exchange table has no Python "
             "objects (use dlrun_export on a dlrun_array)");
  return -1;
}

static int no_py_object_to(DLManagedTensorVersioned *tensor, void **out_py_object) {
  (void)tensor;
  if (out_py_object) *out_py_object = NULL;
  dlrun_fail(DLRUN_ERR_TYPE,
             "managed_tensor_to_py_object_no_sync: dlrun's exchange table has no Python "
             "objects (use dlrun_import; the tensor is still the caller's)");
  return -1;
}

static const DLPackExchangeAPI exchange_api = {
    .header = {.version = {.major = 1, .minor = 3}, .prev_api = NULL},
    .managed_tensor_allocator = dlrun_exchange_allocator,
    .managed_tensor_from_py_object_no_sync = no_py_object_from,
    .managed_tensor_to_py_object_no_sync = no_py_object_to,
    .dltensor_from_py_object_no_sync = NULL,
    .current_work_stream = dlrun_exchange_work_stream,
};

const DLPackExchangeAPI *dlrun_exchange_api(void) { return &exchange_api; }
