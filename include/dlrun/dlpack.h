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

/* Options of an export, as __dlpack__ takes them. */
typedef struct dlrun_export_options {
  bool has_max_version; /* absent: legacy DLManagedTensor */
  uint32_t max_major, max_minor;
  bool has_dl_device;   /* absent: the array's own device */
  int32_t device_type, device_id;
  int copy;             /* -1: copy only if needed; 0: never; 1: always */
  bool has_stream;      /* absent: wait for the array's data */
  int64_t stream;       /* sim devices: -1 = do not wait */
  /* Optional (NULL: unused). Caller-owned; on success receives the copies
   * this export made (dl_device moves, copy = 1), all zero when it shares
   * the array's memory. The runtime's totals are counted as well. */
  dlrun_transfer_stats *stats;
} dlrun_export_options;

/* A tensor handed out by an export: exactly one of the two is set. The
 * consumer owns it and must call its deleter once (from any thread); until
 * then its memory stays valid, whatever happens to the array. */
typedef struct dlrun_exported {
  DLManagedTensor *legacy;
  DLManagedTensorVersioned *versioned;
} dlrun_exported;

/* Export a single-device array. JAX's errors and texts: a multi-device array
 * (BufferError), a version below 0.5, an unknown device type, a copy needed
 * with copy = 0 (ValueError; memory kinds are named when only they differ),
 * an unsupported stream (BufferError). Exporting never consumes the array. */
DLRUN_API dlrun_status dlrun_export(dlrun_array *a, const dlrun_export_options *options,
                                    dlrun_exported *out);

/* The (device_type, device_id) an array would export to by default. A
 * multi-device array is DLRUN_ERR_BUFFER "__dlpack__ only supported for
 * unsharded arrays." */
DLRUN_API dlrun_status dlrun_export_device(dlrun_array *a, int32_t *device_type,
                                           int32_t *device_id);

/* Exports of a runtime whose deleter has not run yet (a leak shows here). */
DLRUN_API int64_t dlrun_live_exports(dlrun_runtime *rt);

/* Options of an import. */
typedef struct dlrun_import_options {
  dlrun_sharding *target; /* NULL: the tensor's own device */
  int copy;               /* -1: copy only if needed; 0: never; 1: always */
} dlrun_import_options;

/* Import a producer's tensor into a new array on `rt`'s devices. Exactly
 * one of legacy / versioned is given. A tensor dlrun itself exported (with
 * stream -1 or not) is read only once the exported data is written: a copy
 * waits for it, a shared buffer becomes ready with it. Everything is checked before taking
 * ownership: on failure the producer still owns the tensor and its deleter
 * has not been called — except for an unknown major version, where (as the
 * protocol says) the deleter is called and DLRUN_ERR_BUFFER returned. On
 * success the array owns the tensor and calls its deleter exactly once, when
 * the array (or a copy made at import) no longer needs it. */
DLRUN_API dlrun_status dlrun_import(dlrun_runtime *rt, DLManagedTensor *legacy,
                                    DLManagedTensorVersioned *versioned,
                                    const dlrun_import_options *options, dlrun_array **out);

#ifdef __cplusplus
}
#endif
#endif
