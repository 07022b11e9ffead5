/* The subset of the CUDA driver API that dlrun uses, declared from NVIDIA's
 * public documentation of the names, signatures, constants and struct
 * layouts (the CUDA Driver API reference), never from cuda.h. Everything is
 * prefixed (dlcu_, DLCU_) so that this header and cuda.h can be compiled in
 * one translation unit: check_cuda_h.c asserts every size, offset and
 * constant here against cuda.h where one is installed.
 *
 * The library is loaded at run time (loader.c): the table dlcu_api holds one
 * pointer per entry point, resolved through cuGetProcAddress_v2 (CUDA 12 and
 * later) or dlsym of the versioned symbol name. The same header serves the
 * test's driver double (spec/cuda/), which implements these entries. */
#ifndef DLRUN_CUDA_DRIVER_API_H
#define DLRUN_CUDA_DRIVER_API_H

#include <stddef.h>
#include <stdint.h>

/* ---- scalar and handle types ---- */
typedef int dlcu_result;                       /* CUresult */
typedef int dlcu_device;                       /* CUdevice (an ordinal) */
typedef unsigned long long dlcu_ptr;           /* CUdeviceptr (CUdeviceptr_v2) */
typedef unsigned long long dlcu_mem_handle;    /* CUmemGenericAllocationHandle */
typedef struct dlcu_ctx_st *dlcu_context;      /* CUcontext */
typedef struct dlcu_stream_st *dlcu_stream;    /* CUstream */
typedef struct dlcu_event_st *dlcu_event;      /* CUevent */
typedef struct dlcu_module_st *dlcu_module;    /* CUmodule */
typedef struct dlcu_function_st *dlcu_function; /* CUfunction */
typedef struct dlcu_array_st *dlcu_array;      /* CUarray (never used, in the structs) */

/* ---- CUresult values dlrun names or acts on ---- */
enum {
  DLCU_SUCCESS = 0,
  DLCU_ERROR_INVALID_VALUE = 1,
  DLCU_ERROR_OUT_OF_MEMORY = 2,
  DLCU_ERROR_NOT_INITIALIZED = 3,
  DLCU_ERROR_DEINITIALIZED = 4,
  DLCU_ERROR_STUB_LIBRARY = 34,
  DLCU_ERROR_NO_DEVICE = 100,
  DLCU_ERROR_INVALID_DEVICE = 101,
  DLCU_ERROR_INVALID_IMAGE = 200,
  DLCU_ERROR_INVALID_CONTEXT = 201,
  DLCU_ERROR_NO_BINARY_FOR_GPU = 209,
  DLCU_ERROR_PEER_ACCESS_UNSUPPORTED = 217,
  DLCU_ERROR_INVALID_PTX = 218,
  DLCU_ERROR_UNSUPPORTED_PTX_VERSION = 222,
  DLCU_ERROR_OPERATING_SYSTEM = 304,
  DLCU_ERROR_INVALID_HANDLE = 400,
  DLCU_ERROR_NOT_FOUND = 500,
  DLCU_ERROR_NOT_READY = 600,
  DLCU_ERROR_ILLEGAL_ADDRESS = 700,
  DLCU_ERROR_LAUNCH_OUT_OF_RESOURCES = 701,
  DLCU_ERROR_PEER_ACCESS_ALREADY_ENABLED = 704,
  DLCU_ERROR_PEER_ACCESS_NOT_ENABLED = 705,
  DLCU_ERROR_LAUNCH_FAILED = 719,
  DLCU_ERROR_NOT_PERMITTED = 800,
  DLCU_ERROR_NOT_SUPPORTED = 801,
  DLCU_ERROR_SYSTEM_DRIVER_MISMATCH = 803,
  DLCU_ERROR_UNKNOWN = 999,
};

