/* DLPack export: a single-device array handed to another library.
 *
 * One block holds the managed tensor and its shape and strides (8-byte
 * aligned, after the struct): an allocation of its own, or storage of the
 * caller's (dlrun_export_into, moved out by dlrun_export_detach before a
 * consumer gets it). Its manager_ctx, a reference to the shard's buffer,
 * keeps the memory alive until the consumer calls the deleter, which may
 * happen on any thread, after the array is gone, exactly once. */
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "array/array_impl.h"
#include "core/alloc.h"
#include "core/dlpack_names.h"
#include "core/dtype_impl.h"
#include "core/status_impl.h"
#include "core/trace_impl.h"
#include "device/dlpack_codes.h"
#include "device/memory_place.h"
#include "dlpack_impl.h"
#include "dlrun/dlpack.h"

_Static_assert(sizeof(DLDevice) == 8, "DLDevice layout");
_Static_assert(sizeof(DLDataType) == 4, "DLDataType layout");
_Static_assert(sizeof(DLTensor) == 48, "DLTensor layout");
_Static_assert(offsetof(DLTensor, shape) == 24 && offsetof(DLTensor, byte_offset) == 40,
               "DLTensor offsets");
_Static_assert(sizeof(DLManagedTensor) == 64 && offsetof(DLManagedTensor, deleter) == 56,
               "DLManagedTensor layout");
_Static_assert(sizeof(DLManagedTensorVersioned) == 80 &&
                   offsetof(DLManagedTensorVersioned, flags) == 24 &&
                   offsetof(DLManagedTensorVersioned, dl_tensor) == 32,
               "DLManagedTensorVersioned layout");

/* One block holds the managed struct, then shape and strides (8-byte
 * aligned): memory of its own, or the caller's (dlrun_export_into). Its
 * manager_ctx is the buffer the export holds. A tensor in the caller's
 * storage also says by it whether its deleter has yet to run (NULL once it
 * has): the storage records its own export. */
_Static_assert(sizeof(DLManagedTensor) % 8 == 0 && sizeof(DLManagedTensorVersioned) % 8 == 0,
               "shape and strides after the struct are 8-byte aligned");

static size_t head_size(bool versioned) {
  return versioned ? sizeof(DLManagedTensorVersioned) : sizeof(DLManagedTensor);
}

static size_t block_size(int ndim, bool versioned) {
  return head_size(versioned) + 2 * (size_t)ndim * sizeof(int64_t);
}

/* Whether options ask for a versioned tensor (else a legacy one). */
static bool wants_versioned(const dlrun_export_options *o) {
  return o && o->has_max_version && o->max_major >= 1;
}

size_t dlrun_export_size(int ndim, const dlrun_export_options *options) {
  return block_size(ndim >= 0 && ndim <= DLRUN_MAX_NDIM ? ndim : DLRUN_MAX_NDIM,
                    wants_versioned(options));
}

/* The exported tensors in blocks of their own whose deleter has not run: a
 * set of pointers, so that a second call of a deleter (a consumer's
 * mistake) is recognised without reading the memory the first call freed.
 * Open addressing. Its lock also guards the blocks held back (below). */
#define TOMBSTONE ((void *)1)
static pthread_mutex_t live_mu = PTHREAD_MUTEX_INITIALIZER;
static void **live_slots;
static size_t live_cap, live_used; /* used: entries and tombstones */

static size_t slot_of(const void *p, size_t cap) {
  uint64_t x = (uint64_t)(uintptr_t)p;
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  return (size_t)x & (cap - 1);
}

/* Rehash into twice the live entries (at least 64 slots). Called locked. */
static bool live_rehash(void) {
  size_t live = 0;
  for (size_t i = 0; i < live_cap; i++) live += live_slots[i] && live_slots[i] != TOMBSTONE;
  size_t cap = 64;
  while (cap < 4 * (live + 1)) cap *= 2;
  void **slots = dlrun_calloc(cap, sizeof *slots);
  if (!slots) return false;
  for (size_t i = 0; i < live_cap; i++) {
    void *p = live_slots[i];
    if (!p || p == TOMBSTONE) continue;
    size_t j = slot_of(p, cap);
    while (slots[j]) j = (j + 1) & (cap - 1);
    slots[j] = p;
  }
  dlrun_free(live_slots);
  live_slots = slots;
  live_cap = cap;
  live_used = live;
  return true;
}

