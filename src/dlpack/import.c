/* DLPack import: a producer's tensor becomes a dlrun array.
 *
 * Everything is validated before ownership is taken (dlpack.md checklist
 * items 8-15). Compact host data, row-major or any permutation of it,
 * aligned to its element size, is wrapped without a copy: the array's buffer
 * calls the producer's deleter when released. Anything else (strided slices,
 * negative or zero strides, another target device, copy = 1) is copied, and
 * the producer's deleter is called right after the copy. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "array/array_impl.h"
#include "array/storage_view.h"
#include "core/alloc.h"
#include "core/dlpack_names.h"
#include "core/status_impl.h"
#include "core/text.h"
#include "core/trace_impl.h"
#include "device/boxes.h"
#include "device/copy_route.h"
#include "device/dlpack_codes.h"
#include "device/memory_place.h"
#include "dlpack_impl.h"
#include "dlrun/dlpack.h"

typedef struct producer {
  DLManagedTensor *legacy;
  DLManagedTensorVersioned *versioned;
} producer;

static void call_deleter(producer p) {
  if (p.legacy && p.legacy->deleter) p.legacy->deleter(p.legacy);
  if (p.versioned && p.versioned->deleter) p.versioned->deleter(p.versioned);
}

/* The release hook of a wrapped tensor's buffer, whose context (inside the
 * buffer's allocation) is the producer's tensor. */
static void release_producer(void *ctx) { call_deleter(*(producer *)ctx); }

/* The tensor's layout, checked. */
typedef struct layout {
  dlrun_dtype dtype;
  size_t esize;
  int ndim;
  int64_t dims[DLRUN_MAX_NDIM], strides[DLRUN_MAX_NDIM];
  int64_t size;
  uint64_t nbytes;
  const char *data; /* with byte_offset applied */
  bool compact;     /* a permutation of row-major, no gaps */
  bool row_major;
  dlrun_device *source; /* where the memory is */
  dlrun_memory_kind source_kind;
  /* A packed sub-byte tensor is read as the uint8 run of its bytes (dtype,
   * dims above), and becomes an array of its own dtype and shape after. */
  bool packed;
  dlrun_dtype packed_dtype;
  int packed_ndim;
  int64_t packed_dims[DLRUN_MAX_NDIM];
} layout;

/* DLPack 1.1's packed layout is row-major and compact: element strides
 * (NULL or row-major; size-1 dimensions any; any for no elements, which
 * have no layout) are the only ones dlrun can read for a sub-byte dtype.
 * The layout becomes its bytes, as uint8. */
static dlrun_status take_packed(const DLTensor *t, layout *l) {
  const dlrun_dtype_info *info = dlrun_dtype_get(l->dtype);
  int64_t row_major[DLRUN_MAX_NDIM];
  dlrun_row_major_strides(l->ndim, l->dims, row_major);
  bool empty = false;
  for (int d = 0; d < l->ndim; d++) empty |= l->dims[d] == 0;
  for (int d = 0; t->strides && !empty && d < l->ndim; d++)
    if (l->dims[d] != 1 && t->strides[d] != row_major[d]) {
      char got[256], want[256], shape[256];
      return dlrun_fail(DLRUN_ERR_BUFFER,
                        "from_dlpack: %s is a packed sub-byte type, which dlrun reads only "
                        "row-major and compact, but shape %s has strides %s (expected %s)",
                        info->name, dlrun_tuple_string(l->dims, l->ndim, shape, sizeof shape),
                        dlrun_tuple_string(t->strides, l->ndim, got, sizeof got),
                        dlrun_tuple_string(row_major, l->ndim, want, sizeof want));
    }
  uint64_t nbytes;
  dlrun_status st = dlrun_shape_nbytes(l->ndim, l->dims, l->dtype, &nbytes);
  if (st) return dlrun_fail_prefix(DLRUN_ERR_BUFFER, "from_dlpack: ");
  l->packed = true;
  l->packed_dtype = l->dtype;
  l->packed_ndim = l->ndim;
  memcpy(l->packed_dims, l->dims, (size_t)l->ndim * sizeof *l->dims);
  l->dtype = DLRUN_UINT8;
  l->ndim = 1;
  l->dims[0] = (int64_t)nbytes;
  return DLRUN_OK;
}

