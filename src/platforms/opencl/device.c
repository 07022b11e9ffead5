/* OpenCL devices: one cl_context shared by every device of the platform
 * (waits across contexts fail with CL_INVALID_CONTEXT, and a copy between
 * two devices needs both buffers in one context), made by the first
 * device_init and released by the last device_destroy; an in-order queue
 * (a CPU device's big copies also use a second one, lane.c) and a timeline
 * of the library's per device. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ocl.h"

ocl_shared ocl_state = {.lock = PTHREAD_MUTEX_INITIALIZER};

ocl_device *ocl_dev(const dlrun_device *dev) { return ocl_svc->device_impl(dev); }

ocl_device *ocl_device_of_queue(cl_command_queue queue) {
  pthread_mutex_lock(&ocl_state.lock);
  ocl_device *d = ocl_state.devices;
  while (d && d->queue != queue) d = d->next;
  pthread_mutex_unlock(&ocl_state.lock);
  return d;
}

/* The shared context, made when the first device comes (state lock held). */
static dlrun_status share_context(const char *name) {
  if (ocl_state.refs++ > 0) return DLRUN_OK;
  char why[200];
  size_t naccel;
  if (!ocl_discover(&ocl_state.platform, &ocl_state.devs, &ocl_state.ndevs, &naccel, why,
                    sizeof why)) {
    ocl_state.refs--;
    return ocl_svc->fail(DLRUN_ERR_RUNTIME, "%s: %s", name, why);
  }
  cl_context_properties props[] = {CL_CONTEXT_PLATFORM, (cl_context_properties)ocl_state.platform,
                                   0};
  cl_int err;
  ocl_state.context =
      clCreateContext(props, (cl_uint)ocl_state.ndevs, ocl_state.devs, NULL, NULL, &err);
  if (!ocl_state.context) {
    free(ocl_state.devs);
    ocl_state.devs = NULL;
    ocl_state.refs--;
    return ocl_svc->fail(DLRUN_ERR_RUNTIME, "%s: clCreateContext failed: %s (%d)", name,
                         ocl_error_name(err), err);
  }
  return DLRUN_OK;
}

/* The last device gone: the context and the fill kernels' program go too
 * (state lock held). */
static void unshare_context(void) {
  if (--ocl_state.refs > 0) return;
  if (ocl_state.program) clReleaseProgram(ocl_state.program);
  ocl_state.program = NULL;
  ocl_state.program_status = CL_SUCCESS;
  clReleaseContext(ocl_state.context);
  ocl_state.context = NULL;
  free(ocl_state.devs);
  ocl_state.devs = NULL;
  ocl_state.ndevs = 0;
}

static void read_device_info(ocl_device *d) {
  cl_ulong u = 0;
  cl_bool b = CL_FALSE;
  cl_device_fp_config fp = 0;
  cl_uint bits = 0;
  clGetDeviceInfo(d->id, CL_DEVICE_GLOBAL_MEM_SIZE, sizeof u, &u, NULL);
  d->global_mem = u;
  u = 0;
  clGetDeviceInfo(d->id, CL_DEVICE_MAX_MEM_ALLOC_SIZE, sizeof u, &u, NULL);
  d->max_alloc = u & ~(cl_ulong)4095; /* the pool's segments: a multiple of its alignment */
  clGetDeviceInfo(d->id, CL_DEVICE_HOST_UNIFIED_MEMORY, sizeof b, &b, NULL);
  d->unified = b == CL_TRUE;
  clGetDeviceInfo(d->id, CL_DEVICE_DOUBLE_FP_CONFIG, sizeof fp, &fp, NULL);
  d->fp64 = fp != 0;
  clGetDeviceInfo(d->id, CL_DEVICE_MEM_BASE_ADDR_ALIGN, sizeof bits, &bits, NULL);
  d->align = bits / 8 ? bits / 8 : 1;
}

dlrun_status ocl_device_init(dlrun_device *dev, size_t local_index, size_t ndevices,
                             void **impl) {
  const char *name = ocl_svc->device_name(dev);
  ocl_device *d = calloc(1, sizeof *d);
  if (!d) return ocl_svc->fail(DLRUN_ERR_RESOURCE_EXHAUSTED, "%s: out of host memory", name);
  d->dev = dev;
  d->name = name;
  d->index = local_index;
  d->ndevices = ndevices;
  opq_queue_init(&d->q, ocl_svc, &ocl_op_driver, d, name);
  pthread_mutex_init(&d->mem_lock, NULL);
  pthread_mutex_lock(&ocl_state.lock);
  dlrun_status st = share_context(name);
  if (!st && local_index >= ocl_state.ndevs) {
    st = ocl_svc->fail(DLRUN_ERR_RUNTIME, "%s: the OpenCL platform has %zu devices, not %zu",
                       name, ocl_state.ndevs, local_index + 1);
    unshare_context();
  }
  if (!st) {
    d->id = ocl_state.devs[local_index];
    read_device_info(d);
    cl_int err;
    d->queue = clCreateCommandQueue(ocl_state.context, d->id, 0, &err);
    if (!d->queue) {
      st = ocl_svc->fail(DLRUN_ERR_RUNTIME, "%s: clCreateCommandQueue failed: %s (%d)", name,
                         ocl_error_name(err), err);
      unshare_context();
    }
  }
  if (!st) ocl_lane_open(d);
  if (!st && (st = ocl_svc->timeline_create(&ocl_platform, &d->q.tl))) {
    ocl_lane_close(d);
    clReleaseCommandQueue(d->queue);
    unshare_context();
  }
  if (!st) {
    d->next = ocl_state.devices;
    ocl_state.devices = d;
  }
  pthread_mutex_unlock(&ocl_state.lock);
  if (st) {
    opq_queue_destroy(&d->q);
    pthread_mutex_destroy(&d->mem_lock);
    free(d);
    return st;
  }
  *impl = d;
  return DLRUN_OK;
}

void ocl_device_destroy(dlrun_device *dev, void *impl) {
  (void)dev;
  ocl_device *d = impl;
  /* The queue's work is done, but its completion callbacks may still run:
   * wait until every op has completed its point. */
  clFinish(d->queue);
  ocl_lane_close(d); /* idle: every op that used it ended on the main queue */
  pthread_mutex_lock(&d->q.lock);
  opq_queue_wait_idle(&d->q);
  pthread_mutex_unlock(&d->q.lock);
  for (size_t i = 0; i < sizeof d->kernels / sizeof d->kernels[0]; i++)
    if (d->kernels[i]) clReleaseKernel(d->kernels[i]);
  clReleaseCommandQueue(d->queue);
  ocl_svc->timeline_destroy(d->q.tl);
  pthread_mutex_lock(&ocl_state.lock);
  ocl_device **p = &ocl_state.devices;
  while (*p != d) p = &(*p)->next;
  *p = d->next;
  unshare_context();
  pthread_mutex_unlock(&ocl_state.lock);
  opq_queue_destroy(&d->q);
  pthread_mutex_destroy(&d->mem_lock);
  free(d);
}

/* The native handles a host application uses with exported buffers:
 * cl_context, cl_command_queue, cl_device_id (borrowed), at most n. */
dlrun_status ocl_native_handles(const dlrun_device *dev, void **handles, size_t n) {
  ocl_device *d = ocl_dev(dev);
  void *all[3] = {ocl_state.context, d->queue, d->id};
  for (size_t i = 0; i < n && i < 3; i++) handles[i] = all[i];
  return DLRUN_OK;
}
