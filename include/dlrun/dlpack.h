/* DLPack export and import.
 *
 * Builds against the system's DLPack 0.6 header and against 1.x: the 1.x
 * additions (versioned tensors, flags, the bool type code) are declared here
 * only when the included header lacks them. */
#ifndef DLRUN_DLPACK_H
#define DLRUN_DLPACK_H

#include <stdbool.h>
#include <stdint.h>

#include <dlpack/dlpack.h>

#include "array.h"
#include "export.h"
#include "status.h"

#ifdef __cplusplus
extern "C" {
#endif

#ifndef DLPACK_MAJOR_VERSION
/* DLPack 1.x declarations, absent from 0.6 headers. */
typedef struct DLPackVersion {
  uint32_t major;
  uint32_t minor;
} DLPackVersion;

typedef struct DLManagedTensorVersioned {
  DLPackVersion version;
  void *manager_ctx;
  void (*deleter)(struct DLManagedTensorVersioned *self);
  uint64_t flags;
  DLTensor dl_tensor;
} DLManagedTensorVersioned;

#define DLPACK_FLAG_BITMASK_READ_ONLY (1UL << 0UL)
#define DLPACK_FLAG_BITMASK_IS_COPIED (1UL << 1UL)
#define DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED (1UL << 2UL)
#endif

/* Type and device codes that 0.6's enums lack (enumerators in 1.x). */
#define DLRUN_DL_BOOL 6
#define DLRUN_DL_ONEAPI 14

/* The DLPack version whose rules dlrun follows for versioned exports. */
#define DLRUN_DLPACK_MAJOR 1
#define DLRUN_DLPACK_MINOR 1

/* Whether a call may copy, as the array API's `copy` (None, False, True).
 * Zero is the default. */
typedef enum dlrun_copy_mode {
  DLRUN_COPY_IF_NEEDED = 0, /* copy only when needed (copy=None) */
  DLRUN_COPY_NEVER = 1,     /* never: a needed copy is DLRUN_ERR_VALUE (copy=False) */
  DLRUN_COPY_ALWAYS = 2,    /* always a fresh copy (copy=True) */
} dlrun_copy_mode;

/* What a legacy export does with the array's memory: a legacy tensor has
 * no READ_ONLY flag, and a consumer that writes into shared memory would
 * change every dlrun array sharing it. Zero is the default. */
typedef enum dlrun_legacy_sharing {
  /* Export a copy, the consumer's alone (no copy for zero-size arrays). */
  DLRUN_LEGACY_PROTECT = 0,
  /* Share the array's memory, as JAX does: the caller vouches that the
   * consumer never writes (NumPy, for one, imports read-only arrays). */
  DLRUN_LEGACY_SHARE = 1,
} dlrun_legacy_sharing;

/* Options of an export, as __dlpack__ takes them. All zero (or a NULL
 * pointer) asks for the defaults: a legacy tensor on the array's own
 * device, copied only if needed, after the array's data is written. Read
 * during the call only. */
typedef struct dlrun_export_options {
  bool has_max_version; /* false: a legacy DLManagedTensor */
  uint32_t max_major, max_minor;
  bool has_dl_device;   /* false: the array's own device */
  int32_t device_type, device_id;
  dlrun_copy_mode copy;
  bool has_stream;      /* false: wait for the array's data */
  int64_t stream;       /* sim devices: -1 = do not wait */
  /* Optional (NULL: unused). Caller-owned; on success receives the copies
   * this export made (dl_device moves, DLRUN_COPY_ALWAYS, the copy of a
   * legacy export), all zero when it shares the array's memory. The runtime's
   * totals are counted as well. */
  dlrun_transfer_stats *stats;
  dlrun_legacy_sharing legacy_sharing; /* read by legacy exports only */
  /* Read only without max_version: the caller vouches that the consumer of
   * the legacy tensor reads DLPack 1.1's type codes. Without it, exporting
   * a dtype DLPack 1.1 added (the float8 family) with no max_version is
   * DLRUN_ERR_BUFFER; so is any export asking for max_version below (1, 1),
   * whatever this says. */
  bool legacy_knows_1_1;
} dlrun_export_options;

/* A tensor handed out by an export: exactly one of legacy / versioned is
 * set. The consumer owns it and must call its deleter once (from any
 * thread); until then its memory stays valid, whatever happens to the
 * array. The deleter frees the struct: a second call through a function
 * pointer saved before the first (`d = m->deleter; d(m); d(m);`) does
 * nothing when it comes before DLRUN_EXPORT_REUSE_DELAY further exports
 * have been released (their memory is held back from reuse until then);
 * `m->deleter(m)` a second time reads the released struct, which DLPack
 * forbids. */
typedef struct dlrun_exported {
  DLManagedTensor *legacy;
  DLManagedTensorVersioned *versioned;
  /* Whether the tensor is a copy, the consumer's alone (IS_COPIED for a
   * versioned tensor; a legacy one cannot say it). */
  bool copied;
} dlrun_exported;

/* Released exports whose memory is held back from reuse (see above). */
#define DLRUN_EXPORT_REUSE_DELAY 1024

/* Export a single-device array. `options` NULL: the defaults (all zero).
 * JAX's errors and texts: a multi-device array (BufferError), a version
 * below 0.5, an unknown device type, a copy needed with DLRUN_COPY_NEVER
 * (ValueError; memory kinds are named when only they differ), an
 * unsupported stream (BufferError). Exporting never consumes the array. On
 * failure *out is all zero and nothing is left to release.
 *
 * Layout: shape and strides are never NULL (for ndim 0 they point at zero
 * entries after the struct), strides in elements, byte_offset 0; data is
 * NULL for zero-size arrays. A versioned tensor is READ_ONLY when it shares
 * dlrun's memory, IS_COPIED when it is a copy. A legacy tensor is a copy
 * unless `legacy_sharing` is DLRUN_LEGACY_SHARE (with DLRUN_COPY_NEVER and
 * no DLRUN_LEGACY_SHARE, a non-empty legacy export is DLRUN_ERR_VALUE
 * naming the ways out); `out->copied` says which it got. */
DLRUN_API dlrun_status dlrun_export(dlrun_array *a, const dlrun_export_options *options,
                                    dlrun_exported *out);

/* dlrun_export with the tensor placed in `storage`, `size` bytes of the
 * caller's (8-byte aligned, at least dlrun_export_size(ndim of a,
 * options)), rather
 * than in memory of its own: for a binding whose handle holds the export
 * (a Lua Capsule), one allocation per export instead of two. The caller
 * owns the tensor as any export's and keeps `storage` valid, unmoved, until
 * its deleter has run (which releases what the export holds, never the
 * storage). The tensor must not reach a consumer, who may call the deleter
 * at any later time, from any thread, twice by mistake: dlrun_export_detach
 * first. Errors as dlrun_export's; a NULL, misaligned or small `storage` is
 * DLRUN_ERR_VALUE. */
DLRUN_API dlrun_status dlrun_export_into(dlrun_array *a, const dlrun_export_options *options,
                                         void *storage, size_t size, dlrun_exported *out);

/* The bytes dlrun_export_into needs for an export of an array of ndim
 * dimensions with these options (NULL: the defaults); for ndim outside 0 to
 * DLRUN_MAX_NDIM, enough for any array. */
DLRUN_API size_t dlrun_export_size(int ndim, const dlrun_export_options *options);

/* Move a tensor of dlrun_export_into out of its storage into memory of its
 * own, where it is a tensor as dlrun_export makes (a consumer may have it):
 * *e then names it, and the storage is free. A tensor already in memory of
 * its own is left as it is. On failure (DLRUN_ERR_RESOURCE_EXHAUSTED;
 * DLRUN_ERR_VALUE for a tensor that is not a live export of dlrun) *e is
 * unchanged and still valid. */
DLRUN_API dlrun_status dlrun_export_detach(dlrun_exported *e);

/* The (device_type, device_id) an array would export to by default. A
 * multi-device array is DLRUN_ERR_BUFFER "__dlpack__ only supported for
 * unsharded arrays." */
DLRUN_API dlrun_status dlrun_export_device(dlrun_array *a, int32_t *device_type,
                                           int32_t *device_id);

/* Exports of a runtime whose deleter has not run yet (a leak shows here). */
DLRUN_API int64_t dlrun_live_exports(dlrun_runtime *rt);

/* Options of an import. All zero (or a NULL pointer) asks for the defaults:
 * the tensor's own device, copied only if needed. Read during the call. */
typedef struct dlrun_import_options {
  dlrun_sharding *target; /* NULL: the tensor's own device; borrowed */
  dlrun_copy_mode copy;
} dlrun_import_options;

/* What an import did with the producer's tensor: who owns it now. */
typedef enum dlrun_import_outcome {
  /* Refused, tensor untouched: the caller still owns it and must release
   * it (call its deleter). Every failure but the one below. */
  DLRUN_IMPORT_REFUSED = 0,
  /* Refused, and dlrun has called the deleter, as DLPack says a consumer
   * must for a major version it cannot read: the tensor is gone. */
  DLRUN_IMPORT_RELEASED = 1,
  /* Imported without a copy: the array wraps the producer's memory and
   * owns the tensor; its deleter runs once, when the array and every array
   * sharing that memory are gone. */
  DLRUN_IMPORT_WRAPPED = 2,
  /* Imported as a copy: the deleter has already been called. */
  DLRUN_IMPORT_COPIED = 3,
} dlrun_import_outcome;

/* Import a producer's tensor into a new array on `rt`'s devices. Exactly
 * one of legacy / versioned is given. `options` NULL: the defaults.
 * `outcome` (optional, NULL: not reported) always receives what happened
 * to the tensor, on success and on failure, for legacy and versioned
 * tensors alike: the one answer to "must I still release it?" (only
 * DLRUN_IMPORT_REFUSED says yes). Every check comes before dlrun takes
 * ownership; the one refusal that releases the tensor is an unknown major
 * version (DLRUN_ERR_BUFFER, DLRUN_IMPORT_RELEASED). Memory labelled with
 * a device of dlrun's (kDLExtDev) must lie in that device's memory, else
 * DLRUN_ERR_BUFFER. A tensor dlrun itself exported (with stream -1 or not)
 * is read only once the exported data is written: a copy waits for it, a
 * shared buffer becomes ready with it. *out receives one reference (NULL on
 * failure). */
DLRUN_API dlrun_status dlrun_import(dlrun_runtime *rt, DLManagedTensor *legacy,
                                    DLManagedTensorVersioned *versioned,
                                    const dlrun_import_options *options, dlrun_array **out,
                                    dlrun_import_outcome *outcome);

/* The DLPack stream protocol, consumer side: the `stream` a consumer in
 * `rt` passes to a producer's __dlpack__ for a tensor on (device_type,
 * device_id), so that the producer orders its work before the consumer's
 * queue reads it. true with *stream set when that device is one of rt's
 * and its platform has queues a producer can name (an OpenCL device's
 * command queue); false when the consumer passes none (sim, cpu, and
 * devices rt does not know: the producer then waits on the host). */
DLRUN_API bool dlrun_dlpack_consumer_stream(dlrun_runtime *rt, int32_t device_type,
                                           int32_t device_id, int64_t *stream);

/* How dlrun_import made `a`: DLRUN_IMPORT_WRAPPED or DLRUN_IMPORT_COPIED
 * for the array it returned; DLRUN_IMPORT_REFUSED (zero) for every other
 * array, arrays made from an import (device_put, shard_data) included. */
DLRUN_API dlrun_import_outcome dlrun_array_import_outcome(const dlrun_array *a);

#ifdef __cplusplus
}
#endif
#endif
