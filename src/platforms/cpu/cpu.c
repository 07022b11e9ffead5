/* The cpu platform: real host memory, work on the host's threads
 * (platforms/host/hostexec.h). Every cpu device's memory is the host's. */
#include "dlrun/platform.h"
#include "platforms/common/dlpack_codes.h"
#include "platforms/host/host_services.h"
#include "platforms/host/hostexec.h"
#include "platforms/host/region.h"

/* Built into libdlrun: its services are the library's. */
static const dlrun_platform_services *svc(void) { return dlrun_host_services(); }

typedef struct cpu_device {
  dlrun_host_queue queue; /* first: host execution reads it */
  dlrun_host_region regions[DLRUN_MEM_KIND_COUNT];
} cpu_device;

static cpu_device *cpu_of(const dlrun_device *dev) { return svc()->device_impl(dev); }

static uint64_t cpu_capacity(const dlrun_device *dev, dlrun_memory_kind kind, size_t ndevices) {
  (void)dev;
  (void)kind;
  (void)ndevices;
  return svc()->host_ram();
}

static void cpu_memory_info(const dlrun_device *dev, dlrun_memory_kind kind,
                            dlrun_memory_info *out) {
  (void)dev;
  (void)kind;
  *out = (dlrun_memory_info){.total = svc()->host_ram(), .host_ram = true};
}

static bool cpu_is_host(const dlrun_device *dev, dlrun_memory_kind kind) {
  (void)dev;
  (void)kind;
  return true;
}

static void *cpu_view(const dlrun_device *dev, dlrun_memory_kind kind, const void *data) {
  (void)dev;
  (void)kind;
  return (void *)data;
}

static dlrun_status cpu_device_init(dlrun_device *dev, size_t local_index, size_t ndevices,
                                    void **impl) {
  (void)local_index;
  (void)ndevices;
  cpu_device *c = svc()->alloc(sizeof *c);
  if (!c) return DLRUN_ERR_RESOURCE_EXHAUSTED;
  dlrun_status st = dlrun_host_queue_init(&c->queue, dev, cpu_view);
  if (st) {
    svc()->free(c);
    return st;
  }
  *impl = c;
  return DLRUN_OK;
}

static void cpu_device_destroy(dlrun_device *dev, void *impl) {
  (void)dev;
  cpu_device *c = impl;
  dlrun_host_queue_fini(&c->queue);
  svc()->free(c);
}

/* Each memory is a recorded region, so that peers on this host may map it. */
static dlrun_status cpu_reserve(dlrun_device *dev, dlrun_memory_kind kind, uint64_t size,
                                void **base) {
  return dlrun_host_region_reserve(&cpu_of(dev)->regions[kind], size, false, base);
}

static void cpu_release(dlrun_device *dev, dlrun_memory_kind kind, void *base, uint64_t size) {
  (void)base;
  (void)size;
  dlrun_host_region_release(&cpu_of(dev)->regions[kind]);
}

static dlrun_status cpu_commit(dlrun_device *dev, dlrun_memory_kind kind, void *data,
                               uint64_t size) {
  return dlrun_host_region_commit(&cpu_of(dev)->regions[kind], data, size);
}

static uint64_t cpu_decommit(dlrun_device *dev, dlrun_memory_kind kind, void *data,
                             uint64_t size) {
  return dlrun_host_region_decommit(&cpu_of(dev)->regions[kind], data, size);
}

static bool cpu_share(const dlrun_device *dev, dlrun_memory_kind kind, const void *data,
                      uint64_t n, dlrun_shared_region *out, uint64_t *offset) {
  return dlrun_host_region_share(&cpu_of(dev)->regions[kind], data, n, out, offset);
}

static bool cpu_owns(const dlrun_device *dev, dlrun_memory_kind kind, const void *data,
                     uint64_t n) {
  (void)dev;
  (void)kind;
  (void)data;
  (void)n;
  return true; /* any host address */
}

/* Host memory: the transport reaches it where the host does. */
static void *cpu_transport_view(const dlrun_device *dev, dlrun_memory_kind kind,
                                const void *data) {
  return cpu_view(dev, kind, data);
}

/* Every cpu device's memory is the host's: (kDLCPU, 0), as JAX. */
static void cpu_dlpack_device(const dlrun_device *dev, dlrun_memory_kind kind, int32_t *type,
                              int32_t *id) {
  (void)dev;
  (void)kind;
  *type = DL_CPU;
  *id = 0;
}

/* Host memory, pinned host memory included, is read on the first cpu device,
 * whatever device_id the producer gives it. */
static ptrdiff_t cpu_dlpack_lookup(int32_t type, int32_t id, size_t ndevices,
                                   dlrun_memory_kind *kind) {
  (void)id;
  *kind = DLRUN_MEM_DEVICE;
  if (type == DL_CPU || type == DL_CUDA_HOST || type == DL_ROCM_HOST) return ndevices ? 0 : -1;
  return -1;
}

/* The event slots are the timelines' (set when opened). */
static dlrun_platform cpu_platform = {
    .abi = DLRUN_PLATFORM_ABI,
    .name = "cpu",
    .class_name = "CpuDevice",
    .is_accelerator = false,
    .device_init = cpu_device_init,
    .device_destroy = cpu_device_destroy,
    .is_host_memory = cpu_is_host,
    .host_readable = cpu_is_host,
    .memory_info = cpu_memory_info,
    .default_capacity = cpu_capacity,
    .reserve = cpu_reserve,
    .release = cpu_release,
    .commit = cpu_commit,
    .decommit = cpu_decommit,
    .owns = cpu_owns,
    .copy_box = dlrun_hostexec_copy,
    .copy_boxes = dlrun_hostexec_copy_boxes,
    .fill = dlrun_hostexec_fill,
    .record = dlrun_hostexec_record,
    .dlpack_device = cpu_dlpack_device,
    .dlpack_lookup = cpu_dlpack_lookup,
    .transport_view = cpu_transport_view,
    .share = cpu_share,
    .map_shared = dlrun_host_region_map_peer,
    .unmap_shared = dlrun_host_region_unmap_peer,
    .inject_failure = dlrun_hostexec_inject,
};

/* Built in: the registry opens it once, before any use, with the library's
 * services. */
const dlrun_platform *dlrun_cpu_platform_open(const dlrun_platform_services *s) {
  dlrun_host_services_set(s);
  dlrun_hostexec_use_timelines(&cpu_platform);
  return &cpu_platform;
}