/* ---- flags and enumerations ---- */
enum {
  DLCU_STREAM_NON_BLOCKING = 0x1, /* CU_STREAM_NON_BLOCKING */
  DLCU_EVENT_DISABLE_TIMING = 0x2, /* CU_EVENT_DISABLE_TIMING */
  DLCU_MEMHOSTALLOC_PORTABLE = 0x1, /* CU_MEMHOSTALLOC_PORTABLE */
  DLCU_MEMHOSTALLOC_DEVICEMAP = 0x2, /* CU_MEMHOSTALLOC_DEVICEMAP */
  DLCU_GET_PROC_ADDRESS_DEFAULT = 0, /* CU_GET_PROC_ADDRESS_DEFAULT */
};

typedef enum dlcu_memorytype { /* CUmemorytype */
  DLCU_MEMORYTYPE_HOST = 1,
  DLCU_MEMORYTYPE_DEVICE = 2,
  DLCU_MEMORYTYPE_ARRAY = 3,
  DLCU_MEMORYTYPE_UNIFIED = 4,
} dlcu_memorytype;

typedef enum dlcu_pointer_attribute { /* CUpointer_attribute */
  DLCU_POINTER_ATTRIBUTE_CONTEXT = 1,
  DLCU_POINTER_ATTRIBUTE_MEMORY_TYPE = 2,
  DLCU_POINTER_ATTRIBUTE_DEVICE_POINTER = 3,
  DLCU_POINTER_ATTRIBUTE_HOST_POINTER = 4,
  DLCU_POINTER_ATTRIBUTE_IS_MANAGED = 8,
  DLCU_POINTER_ATTRIBUTE_DEVICE_ORDINAL = 9,
  DLCU_POINTER_ATTRIBUTE_RANGE_START_ADDR = 11,
  DLCU_POINTER_ATTRIBUTE_RANGE_SIZE = 12,
} dlcu_pointer_attribute;

typedef enum dlcu_device_attribute { /* CUdevice_attribute */
  DLCU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16,
  DLCU_DEVICE_ATTRIBUTE_PCI_BUS_ID = 33,
  DLCU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID = 34,
  DLCU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING = 41,
  DLCU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID = 50,
  DLCU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75,
  DLCU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76,
  DLCU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED = 102,
} dlcu_device_attribute;

typedef enum dlcu_mem_allocation_type { /* CUmemAllocationType */
  DLCU_MEM_ALLOCATION_TYPE_PINNED = 1,
} dlcu_mem_allocation_type;

typedef enum dlcu_mem_handle_type { /* CUmemAllocationHandleType */
  DLCU_MEM_HANDLE_TYPE_NONE = 0,
  DLCU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR = 1,
} dlcu_mem_handle_type;

typedef enum dlcu_mem_location_type { /* CUmemLocationType */
  DLCU_MEM_LOCATION_TYPE_DEVICE = 1,
} dlcu_mem_location_type;

typedef enum dlcu_mem_access_flags { /* CUmemAccess_flags */
  DLCU_MEM_ACCESS_FLAGS_PROT_NONE = 0,
  DLCU_MEM_ACCESS_FLAGS_PROT_READ = 1,
  DLCU_MEM_ACCESS_FLAGS_PROT_READWRITE = 3,
} dlcu_mem_access_flags;

typedef enum dlcu_mem_granularity_flags { /* CUmemAllocationGranularity_flags */
  DLCU_MEM_ALLOC_GRANULARITY_MINIMUM = 0,
  DLCU_MEM_ALLOC_GRANULARITY_RECOMMENDED = 1,
} dlcu_mem_granularity_flags;

typedef enum dlcu_proc_address_status { /* CUdriverProcAddressQueryResult */
  DLCU_GET_PROC_ADDRESS_SUCCESS = 0,
  DLCU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND = 1,
  DLCU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT = 2,
} dlcu_proc_address_status;

/* ---- structs (their _v2 layouts) ---- */
typedef struct dlcu_memcpy2d { /* CUDA_MEMCPY2D */
  size_t srcXInBytes, srcY;
  dlcu_memorytype srcMemoryType;
  const void *srcHost;
  dlcu_ptr srcDevice;
  dlcu_array srcArray;
  size_t srcPitch;
  size_t dstXInBytes, dstY;
  dlcu_memorytype dstMemoryType;
  void *dstHost;
  dlcu_ptr dstDevice;
  dlcu_array dstArray;
  size_t dstPitch;
  size_t WidthInBytes, Height;
} dlcu_memcpy2d;

