/* The sim platform: simulated accelerators.
 *
 * A sim device's memory models a discrete accelerator's: the addresses it
 * hands out (to the layers above, and to DLPack consumers as the data of a
 * kDLExtDev export) are inaccessible (PROT_NONE), so a host dereference
 * faults at once, as on a GPU. The bytes live in a second mapping, the
 * region's view, that only this platform's slots use: copies and fills
 * translate device addresses to it by offset. DLRUN_SIM_MEMORY=shared keeps
 * a single host-readable mapping instead. pinned_host memory is host memory
 * either way. Work runs on the host's threads (platforms/host/hostexec.h). */
#include <stdlib.h>
#include <string.h>

#include "dlrun/platform.h"
#include "platforms/common/dlpack_codes.h"
#include "platforms/host/host_services.h"
#include "platforms/host/hostexec.h"
#include "platforms/host/region.h"

/* Built into libdlrun: its services are the library's. */
static const dlrun_platform_services *svc(void) { return dlrun_host_services(); }

typedef struct sim_device {
  dlrun_host_queue queue; /* first: host execution reads it */
  bool shared;            /* DLRUN_SIM_MEMORY=shared: device memory host-readable */
  int32_t index;          /* its local index: the DLPack device_id */
  /* Each memory's region: device memory behind inaccessible addresses
   * unless shared; pinned_host memory is host memory either way. */
  dlrun_host_region regions[DLRUN_MEM_KIND_COUNT];
} sim_device;

static sim_device *sim_of(const dlrun_device *dev) { return svc()->device_impl(dev); }

/* DLRUN_SIM_MEMORY, checked: shared (host-readable sim device memory) or
 * private (the default). */
static dlrun_status memory_mode(bool *shared) {
  const char *env = getenv("DLRUN_SIM_MEMORY");
  *shared = env && strcmp(env, "shared") == 0;
  if (!env || !*env || *shared || strcmp(env, "private") == 0) return DLRUN_OK;
  return svc()->fail(DLRUN_ERR_VALUE,
                     "DLRUN_SIM_MEMORY must be \"private\" or \"shared\", got \"%.64s\"", env);
}

static dlrun_status sim_check_config(void) {
  bool shared;
  return memory_mode(&shared);
}

/* Each memory of a sim device: at most half of host RAM shared among the sim
 * devices, and at most 16 GiB; the runtime lowers it further so that all
 * memories together fit in host RAM. */
static uint64_t sim_capacity(const dlrun_device *dev, dlrun_memory_kind kind, size_t ndevices) {
  (void)dev;
  (void)kind;
  uint64_t share = svc()->host_ram() / 2 / (ndevices ? ndevices : 1);
  const uint64_t hi = 16ull << 30;
  if (share > hi) share = hi;
  return share & ~(uint64_t)4095;
}

static void sim_memory_info(const dlrun_device *dev, dlrun_memory_kind kind,
                            dlrun_memory_info *out) {
  (void)dev;
  (void)kind;
  *out = (dlrun_memory_info){.total = svc()->host_ram(), .host_ram = true};
}

/* Whether dev's `kind` memory is the inaccessible kind. */
static bool is_private(const dlrun_device *dev, dlrun_memory_kind kind) {
  return kind == DLRUN_MEM_DEVICE && !sim_of(dev)->shared;
}

static bool sim_is_host_memory(const dlrun_device *dev, dlrun_memory_kind kind) {
  (void)dev;
  return kind == DLRUN_MEM_PINNED_HOST;
}

static bool sim_host_readable(const dlrun_device *dev, dlrun_memory_kind kind) {
  return !is_private(dev, kind);
}

/* Where the host reaches the bytes at device address `data`. */
static void *view_of(const dlrun_device *dev, dlrun_memory_kind kind, const void *data) {
  return dlrun_host_region_view(&sim_of(dev)->regions[kind], data);
}

static dlrun_status sim_device_init(dlrun_device *dev, size_t local_index, size_t ndevices,
                                    void **impl) {
  (void)ndevices;
  bool shared;
  dlrun_status st = memory_mode(&shared);
  if (st) return st;
  sim_device *s = svc()->alloc(sizeof *s);
  if (!s) return DLRUN_ERR_RESOURCE_EXHAUSTED;
  s->shared = shared;
  s->index = (int32_t)local_index;
  if ((st = dlrun_host_queue_init(&s->queue, dev, view_of))) {
    svc()->free(s);
    return st;
  }
  *impl = s;
  return DLRUN_OK;
}

