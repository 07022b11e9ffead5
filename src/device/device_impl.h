/* Internal: platforms (one vtable per device kind), devices and the runtime. */
#ifndef DLRUN_DEVICE_IMPL_H
#define DLRUN_DEVICE_IMPL_H

#include <stdatomic.h>
#include <stdbool.h>

#include "dlrun/device.h"
#include "device/stream.h"
#include "mem/pool.h"

/* What differs between device kinds. Slots are required unless marked
 * optional. */
typedef struct dlrun_platform {
  const char *name;        /* spec and API name: "sim" */
  const char *class_name;  /* for tostring: "SimDevice" */
  int dl_device_type;      /* DLPack device type of its device memory */
  bool is_accelerator;     /* counts for "auto" and the default backend */
  /* Capacity of each device memory when the user sets none. */
  uint64_t (*default_capacity)(dlrun_memory_kind kind, size_t ndevices, uint64_t host_ram);
  /* (optional) Copy n bytes between memories of devices of this platform
   * (or host). NULL: the memory is host memory, copied with memcpy. */
  void (*copy)(void *dst, const void *src, size_t n);
} dlrun_platform;

/* The registry of device kinds, in the order "auto" prefers them. */
extern const dlrun_platform *const dlrun_platforms[];
extern const size_t dlrun_platform_count;
const dlrun_platform *dlrun_platform_find(const char *name, size_t len);

struct dlrun_device {
  const dlrun_platform *platform;
  dlrun_runtime *rt;
  int id;
  char name[40];
  dlrun_pool *pools[DLRUN_MEM_KIND_COUNT];
  dlrun_stream stream;
  atomic_uint_fast64_t bytes_in, bytes_out; /* copied from / to other devices */
  atomic_int_fast64_t live_exports;
};

/* A run of devices of one platform inside runtime->devices. */
typedef struct dlrun_device_group {
  const dlrun_platform *platform;
  size_t first, count;
} dlrun_device_group;

#define DLRUN_MAX_DEVICES 65536

struct dlrun_runtime {
  atomic_int refs;
  char spec[128];      /* canonical: "sim:8,cpu:1" */
  char platforms[64];  /* "sim,cpu" */
  dlrun_workers *workers;
  dlrun_device *devices;
  size_t ndevices;
  dlrun_device_group groups[4];
  size_t ngroups;
  const dlrun_device_group *default_group;
  dlrun_device *host;
  uint64_t accelerator_memory; /* capacity of each accelerator's memory; 0 if none */
  uint64_t memory_total;       /* capacities of all memories of all devices */
  char memory_note[320];       /* dlrun_runtime_memory_note; empty when none */
  /* Transfer statistics (dlrun_transfer_stats_get). */
  atomic_uint_fast64_t bytes_moved, local_bytes, copies, shares;
  atomic_int_fast64_t live_exports; /* DLPack exports whose deleter has not run */
  atomic_uint_fast64_t bytes_queued, bytes_done; /* transfer progress */
};

/* Parsed device spec: counts per platform, in spec order. */
typedef struct dlrun_device_spec {
  dlrun_device_group groups[4];
  size_t ngroups;
} dlrun_device_spec;

dlrun_status dlrun_parse_device_spec(const char *text, dlrun_device_spec *out);
/* Wait for all work queued on every device of the runtime. */
void dlrun_runtime_synchronize(dlrun_runtime *rt);
/* The spec with the host cpu device added when it names no cpu ("auto"
 * expanded), as the runtime lays devices out. */
void dlrun_complete_device_spec(dlrun_device_spec *spec);
/* "sim:8,cpu:1" into buf. */
const char *dlrun_format_device_spec(const dlrun_device_spec *spec, char *buf, size_t n);
uint64_t dlrun_host_ram_bytes(void);

#endif