/* List p. Called locked. */
static dlrun_status live_add(const void *p) {
  if (2 * (live_used + 1) > live_cap && !live_rehash())
    return dlrun_fail_oom_host(live_cap * 2 * sizeof(void *));
  size_t j = slot_of(p, live_cap);
  while (live_slots[j] && live_slots[j] != TOMBSTONE) j = (j + 1) & (live_cap - 1);
  if (!live_slots[j]) live_used++;
  live_slots[j] = (void *)p;
  return DLRUN_OK;
}

/* The slot listing p, or NULL. Called locked. */
static void **live_find(const void *p) {
  if (!live_cap || !p) return NULL;
  size_t j = slot_of(p, live_cap);
  while (live_slots[j] && live_slots[j] != p) j = (j + 1) & (live_cap - 1);
  return live_slots[j] == p ? &live_slots[j] : NULL;
}

/* A block of its own for a tensor of `size` bytes, listed live. */
static dlrun_status listed_block(size_t size, char **out) {
  char *block = dlrun_malloc(size);
  if (!block) return dlrun_fail_oom_host(size);
  pthread_mutex_lock(&live_mu);
  dlrun_status st = live_add(block);
  pthread_mutex_unlock(&live_mu);
  if (st) dlrun_free(block);
  else *out = block;
  return st;
}

/* Released blocks held back from reuse (DLRUN_EXPORT_REUSE_DELAY, dlpack.h):
 * a second deleter call through a saved pointer must not find a newer
 * export at the same address. A ring, oldest released first. */
static void *held[DLRUN_EXPORT_REUSE_DELAY];
static size_t held_next;

/* What every deleter does once the export is found live: the counts, then
 * the buffer's reference. */
static void release_export(dlrun_buffer *buf) {
  uint64_t start = dlrun_trace_enabled() ? dlrun_trace_now() : 0;
  dlrun_device *dev = buf->dev;
  atomic_fetch_sub(&dev->live_exports, 1);
  if (dlrun_trace_enabled())
    dlrun_trace_event(NULL, "dlpack", "deleter", start, "\"device\": \"%s\", \"bytes\": %llu",
                      dev->name, (unsigned long long)buf->nbytes);
  dlrun_buffer_tag_export(buf, -1);
  dlrun_buffer_release(buf); /* may free the runtime: read nothing after */
}

/* The deleter of a block of its own: a second call (or a pointer dlrun
 * never made) finds nothing listed and does nothing; it reads only the
 * pointer's value, not the released struct. One locked step unlists the
 * block, reads its buffer and holds the block back. */
static void delete_block(void *block, void *const *manager_ctx) {
  pthread_mutex_lock(&live_mu);
  void **slot = live_find(block);
  if (!slot) {
    pthread_mutex_unlock(&live_mu);
    return;
  }
  *slot = TOMBSTONE;
  dlrun_buffer *buf = *manager_ctx;
  void *oldest = held[held_next];
  held[held_next] = block;
  held_next = (held_next + 1) % DLRUN_EXPORT_REUSE_DELAY;
  pthread_mutex_unlock(&live_mu);
  dlrun_free(oldest);
  release_export(buf);
}

/* The deleter of a block in the caller's storage, valid until this runs
 * (dlrun_export_into): taking its buffer makes a second call do nothing. */
static void delete_stored(void **manager_ctx) {
  dlrun_buffer *buf = __atomic_exchange_n(manager_ctx, NULL, __ATOMIC_ACQ_REL);
  if (buf) release_export(buf);
}

static void delete_legacy(DLManagedTensor *self) {
  if (self) delete_block(self, &self->manager_ctx);
}

static void delete_versioned(DLManagedTensorVersioned *self) {
  if (self) delete_block(self, &self->manager_ctx);
}

static void delete_stored_legacy(DLManagedTensor *self) {
  if (self) delete_stored(&self->manager_ctx);
}

static void delete_stored_versioned(DLManagedTensorVersioned *self) {
  if (self) delete_stored(&self->manager_ctx);
}

