// The CUDA C source of dlrun's kernels, for reference: kernels.ptx, beside
// it, is their hand-written PTX, the text the module embeds and loads with
// cuModuleLoadData (no nvcc is needed to build dlrun). Keep both in step:
// the names and parameters are a contract (the test's driver double runs
// kernels of these names natively).
//
// Element i of a sequence is start + (first + i) * step, as the host's
// loop computes it (dlrun_fill_value, then dlrun_dtype_store): in int64 when
// integral, else in double without contraction into fma, stored with
// round-to-nearest-even (integers: truncated toward zero). dtype codes are
// dlrun's dtype enum (include/dlrun/dtype.h).
#include <stdint.h>

#define GRID_STRIDE(i, n) \
  for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < (n); \
       i += (uint64_t)gridDim.x * blockDim.x)

extern "C" __global__ void dlrun_fill8(uint64_t *dst, uint64_t count, uint64_t pattern) {
  GRID_STRIDE(i, count) dst[i] = pattern;
}

extern "C" __global__ void dlrun_fill16(uint64_t *dst, uint64_t count, uint64_t lo, uint64_t hi) {
  GRID_STRIDE(i, count) {
    dst[2 * i] = lo;
    dst[2 * i + 1] = hi;
  }
}

enum { BOOL_, I8, I16, I32, I64, U8, U16, U32, U64, F16, BF16, F32, F64, C64, C128 };

__device__ static void store_int(unsigned char *p, int code, int64_t v) {
  switch (code) {
  case BOOL_: *p = v != 0; break;
  case I8: case U8: *p = (unsigned char)v; break;
  case I16: case U16: *(uint16_t *)p = (uint16_t)v; break;
  case I32: case U32: *(uint32_t *)p = (uint32_t)v; break;
  default: *(uint64_t *)p = (uint64_t)v; break;
  }
}

// bfloat16 to nearest even from a double: round to float toward zero
// keeping the inexact bit (round to odd), then to 16 bits.
__device__ static uint16_t bf16_of(double v) {
  float f = __double2float_rz(v);
  uint32_t b = __float_as_uint(f) | ((double)f != v ? 1u : 0u);
  return (uint16_t)((b + 0x7FFFu + ((b >> 16) & 1u)) >> 16);
}

__device__ static void store_real(unsigned char *p, int code, double v) {
  switch (code) {
  case F16: *(__half_raw *)p = __half_raw{__double2half(v)}; break;  // round to nearest even
  case BF16: *(uint16_t *)p = bf16_of(v); break;
  case F32: *(float *)p = (float)v; break;
  case F64: *(double *)p = v; break;
  case C64: ((float *)p)[0] = (float)v; ((float *)p)[1] = 0.0f; break;
  case C128: ((double *)p)[0] = v; ((double *)p)[1] = 0.0; break;
  }
}

__constant__ static const unsigned char esize[15] = {1, 1, 2, 4, 8, 1, 2, 4, 8, 2, 2, 4, 8, 8, 16};

extern "C" __global__ void dlrun_sequence(unsigned char *dst, uint64_t count, uint64_t first,
                                          uint32_t dtype_code, uint32_t integral, int64_t start_i,
                                          int64_t step_i, double start_f, double step_f) {
  GRID_STRIDE(i, count) {
    unsigned char *p = dst + i * esize[dtype_code];
    int64_t n = (int64_t)(first + i);
    bool real = dtype_code >= F16;
    if (integral) {
      int64_t v = start_i + n * step_i;
      if (real) store_real(p, dtype_code, (double)v);
      else store_int(p, dtype_code, v);
    } else {
      double v = __dadd_rn(start_f, __dmul_rn((double)n, step_f));
      if (real) store_real(p, dtype_code, v);
      else store_int(p, dtype_code, v < 0 ? (int64_t)v : (int64_t)(uint64_t)v);
    }
  }
}