typedef struct dlcu_memcpy3d { /* CUDA_MEMCPY3D */
  size_t srcXInBytes, srcY, srcZ, srcLOD;
  dlcu_memorytype srcMemoryType;
  const void *srcHost;
  dlcu_ptr srcDevice;
  dlcu_array srcArray;
  void *reserved0;
  size_t srcPitch, srcHeight;
  size_t dstXInBytes, dstY, dstZ, dstLOD;
  dlcu_memorytype dstMemoryType;
  void *dstHost;
  dlcu_ptr dstDevice;
  dlcu_array dstArray;
  void *reserved1;
  size_t dstPitch, dstHeight;
  size_t WidthInBytes, Height, Depth;
} dlcu_memcpy3d;

typedef struct dlcu_memcpy3d_peer { /* CUDA_MEMCPY3D_PEER */
  size_t srcXInBytes, srcY, srcZ, srcLOD;
  dlcu_memorytype srcMemoryType;
  const void *srcHost;
  dlcu_ptr srcDevice;
  dlcu_array srcArray;
  dlcu_context srcContext;
  size_t srcPitch, srcHeight;
  size_t dstXInBytes, dstY, dstZ, dstLOD;
  dlcu_memorytype dstMemoryType;
  void *dstHost;
  dlcu_ptr dstDevice;
  dlcu_array dstArray;
  dlcu_context dstContext;
  size_t dstPitch, dstHeight;
  size_t WidthInBytes, Height, Depth;
} dlcu_memcpy3d_peer;

typedef struct dlcu_mem_location { /* CUmemLocation */
  dlcu_mem_location_type type;
  int id;
} dlcu_mem_location;

typedef struct dlcu_mem_allocation_prop { /* CUmemAllocationProp */
  dlcu_mem_allocation_type type;
  dlcu_mem_handle_type requestedHandleTypes;
  dlcu_mem_location location;
  void *win32HandleMetaData;
  struct {
    unsigned char compressionType;
    unsigned char gpuDirectRDMACapable;
    unsigned short usage;
    unsigned char reserved[4];
  } allocFlags;
} dlcu_mem_allocation_prop;

typedef struct dlcu_mem_access_desc { /* CUmemAccessDesc */
  dlcu_mem_location location;
  dlcu_mem_access_flags flags;
} dlcu_mem_access_desc;

/* ---- the entry points ----
 * X(field, base name, CUDA version of the ABI dlrun calls, the symbol of
 *   that version (a bare name: check_cuda_h.c takes its address in cuda.h),
 *   parameters); every entry returns a dlcu_result. cuGetProcAddress_v2
 *   takes the base name and the version; dlsym takes the symbol's name. */
