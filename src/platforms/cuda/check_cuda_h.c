/* Checks driver_api.h, dlrun's own declarations of the CUDA driver API,
 * against NVIDIA's cuda.h where one is installed: every constant, struct
 * size and field offset, and every entry point's symbol and signature. The
 * build compiles it with -fsyntax-only when it finds cuda.h (make
 * check-cuda-h); it is never part of a library, and without cuda.h it is
 * not compiled at all. */
#include <cuda.h>
#include <stddef.h>

#include "driver_api.h"

#define SAME(a, b) _Static_assert((long long)(a) == (long long)(b), #a " differs from cuda.h's " #b)

/* ---- constants ---- */
SAME(DLCU_SUCCESS, CUDA_SUCCESS);
SAME(DLCU_ERROR_INVALID_VALUE, CUDA_ERROR_INVALID_VALUE);
SAME(DLCU_ERROR_OUT_OF_MEMORY, CUDA_ERROR_OUT_OF_MEMORY);
SAME(DLCU_ERROR_NOT_INITIALIZED, CUDA_ERROR_NOT_INITIALIZED);
SAME(DLCU_ERROR_DEINITIALIZED, CUDA_ERROR_DEINITIALIZED);
SAME(DLCU_ERROR_STUB_LIBRARY, CUDA_ERROR_STUB_LIBRARY);
SAME(DLCU_ERROR_NO_DEVICE, CUDA_ERROR_NO_DEVICE);
SAME(DLCU_ERROR_INVALID_DEVICE, CUDA_ERROR_INVALID_DEVICE);
SAME(DLCU_ERROR_INVALID_IMAGE, CUDA_ERROR_INVALID_IMAGE);
SAME(DLCU_ERROR_INVALID_CONTEXT, CUDA_ERROR_INVALID_CONTEXT);
SAME(DLCU_ERROR_NO_BINARY_FOR_GPU, CUDA_ERROR_NO_BINARY_FOR_GPU);
SAME(DLCU_ERROR_PEER_ACCESS_UNSUPPORTED, CUDA_ERROR_PEER_ACCESS_UNSUPPORTED);
SAME(DLCU_ERROR_INVALID_PTX, CUDA_ERROR_INVALID_PTX);
SAME(DLCU_ERROR_UNSUPPORTED_PTX_VERSION, CUDA_ERROR_UNSUPPORTED_PTX_VERSION);
SAME(DLCU_ERROR_OPERATING_SYSTEM, CUDA_ERROR_OPERATING_SYSTEM);
SAME(DLCU_ERROR_INVALID_HANDLE, CUDA_ERROR_INVALID_HANDLE);
SAME(DLCU_ERROR_NOT_FOUND, CUDA_ERROR_NOT_FOUND);
SAME(DLCU_ERROR_NOT_READY, CUDA_ERROR_NOT_READY);
SAME(DLCU_ERROR_ILLEGAL_ADDRESS, CUDA_ERROR_ILLEGAL_ADDRESS);
SAME(DLCU_ERROR_LAUNCH_OUT_OF_RESOURCES, CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES);
SAME(DLCU_ERROR_PEER_ACCESS_ALREADY_ENABLED, CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED);
SAME(DLCU_ERROR_PEER_ACCESS_NOT_ENABLED, CUDA_ERROR_PEER_ACCESS_NOT_ENABLED);
SAME(DLCU_ERROR_LAUNCH_FAILED, CUDA_ERROR_LAUNCH_FAILED);
SAME(DLCU_ERROR_NOT_PERMITTED, CUDA_ERROR_NOT_PERMITTED);
SAME(DLCU_ERROR_NOT_SUPPORTED, CUDA_ERROR_NOT_SUPPORTED);
SAME(DLCU_ERROR_SYSTEM_DRIVER_MISMATCH, CUDA_ERROR_SYSTEM_DRIVER_MISMATCH);
SAME(DLCU_ERROR_UNKNOWN, CUDA_ERROR_UNKNOWN);

SAME(DLCU_STREAM_NON_BLOCKING, CU_STREAM_NON_BLOCKING);
SAME(DLCU_EVENT_DISABLE_TIMING, CU_EVENT_DISABLE_TIMING);
SAME(DLCU_MEMHOSTALLOC_PORTABLE, CU_MEMHOSTALLOC_PORTABLE);
SAME(DLCU_MEMHOSTALLOC_DEVICEMAP, CU_MEMHOSTALLOC_DEVICEMAP);
SAME(DLCU_GET_PROC_ADDRESS_DEFAULT, CU_GET_PROC_ADDRESS_DEFAULT);

SAME(DLCU_MEMORYTYPE_HOST, CU_MEMORYTYPE_HOST);
SAME(DLCU_MEMORYTYPE_DEVICE, CU_MEMORYTYPE_DEVICE);
SAME(DLCU_MEMORYTYPE_ARRAY, CU_MEMORYTYPE_ARRAY);
SAME(DLCU_MEMORYTYPE_UNIFIED, CU_MEMORYTYPE_UNIFIED);