static void sim_device_destroy(dlrun_device *dev, void *impl) {
  (void)dev;
  sim_device *s = impl;
  dlrun_host_queue_fini(&s->queue);
  svc()->free(s);
}

/* Every memory is a recorded region (so that imports naming a sim device
 * are checked against it, and so that peers on this host may map it); only
 * private device memory puts the bytes behind a second, inaccessible range
 * of addresses. */
static dlrun_status sim_reserve(dlrun_device *dev, dlrun_memory_kind kind, uint64_t size,
                                void **base) {
  return dlrun_host_region_reserve(&sim_of(dev)->regions[kind], size, is_private(dev, kind),
                                   base);
}

static void sim_release(dlrun_device *dev, dlrun_memory_kind kind, void *base, uint64_t size) {
  (void)base;
  (void)size;
  dlrun_host_region_release(&sim_of(dev)->regions[kind]);
}

static bool sim_owns(const dlrun_device *dev, dlrun_memory_kind kind, const void *data,
                     uint64_t n) {
  if (kind != DLRUN_MEM_DEVICE || n == 0) return true; /* host memory */
  return dlrun_host_region_owns(&sim_of(dev)->regions[kind], data, n);
}

/* The view is host memory, which MPI reaches as it would a GPU's through
 * a CUDA-aware build. */
static void *sim_transport_view(const dlrun_device *dev, dlrun_memory_kind kind,
                                const void *data) {
  return view_of(dev, kind, data);
}

static dlrun_status sim_commit(dlrun_device *dev, dlrun_memory_kind kind, void *data,
                               uint64_t size) {
  return dlrun_host_region_commit(&sim_of(dev)->regions[kind], data, size);
}

static uint64_t sim_decommit(dlrun_device *dev, dlrun_memory_kind kind, void *data,
                             uint64_t size) {
  return dlrun_host_region_decommit(&sim_of(dev)->regions[kind], data, size);
}

static bool sim_share(const dlrun_device *dev, dlrun_memory_kind kind, const void *data,
                      uint64_t n, dlrun_shared_region *out, uint64_t *offset) {
  return dlrun_host_region_share(&sim_of(dev)->regions[kind], data, n, out, offset);
}

/* Device memory exports as (kDLExtDev, id); pinned_host memory as the host's. */
static void sim_dlpack_device(const dlrun_device *dev, dlrun_memory_kind kind, int32_t *type,
                              int32_t *id) {
  bool host = kind == DLRUN_MEM_PINNED_HOST;
  *type = host ? DL_CPU : DL_EXT_DEV;
  *id = host ? 0 : sim_of(dev)->index; /* a process-local ordinal, as CUDA's */
}

static ptrdiff_t sim_dlpack_lookup(int32_t type, int32_t id, size_t ndevices,
                                   dlrun_memory_kind *kind) {
  *kind = DLRUN_MEM_DEVICE;
  return type == DL_EXT_DEV && id >= 0 && (size_t)id < ndevices ? id : -1;
}

/* The event slots are the timelines' (set when opened). */
static dlrun_platform sim_platform = {
    .abi = DLRUN_PLATFORM_ABI,
    .name = "sim",
    .class_name = "SimDevice",
    .is_accelerator = true,
    .device_init = sim_device_init,
    .device_destroy = sim_device_destroy,
    .is_host_memory = sim_is_host_memory,
    .host_readable = sim_host_readable,
    .memory_info = sim_memory_info,
    .default_capacity = sim_capacity,
    .reserve = sim_reserve,
    .release = sim_release,
    .commit = sim_commit,
    .decommit = sim_decommit,
    .owns = sim_owns,
    .copy_box = dlrun_hostexec_copy, /* simulated: the host's threads do the work */
    .copy_boxes = dlrun_hostexec_copy_boxes,
    .fill = dlrun_hostexec_fill,
    .record = dlrun_hostexec_record,
    .dlpack_device = sim_dlpack_device,
    .dlpack_lookup = sim_dlpack_lookup,
    .transport_view = sim_transport_view,
    .share = sim_share,
    .map_shared = dlrun_host_region_map_peer,
    .unmap_shared = dlrun_host_region_unmap_peer,
    .inject_failure = dlrun_hostexec_inject,
    .check_config = sim_check_config,
};

/* Built in: the registry opens it once, before any use, with the library's
 * services. */
const dlrun_platform *dlrun_sim_platform_open(const dlrun_platform_services *s) {
  dlrun_host_services_set(s);
  dlrun_hostexec_use_timelines(&sim_platform);
  return &sim_platform;
}