bool dlrun_export_source(const DLManagedTensor *legacy, const DLManagedTensorVersioned *versioned,
                         dlrun_export_origin *origin) {
  const void *managed = legacy ? (const void *)legacy : (const void *)versioned;
  /* Another producer's tensor (the caller's to read) has another deleter:
   * no lock, no lookup. */
  if (!managed ||
      (legacy ? legacy->deleter != delete_legacy : versioned->deleter != delete_versioned))
    return false;
  pthread_mutex_lock(&live_mu);
  /* Listed, so its deleter cannot run before we unlock. */
  bool found = live_find(managed) &&
               (legacy ? legacy->deleter == delete_legacy : versioned->deleter == delete_versioned);
  if (found) {
    const dlrun_buffer *buf = legacy ? legacy->manager_ctx : versioned->manager_ctx;
    *origin = (dlrun_export_origin){.ready = buf->ready, .rt = buf->dev->rt, .dev = buf->dev,
                                    .kind = buf->kind};
  }
  pthread_mutex_unlock(&live_mu);
  return found;
}

/* Where an array lives, in DLPack terms: host-visible memory (cpu devices,
 * pinned host memory) is (kDLCPU, 0); sim device memory (kDLExtDev, id). */
static DLDevice dl_device_of(const dlrun_buffer *b) {
  int32_t type, id;
  dlrun_buffer_dlpack_device(b, &type, &id);
  return (DLDevice){.device_type = (DLDeviceType)type, .device_id = id};
}

dlrun_status dlrun_export_device(dlrun_array *a, int32_t *device_type, int32_t *device_id) {
  DLRUN_NONNULL(a, "dlrun_export_device", "array");
  DLRUN_NONNULL(device_type, "dlrun_export_device", "device_type");
  DLRUN_NONNULL(device_id, "dlrun_export_device", "device_id");
  dlrun_status st = dlrun_array_check_live(a);
  if (st) return st;
  if (a->nshards > 1)
    return dlrun_fail(DLRUN_ERR_BUFFER, "__dlpack__ only supported for unsharded arrays.");
  dlrun_buffer *b;
  if ((st = dlrun_array_acquire_buffers(a, &b))) return st;
  DLDevice d = dl_device_of(b);
  dlrun_buffer_release(b);
  *device_type = (int32_t)d.device_type;
  *device_id = d.device_id;
  return DLRUN_OK;
}

/* The device a dl_device request names: the device whose device memory
 * exports as (type, id), as its platform says: the host cpu device for
 * (kDLCPU, 0), a sim device for (kDLExtDev, id); JAX's BufferError
 * otherwise. Types only imports read (pinned host memory's) name none. */
static dlrun_status resolve_dl_device(dlrun_runtime *rt, int32_t type, int32_t id,
                                      dlrun_device **out) {
  bool type_known;
  *out = dlrun_device_exporting_as(rt, type, id, &type_known);
  if (*out) return DLRUN_OK;
  char text[DLRUN_DL_CODE_TEXT];
  dlrun_dlpack_device_type_text(type, text, sizeof text);
  if (type_known)
    return dlrun_fail(DLRUN_ERR_BUFFER,
                      "The device specification passed to to_dlpack names device id %d, which "
                      "does not exist for DLDeviceType %s",
                      id, text);
  return dlrun_fail(DLRUN_ERR_BUFFER,
                    "The device specification passed to to_dlpack contains an unsupported device "
                    "type (DLDeviceType: %s)",
                    text);
}

/* A dtype whose DLPack code a later version added (1.1: the float8 family)
 * goes to any versioned consumer, labelled with that version (export_minor):
 * a 1.x consumer reads the code and refuses one it lacks (PyTorch asks for
 * (1, 0) and reads 1.1's codes). A legacy consumer (no max_version) may
 * predate the code and read the bytes as something else, or fail in its own
 * words: it gets the tensor only when the caller vouches for it. */
static dlrun_status check_type_code(dlrun_dtype dtype, const dlrun_export_options *o) {
  unsigned major, minor;
  dlrun_dtype_dlpack_since(dtype, &major, &minor);
  if (major == 0 || (o->has_max_version && o->max_major >= 1) || o->legacy_knows_1_1)
    return DLRUN_OK;
  const dlrun_dtype_info *info = dlrun_dtype_get(dtype);
  /* Sub-byte types: the code may be old (Int, UInt), the packed layout of
   * `bits` below 8 is what 1.1 set. */
  char code[DLRUN_DL_CODE_TEXT], what[192];
  dlrun_dlpack_type_code_text(info->dl_code, code, sizeof code);
  if (info->dl_bits < 8)
    snprintf(what, sizeof what,
             "%s is a packed sub-byte type (code=%s, bits=%u), whose layout DLPack %u.%u set",
             info->name, code, (unsigned)info->dl_bits, major, minor);
  else
    snprintf(what, sizeof what, "%s has DLPack type code %s, which DLPack %u.%u added",
             info->name, code, major, minor);
  return dlrun_fail(DLRUN_ERR_BUFFER,
                    "%s: the consumer of a legacy DLPack tensor (no max_version) may predate "
                    "it. Ask for max_version (1, 0) or later, or pass legacy_knows_1_1=true if "
                    "the consumer reads DLPack %u.%u's type codes.",
                    what, major, minor);
}

