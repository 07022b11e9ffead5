/* The services the library gives platforms (dlrun/platform.h): one table,
 * handed to every module it opens, so that a module never links a second
 * copy of dlrun. */
#include <stdarg.h>
#include <stdio.h>
#include <unistd.h>

#include "core/alloc.h"
#include "core/status_impl.h"
#include "core/trace_impl.h"
#include "device_impl.h"
#include "host_loops.h"
#include "mem/shared_file.h"
#include "timeline.h"
#include "work_trace.h"
#include "workers.h"

static dlrun_status fail_v(dlrun_status code, const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return dlrun_fail(code, "%s", msg);
}

uint64_t dlrun_host_ram_bytes(void) {
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page <= 0) return 1ull << 32;
  return (uint64_t)pages * (uint64_t)page;
}

static void *device_impl(const dlrun_device *dev) { return dev->impl; }
static const dlrun_platform *device_platform(const dlrun_device *dev) { return dev->platform; }
static const char *device_name(const dlrun_device *dev) { return dev->name; }

static dlrun_status map_inaccessible(uint64_t size, void **base) {
  return dlrun_map_range(size, false, base);
}

static void *alloc(size_t n) {
  void *p = dlrun_calloc(1, n);
  if (!p) dlrun_fail_oom_host(n);
  return p;
}

static dlrun_status map_host(uint64_t size, void **base) { return dlrun_map_range(size, true, base); }

/* A memory file only when the job found peers on this host that may map it. */
static int shared_file_create(uint64_t size, void **mapping) {
  return dlrun_shared_files_wanted() ? dlrun_shared_file_create(size, mapping) : -1;
}

static dlrun_workers *device_workers(const dlrun_device *dev) { return dev->rt->workers; }

static bool trace_enabled(void) { return dlrun_trace_enabled(); }

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
    .alloc = alloc,
    .free = dlrun_free,
    .map_host = map_host,
    .commit_host = dlrun_commit_range,
    .decommit_host = dlrun_decommit_range,
    .shared_file_create = shared_file_create,
    .shared_file_map = dlrun_shared_file_map,
    .shared_file_unmap = dlrun_shared_file_unmap,
    .timeline_park = dlrun_timeline_park,
    .device_workers = device_workers,
    .workers_start = dlrun_workers_start,
    .workers_post = dlrun_workers_post,
    .workers_parallel = dlrun_workers_parallel,
    .trace_enabled = trace_enabled,
    .trace_now = dlrun_trace_now,
    .trace_copy = dlrun_trace_copy,
    .trace_work = dlrun_trace_work,
};

const dlrun_platform_services *dlrun_platform_services_get(void) { return &services; }
