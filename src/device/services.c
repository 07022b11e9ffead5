/* The services the library gives platforms (dlrun/platform.h): one table,
 * handed to every module it opens, so that a module never links a second
 * copy of dlrun. */
#include <stdarg.h>
#include <stdio.h>

#include "core/status_impl.h"
#include "device_impl.h"
#include "host/hostexec.h"
#include "timeline.h"

static dlrun_status fail_v(dlrun_status code, const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return dlrun_fail(code, "%s", msg);
}

static void *device_impl(const dlrun_device *dev) { return dev->impl; }
static const dlrun_platform *device_platform(const dlrun_device *dev) { return dev->platform; }
static const char *device_name(const dlrun_device *dev) { return dev->name; }

static dlrun_status map_inaccessible(uint64_t size, void **base) {
  return dlrun_map_range(size, false, base);
}

static const dlrun_platform_services services = {
    .abi = DLRUN_PLATFORM_ABI,
    .fail = fail_v,
    .last_error = dlrun_last_error,
    .device_impl = device_impl,
    .device_platform = device_platform,
    .device_name = device_name,
    .host_ram = dlrun_host_ram_bytes,
    .host_copy_box = dlrun_host_copy_box,
    .host_fill = dlrun_host_fill,
    .timeline_create = dlrun_timeline_create,
    .timeline_destroy = dlrun_timeline_destroy,
    .timeline_begin = dlrun_timeline_begin,
    .timeline_complete = dlrun_timeline_complete,
    .timeline_last = dlrun_timeline_last,
    .timeline_query = dlrun_timeline_query,
    .timeline_wait = dlrun_timeline_wait,
    .timeline_then = dlrun_timeline_then,
    .event_query = dlrun_event_done,
    .event_wait = dlrun_event_wait,
    .event_then = dlrun_event_then,
    .event_status = dlrun_event_status,
    .map_inaccessible = map_inaccessible,
    .unmap = dlrun_unmap_range,
};

const dlrun_platform_services *dlrun_platform_services_get(void) { return &services; }
