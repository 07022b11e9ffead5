/* A host application sharing an array with its own OpenCL code: dlrun makes
 * 1024 float32 values on an OpenCL device, exports them with DLPack, and the
 * application runs a kernel of its own on the exported buffer, on dlrun's
 * queue for that device, then reads its result back and checks it.
 *
 * Built by `make` when the OpenCL module is (the Makefile's OPENCL_OK), with
 * libdlrun.a and -lOpenCL. Run it on any OpenCL device; with pocl's CPU driver:
 *   POCL_DEVICES=pthread build/examples/opencl_interop */
#define CL_TARGET_OPENCL_VERSION 120
#include <stdint.h>
#include <stdio.h>

#include <CL/cl.h>
#include <dlrun/dlpack.h>
#include <dlrun/dlrun.h>
#include <dlrun/opencl.h>

#define N 1024

/* y[i] = 2 x[i] + 1, with x the exported buffer read from `offset` (in
 * elements: DLPack gives the array's place inside the cl_mem as a byte
 * offset, which need not be aligned for a sub-buffer). */
static const char SOURCE[] =
    "__kernel void scale(__global const float *x, ulong offset, __global float *y) {\n"
    "  size_t i = get_global_id(0);\n"
    "  y[i] = 2.0f * x[offset + i] + 1.0f;\n"
    "}\n";

/* Report a failed dlrun call: its status and the calling thread's last message. */
static int fail(const char *what, dlrun_status st) {
  fprintf(stderr, "%s: %s: %s\n", what, dlrun_status_name(st), dlrun_last_error());
  return 1;
}

/* Report a failed OpenCL call by its error code. */
static int cl_fail(const char *what, cl_int err) {
  fprintf(stderr, "%s: OpenCL error %d\n", what, (int)err);
  return 1;
}

/* Report a failed build with the compiler's log. */
static int build_fail(cl_program program, cl_device_id device, cl_int err) {
  char log[4096] = "";
  clGetProgramBuildInfo(program, device, CL_PROGRAM_BUILD_LOG, sizeof log - 1, log, NULL);
  fprintf(stderr, "clBuildProgram: OpenCL error %d\n%s\n", (int)err, log);
  return 1;
}

/* Runs the kernel on the exported tensor `t` and checks what it wrote. The
 * caller releases the tensor and the handles it borrowed. */
static int scale_on_device(const DLTensor *t, cl_context ctx, cl_command_queue queue,
                           cl_device_id device) {
  if (t->device.device_type != kDLOpenCL || t->ndim != 1 || t->shape[0] != N ||
      t->strides[0] != 1 || t->dtype.code != kDLFloat || t->dtype.bits != 32 ||
      t->byte_offset % sizeof(float) != 0) {
    fprintf(stderr, "export: expected %d contiguous float32 values on kDLOpenCL\n", N);
    return 1;
  }
  cl_mem x = (cl_mem)t->data; /* dlrun's buffer: borrowed until the deleter runs */
  cl_ulong offset = t->byte_offset / sizeof(float);

  cl_int err;
  const char *source = SOURCE;
  cl_program program = clCreateProgramWithSource(ctx, 1, &source, NULL, &err);
  if (err != CL_SUCCESS) return cl_fail("clCreateProgramWithSource", err);
  int rc = 1;
  cl_kernel kernel = NULL;
  cl_mem y = NULL;
  if ((err = clBuildProgram(program, 1, &device, "", NULL, NULL)) != CL_SUCCESS) {
    rc = build_fail(program, device, err);
    goto done;
  }
  kernel = clCreateKernel(program, "scale", &err);
  if (err != CL_SUCCESS) { rc = cl_fail("clCreateKernel", err); goto done; }
  y = clCreateBuffer(ctx, CL_MEM_WRITE_ONLY, N * sizeof(float), NULL, &err);
  if (err != CL_SUCCESS) { rc = cl_fail("clCreateBuffer", err); goto done; }
  if ((err = clSetKernelArg(kernel, 0, sizeof x, &x)) != CL_SUCCESS ||
      (err = clSetKernelArg(kernel, 1, sizeof offset, &offset)) != CL_SUCCESS ||
      (err = clSetKernelArg(kernel, 2, sizeof y, &y)) != CL_SUCCESS) {
    rc = cl_fail("clSetKernelArg", err);
    goto done;
  }
  /* The export made this queue wait for the array's writes (arange runs on
   * the device): the kernel enqueued after it reads them. */
  size_t global = N;
  err = clEnqueueNDRangeKernel(queue, kernel, 1, NULL, &global, NULL, 0, NULL, NULL);
  if (err != CL_SUCCESS) { rc = cl_fail("clEnqueueNDRangeKernel", err); goto done; }
  float out[N];
  err = clEnqueueReadBuffer(queue, y, CL_TRUE, 0, sizeof out, out, 0, NULL, NULL);
  if (err != CL_SUCCESS) { rc = cl_fail("clEnqueueReadBuffer", err); goto done; }
  for (int i = 0; i < N; i++) {
    if (out[i] != 2.0f * (float)i + 1.0f) {
      fprintf(stderr, "y[%d] is %g, expected %g\n", i, out[i], 2.0 * i + 1.0);
      goto done;
    }
  }
  printf("a kernel of the application read the exported buffer on dlrun's queue: "
         "y = 2x + 1 = %g, %g, ..., %g, all %d correct\n", out[0], out[1], out[N - 1], N);
  rc = 0;
done:
  if (y) clReleaseMemObject(y);
  if (kernel) clReleaseKernel(kernel);
  clReleaseProgram(program);
  return rc;
}

int main(void) {
  dlrun_status st;
  dlrun_config cfg = {.devices = "opencl:1", .device_memory = 64u << 20};
  dlrun_runtime *rt;                         /* the caller owns one reference */
  if ((st = dlrun_runtime_create(&cfg, &rt))) return fail("runtime", st);
  dlrun_device *dev = dlrun_device_get(rt, "opencl", 0);

  /* 0, 1, ..., 1023 as float32, computed on the device. */
  dlrun_sharding *single;
  if ((st = dlrun_single_device_sharding_create(dev, DLRUN_MEM_DEVICE, &single)))
    return fail("sharding", st);
  dlrun_scalar start = {.kind = DLRUN_SCALAR_INT, .i = 0}, step = {.kind = DLRUN_SCALAR_INT, .i = 1};
  dlrun_array *x;
  if ((st = dlrun_array_arange(single, DLRUN_FLOAT32, &start, &step, N, &x)))
    return fail("arange", st);

  /* The device's context, queue and device id: borrowed from the runtime. */
  void *ctx, *queue, *device;
  if ((st = dlrun_opencl_handles(dev, &ctx, &queue, &device))) return fail("opencl_handles", st);

  /* A versioned export (read-only: it shares dlrun's buffer) with the queue
   * as the stream: dlrun orders the queue after the array's writes instead
   * of waiting on the host. */
  dlrun_export_options opts = {.has_max_version = true, .max_major = 1, .max_minor = 1,
                               .has_stream = true, .stream = (int64_t)(intptr_t)queue};
  dlrun_exported e;
  if ((st = dlrun_export(x, &opts, &e))) return fail("export", st);
  int rc = scale_on_device(&e.versioned->dl_tensor, (cl_context)ctx, (cl_command_queue)queue,
                           (cl_device_id)device);

  /* The application's reads are done (its read above blocked): give the
   * buffer back, then everything else. */
  e.versioned->deleter(e.versioned);
  dlrun_array_release(x);
  dlrun_sharding_release(single);
  dlrun_runtime_release(rt);                 /* the last reference frees everything */
  return rc;
}