/* Host memory (pinned host memory too) is read on the host cpu device;
 * device memory on the device the platforms recognise. */
static dlrun_status check_device(dlrun_runtime *rt, DLDevice d, layout *l) {
  l->source = dlrun_device_from_dlpack(rt, d.device_type, d.device_id, &l->source_kind);
  if (l->source) return DLRUN_OK;
  char type[DLRUN_DL_CODE_TEXT];
  return dlrun_fail(DLRUN_ERR_BUFFER,
                    "from_dlpack: unsupported DLPack device: device type %s, device_id %d; dlrun "
                    "reads host memory (kDLCPU, kDLCUDAHost) and its own sim devices (kDLExtDev)",
                    dlrun_dlpack_device_type_text(d.device_type, type, sizeof type), d.device_id);
}

/* Positive strides that are some permutation of a row-major layout. */
static bool is_compact(const layout *l) {
  int order[DLRUN_MAX_NDIM], n = 0;
  for (int d = 0; d < l->ndim; d++)
    if (l->dims[d] != 1) {
      if (l->strides[d] <= 0) return false;
      order[n++] = d;
    }
  /* Sort the dimensions by stride, largest first (n is small). */
  for (int i = 1; i < n; i++)
    for (int j = i; j > 0 && l->strides[order[j]] > l->strides[order[j - 1]]; j--) {
      int t = order[j];
      order[j] = order[j - 1];
      order[j - 1] = t;
    }
  int64_t expect = 1;
  for (int i = n - 1; i >= 0; i--) {
    if (l->strides[order[i]] != expect) return false;
    expect *= l->dims[order[i]];
  }
  return true;
}

/* BufferError: memory labelled with a device of dlrun's is not in it. */
static dlrun_status not_device_memory(const layout *l, const DLTensor *t, uint64_t nbytes,
                                      const void *at) {
  char type[DLRUN_DL_CODE_TEXT];
  dlrun_dlpack_device_type_text(t->device.device_type, type, sizeof type);
  return dlrun_fail(DLRUN_ERR_BUFFER,
                    "from_dlpack: the tensor names %s (device type %s, device_id %d), but its "
                    "%llu bytes at %p are not in that device's memory: dlrun imports device type "
                    "%s only from memory of its own devices",
                    l->source->name, type, t->device.device_id, (unsigned long long)nbytes, at,
                    type);
}

