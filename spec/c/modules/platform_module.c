/* A platform module for test_modules.c, built as a module is: on the public
 * header alone. Its environment steers it: DLRUN_TEST_PLATFORM_NAME (the
 * platform's name, default "opencl"), DLRUN_TEST_PLATFORM_FAIL (open
 * fails with this text), DLRUN_TEST_PLATFORM_DEVICES (probe: that many
 * devices; "none": not available). No device is ever made. */
#include <stdlib.h>
#include <string.h>
#include <stdio.h>

#include "dlrun/platform.h"

/* How many times open ran (the test reads it through dlsym). */
DLRUN_API int dlrun_test_platform_opens;

static const dlrun_platform_services *svc;

static bool probe(bool for_auto, size_t *ndevices, char *why, size_t n) {
  (void)for_auto;
  const char *d = getenv("DLRUN_TEST_PLATFORM_DEVICES");
  if (d && strcmp(d, "none") == 0) {
    snprintf(why, n, "no devices here (test)");
    return false;
  }
  *ndevices = d ? (size_t)atoi(d) : 1;
  return true;
}

static dlrun_status no_device(void) { return svc->fail(DLRUN_ERR_RUNTIME, "a test platform"); }
static dlrun_status device_init(dlrun_device *d, size_t i, size_t n, void **impl) {
  (void)d, (void)i, (void)n, (void)impl;
  return no_device();
}
static void device_destroy(dlrun_device *d, void *impl) { (void)d, (void)impl; }
static bool no_memory(const dlrun_device *d, dlrun_memory_kind k) { return (void)d, (void)k, false; }
static void memory_info(const dlrun_device *d, dlrun_memory_kind k, dlrun_memory_info *out) {
  (void)d, (void)k;
  memset(out, 0, sizeof *out);
}
static uint64_t default_capacity(const dlrun_device *d, dlrun_memory_kind k, size_t n) {
  return (void)d, (void)k, (void)n, 0;
}
static dlrun_status reserve(dlrun_device *d, dlrun_memory_kind k, uint64_t size, void **base) {
  (void)d, (void)k, (void)size, (void)base;
  return no_device();
}
static void release(dlrun_device *d, dlrun_memory_kind k, void *base, uint64_t size) {
  (void)d, (void)k, (void)base, (void)size;
}
static bool owns(const dlrun_device *d, dlrun_memory_kind k, const void *p, uint64_t n) {
  return (void)d, (void)k, (void)p, (void)n, false;
}
static dlrun_status copy_box(dlrun_device *d, dlrun_copy_op *op, const dlrun_event *w,
                             size_t nw, dlrun_event *done) {
  (void)d, (void)op, (void)w, (void)nw, (void)done;
  return no_device();
}
static dlrun_status fill(dlrun_device *d, dlrun_memory_kind k, void *p, uint64_t n,
                         const dlrun_fill *f, const dlrun_event *w, size_t nw, dlrun_event *done) {
  (void)d, (void)k, (void)p, (void)n, (void)f, (void)w, (void)nw, (void)done;
  return no_device();
}
static dlrun_status record(dlrun_device *d, const dlrun_event *w, size_t nw, dlrun_event *done) {
  (void)d, (void)w, (void)nw, (void)done;
  return no_device();
}
static bool event_query(dlrun_event ev) { return (void)ev, true; }
static dlrun_status event_wait(dlrun_event ev) { return (void)ev, DLRUN_OK; }
static dlrun_status event_then(dlrun_event ev, void (*fn)(void *), void *ctx) {
  (void)ev;
  fn(ctx);
  return DLRUN_OK;
}
static void dlpack_device(const dlrun_device *d, dlrun_memory_kind k, int32_t *type, int32_t *id) {
  (void)d, (void)k;
  *type = 14; /* kDLOneAPI: nobody's */
  *id = 0;
}
static ptrdiff_t dlpack_lookup(int32_t type, int32_t id, size_t n, dlrun_memory_kind *k) {
  return (void)type, (void)id, (void)n, (void)k, -1;
}

static dlrun_platform platform = {
    .abi = DLRUN_PLATFORM_ABI,
    .class_name = "TestDevice",
    .is_accelerator = true,
    .probe = probe,
    .device_init = device_init,
    .device_destroy = device_destroy,
    .is_host_memory = no_memory,
    .host_readable = no_memory,
    .memory_info = memory_info,
    .default_capacity = default_capacity,
    .reserve = reserve,
    .release = release,
    .owns = owns,
    .copy_box = copy_box,
    .fill = fill,
    .record = record,
    .event_query = event_query,
    .event_wait = event_wait,
    .event_then = event_then,
    .dlpack_device = dlpack_device,
    .dlpack_lookup = dlpack_lookup,
};

DLRUN_API int dlrun_platform_module_open(int abi, const dlrun_platform_services *services,
                                         const dlrun_platform **out, char *err, size_t n) {
  dlrun_test_platform_opens++;
  const char *fail = getenv("DLRUN_TEST_PLATFORM_FAIL");
  if (abi != DLRUN_PLATFORM_ABI || fail) {
    snprintf(err, n, "%s", fail ? fail : "another platform ABI");
    return 1;
  }
  svc = services;
  const char *name = getenv("DLRUN_TEST_PLATFORM_NAME");
  platform.name = name ? name : "opencl";
  *out = &platform;
  return 0;
}