#define DLCU_ENTRIES(X)                                                                        \
  X(Init, "cuInit", 2000, cuInit, (unsigned int flags))                                      \
  X(DriverGetVersion, "cuDriverGetVersion", 2020, cuDriverGetVersion, (int *version))        \
  X(DeviceGetCount, "cuDeviceGetCount", 2000, cuDeviceGetCount, (int *count))                \
  X(DeviceGet, "cuDeviceGet", 2000, cuDeviceGet, (dlcu_device * device, int ordinal))        \
  X(DeviceGetName, "cuDeviceGetName", 2000, cuDeviceGetName,                                 \
    (char *name, int len, dlcu_device dev))                                                    \
  X(DeviceGetAttribute, "cuDeviceGetAttribute", 2000, cuDeviceGetAttribute,                  \
    (int *value, dlcu_device_attribute attrib, dlcu_device dev))                               \
  X(DeviceTotalMem, "cuDeviceTotalMem", 3020, cuDeviceTotalMem_v2,                           \
    (size_t * bytes, dlcu_device dev))                                                         \
  X(DevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", 7000, cuDevicePrimaryCtxRetain,      \
    (dlcu_context * ctx, dlcu_device dev))                                                     \
  X(DevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease", 11000,                               \
    cuDevicePrimaryCtxRelease_v2, (dlcu_device dev))                                         \
  X(CtxSetCurrent, "cuCtxSetCurrent", 4000, cuCtxSetCurrent, (dlcu_context ctx))             \
  X(CtxEnablePeerAccess, "cuCtxEnablePeerAccess", 4000, cuCtxEnablePeerAccess,               \
    (dlcu_context peer, unsigned int flags))                                                   \
  X(DeviceCanAccessPeer, "cuDeviceCanAccessPeer", 4000, cuDeviceCanAccessPeer,               \
    (int *can, dlcu_device dev, dlcu_device peer))                                             \
  X(MemGetInfo, "cuMemGetInfo", 3020, cuMemGetInfo_v2, (size_t * free, size_t * total))      \
  X(MemAlloc, "cuMemAlloc", 3020, cuMemAlloc_v2, (dlcu_ptr * dptr, size_t bytes))            \
  X(MemFree, "cuMemFree", 3020, cuMemFree_v2, (dlcu_ptr dptr))                               \
  X(MemHostAlloc, "cuMemHostAlloc", 2020, cuMemHostAlloc,                                    \
    (void **pp, size_t bytes, unsigned int flags))                                             \
  X(MemFreeHost, "cuMemFreeHost", 2000, cuMemFreeHost, (void *p))                            \
  X(MemAddressReserve, "cuMemAddressReserve", 10020, cuMemAddressReserve,                    \
    (dlcu_ptr * ptr, size_t size, size_t alignment, dlcu_ptr addr, unsigned long long flags))  \
  X(MemAddressFree, "cuMemAddressFree", 10020, cuMemAddressFree, (dlcu_ptr ptr, size_t size)) \
  X(MemGetAllocationGranularity, "cuMemGetAllocationGranularity", 10020,                       \
    cuMemGetAllocationGranularity,                                                           \
    (size_t * granularity, const dlcu_mem_allocation_prop *prop,                               \
     dlcu_mem_granularity_flags option))                                                       \
  X(MemCreate, "cuMemCreate", 10020, cuMemCreate,                                            \
    (dlcu_mem_handle * handle, size_t size, const dlcu_mem_allocation_prop *prop,              \
     unsigned long long flags))                                                                \
  X(MemRelease, "cuMemRelease", 10020, cuMemRelease, (dlcu_mem_handle handle))               \
  X(MemMap, "cuMemMap", 10020, cuMemMap,                                                     \
    (dlcu_ptr ptr, size_t size, size_t offset, dlcu_mem_handle handle,                         \
     unsigned long long flags))                                                                \
  X(MemUnmap, "cuMemUnmap", 10020, cuMemUnmap, (dlcu_ptr ptr, size_t size))                  \
  X(MemSetAccess, "cuMemSetAccess", 10020, cuMemSetAccess,                                   \
    (dlcu_ptr ptr, size_t size, const dlcu_mem_access_desc *desc, size_t count))               \
  X(PointerGetAttribute, "cuPointerGetAttribute", 4000, cuPointerGetAttribute,               \
    (void *data, dlcu_pointer_attribute attribute, dlcu_ptr ptr))                              \
  X(Memcpy, "cuMemcpy", 4000, cuMemcpy, (dlcu_ptr dst, dlcu_ptr src, size_t bytes))          \
  X(MemcpyAsync, "cuMemcpyAsync", 4000, cuMemcpyAsync,                                       \
    (dlcu_ptr dst, dlcu_ptr src, size_t bytes, dlcu_stream stream))                            \
  X(MemcpyPeer, "cuMemcpyPeer", 4000, cuMemcpyPeer,                                          \
    (dlcu_ptr dst, dlcu_context dst_ctx, dlcu_ptr src, dlcu_context src_ctx, size_t bytes))    \
  X(Memcpy2DAsync, "cuMemcpy2DAsync", 3020, cuMemcpy2DAsync_v2,                              \
    (const dlcu_memcpy2d *copy, dlcu_stream stream))                                           \
  X(Memcpy3DAsync, "cuMemcpy3DAsync", 3020, cuMemcpy3DAsync_v2,                              \
    (const dlcu_memcpy3d *copy, dlcu_stream stream))                                           \
  X(Memcpy3DPeerAsync, "cuMemcpy3DPeerAsync", 4000, cuMemcpy3DPeerAsync,                     \
    (const dlcu_memcpy3d_peer *copy, dlcu_stream stream))                                      \
  X(MemsetD8Async, "cuMemsetD8Async", 3020, cuMemsetD8Async,                                 \
    (dlcu_ptr dst, unsigned char value, size_t n, dlcu_stream stream))                         \
  X(MemsetD16Async, "cuMemsetD16Async", 3020, cuMemsetD16Async,                              \
    (dlcu_ptr dst, unsigned short value, size_t n, dlcu_stream stream))                        \
  X(MemsetD32Async, "cuMemsetD32Async", 3020, cuMemsetD32Async,                              \
    (dlcu_ptr dst, unsigned int value, size_t n, dlcu_stream stream))                          \
  X(ModuleLoadData, "cuModuleLoadData", 2000, cuModuleLoadData,                              \
    (dlcu_module * module, const void *image))                                                 \
  X(ModuleUnload, "cuModuleUnload", 2000, cuModuleUnload, (dlcu_module module))              \
  X(ModuleGetFunction, "cuModuleGetFunction", 2000, cuModuleGetFunction,                     \
    (dlcu_function * fn, dlcu_module module, const char *name))                                \
  X(LaunchKernel, "cuLaunchKernel", 4000, cuLaunchKernel,                                    \
    (dlcu_function fn, unsigned int grid_x, unsigned int grid_y, unsigned int grid_z,          \
     unsigned int block_x, unsigned int block_y, unsigned int block_z,                         \
     unsigned int shared_bytes, dlcu_stream stream, void **params, void **extra))              \
  X(StreamCreate, "cuStreamCreate", 2000, cuStreamCreate,                                    \
    (dlcu_stream * stream, unsigned int flags))                                                \
  X(StreamDestroy, "cuStreamDestroy", 4000, cuStreamDestroy_v2, (dlcu_stream stream))        \
  X(StreamWaitEvent, "cuStreamWaitEvent", 3020, cuStreamWaitEvent,                           \
    (dlcu_stream stream, dlcu_event event, unsigned int flags))                                \
  X(StreamSynchronize, "cuStreamSynchronize", 2000, cuStreamSynchronize,                     \
    (dlcu_stream stream))                                                                      \
  X(EventCreate, "cuEventCreate", 2000, cuEventCreate, (dlcu_event * event, unsigned int flags)) \
  X(EventRecord, "cuEventRecord", 2000, cuEventRecord, (dlcu_event event, dlcu_stream stream)) \
  X(EventQuery, "cuEventQuery", 2000, cuEventQuery, (dlcu_event event))                      \
  X(EventSynchronize, "cuEventSynchronize", 2000, cuEventSynchronize, (dlcu_event event))    \
  X(EventDestroy, "cuEventDestroy", 4000, cuEventDestroy_v2, (dlcu_event event))

/* cuGetProcAddress_v2, found with dlsym; the way to every other entry on
 * CUDA 12 and later. */
typedef dlcu_result (*dlcu_get_proc_address_fn)(const char *symbol, void **fn, int cuda_version,
                                                 uint64_t flags, dlcu_proc_address_status *status);
#define DLCU_GET_PROC_ADDRESS_SYMBOL "cuGetProcAddress_v2"
#define DLCU_GET_PROC_ADDRESS_SINCE 12000

/* One function pointer per entry. */
typedef struct dlcu_api {
#define DLCU_FIELD(field, name, version, symbol, params) dlcu_result (*field) params;
  DLCU_ENTRIES(DLCU_FIELD)
#undef DLCU_FIELD
  int driver_version; /* cuDriverGetVersion: 1000 * major + 10 * minor */
} dlcu_api;

#endif