static dlrun_status check_options(const dlrun_array *a, const dlrun_export_options *o,
                                  const dlrun_buffer *b) {
  dlrun_status st;
  if (a->nshards > 1)
    return dlrun_fail(DLRUN_ERR_BUFFER,
                      "to_dlpack can only pack a dlpack tensor from an array on a singular "
                      "device, but an array with a Sharding over %zu devices was provided.",
                      a->nshards);
  if (o->has_max_version && o->max_major == 0 && o->max_minor < 5)
    return dlrun_fail(DLRUN_ERR_BUFFER,
                      "dlrun does not support any version below (0, 5) but version (%u, %u) was "
                      "requested.",
                      o->max_major, o->max_minor);
  if (o->has_stream && !dlrun_device_has_streams(b->dev)) {
    bool host = dlrun_memory_is_host(b->dev, b->kind); /* cpu devices, pinned host memory */
    if (host)
      return dlrun_fail(DLRUN_ERR_BUFFER,
                        "stream must be nil for arrays on %s, got %lld", b->dev->name,
                        (long long)o->stream);
    if (o->stream != -1)
      return dlrun_fail(DLRUN_ERR_BUFFER,
                        "stream must be nil (wait for the array) or -1 (do not wait) for arrays "
                        "on %s, got %lld",
                        b->dev->name, (long long)o->stream);
  }
  if ((unsigned)o->copy > DLRUN_COPY_ALWAYS)
    return dlrun_fail(DLRUN_ERR_VALUE,
                      "dlrun_export: copy must be DLRUN_COPY_IF_NEEDED (0), DLRUN_COPY_NEVER (1) "
                      "or DLRUN_COPY_ALWAYS (2), got %d",
                      (int)o->copy);
  if ((st = check_type_code(a->dtype, o))) return st;
  if ((unsigned)o->legacy_sharing > DLRUN_LEGACY_SHARE)
    return dlrun_fail(DLRUN_ERR_VALUE,
                      "dlrun_export: legacy_sharing must be DLRUN_LEGACY_PROTECT (0) or "
                      "DLRUN_LEGACY_SHARE (1), got %d",
                      (int)o->legacy_sharing);
  return DLRUN_OK;
}

/* "SimDevice(id=0)", or with the memory kind when `with_kind`. */
static const char *place_text(const dlrun_device *d, dlrun_memory_kind kind, bool with_kind,
                              char *buf, size_t n) {
  if (with_kind) snprintf(buf, n, "%s (memory_kind=%s)", d->name, dlrun_memory_kind_name(kind));
  else snprintf(buf, n, "%s", d->name);
  return buf;
}

dlrun_status dlrun_copy_false_error(const dlrun_device *dest, dlrun_memory_kind dest_kind,
                                    const dlrun_device *src, dlrun_memory_kind src_kind) {
  bool same = dest == src;
  char want[96], have[96];
  return dlrun_fail(DLRUN_ERR_VALUE,
                    "Specified device=%s which requires a copy since the source device is %s, "
                    "however copy=False. Set copy=True or copy=None to perform the requested "
                    "operation.",
                    place_text(dest, dest_kind, same, want, sizeof want),
                    place_text(src, src_kind, same, have, sizeof have));
}

/* A fresh copy of the array in `dev`'s `kind` memory; its counts go to
 * *stats. */
static dlrun_status copy_to(dlrun_array *a, dlrun_device *dev, dlrun_memory_kind kind,
                            dlrun_transfer_stats *stats, dlrun_buffer **out) {
  dlrun_sharding *s;
  dlrun_status st = dlrun_device_sharding(dev, kind, &s);
  if (st) return st;
  dlrun_array *copy;
  dlrun_put_options never = {.may_alias = DLRUN_ALIAS_NEVER, .stats = stats};
  st = dlrun_device_put(a, s, &never, &copy);
  dlrun_sharding_release(s);
  if (st) return st;
  st = dlrun_array_acquire_buffers(copy, out);
  dlrun_array_release(copy);
  return st;
}