static dlrun_status check_tensor(dlrun_runtime *rt, const DLTensor *t, layout *l) {
  /* Every field is set below; dims and strides below ndim only (nothing
   * reads past it): no clearing of the whole struct per import. */
  l->data = NULL;
  l->compact = l->row_major = false;
  if (t->ndim < 0 || t->ndim > DLRUN_MAX_NDIM)
    return dlrun_fail(DLRUN_ERR_BUFFER, "from_dlpack: ndim %d is out of range (0 to %d)", t->ndim,
                      DLRUN_MAX_NDIM);
  if (t->ndim > 0 && !t->shape)
    return dlrun_fail(DLRUN_ERR_BUFFER, "from_dlpack: shape is NULL but ndim is %d", t->ndim);
  l->ndim = t->ndim;
  for (int d = 0; d < l->ndim; d++) {
    if (t->shape[d] < 0)
      return dlrun_fail(DLRUN_ERR_BUFFER, "from_dlpack: dimension %d is negative (%lld)", d,
                        (long long)t->shape[d]);
    l->dims[d] = t->shape[d];
  }
  dlrun_status st = dlrun_dtype_from_dlpack(t->dtype.code, t->dtype.bits, t->dtype.lanes, &l->dtype);
  if (st) return dlrun_fail_prefix(st, "from_dlpack: ");
  l->packed = false;
  if (dlrun_dtype_get(l->dtype)->dl_bits < 8 && (st = take_packed(t, l))) return st;
  const int64_t *given_strides = l->packed ? NULL : t->strides;
  l->esize = dlrun_dtype_get(l->dtype)->size;
  if ((st = dlrun_shape_nbytes(l->ndim, l->dims, l->dtype, &l->nbytes)))
    return dlrun_fail_prefix(DLRUN_ERR_BUFFER, "from_dlpack: ");
  l->size = (int64_t)(l->nbytes / l->esize); /* every dtype has whole bytes */
  if ((st = check_device(rt, t->device, l))) return st;
  /* NULL strides are row-major: DLPack's rule before 1.2, and still
   * accepted from a versioned tensor that says 1.2 or later (which DLPack
   * lets a consumer refuse): the meaning is not in doubt. */
  if (given_strides) memcpy(l->strides, given_strides, (size_t)l->ndim * sizeof(int64_t));
  else dlrun_row_major_strides(l->ndim, l->dims, l->strides);
  /* Size-1 dimensions may carry any stride: normalise them. */
  int64_t row_major[DLRUN_MAX_NDIM];
  dlrun_row_major_strides(l->ndim, l->dims, row_major);
  for (int d = 0; d < l->ndim; d++)
    if (l->dims[d] == 1) l->strides[d] = row_major[d];
  if (l->size == 0) {
    /* Nothing to read, but an address labelled with a device must still
     * be that device's (dlrun's own zero-size exports give NULL). */
    if (t->data && !dlrun_memory_is_host(l->source, l->source_kind) &&
        !dlrun_memory_owns(l->source, l->source_kind, t->data, 1))
      return not_device_memory(l, t, 0, t->data);
    l->compact = l->row_major = true;
    memcpy(l->strides, row_major, sizeof row_major);
    return DLRUN_OK;
  }
  if (!t->data)
    return dlrun_fail(DLRUN_ERR_BUFFER, "from_dlpack: data is NULL but the tensor has %lld elements",
                      (long long)l->size);
  bool host = dlrun_memory_is_host(l->source, l->source_kind);
  uintptr_t at;
  if (host && (__builtin_add_overflow((uintptr_t)t->data, (uintptr_t)t->byte_offset, &at) ||
               t->byte_offset > (uint64_t)INTPTR_MAX))
    return dlrun_fail(DLRUN_ERR_BUFFER, "from_dlpack: byte_offset %llu overflows the address",
                      (unsigned long long)t->byte_offset);
  l->data = host ? (const char *)at : NULL;
  /* The farthest element must be addressable: sum of |stride| * (dim - 1). */
  int64_t reach = 0, term;
  for (int d = 0; d < l->ndim; d++) {
    if (l->strides[d] == INT64_MIN) /* no magnitude in int64 */
      return dlrun_fail(DLRUN_ERR_BUFFER, "from_dlpack: strides overflow the address range");
    int64_t s = l->strides[d] < 0 ? -l->strides[d] : l->strides[d];
    if (__builtin_mul_overflow(s, l->dims[d] - 1, &term) ||
        __builtin_add_overflow(reach, term, &reach) ||
        __builtin_mul_overflow(reach, (int64_t)l->esize, &term))
      return dlrun_fail(DLRUN_ERR_BUFFER, "from_dlpack: strides overflow the address range");
  }
  /* Memory that names a device must be that device's: the bytes between
   * the lowest and the highest element address (host memory is the
   * producer's to vouch for). Address arithmetic in integers: a tensor may
   * reach outside the address space, which is refused, not computed. */
  if (!host) {
    uint64_t below = 0, above = 0; /* bytes before and after the first element */
    for (int d = 0; d < l->ndim; d++) {
      uint64_t span = (uint64_t)(l->strides[d] < 0 ? -l->strides[d] : l->strides[d]) *
                      (uint64_t)(l->dims[d] - 1) * l->esize; /* bounded by reach above */
      *(l->strides[d] < 0 ? &below : &above) += span;
    }
    bool handled;
    const void *elem0;
    dlrun_status st = dlrun_memory_import(l->source, l->source_kind, t->data, t->byte_offset,
                                          below, below + above + l->esize, &elem0, &handled);
    if (st) return st;
    if (handled) {
      l->data = elem0;
    } else {
      if (__builtin_add_overflow((uintptr_t)t->data, (uintptr_t)t->byte_offset, &at) ||
          t->byte_offset > (uint64_t)INTPTR_MAX)
        return dlrun_fail(DLRUN_ERR_BUFFER, "from_dlpack: byte_offset %llu overflows the address",
                          (unsigned long long)t->byte_offset);
      l->data = (const char *)at;
      uintptr_t first, last;
      bool wraps = below > at || __builtin_add_overflow(at, above + l->esize - 1, &last);
      first = wraps ? 0 : at - below;
      if (wraps || !dlrun_memory_owns(l->source, l->source_kind, (const void *)first,
                                      (uint64_t)(last - first) + 1))
        return not_device_memory(l, t, below + above + l->esize, l->data);
    }
  }
  l->compact = is_compact(l);
  l->row_major = memcmp(l->strides, row_major, (size_t)l->ndim * sizeof(int64_t)) == 0;
  return DLRUN_OK;
}

