/* Internal to src/device: what the platform files share. */
#ifndef DLRUN_PLATFORM_IMPL_H
#define DLRUN_PLATFORM_IMPL_H

#include "device_impl.h"

/* DLPack device types (dlpack.h's kDLCPU, kDLCUDAHost, kDLExtDev,
 * kDLROCMHost); src/device does not depend on the DLPack header. */
#define DL_CPU 1
#define DL_CUDA_HOST 3
#define DL_EXT_DEV 12
#define DL_ROCM_HOST 11

extern const dlrun_platform dlrun_sim_platform, dlrun_cpu_platform;

/* DLRUN_SIM_MEMORY, checked: shared (host-readable sim device memory) or
 * private (the default). */
dlrun_status dlrun_sim_memory_mode(bool *shared);

#endif