/* The minor version a versioned export says: the one whose rules dlrun
 * follows, or the consumer's max_version when that is a lower 1.x (the
 * array API recommends answering with max_version when the producer can,
 * and a tensor under 1.2's rules, strides set, is valid under every 1.x),
 * but never below the version that brought the dtype's code (1.1 for the
 * float8 family: check_type_code). */
static uint32_t export_minor(const dlrun_export_options *o, dlrun_dtype dtype) {
  uint32_t minor = DLRUN_DLPACK_MINOR;
  if (o->max_major == DLRUN_DLPACK_MAJOR && o->max_minor < minor) minor = o->max_minor;
  unsigned since_major, since_minor;
  dlrun_dtype_dlpack_since(dtype, &since_major, &since_minor);
  if (since_major == DLRUN_DLPACK_MAJOR && minor < since_minor) minor = since_minor;
  return minor;
}

/* Fill the DLTensor and managed struct around buffer b (reference taken),
 * a tensor of ndim dims of dtype, in `storage` or, when NULL, in a block of
 * its own; list it live. A versioned tensor says version {1, minor}. Shape
 * and strides are never NULL, for ndim 0 too (DLPack 1.2: strides may be
 * NULL only then). */
static dlrun_status build(int ndim, const int64_t *dims, dlrun_dtype dtype, dlrun_buffer *b,
                          DLDevice device, const int64_t *layout, bool versioned, uint32_t minor,
                          bool copied, char *storage, dlrun_exported *out) {
  void *data;
  uint64_t byte_offset;
  dlrun_status st = dlrun_buffer_export_data(b, &data, &byte_offset);
  if (st) return st;
  char *block = storage;
  if (!block && (st = listed_block(block_size(ndim, versioned), &block))) return st;
  /* Counted before the block is written: the atomic updates then need not
   * wait for those (often cache-missing) stores. */
  dlrun_buffer_tag_export(b, 1);
  atomic_fetch_add(&b->dev->live_exports, 1);
  int64_t *shape = (int64_t *)(block + head_size(versioned)), *strides = shape + ndim;
  if (ndim) { /* ndim 0: dims and layout may be NULL */
    memcpy(shape, dims, (size_t)ndim * sizeof *shape);
    memcpy(strides, layout, (size_t)ndim * sizeof *strides);
  }
  const dlrun_dtype_info *info = dlrun_dtype_get(dtype);
  DLTensor t = {
      .data = b->nbytes ? data : NULL,
      .device = device,
      .ndim = ndim,
      .dtype = {.code = info->dl_code, .bits = info->dl_bits, .lanes = info->dl_lanes},
      .shape = shape,     /* never NULL, even for ndim 0 (dlpack.h) */
      .strides = strides, /* never NULL: 1.2 consumers may refuse NULL */
      .byte_offset = byte_offset,
  };
  *out = (dlrun_exported){0};
  if (versioned) {
    DLManagedTensorVersioned *m = (DLManagedTensorVersioned *)block;
    m->version = (DLPackVersion){.major = DLRUN_DLPACK_MAJOR, .minor = minor};
    m->manager_ctx = b;
    m->deleter = storage ? delete_stored_versioned : delete_versioned;
    /* A copy is the consumer's alone; shared memory must not be written. */
    m->flags = copied ? DLPACK_FLAG_BITMASK_IS_COPIED : DLPACK_FLAG_BITMASK_READ_ONLY;
    m->dl_tensor = t;
    out->versioned = m;
  } else {
    DLManagedTensor *m = (DLManagedTensor *)block;
    m->dl_tensor = t;
    m->manager_ctx = b;
    m->deleter = storage ? delete_stored_legacy : delete_legacy;
    out->legacy = m;
  }
  out->copied = copied;
  return DLRUN_OK;
}

