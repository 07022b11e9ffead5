/* The OpenCL C source of the sequence fills (arange) and of the strided box
 * copy, built once per context on first use. Element i of a sequence is start + (first + i) *
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
#include <stdio.h>

#include "ocl.h"

const char ocl_kernel_source[] =
    "#pragma OPENCL FP_CONTRACT OFF\n"
    "#define INT_SEQ(name, T)                                                       \\\n"
    "  __kernel void name(__global T *out, ulong off, long start, long step,       \\\n"
    "                     long first) {                                            \\\n"
    "    size_t i = get_global_id(0);                                               \\\n"
    "    out[off + i] = (T)(ulong)(start + (first + (long)i) * step);               \\\n"
    "  }\n"
    "/* A box copy between two buffers whose layouts no rect command fits\n"
    " * (a dimension running backwards on one side only): element i of the box,\n"
    " * of up to 4 dimensions, at byte offsets from soff and doff. */\n"
    "__kernel void copy_strided(__global const uchar *src, ulong soff, __global uchar *dst,\n"
    "                           ulong doff, uint esize, long4 ext, long4 ss, long4 ds) {\n"
    "  long r = (long)get_global_id(0), so = (long)soff, dof = (long)doff, k;\n"
    "  k = r % ext.s3; r /= ext.s3; so += k * ss.s3; dof += k * ds.s3;\n"
    "  k = r % ext.s2; r /= ext.s2; so += k * ss.s2; dof += k * ds.s2;\n"
    "  k = r % ext.s1; r /= ext.s1; so += k * ss.s1; dof += k * ds.s1;\n"
    "  so += r * ss.s0; dof += r * ds.s0;\n"
    "  for (uint b = 0; b < esize; b++) dst[dof + b] = src[so + b];\n"
    "}\n"
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
    [OCL_SEQ_C64] = "seq_c64", [OCL_SEQ_C128] = "seq_c128", [OCL_COPY_STRIDED] = "copy_strided",
};

/* The kernels' program of the shared context, built on first use (state
 * lock). */
static cl_int build_program(char *log, size_t n) {
  if (ocl_state.program) return ocl_state.program_status;
  const char *src = ocl_kernel_source;
  cl_int err;
  ocl_state.program = clCreateProgramWithSource(ocl_state.context, 1, &src, NULL, &err);
  if (!ocl_state.program) return err;
  err = clBuildProgram(ocl_state.program, (cl_uint)ocl_state.ndevs, ocl_state.devs, "", NULL,
                       NULL);
  if (err != CL_SUCCESS) {
    log[0] = '\0';
    clGetProgramBuildInfo(ocl_state.program, ocl_state.devs[0], CL_PROGRAM_BUILD_LOG, n, log,
                          NULL);
    log[n - 1] = '\0';
  }
  ocl_state.program_status = err;
  return err;
}

dlrun_status ocl_kernel_of(ocl_device *d, int which, cl_kernel *out) {
  char log[512] = "";
  pthread_mutex_lock(&ocl_state.lock);
  cl_int err = build_program(log, sizeof log);
  pthread_mutex_unlock(&ocl_state.lock);
  if (err != CL_SUCCESS)
    return ocl_svc->fail(DLRUN_ERR_RUNTIME, "%s: building dlrun's kernels failed: %s (%d)%s%s",
                         d->name, ocl_error_name(err), err, log[0] ? ": " : "", log);
  pthread_mutex_lock(&d->q.lock);
  if (!d->kernels[which])
    d->kernels[which] = clCreateKernel(ocl_state.program, ocl_kernel_names[which], &err);
  *out = d->kernels[which];
  pthread_mutex_unlock(&d->q.lock);
  if (!*out)
    return ocl_svc->fail(DLRUN_ERR_RUNTIME, "%s: the kernel %s: %s (%d)", d->name,
                         ocl_kernel_names[which], ocl_error_name(err), err);
  return DLRUN_OK;
}
