/* DLPack's device types (dlpack.h's DLDeviceType) that platforms export
 * and look up: a platform does not depend on the DLPack header. */
#ifndef DLRUN_PLATFORMS_DLPACK_CODES_H
#define DLRUN_PLATFORMS_DLPACK_CODES_H

#define DL_CPU 1       /* kDLCPU */
#define DL_CUDA_HOST 3 /* kDLCUDAHost */
#define DL_ROCM_HOST 11 /* kDLROCMHost */
#define DL_EXT_DEV 12  /* kDLExtDev */

#endif
