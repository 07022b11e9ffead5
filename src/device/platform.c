/* The device kinds: cpu (real host memory) and sim (simulated accelerators).
 * Both keep their bytes in host memory; what differs is how they present
 * themselves (name, DLPack device type) and their default capacity. */
#include <string.h>
#include <unistd.h>

#include "device_impl.h"

/* DLPack device types (dlpack.h names: kDLCPU, kDLExtDev). */
#define DL_CPU 1
#define DL_EXT_DEV 12

uint64_t dlrun_host_ram_bytes(void) {
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page <= 0) return 1ull << 32;
  return (uint64_t)pages * (uint64_t)page;
}

static uint64_t cpu_capacity(dlrun_memory_kind kind, size_t ndevices, uint64_t host_ram) {
  (void)kind;
  (void)ndevices;
  return host_ram;
}

/* Each memory of a sim device: at most half of host RAM shared among the sim
 * devices, and at most 16 GiB; the runtime lowers it further so that all
 * memories together fit in host RAM. */
static uint64_t sim_capacity(dlrun_memory_kind kind, size_t ndevices, uint64_t host_ram) {
  (void)kind;
  uint64_t share = host_ram / 2 / (ndevices ? ndevices : 1);
  const uint64_t hi = 16ull << 30;
  if (share > hi) share = hi;
  return share & ~(uint64_t)4095;
}

static const dlrun_platform sim_platform = {
    .name = "sim",
    .class_name = "SimDevice",
    .dl_device_type = DL_EXT_DEV,
    .is_accelerator = true,
    .default_capacity = sim_capacity,
    .copy = NULL, /* host memory */
};

static const dlrun_platform cpu_platform = {
    .name = "cpu",
    .class_name = "CpuDevice",
    .dl_device_type = DL_CPU,
    .is_accelerator = false,
    .default_capacity = cpu_capacity,
    .copy = NULL, /* host memory */
};

const dlrun_platform *const dlrun_platforms[] = {&sim_platform, &cpu_platform};
const size_t dlrun_platform_count = sizeof dlrun_platforms / sizeof dlrun_platforms[0];

const dlrun_platform *dlrun_platform_find(const char *name, size_t len) {
  for (size_t i = 0; i < dlrun_platform_count; i++)
    if (strlen(dlrun_platforms[i]->name) == len && memcmp(dlrun_platforms[i]->name, name, len) == 0)
      return dlrun_platforms[i];
  return NULL;
}
