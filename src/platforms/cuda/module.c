/* The CUDA platform module (libdlrun_cuda.so): its entry point, its vtable,
 * and the slots that are a few lines each (record, the DLPack stream
 * protocol, native handles, failure injection).
 *
 * transport_view hands CUDA's device addresses themselves
 * (transport_view_device): a CUDA-aware MPI reads and writes them; any
 * other transport has the device layer stage them through host memory. */
#include <stdio.h>
#include <stdlib.h>

#include "cu.h"

#define EXPORT __attribute__((visibility("default")))

const dlrun_platform_services *cu_svc;

static bool cu_host_readable(const dlrun_device *dev, dlrun_memory_kind kind) {
  return cu_is_host_memory(dev, kind);
}

static dlrun_status cu_record(dlrun_device *dev, const dlrun_event *waits, size_t nwaits,
                              dlrun_event *done) {
  return cu_enqueue(cu_dev(dev), "record", -1, NULL, NULL, NULL, NULL, NULL, waits, nwaits,
                    done);
}

/* Device memory and pinned_host memory alike: the address is what a
 * CUDA-aware MPI takes (pinned_host memory is host memory too). */
static void *cu_transport_view(const dlrun_device *dev, dlrun_memory_kind kind,
                               const void *data) {
  (void)dev;
  (void)kind;
  return (void *)data;
}

/* The DLPack stream protocol: a consumer names a device's stream by its
 * CUstream handle. */
static int64_t cu_consumer_stream(const dlrun_device *dev) {
  return (int64_t)(intptr_t)cu_dev(dev)->stream;
}

/* Make the consumer's stream wait for ev: 1 is the legacy default stream,
 * 2 the per-thread default stream (CUstream 0x1 and 0x2), a value of 4096
 * or more a CUstream (a pointer: none lies in the first page, so 3 to 4095
 * are no handle and refused); 0 is refused (the Array API leaves it
 * ambiguous). The driver checks the handle (cu_stream_wait_event). */
static dlrun_status cu_stream_wait(const dlrun_device *dev, int64_t stream, dlrun_event ev) {
  cu_device *d = cu_dev(dev);
  if (stream == 0)
    return cu_svc->fail(DLRUN_ERR_BUFFER,
                        "stream=0 is ambiguous for arrays on %s (the __dlpack__ protocol "
                        "disallows it): pass 1 (the legacy default stream), 2 (the per-thread "
                        "default stream), a CUstream, -1 (do not wait) or nil (wait for the array)",
                        d->name);
  /* a CUstream is a pointer: no handle lies in the first page */
  if (stream < -1 || (stream > 2 && stream < 4096))
    return cu_svc->fail(DLRUN_ERR_BUFFER,
                        "stream must be nil (wait for the array), -1 (do not wait), 1 (the legacy "
                        "default stream), 2 (the per-thread default stream) or a CUstream (a "
                        "pointer, 4096 or more: 3 to 4095 cannot be one) for arrays on %s, got %lld",
                        d->name, (long long)stream);
  return cu_stream_wait_event(d, (dlcu_stream)(intptr_t)stream, ev);
}

/* The driver's handles of dev: its primary context, its stream, its
 * CUdevice (as a pointer-sized integer), at most n. */
static dlrun_status cu_native_handles(const dlrun_device *dev, void **handles, size_t n) {
  cu_device *d = cu_dev(dev);
  void *all[3] = {d->ctx, d->stream, (void *)(intptr_t)d->cu};
  for (size_t i = 0; i < n && i < 3; i++) handles[i] = all[i];
  return DLRUN_OK;
}

static dlrun_status cu_inject_failure(dlrun_device *dev, dlrun_work_kind what, unsigned count) {
  cu_device *d = cu_dev(dev);
  if (what != DLRUN_WORK_COPY && what != DLRUN_WORK_FILL)
    return cu_svc->fail(DLRUN_ERR_VALUE, "%s: no work kind %d", d->name, (int)what);
  pthread_mutex_lock(&d->q.lock);
  d->q.inject[what] = count;
  pthread_mutex_unlock(&d->q.lock);
  return DLRUN_OK;
}

dlrun_platform cu_platform = {
    .abi = DLRUN_PLATFORM_ABI,
    .name = "cuda",
    .class_name = "CudaDevice",
    .is_accelerator = true,
    .probe = cu_probe,
    .device_init = cu_device_init,
    .device_destroy = cu_device_destroy,
    .is_host_memory = cu_is_host_memory,
    .host_readable = cu_host_readable,
    .memory_info = cu_memory_info,
    .default_capacity = cu_default_capacity,
    .reserve = cu_reserve,
    .release = cu_release,
    .commit = cu_commit,
    .decommit = cu_decommit,
    .owns = cu_owns,
    .copy_box = cu_copy_box,
    .fill = cu_fill,
    .record = cu_record,
    .event_wait = cu_event_wait,
    /* event_query, event_then: the timeline's, set at open */
    .dlpack_device = cu_dlpack_device,
    .dlpack_lookup = cu_dlpack_lookup,
    .export_data = cu_export_data,
    .import_data = cu_import_data,
    .consumer_stream = cu_consumer_stream,
    .stream_wait = cu_stream_wait,
    .transport_view = cu_transport_view,
    .transport_view_device = true,
    .native_handles = cu_native_handles,
    .inject_failure = cu_inject_failure,
    .bytes_held = cu_bytes_held,
};

EXPORT int dlrun_platform_module_open(int abi, const dlrun_platform_services *svc,
                                      const dlrun_platform **out, char *err, size_t n) {
  if (abi != DLRUN_PLATFORM_ABI || !svc || svc->abi != DLRUN_PLATFORM_ABI) {
    snprintf(err, n, "libdlrun_cuda is built for platform ABI %d, the library has %d",
             DLRUN_PLATFORM_ABI, svc && abi == DLRUN_PLATFORM_ABI ? svc->abi : abi);
    return -1;
  }
  cu_svc = svc;
  /* Its events are the library's timeline points (see the OpenCL module). */
  cu_platform.event_query = svc->timeline_query;
  cu_platform.event_then = svc->timeline_then;
  *out = &cu_platform;
  return 0;
}
