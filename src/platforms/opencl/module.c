/* The OpenCL platform module (libdlrun_opencl.so): its entry point, its
 * vtable, whether the hardware is here (probe), and the slots that are a
 * few lines each (events, record, stream protocol, failure injection).
 *
 * OpenCL memory is not reachable by a transport between processes (MPI
 * reads host memory), so transport_view is NULL: device_put between
 * processes stages OpenCL device memory through host memory. commit/decommit are NULL: an
 * OpenCL buffer has no pages to give back while keeping its contents'
 * addresses. */
#include <stdio.h>
#include <stdlib.h>

#include "ocl.h"

#define EXPORT __attribute__((visibility("default")))

const dlrun_platform_services *ocl_svc;

static bool ocl_probe(bool for_auto, size_t *ndevices, char *why, size_t n) {
  cl_platform_id p;
  cl_device_id *devs;
  size_t ndevs, naccel;
  if (!ocl_discover(&p, &devs, &ndevs, &naccel, why, n)) return false;
  free(devs);
  if (for_auto && naccel == 0) {
    char name[128] = "?";
    clGetPlatformInfo(p, CL_PLATFORM_NAME, sizeof name, name, NULL);
    name[sizeof name - 1] = '\0';
    snprintf(why, n,
             "the OpenCL platform %s has no GPU or accelerator (its other devices are used when "
             "asked for by name: --devices opencl:N)",
             name);
    return false;
  }
  *ndevices = for_auto ? naccel : ndevs;
  return true;
}

static bool ocl_host_readable(const dlrun_device *dev, dlrun_memory_kind kind) {
  return ocl_is_host_memory(dev, kind);
}

static dlrun_status ocl_record(dlrun_device *dev, const dlrun_event *waits, size_t nwaits,
                               dlrun_event *done) {
  ocl_enqueue q;
  dlrun_status st = ocl_begin(ocl_dev(dev), "record", -1, waits, nwaits, &q);
  return st ? st : ocl_end(&q, CL_SUCCESS, done);
}

/* The DLPack stream protocol: a consumer names a device's queue by its
 * cl_command_queue handle. */
static int64_t ocl_consumer_stream(const dlrun_device *dev) {
  return (int64_t)(intptr_t)ocl_dev(dev)->queue;
}

/* Make the consumer's queue `stream` (one of this module's queues: any
 * other value is refused before OpenCL sees it) wait for ev. A failure of
 * ev known now is returned; one that comes later is not seen by the
 * consumer's queue (OpenCL has no way to fail a barrier). */
static dlrun_status ocl_stream_wait(const dlrun_device *dev, int64_t stream, dlrun_event ev) {
  ocl_device *d = ocl_dev(dev);
  ocl_device *c = ocl_device_of_queue((cl_command_queue)(intptr_t)stream);
  if (!c) /* worded as the library's message for platforms without queues */
    return ocl_svc->fail(DLRUN_ERR_BUFFER,
                         "stream must be nil (wait for the array), -1 (do not wait) or the "
                         "cl_command_queue of an OpenCL device of dlrun for arrays on %s, got %lld",
                         d->name, (long long)stream);
  cl_event e;
  dlrun_status st = ocl_wait_event(c, ev, &e);
  if (st || !e) return st;
  pthread_mutex_lock(&c->q.lock);
  cl_int err = clEnqueueBarrierWithWaitList(c->queue, 1, &e, NULL);
  pthread_mutex_unlock(&c->q.lock);
  clReleaseEvent(e);
  if (err != CL_SUCCESS)
    return ocl_svc->fail(DLRUN_ERR_RUNTIME, "%s: clEnqueueBarrierWithWaitList failed: %s (%d)",
                         c->name, ocl_error_name(err), err);
  return DLRUN_OK;
}

static dlrun_status ocl_inject_failure(dlrun_device *dev, dlrun_work_kind what, unsigned count) {
  ocl_device *d = ocl_dev(dev);
  if (what != DLRUN_WORK_COPY && what != DLRUN_WORK_FILL)
    return ocl_svc->fail(DLRUN_ERR_VALUE, "%s: no work kind %d", d->name, (int)what);
  pthread_mutex_lock(&d->q.lock);
  d->q.inject[what] = count;
  pthread_mutex_unlock(&d->q.lock);
  return DLRUN_OK;
}

dlrun_platform ocl_platform = {
    .abi = DLRUN_PLATFORM_ABI,
    .name = "opencl",
    .class_name = "OpenclDevice",
    .is_accelerator = true,
    .probe = ocl_probe,
    .device_init = ocl_device_init,
    .device_destroy = ocl_device_destroy,
    .is_host_memory = ocl_is_host_memory,
    .host_readable = ocl_host_readable,
    .memory_info = ocl_memory_info,
    .default_capacity = ocl_default_capacity,
    .reserve = ocl_reserve,
    .release = ocl_release,
    .commit = NULL,
    .decommit = NULL,
    .owns = ocl_owns,
    .copy_box = ocl_copy_box,
    .fill = ocl_fill,
    .record = ocl_record,
    /* event_query, event_wait, event_then: the timeline's, set at open */
    .dlpack_device = ocl_dlpack_device,
    .dlpack_lookup = ocl_dlpack_lookup,
    .export_data = ocl_export_data,
    .import_data = ocl_import_data,
    .consumer_stream = ocl_consumer_stream,
    .stream_wait = ocl_stream_wait,
    .transport_view = NULL,
    .native_handles = ocl_native_handles,
    .inject_failure = ocl_inject_failure,
};

EXPORT int dlrun_platform_module_open(int abi, const dlrun_platform_services *svc,
                                      const dlrun_platform **out, char *err, size_t n) {
  if (abi != DLRUN_PLATFORM_ABI || !svc || svc->abi != DLRUN_PLATFORM_ABI) {
    snprintf(err, n, "libdlrun_opencl is built for platform ABI %d, the library has %d",
             DLRUN_PLATFORM_ABI, svc && abi == DLRUN_PLATFORM_ABI ? svc->abi : abi);
    return -1;
  }
  ocl_svc = svc;
  /* Its events are the library's timeline points: with the timeline's own
   * slots the library knows them as such, so work releases what it held
   * before its point reads complete (a buffer a fill or a copy held is
   * free once block_until_ready returns), as on sim and cpu. */
  ocl_platform.event_query = svc->timeline_query;
  ocl_platform.event_wait = svc->timeline_wait;
  ocl_platform.event_then = svc->timeline_then;
  *out = &ocl_platform;
  return 0;
}