static const char *strides_text(const layout *l, char *buf, size_t n) {
  return dlrun_tuple_string(l->strides, l->ndim, buf, n);
}

/* A copy of the tensor into fresh row-major memory on `dev`. */
/* A packed tensor's bytes (a uint8 array, *out) become the array of its
 * own dtype and shape; on failure *out is released and NULL. Called before
 * the import takes the tensor, so that a failure leaves it with its
 * producer. */
static dlrun_status as_packed(const layout *l, dlrun_sharding *target, dlrun_array **out) {
  if (!l->packed) return DLRUN_OK;
  dlrun_array *packed = NULL;
  dlrun_status st = dlrun_array_from_storage_view(*out, l->packed_dtype, l->packed_ndim,
                                                  l->packed_dims, target, &packed);
  dlrun_array_release(*out);
  *out = packed;
  return st;
}

static dlrun_status copy_in(const layout *l, dlrun_sharding *target, dlrun_array **out) {
  dlrun_array *a;
  dlrun_status st = dlrun_array_alloc(target, l->dtype, l->ndim, l->dims, &a);
  if (st) return st;
  static const int64_t origin[DLRUN_MAX_NDIM];
  int64_t hi[DLRUN_MAX_NDIM], row_major[DLRUN_MAX_NDIM];
  memcpy(hi, l->dims, (size_t)l->ndim * sizeof *hi);
  dlrun_row_major_strides(l->ndim, l->dims, row_major);
  if (l->size) {
    dlrun_box_end dst = dlrun_buffer_end(a->bufs[0], origin, row_major);
    dlrun_box_end src = {.dev = l->source, .kind = l->source_kind, .data = l->data,
                         .origin = origin, .strides = l->strides};
    if ((st = dlrun_copy_sync(l->esize, l->ndim, origin, hi, &dst, &src))) {
      dlrun_array_release(a);
      return st;
    }
  }
  *out = a;
  return as_packed(l, target, out);
}

/* Wrap the producer's memory on the target: the array owns the tensor from
 * now on, and its data is ready with `ready`. The release hook is set only
 * once nothing can fail, so that a failure leaves the tensor with its
 * producer. */
