/* CUDA devices: the local_index-th device is CUDA ordinal local_index; its
 * primary context is retained (released at device_destroy) and made
 * current on each thread before it calls the driver; one non-blocking
 * stream per device, a timeline of the library's, and a completion thread
 * (ops.c) that submits the work a foreign event gated and completes the
 * points in order. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cu.h"

pthread_mutex_t cu_devices_lock = PTHREAD_MUTEX_INITIALIZER;
cu_device *cu_devices;

cu_device *cu_dev(const dlrun_device *dev) { return cu_svc->device_impl(dev); }

cu_device *cu_device_of_ordinal(int ordinal) {
  pthread_mutex_lock(&cu_devices_lock);
  cu_device *d = cu_devices;
  while (d && d->cu != ordinal) d = d->next;
  pthread_mutex_unlock(&cu_devices_lock);
  return d;
}

/* What dlrun reads of the device: memory, VMM support and its granularity. */
static dlcu_result read_device_info(cu_device *d) {
  size_t total = 0;
  dlcu_result r = cu_api.DeviceTotalMem(&total, d->cu);
  d->total_mem = total;
  int vmm = 0;
  if (!r) r = cu_api.DeviceGetAttribute(
              &vmm, DLCU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, d->cu);
  d->vmm = !r && vmm;
  if (!r && d->vmm) {
    dlcu_mem_allocation_prop prop = {.type = DLCU_MEM_ALLOCATION_TYPE_PINNED,
                                     .location = {DLCU_MEM_LOCATION_TYPE_DEVICE, d->cu}};
    size_t g = 0;
    if (cu_api.MemGetAllocationGranularity(&g, &prop, DLCU_MEM_ALLOC_GRANULARITY_MINIMUM) ||
        g == 0)
      d->vmm = false; /* then cuMemAlloc segments */
    d->granularity = g;
  }
  return r;
}

static void destroy_sync(cu_device *d) {
  opq_queue_destroy(&d->q);
  pthread_mutex_destroy(&d->mem_lock);
  pthread_mutex_destroy(&d->ev_lock);
  pthread_cond_destroy(&d->wake);
}

/* Its failures do not name the device: the library prefixes them with it. */
dlrun_status cu_device_init(dlrun_device *dev, size_t local_index, size_t ndevices, void **impl) {
  const char *name = cu_svc->device_name(dev);
  char why[200];
  int count;
  if (!cu_load(&count, why, sizeof why)) return cu_svc->fail(DLRUN_ERR_RUNTIME, "%s", why);
  if (local_index >= (size_t)count)
    return cu_svc->fail(DLRUN_ERR_RUNTIME, "the CUDA driver has %d devices, not %zu", count,
                        local_index + 1);
  cu_device *d = calloc(1, sizeof *d);
  if (!d) return cu_svc->fail(DLRUN_ERR_RESOURCE_EXHAUSTED, "out of host memory");
  d->dev = dev;
  d->name = name;
  d->index = local_index;
  d->ndevices = ndevices;
  memset(d->peer, -1, sizeof d->peer);
  opq_queue_init(&d->q, cu_svc, &cu_op_driver, d, name);
  pthread_mutex_init(&d->mem_lock, NULL);
  pthread_mutex_init(&d->ev_lock, NULL);
  pthread_cond_init(&d->wake, NULL);
  const char *call = "cuDeviceGet";
  dlcu_result r = cu_api.DeviceGet(&d->cu, (int)local_index);
  bool retained = false;
  if (!r) {
    call = "cuDevicePrimaryCtxRetain";
    retained = !(r = cu_api.DevicePrimaryCtxRetain(&d->ctx, d->cu));
    cu_contexts_changed();
  }
  if (!r) {
    call = "cuCtxSetCurrent";
    r = cu_make_current(d->ctx);
  }
  if (!r) {
    call = "cuDeviceGetAttribute";
    r = read_device_info(d);
  }
  if (!r) {
    call = "cuStreamCreate";
    r = cu_api.StreamCreate(&d->stream, DLCU_STREAM_NON_BLOCKING);
  }
  if (!r) {
    call = "cuEventCreate";
    r = cu_api.EventCreate(&d->unrecorded, DLCU_EVENT_DISABLE_TIMING);
  }
  dlrun_status st = DLRUN_OK;
  if (r) {
    st = cu_svc->fail(DLRUN_ERR_RUNTIME, "%s failed: %s (%d)", call, cu_error_name(r), r);
  } else if (!(st = cu_svc->timeline_create(&cu_platform, &d->q.tl)) &&
             pthread_create(&d->thread, NULL, cu_completion_main, d) != 0) {
    cu_svc->timeline_destroy(d->q.tl);
    st = cu_svc->fail(DLRUN_ERR_RESOURCE_EXHAUSTED, "cannot start a thread");
  }
  if (st) {
    if (d->unrecorded) cu_api.EventDestroy(d->unrecorded);
    if (d->stream) cu_api.StreamDestroy(d->stream);
    if (retained) cu_api.DevicePrimaryCtxRelease(d->cu);
    cu_contexts_changed();
    destroy_sync(d);
    free(d);
    return st;
  }
  pthread_mutex_lock(&cu_devices_lock);
  d->next = cu_devices;
  cu_devices = d;
  pthread_mutex_unlock(&cu_devices_lock);
  *impl = d;
  return DLRUN_OK;
}

void cu_device_destroy(dlrun_device *dev, void *impl) {
  (void)dev;
  cu_device *d = impl;
  pthread_mutex_lock(&d->q.lock);
  opq_queue_wait_idle(&d->q);
  d->stop = true;
  pthread_cond_broadcast(&d->wake);
  pthread_mutex_unlock(&d->q.lock);
  pthread_join(d->thread, NULL);
  pthread_mutex_lock(&cu_devices_lock);
  cu_device **p = &cu_devices;
  while (*p != d) p = &(*p)->next;
  *p = d->next;
  pthread_mutex_unlock(&cu_devices_lock);
  cu_make_current(d->ctx);
  cu_api.StreamSynchronize(d->stream);
  if (d->module) cu_api.ModuleUnload(d->module);
  cu_spare_events_destroy(d);
  cu_api.EventDestroy(d->unrecorded);
  cu_api.StreamDestroy(d->stream);
  cu_svc->timeline_destroy(d->q.tl);
  cu_api.DevicePrimaryCtxRelease(d->cu);
  cu_contexts_changed();
  destroy_sync(d);
  free(d);
}