SAME(DLCU_POINTER_ATTRIBUTE_CONTEXT, CU_POINTER_ATTRIBUTE_CONTEXT);
SAME(DLCU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_MEMORY_TYPE);
SAME(DLCU_POINTER_ATTRIBUTE_DEVICE_POINTER, CU_POINTER_ATTRIBUTE_DEVICE_POINTER);
SAME(DLCU_POINTER_ATTRIBUTE_HOST_POINTER, CU_POINTER_ATTRIBUTE_HOST_POINTER);
SAME(DLCU_POINTER_ATTRIBUTE_IS_MANAGED, CU_POINTER_ATTRIBUTE_IS_MANAGED);
SAME(DLCU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL);
SAME(DLCU_POINTER_ATTRIBUTE_RANGE_START_ADDR, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR);
SAME(DLCU_POINTER_ATTRIBUTE_RANGE_SIZE, CU_POINTER_ATTRIBUTE_RANGE_SIZE);

SAME(DLCU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
SAME(DLCU_DEVICE_ATTRIBUTE_PCI_BUS_ID, CU_DEVICE_ATTRIBUTE_PCI_BUS_ID);
SAME(DLCU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID, CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID);
SAME(DLCU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING, CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING);
SAME(DLCU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID, CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID);
SAME(DLCU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
SAME(DLCU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
SAME(DLCU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED,
     CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED);

SAME(DLCU_MEM_ALLOCATION_TYPE_PINNED, CU_MEM_ALLOCATION_TYPE_PINNED);
SAME(DLCU_MEM_HANDLE_TYPE_NONE, CU_MEM_HANDLE_TYPE_NONE);
SAME(DLCU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
SAME(DLCU_MEM_LOCATION_TYPE_DEVICE, CU_MEM_LOCATION_TYPE_DEVICE);
SAME(DLCU_MEM_ACCESS_FLAGS_PROT_NONE, CU_MEM_ACCESS_FLAGS_PROT_NONE);
SAME(DLCU_MEM_ACCESS_FLAGS_PROT_READ, CU_MEM_ACCESS_FLAGS_PROT_READ);
SAME(DLCU_MEM_ACCESS_FLAGS_PROT_READWRITE, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
SAME(DLCU_MEM_ALLOC_GRANULARITY_MINIMUM, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
SAME(DLCU_MEM_ALLOC_GRANULARITY_RECOMMENDED, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED);
SAME(DLCU_GET_PROC_ADDRESS_SUCCESS, CU_GET_PROC_ADDRESS_SUCCESS);
SAME(DLCU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
SAME(DLCU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);

/* ---- scalar types and struct layouts ---- */
SAME(sizeof(dlcu_result), sizeof(CUresult));
SAME(sizeof(dlcu_device), sizeof(CUdevice));
SAME(sizeof(dlcu_ptr), sizeof(CUdeviceptr));
SAME(sizeof(dlcu_mem_handle), sizeof(CUmemGenericAllocationHandle));
SAME(sizeof(dlcu_memorytype), sizeof(CUmemorytype));

#define FIELD(ours, theirs, field)                                                       \
  SAME(offsetof(ours, field), offsetof(theirs, field));                                  \
  SAME(sizeof(((ours *)0)->field), sizeof(((theirs *)0)->field))

SAME(sizeof(dlcu_memcpy2d), sizeof(CUDA_MEMCPY2D));
FIELD(dlcu_memcpy2d, CUDA_MEMCPY2D, srcXInBytes);
FIELD(dlcu_memcpy2d, CUDA_MEMCPY2D, srcY);
FIELD(dlcu_memcpy2d, CUDA_MEMCPY2D, srcMemoryType);
FIELD(dlcu_memcpy2d, CUDA_MEMCPY2D, srcHost);
FIELD(dlcu_memcpy2d, CUDA_MEMCPY2D, srcDevice);
FIELD(dlcu_memcpy2d, CUDA_MEMCPY2D, srcArray);
FIELD(dlcu_memcpy2d, CUDA_MEMCPY2D, srcPitch);
FIELD(dlcu_memcpy2d, CUDA_MEMCPY2D, dstXInBytes);
FIELD(dlcu_memcpy2d, CUDA_MEMCPY2D, dstY);
FIELD(dlcu_memcpy2d, CUDA_MEMCPY2D, dstMemoryType);
FIELD(dlcu_memcpy2d, CUDA_MEMCPY2D, dstHost);
FIELD(dlcu_memcpy2d, CUDA_MEMCPY2D, dstDevice);
FIELD(dlcu_memcpy2d, CUDA_MEMCPY2D, dstArray);
FIELD(dlcu_memcpy2d, CUDA_MEMCPY2D, dstPitch);
FIELD(dlcu_memcpy2d, CUDA_MEMCPY2D, WidthInBytes);
FIELD(dlcu_memcpy2d, CUDA_MEMCPY2D, Height);

/* CUDA_MEMCPY3D and CUDA_MEMCPY3D_PEER share every field but the two in the
 * middle of each half. */
#define COPY3D_FIELDS(ours, theirs)                                                      \
  SAME(sizeof(ours), sizeof(theirs));                                                    \
  FIELD(ours, theirs, srcXInBytes);                                                      \
  FIELD(ours, theirs, srcY);                                                             \
  FIELD(ours, theirs, srcZ);                                                             \
  FIELD(ours, theirs, srcLOD);                                                           \
  FIELD(ours, theirs, srcMemoryType);                                                    \
  FIELD(ours, theirs, srcHost);                                                          \
  FIELD(ours, theirs, srcDevice);                                                        \
  FIELD(ours, theirs, srcArray);                                                         \
  FIELD(ours, theirs, srcPitch);                                                         \
  FIELD(ours, theirs, srcHeight);                                                        \
  FIELD(ours, theirs, dstXInBytes);                                                      \
  FIELD(ours, theirs, dstY);                                                             \
  FIELD(ours, theirs, dstZ);                                                             \
  FIELD(ours, theirs, dstLOD);                                                           \
  FIELD(ours, theirs, dstMemoryType);                                                    \
  FIELD(ours, theirs, dstHost);                                                          \
  FIELD(ours, theirs, dstDevice);                                                        \
  FIELD(ours, theirs, dstArray);                                                         \
  FIELD(ours, theirs, dstPitch);                                                         \
  FIELD(ours, theirs, dstHeight);                                                        \
  FIELD(ours, theirs, WidthInBytes);                                                     \
  FIELD(ours, theirs, Height);                                                           \
  FIELD(ours, theirs, Depth)

COPY3D_FIELDS(dlcu_memcpy3d, CUDA_MEMCPY3D);
FIELD(dlcu_memcpy3d, CUDA_MEMCPY3D, reserved0);
FIELD(dlcu_memcpy3d, CUDA_MEMCPY3D, reserved1);
COPY3D_FIELDS(dlcu_memcpy3d_peer, CUDA_MEMCPY3D_PEER);
FIELD(dlcu_memcpy3d_peer, CUDA_MEMCPY3D_PEER, srcContext);
FIELD(dlcu_memcpy3d_peer, CUDA_MEMCPY3D_PEER, dstContext);

SAME(sizeof(dlcu_mem_location), sizeof(CUmemLocation));
FIELD(dlcu_mem_location, CUmemLocation, type);
FIELD(dlcu_mem_location, CUmemLocation, id);
SAME(sizeof(dlcu_mem_allocation_prop), sizeof(CUmemAllocationProp));
FIELD(dlcu_mem_allocation_prop, CUmemAllocationProp, type);
FIELD(dlcu_mem_allocation_prop, CUmemAllocationProp, requestedHandleTypes);
FIELD(dlcu_mem_allocation_prop, CUmemAllocationProp, location);
FIELD(dlcu_mem_allocation_prop, CUmemAllocationProp, win32HandleMetaData);
FIELD(dlcu_mem_allocation_prop, CUmemAllocationProp, allocFlags);
FIELD(dlcu_mem_allocation_prop, CUmemAllocationProp, allocFlags.compressionType);
FIELD(dlcu_mem_allocation_prop, CUmemAllocationProp, allocFlags.gpuDirectRDMACapable);
FIELD(dlcu_mem_allocation_prop, CUmemAllocationProp, allocFlags.usage);
SAME(sizeof(dlcu_mem_access_desc), sizeof(CUmemAccessDesc));
FIELD(dlcu_mem_access_desc, CUmemAccessDesc, location);
FIELD(dlcu_mem_access_desc, CUmemAccessDesc, flags);

/* ---- entry points: each symbol is cuda.h's, with our signature once our
 * type names read as cuda.h's ---- */
#define dlcu_result CUresult
#define dlcu_device CUdevice
#define dlcu_ptr CUdeviceptr
#define dlcu_mem_handle CUmemGenericAllocationHandle
#define dlcu_context CUcontext
#define dlcu_stream CUstream
#define dlcu_event CUevent
#define dlcu_module CUmodule
#define dlcu_function CUfunction
#define dlcu_device_attribute CUdevice_attribute
#define dlcu_pointer_attribute CUpointer_attribute
#define dlcu_mem_granularity_flags CUmemAllocationGranularity_flags
#define dlcu_mem_allocation_prop CUmemAllocationProp
#define dlcu_mem_access_desc CUmemAccessDesc
#define dlcu_memcpy2d CUDA_MEMCPY2D
#define dlcu_memcpy3d CUDA_MEMCPY3D
#define dlcu_memcpy3d_peer CUDA_MEMCPY3D_PEER
#define dlcu_proc_address_status CUdriverProcAddressQueryResult

#define SIGNATURE(field, name, version, symbol, params)                                  \
  _Static_assert(__builtin_types_compatible_p(__typeof__(&symbol), CUresult(*) params),  \
                 #symbol "'s signature differs from cuda.h's");
DLCU_ENTRIES(SIGNATURE)
_Static_assert(__builtin_types_compatible_p(__typeof__(&cuGetProcAddress_v2),
                                            CUresult (*)(const char *, void **, int, uint64_t,
                                                         dlcu_proc_address_status *)),
               "cuGetProcAddress_v2's signature differs from cuda.h's");