/* dlrun_export, into `storage` when not NULL (checked by the caller). */
static dlrun_status export_array(dlrun_array *a, const dlrun_export_options *options,
                                 char *storage, dlrun_exported *out) {
  uint64_t start = dlrun_trace_enabled() ? dlrun_trace_now() : 0;
  dlrun_export_options o = options ? *options : (dlrun_export_options){0};
  dlrun_status st = dlrun_array_check_live(a);
  if (st) return st;
  if (a->nshards > 1) return check_options(a, &o, NULL);
  dlrun_buffer *b;
  if ((st = dlrun_array_acquire_buffers(a, &b))) return st;
  if ((st = check_options(a, &o, b))) goto fail;
  /* Data whose writing already failed is never handed out, even with
   * stream -1 (a failure still pending then is the consumer's to meet). */
  if ((st = dlrun_event_status(b->ready))) goto fail;
  dlrun_device *target = b->dev;
  if (o.has_dl_device &&
      (st = resolve_dl_device(b->dev->rt, o.device_type, o.device_id, &target)))
    goto fail;
  /* A move lands in the target's device memory. */
  bool move = o.has_dl_device &&
              !dlrun_memory_same_place(b->dev, b->kind, target, DLRUN_MEM_DEVICE);
  if (move && o.copy == DLRUN_COPY_NEVER) {
    st = dlrun_copy_false_error(target, DLRUN_MEM_DEVICE, b->dev, b->kind);
    goto fail;
  }
  bool versioned = o.has_max_version && o.max_major >= 1;
  /* A legacy tensor cannot say READ_ONLY: unless the caller vouches for
   * the consumer, it gets a copy, so that no write reaches dlrun's arrays. */
  bool protect = !versioned && !move && o.copy != DLRUN_COPY_ALWAYS &&
                 o.legacy_sharing == DLRUN_LEGACY_PROTECT && b->nbytes;
  if (protect && o.copy == DLRUN_COPY_NEVER) {
    st = dlrun_fail(DLRUN_ERR_VALUE,
                    "a legacy DLPack tensor cannot be marked read-only, so exporting the array on "
                    "%s as one needs a copy (a consumer could write into memory dlrun's arrays "
                    "share), but copy=False. Ask for max_version (1, 0) or later (READ_ONLY), or "
                    "for legacy_sharing=share if the consumer never writes.",
                    b->dev->name);
    goto fail;
  }
  bool copied = move || o.copy == DLRUN_COPY_ALWAYS || protect;
  dlrun_transfer_stats counted = {0};
  if (copied) {
    dlrun_buffer *fresh;
    /* A move lands in the target's device memory; a plain copy stays put. */
    if ((st = copy_to(a, target, move ? DLRUN_MEM_DEVICE : b->kind, &counted, &fresh))) goto fail;
    dlrun_buffer_release(b);
    b = fresh;
  }
  /* The stream protocol: nil waits here; -1 does not wait; a consumer's
   * queue (platforms with queues) waits for the data device-side. Data
   * whose writing failed is never handed out. */
  if (o.has_stream && o.stream == -1) st = dlrun_event_status(b->ready);
  else if (o.has_stream) st = dlrun_device_stream_wait(b->dev, o.stream, b->ready);
  else st = dlrun_event_wait(b->ready);
  if (st) goto fail;
  /* Memory already where the consumer asked (pinned host memory asked
   * for as (kDLCPU, 0)) is named as asked, not by its own code. */
  DLDevice device = dl_device_of(b);
  if (o.has_dl_device && !move)
    device = (DLDevice){.device_type = (DLDeviceType)o.device_type, .device_id = o.device_id};
  int64_t scratch[DLRUN_MAX_NDIM];
  uint32_t minor = export_minor(&o, a->dtype);
  if ((st = build(a->ndim, a->dims, a->dtype, b, device,
                  dlrun_buffer_layout(b, a->ndim, a->dims, scratch), versioned, minor, copied,
                  storage, out)))
    goto fail;
  if (o.stats) *o.stats = counted;
  if (dlrun_trace_enabled())
    dlrun_trace_event(NULL, "dlpack", "export", start,
                      "\"device\": \"%s\", \"bytes\": %llu, \"versioned\": %s, \"copied\": %s",
                      b->dev->name, (unsigned long long)b->nbytes, versioned ? "true" : "false",
                      copied ? "true" : "false");
  return DLRUN_OK;
fail:
  dlrun_buffer_release(b);
  return st;
}

dlrun_status dlrun_export(dlrun_array *a, const dlrun_export_options *options,
                          dlrun_exported *out) {
  DLRUN_NONNULL(out, "dlrun_export", "out");
  *out = (dlrun_exported){0};
  DLRUN_NONNULL(a, "dlrun_export", "array");
  return export_array(a, options, NULL, out);
}