static dlrun_status wrap(const layout *l, dlrun_sharding *target, producer p, dlrun_event ready,
                         dlrun_array **out) {
  /* The layout travels with the buffer, so arrays sharing it read it right. */
  size_t layout_bytes = l->row_major ? 0 : (size_t)l->ndim * sizeof(int64_t);
  dlrun_buffer **bufs = dlrun_malloc(sizeof *bufs);
  int64_t *strides = layout_bytes ? dlrun_malloc(layout_bytes) : NULL;
  if (!bufs || (layout_bytes && !strides)) {
    dlrun_free(bufs);
    dlrun_free(strides);
    return dlrun_fail_oom_host(sizeof *bufs + layout_bytes);
  }
  dlrun_status st = dlrun_buffer_wrap(dlrun_sharding_device(target, 0),
                                      dlrun_sharding_memory_kind(target), (void *)l->data,
                                      l->nbytes, sizeof(producer), &bufs[0]);
  if (st) {
    dlrun_free(bufs);
    dlrun_free(strides);
    return st;
  }
  dlrun_buffer *b = bufs[0];
  if (strides) memcpy(strides, l->strides, layout_bytes);
  b->strides = strides;
  b->ready = ready;
  if ((st = dlrun_array_wrap(l->dtype, l->ndim, l->dims, target, bufs, out))) return st;
  if ((st = as_packed(l, target, out))) return st; /* b had no hook: the tensor is kept */
  *(producer *)b->release_ctx = p;
  b->release = release_producer;
  return DLRUN_OK;
}

dlrun_import_outcome dlrun_array_import_outcome(const dlrun_array *a) {
  return a ? (dlrun_import_outcome)a->import_outcome : DLRUN_IMPORT_REFUSED;
}

static dlrun_status import_tensor(dlrun_runtime *rt, DLManagedTensor *legacy,
                           DLManagedTensorVersioned *versioned, const dlrun_import_options *options,
                           dlrun_array **out, dlrun_import_outcome *outcome);

dlrun_status dlrun_import(dlrun_runtime *rt, DLManagedTensor *legacy,
                          DLManagedTensorVersioned *versioned, const dlrun_import_options *options,
                          dlrun_array **out, dlrun_import_outcome *outcome) {
  dlrun_import_outcome got = DLRUN_IMPORT_REFUSED;
  dlrun_status st = import_tensor(rt, legacy, versioned, options, out, &got);
  if (!st) (*out)->import_outcome = (int)got;
  if (outcome) *outcome = got;
  return st;
}

