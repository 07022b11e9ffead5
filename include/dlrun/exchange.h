/* DLPack 1.3's exchange table for C hosts: an allocator and a work stream.
 *
 * A library written against DLPack 1.3 (TVM-FFI takes exactly such an
 * allocator, TVMFFIEnvSetDLPackManagedTensorAllocator) asks its host for
 * two things: memory for its outputs (DLPackManagedTensorAllocator) and the
 * queue to launch on (DLPackCurrentWorkStream). dlrun_exchange_allocator
 * and dlrun_exchange_work_stream have exactly those signatures and answer
 * from the pools and queues of the runtime bound by dlrun_exchange_bind: the
 * library's outputs are dlrun's memory, and its work is ordered with
 * dlrun's. docs/dlpack.md, "The exchange table for C hosts".
 *
 * DLPack's header before 1.2 lacks the typedefs; they are declared here
 * then, as 1.3 has them. A development snapshot of dlpack.h that has them
 * under an older version number defines DLRUN_DLPACK_HAS_EXCHANGE_API before
 * including this header. */
#ifndef DLRUN_EXCHANGE_H
#define DLRUN_EXCHANGE_H

#include <stdint.h>

#include "dlpack.h"
#include "export.h"
#include "runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

#if !defined(DLRUN_DLPACK_HAS_EXCHANGE_API) &&                                     \
    (!defined(DLPACK_MAJOR_VERSION) ||                                             \
     (DLPACK_MAJOR_VERSION == 1 && DLPACK_MINOR_VERSION < 2))
/* DLPack 1.3's exchange declarations (dlpack.h, "fast exchange protocol"),
 * absent from headers before 1.2. */
typedef int (*DLPackManagedTensorAllocator)(DLTensor *prototype, DLManagedTensorVersioned **out,
                                            void *error_ctx,
                                            void (*SetError)(void *error_ctx, const char *kind,
                                                             const char *message));
typedef int (*DLPackManagedTensorFromPyObjectNoSync)(void *py_object,
                                                     DLManagedTensorVersioned **out);
typedef int (*DLPackDLTensorFromPyObjectNoSync)(void *py_object, DLTensor *out);
typedef int (*DLPackCurrentWorkStream)(DLDeviceType device_type, int32_t device_id,
                                       void **out_current_stream);
typedef int (*DLPackManagedTensorToPyObjectNoSync)(DLManagedTensorVersioned *tensor,
                                                   void **out_py_object);
typedef struct DLPackExchangeAPIHeader {
  DLPackVersion version;
  struct DLPackExchangeAPIHeader *prev_api;
} DLPackExchangeAPIHeader;
typedef struct DLPackExchangeAPI {
  DLPackExchangeAPIHeader header;
  DLPackManagedTensorAllocator managed_tensor_allocator;
  DLPackManagedTensorFromPyObjectNoSync managed_tensor_from_py_object_no_sync;
  DLPackManagedTensorToPyObjectNoSync managed_tensor_to_py_object_no_sync;
  DLPackDLTensorFromPyObjectNoSync dltensor_from_py_object_no_sync;
  DLPackCurrentWorkStream current_work_stream;
} DLPackExchangeAPI;
#endif

/* Bind the runtime whose pools and queues the exchange functions below use,
 * process-wide (the allocator's signature has no runtime argument). The
 * binding holds a reference of its own on rt (the caller keeps its own);
 * the runtime bound before, if any, loses the binding's reference.
 * dlrun_exchange_bind(NULL) unbinds: the functions then refuse
 * (RuntimeError). Safe from any thread, at any time, also while the
 * functions below run on other threads (each call uses the runtime bound
 * when it starts). Tensors already allocated keep their runtime alive,
 * whatever is bound later. */
DLRUN_API void dlrun_exchange_bind(dlrun_runtime *rt);

/* DLPackManagedTensorAllocator on the bound runtime: a fresh row-major
 * tensor of the prototype's dtype, ndim, shape and device, in the memory of
 * that device that exports as exactly (device_type, device_id) (a sim
 * device's (kDLExtDev, k), the host's (kDLCPU, 0), an OpenCL device's
 * (kDLOpenCL, k), a CUDA device's (kDLCUDA, k), CUDA's pinned host memory
 * (kDLCUDAHost, 0)), taken from that memory's pool. Only dtype, ndim, shape
 * and device are read, as DLPack says: the prototype's data, strides and
 * byte_offset are ignored, and the prototype stays the caller's.
 *
 * Returns 0 with *out set: the caller owns the tensor (version {1, 2},
 * flags 0: writable, neither read-only nor a copy; shape and strides never
 * NULL; data NULL for zero elements, else the platform's data and
 * byte_offset as dlrun's exports have them; contents undefined, as
 * torch.empty's) and calls its deleter once, from any thread, which returns
 * the block to the pool. It counts in dlrun_live_exports until then, and
 * dlrun_import takes it back without a copy.
 *
 * Returns -1 with *out NULL (when out is not NULL) and calls
 * SetError(error_ctx, kind, message) once, kind a Python exception name:
 * ValueError (NULL prototype or out, ndim outside 0 to DLRUN_MAX_NDIM, NULL
 * shape, a negative dimension, a size past 2^63 bytes), BufferError (a
 * dtype dlrun lacks, lanes other than 1, a device this runtime has no
 * memory for: the message names it, kDLCUDA:1, and lists those it has),
 * RuntimeError (no runtime bound), MemoryError (the pool cannot hold the
 * tensor: the bytes asked for and those in use, free and reserved). The
 * same message is the calling thread's dlrun_last_error(). A NULL SetError
 * is allowed: the function then only returns -1. */
DLRUN_API int dlrun_exchange_allocator(DLTensor *prototype, DLManagedTensorVersioned **out,
                                       void *error_ctx,
                                       void (*SetError)(void *error_ctx, const char *kind,
                                                        const char *message));

/* DLPackCurrentWorkStream on the bound runtime: *out_current_stream gets the
 * queue dlrun runs its work for (device_type, device_id) on, so that a
 * library that launches there is ordered after dlrun's work and before
 * dlrun's later work: the CUstream of a CUDA device, the cl_command_queue
 * of an OpenCL device; NULL for host memory (kDLCPU, kDLCUDAHost) and for
 * devices with no queue a library can name (sim: finish writing before the
 * tensor goes back to dlrun). Borrowed: valid while the runtime lives.
 * Returns 0; -1 with *out_current_stream NULL and dlrun_last_error() set
 * when out_current_stream is NULL, no runtime is bound, or the runtime has
 * no memory that exports as (device_type, device_id) (the allocator's
 * message). */
DLRUN_API int dlrun_exchange_work_stream(DLDeviceType device_type, int32_t device_id,
                                         void **out_current_stream);

/* A static DLPackExchangeAPI table, version {1, 3}, prev_api NULL, valid
 * for the life of the process: managed_tensor_allocator and
 * current_work_stream are the two functions above; dltensor_from_py_object_no_sync
 * is NULL (optional in DLPack); managed_tensor_from_py_object_no_sync and
 * managed_tensor_to_py_object_no_sync, which DLPack requires, refuse (-1,
 * *out NULL, dlrun_last_error() set: dlrun has no Python objects). */
DLRUN_API const DLPackExchangeAPI *dlrun_exchange_api(void);

#ifdef __cplusplus
}
#endif
#endif