dlrun_status dlrun_export_into(dlrun_array *a, const dlrun_export_options *options,
                               void *storage, size_t size, dlrun_exported *out) {
  DLRUN_NONNULL(out, "dlrun_export_into", "out");
  *out = (dlrun_exported){0};
  DLRUN_NONNULL(a, "dlrun_export_into", "array");
  DLRUN_NONNULL(storage, "dlrun_export_into", "storage");
  if ((uintptr_t)storage % 8)
    return dlrun_fail(DLRUN_ERR_VALUE, "dlrun_export_into: storage %p is not 8-byte aligned",
                      storage);
  size_t need = block_size(a->ndim, wants_versioned(options));
  if (size < need)
    return dlrun_fail(DLRUN_ERR_VALUE,
                      "dlrun_export_into: storage of %zu bytes is too small: this export of an "
                      "array of %d dimensions needs dlrun_export_size(%d, options) = %zu",
                      size, a->ndim, a->ndim, need);
  return export_array(a, options, storage, out);
}

dlrun_status dlrun_export_detach(dlrun_exported *e) {
  DLRUN_NONNULL(e, "dlrun_export_detach", "e");
  /* The caller owns the tensor: reading it is safe, and nothing else
   * changes it meanwhile. */
  DLManagedTensor *l = e->legacy;
  DLManagedTensorVersioned *v = e->versioned;
  char *old = l ? (char *)l : (char *)v;
  bool versioned = !l;
  void **ctx = l ? &l->manager_ctx : v ? &v->manager_ctx : NULL;
  bool stored = l ? l->deleter == delete_stored_legacy : v && v->deleter == delete_stored_versioned;
  bool own = l ? l->deleter == delete_legacy : v && v->deleter == delete_versioned;
  if (own) {
    pthread_mutex_lock(&live_mu);
    own = live_find(old) != NULL;
    pthread_mutex_unlock(&live_mu);
  }
  if (own) return DLRUN_OK; /* already in memory of its own */
  if (!stored || !__atomic_load_n(ctx, __ATOMIC_ACQUIRE))
    return dlrun_fail(DLRUN_ERR_VALUE,
                      "dlrun_export_detach: the tensor is not a live export of dlrun (made "
                      "elsewhere, or its deleter has run)");
  int ndim = l ? l->dl_tensor.ndim : v->dl_tensor.ndim;
  size_t size = block_size(ndim, versioned);
  char *block;
  dlrun_status st = listed_block(size, &block);
  if (st) return st;
  memcpy(block, old, size); /* manager_ctx, the buffer, included */
  int64_t *shape = (int64_t *)(block + head_size(versioned));
  if (l) {
    DLManagedTensor *m = (DLManagedTensor *)block;
    m->deleter = delete_legacy;
    m->dl_tensor.shape = shape;
    m->dl_tensor.strides = shape + ndim;
    e->legacy = m;
  } else {
    DLManagedTensorVersioned *m = (DLManagedTensorVersioned *)block;
    m->deleter = delete_versioned;
    m->dl_tensor.shape = shape;
    m->dl_tensor.strides = shape + ndim;
    e->versioned = m;
  }
  __atomic_store_n(ctx, NULL, __ATOMIC_RELEASE); /* the storage is free */
  return DLRUN_OK;
}

dlrun_status dlrun_export_fresh(dlrun_buffer *b, int ndim, const int64_t *dims,
                                dlrun_dtype dtype, DLManagedTensorVersioned **out) {
  int64_t scratch[DLRUN_MAX_NDIM];
  dlrun_exported e;
  dlrun_status st = build(ndim, dims, dtype, b, dl_device_of(b),
                          dlrun_buffer_layout(b, ndim, dims, scratch), true, DLRUN_DLPACK_MINOR,
                          false, NULL, &e);
  if (st) return st;
  e.versioned->flags = 0; /* the caller's to write: neither READ_ONLY nor a copy */
  *out = e.versioned;
  return DLRUN_OK;
}

int64_t dlrun_live_exports(dlrun_runtime *rt) {
  /* Every export counts on its buffer's device (one count per export). */
  int64_t n = 0;
  for (size_t i = 0; rt && i < rt->ndevices; i++) n += atomic_load(&rt->devices[i].live_exports);
  return n;
}