static dlrun_status import_tensor(dlrun_runtime *rt, DLManagedTensor *legacy,
                           DLManagedTensorVersioned *versioned, const dlrun_import_options *options,
                           dlrun_array **out, dlrun_import_outcome *outcome) {
  DLRUN_NONNULL(out, "dlrun_import", "out");
  *out = NULL;
  if (!rt || (!legacy) == (!versioned))
    return dlrun_fail(DLRUN_ERR_VALUE, "from_dlpack needs a runtime and exactly one tensor");
  producer p = {.legacy = legacy, .versioned = versioned};
  if (versioned && versioned->version.major != DLRUN_DLPACK_MAJOR) {
    unsigned major = versioned->version.major, minor = versioned->version.minor;
    call_deleter(p); /* the protocol: a consumer that cannot read it releases it */
    *outcome = DLRUN_IMPORT_RELEASED;
    return dlrun_fail(DLRUN_ERR_BUFFER,
                      "from_dlpack: unsupported DLPack version (%u, %u); dlrun reads major "
                      "version %d",
                      major, minor, DLRUN_DLPACK_MAJOR);
  }
  dlrun_import_options o = options ? *options : (dlrun_import_options){0};
  if ((unsigned)o.copy > DLRUN_COPY_ALWAYS)
    return dlrun_fail(DLRUN_ERR_VALUE,
                      "dlrun_import: copy must be DLRUN_COPY_IF_NEEDED (0), DLRUN_COPY_NEVER (1) "
                      "or DLRUN_COPY_ALWAYS (2), got %d",
                      (int)o.copy);
  uint64_t start = dlrun_trace_enabled() ? dlrun_trace_now() : 0;
  layout l;
  dlrun_status st = check_tensor(rt, legacy ? &legacy->dl_tensor : &versioned->dl_tensor, &l);
  if (st) return st;

  if (l.packed && versioned && (versioned->flags & DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED))
    return dlrun_fail(DLRUN_ERR_BUFFER,
                      "from_dlpack: the %s tensor is padded (flags=0x%llx: "
                      "DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED), but dlrun reads sub-byte "
                      "types only packed, DLPack 1.1's default",
                      dlrun_dtype_get(l.packed_dtype)->name, (unsigned long long)versioned->flags);
  dlrun_sharding *target = o.target;
  if (target && dlrun_sharding_device_count(target) != 1)
    return dlrun_fail(DLRUN_ERR_VALUE,
                      "from_dlpack can only unpack a dlpack tensor onto a singular device, but a "
                      "Sharding with %zu devices was provided.",
                      dlrun_sharding_device_count(target));
  if (target && dlrun_sharding_device(target, 0)->rt != rt)
    return dlrun_fail(DLRUN_ERR_VALUE, "from_dlpack: the target device belongs to another runtime");
  /* dlrun's own export, perhaps made with stream -1: its data may still be
   * being written. A copy waits for it; a wrap of the same runtime becomes
   * ready with it (an event of another runtime is waited for here). */
  dlrun_export_origin origin = {0};
  bool own = dlrun_export_source(legacy, versioned, &origin) && origin.rt == rt;
  if (origin.rt && !own && (st = dlrun_event_wait(origin.ready)))
    return st; /* its data was never written */
  dlrun_event ready = own ? origin.ready : (dlrun_event){0};
  /* With no target, data goes back where it lives: host memory is one
   * DLPack device (kDLCPU, 0) for every cpu device and pinned_host memory,
   * so only the export itself says which of them holds one of ours. */
  bool owned_target = !target;
  dlrun_device *home = own ? origin.dev : l.source;
  dlrun_memory_kind home_kind = own ? origin.kind : DLRUN_MEM_DEVICE;
  if (!target && (st = dlrun_device_sharding(home, home_kind, &target))) return st;
  dlrun_device *dest = dlrun_sharding_device(target, 0);
  dlrun_memory_kind dest_kind = dlrun_sharding_memory_kind(target);
  bool same_place = dlrun_memory_same_place(l.source, l.source_kind, dest, dest_kind);
  bool aligned = ((uintptr_t)l.data % l.esize) == 0;
  char text[256];
  bool never = o.copy == DLRUN_COPY_NEVER;
  if (never && !same_place)
    st = dlrun_copy_false_error(dest, dest_kind, l.source, DLRUN_MEM_DEVICE);
  else if (never && !l.compact)
    st = dlrun_fail(DLRUN_ERR_VALUE,
                    "from_dlpack: the tensor's strides %s are not compact, so importing it needs "
                    "a copy, but copy=False",
                    strides_text(&l, text, sizeof text));
  else if (never && !aligned)
    st = dlrun_fail(DLRUN_ERR_VALUE,
                    "from_dlpack: the tensor's data is not aligned to its %zu-byte elements, so "
                    "importing it needs a copy, but copy=False",
                    l.esize);
  else if (o.copy == DLRUN_COPY_ALWAYS || !same_place || !l.compact || !aligned) {
    if (!(st = dlrun_event_wait(ready)) && !(st = copy_in(&l, target, out))) {
      call_deleter(p);
      *outcome = DLRUN_IMPORT_COPIED;
    }
  } else if (!(st = wrap(&l, target, p, ready, out))) {
    *outcome = DLRUN_IMPORT_WRAPPED;
  }
  if (!st && dlrun_trace_enabled())
    dlrun_trace_event(NULL, "dlpack", "import", start,
                      "\"device\": \"%s\", \"bytes\": %llu, \"copied\": %s", dest->name,
                      (unsigned long long)l.nbytes,
                      *outcome == DLRUN_IMPORT_COPIED ? "true" : "false");
  if (owned_target) dlrun_sharding_release(target);
  return st;
}

bool dlrun_dlpack_consumer_stream(dlrun_runtime *rt, int32_t device_type, int32_t device_id,
                                  int64_t *stream) {
  dlrun_memory_kind kind;
  dlrun_device *dev = rt ? dlrun_device_from_dlpack(rt, device_type, device_id, &kind) : NULL;
  if (!dev || !dlrun_device_has_streams(dev)) return false;
  *stream = dlrun_device_consumer_stream(dev);
  return true;
}
