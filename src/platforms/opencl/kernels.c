/* The OpenCL C source of the sequence fills (arange), built once per
 * context on first use. Element i of a sequence is start + (first + i) *
 * step, computed as the host's loop does (src/device: dlrun_fill_value,
 * then dlrun_dtype_store): in int64 for integer dtypes given integer start
 * and step, else in double and stored with round-to-nearest-even, so both
 * write the same bytes. Contraction into fma is off for that reason.
 *
 * The double kernels exist only where the device has cl_khr_fp64; on a
 * device without it, and for a fill whose offset is not a multiple of the
 * element size, the values are computed on the host and written with
 * clEnqueueWriteBuffer (fill.c). bfloat16 has no OpenCL type: it is rounded
 * to float toward zero with the inexact bit kept (round to odd), then to
 * bfloat16 to nearest even, which is exactly a rounding of the double. */
#include "ocl.h"

const char ocl_fill_source[] =
    "#pragma OPENCL FP_CONTRACT OFF\n"
    "#define INT_SEQ(name, T)                                                       \\\n"
    "  __kernel void name(__global T *out, ulong off, long start, long step,       \\\n"
    "                     long first) {                                            \\\n"
    "    size_t i = get_global_id(0);                                               \\\n"
    "    out[off + i] = (T)(ulong)(start + (first + (long)i) * step);               \\\n"
    "  }\n"
    "INT_SEQ(seq_i1, uchar)\n"
    "INT_SEQ(seq_i2, ushort)\n"
    "INT_SEQ(seq_i4, uint)\n"
    "INT_SEQ(seq_i8, ulong)\n"
    "#ifdef cl_khr_fp64\n"
    "#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n"
    "#define VALUE (start + (double)(first + (long)get_global_id(0)) * step)\n"
    "#define AT (off + get_global_id(0))\n"
    "#define DBL_SEQ(name, T)                                                       \\\n"
    "  __kernel void name(__global T *out, ulong off, double start, double step,   \\\n"
    "                     long first) {                                            \\\n"
    "    double v = VALUE;                                                          \\\n"
    "    out[AT] = (T)(v < 0 ? (ulong)(long)v : (ulong)v);                          \\\n"
    "  }\n"
    "DBL_SEQ(seq_d1, uchar)\n"
    "DBL_SEQ(seq_d2, ushort)\n"
    "DBL_SEQ(seq_d4, uint)\n"
    "DBL_SEQ(seq_d8, ulong)\n"
    "__kernel void seq_f16(__global half *out, ulong off, double start, double step,\n"
    "                      long first) {\n"
    "  vstore_half_rte(VALUE, AT, out);\n"
    "}\n"
    "__kernel void seq_bf16(__global ushort *out, ulong off, double start, double step,\n"
    "                       long first) {\n"
    "  double v = VALUE;\n"
    "  float f = convert_float_rtz(v);\n"
    "  uint b = as_uint(f) | ((double)f != v ? 1u : 0u);\n"
    "  out[AT] = (ushort)((b + 0x7FFFu + ((b >> 16) & 1u)) >> 16);\n"
    "}\n"
    "__kernel void seq_f32(__global float *out, ulong off, double start, double step,\n"
    "                      long first) {\n"
    "  out[AT] = (float)VALUE;\n"
    "}\n"
    "__kernel void seq_f64(__global double *out, ulong off, double start, double step,\n"
    "                      long first) {\n"
    "  out[AT] = VALUE;\n"
    "}\n"
    "__kernel void seq_c64(__global float2 *out, ulong off, double start, double step,\n"
    "                      long first) {\n"
    "  out[AT] = (float2)((float)VALUE, 0.0f);\n"
    "}\n"
    "__kernel void seq_c128(__global double2 *out, ulong off, double start, double step,\n"
    "                       long first) {\n"
    "  out[AT] = (double2)(VALUE, 0.0);\n"
    "}\n"
    "#endif\n";

const char *const ocl_kernel_names[OCL_KERNEL_COUNT] = {
    [OCL_SEQ_I1] = "seq_i1",   [OCL_SEQ_I2] = "seq_i2",     [OCL_SEQ_I4] = "seq_i4",
    [OCL_SEQ_I8] = "seq_i8",   [OCL_SEQ_D1] = "seq_d1",     [OCL_SEQ_D2] = "seq_d2",
    [OCL_SEQ_D4] = "seq_d4",   [OCL_SEQ_D8] = "seq_d8",     [OCL_SEQ_F16] = "seq_f16",
    [OCL_SEQ_BF16] = "seq_bf16", [OCL_SEQ_F32] = "seq_f32", [OCL_SEQ_F64] = "seq_f64",
    [OCL_SEQ_C64] = "seq_c64", [OCL_SEQ_C128] = "seq_c128",
};
