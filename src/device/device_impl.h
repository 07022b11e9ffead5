/* Internal: platforms (one vtable per device kind), devices and the runtime. */
#ifndef DLRUN_DEVICE_IMPL_H
#define DLRUN_DEVICE_IMPL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

#include "core/ref.h"
#include "dlrun/device.h"
#include "dlrun/platform.h"
#include "mem/pool.h"
#include "worker_plan.h"

/* RuntimeError: dev is another process's ("... belongs to process 1: its
 * memory is not addressable from process 0"). */
dlrun_status dlrun_not_local(const dlrun_device *dev);

/* Events, whatever their platform: whether ev is complete (done or
 * failed); its status once complete (DLRUN_OK while pending), with the
 * failure's message; wait for it on the host and return its status (a
 * zero event is done). */
bool dlrun_event_done(dlrun_event ev);
dlrun_status dlrun_event_status(dlrun_event ev);
dlrun_status dlrun_event_wait(dlrun_event ev);
/* fn(ctx) once ev is complete, from any thread (now when it is). */
dlrun_status dlrun_event_then(dlrun_event ev, void (*fn)(void *ctx), void *ctx);
/* Wait for all of evs[0..n), last first (work queued last tends to finish
 * last, so the waiting thread usually sleeps once), and return the first
 * failure among them. */
dlrun_status dlrun_events_wait(const dlrun_event *evs, size_t n);
/* The point after all work queued on dev so far. */
dlrun_status dlrun_device_record(dlrun_device *dev, dlrun_event *out);

/* The registry of device kinds, in the order "auto" prefers them: those
 * registered at run time (newest last), then sim and cpu. It holds at most
 * DLRUN_MAX_PLATFORMS, the built-in ones and loaded modules included, which
 * bounds the groups of a device spec and of a runtime (one per platform). */
#define DLRUN_MAX_PLATFORMS 8
const dlrun_platform *dlrun_platform_find(const char *name, size_t len);
/* Copy up to max registered platforms into out; returns how many. */
size_t dlrun_platform_list(const dlrun_platform **out, size_t max);
/* Every registered platform's check_config (its own settings), in order;
 * the first failure. */
dlrun_status dlrun_platforms_check_config(void);
/* A device of the job. Devices of other processes (local false) are
 * names only: no pools, no queue, no memory here. */
struct dlrun_device {
  const dlrun_platform *platform;
  void *impl; /* the platform's context (device_init) */
  dlrun_runtime *rt;
  int id;              /* across processes: process p's k-th is p * local_count + k */
  int process_index;   /* the process that holds it */
  size_t local_index;  /* k: its place among its process's devices of its platform */
  bool local;          /* held by this process */
  char name[40];
  dlrun_pool *pools[DLRUN_MEM_KIND_COUNT];
  /* What a pool's range source needs: its device and memory kind. */
  struct dlrun_pool_memory {
    dlrun_device *dev;
    dlrun_memory_kind kind;
  } memories[DLRUN_MEM_KIND_COUNT];
  atomic_uint_fast64_t bytes_in, bytes_out; /* copied from / to other devices */
  atomic_int_fast64_t live_exports;
  /* A SingleDeviceSharding per memory kind, made at first need and kept
   * for the runtime's life (array/device_sharding.c): an object of the
   * shard layer, known here as its reference, dropped with the device. */
  _Atomic(dlrun_ref *) kept_sharding[DLRUN_MEM_KIND_COUNT];
};

/* A run of devices of one platform inside runtime->devices: every
 * process's, in process order, local_count each (count in all). */
typedef struct dlrun_device_group {
  const dlrun_platform *platform;
  size_t first, count, local_count;
} dlrun_device_group;


/* The capacity settings: one per kind of accelerators' memories, then the
 * host memory (each non-accelerator device's device memory, in host RAM). */
#define DLRUN_SETTING_HOST DLRUN_MEM_KIND_COUNT
#define DLRUN_CAPACITY_SETTINGS (DLRUN_MEM_KIND_COUNT + 1)

/* The memory settings a runtime resolved from its configuration and
 * environment, per capacity setting. */
typedef struct dlrun_memory_settings {
  uint64_t bytes[DLRUN_CAPACITY_SETTINGS];  /* explicit capacity; 0: none */
  double fraction[DLRUN_CAPACITY_SETTINGS]; /* share of host RAM; 0: none */
  bool preallocate[DLRUN_MEM_KIND_COUNT];
} dlrun_memory_settings;

struct dlrun_runtime {
  dlrun_ref ref; /* first: the object base */
  char spec[128];      /* canonical, each process's: "sim:8,cpu:1" */
  int process_index, process_count; /* this process's place in the job */
  char platforms[64];  /* "sim,cpu" */
  dlrun_workers *workers;
  dlrun_worker_plan worker_plan; /* how many, and why */
  dlrun_device *devices;
  size_t ndevices;
  dlrun_device_group groups[DLRUN_MAX_PLATFORMS]; /* one per platform present */
  size_t ngroups;
  const dlrun_device_group *default_group;
  dlrun_device *host;
  uint64_t accelerator_memory; /* capacity of each accelerator's memory; 0 if none */
  uint64_t accelerator_caps[DLRUN_MEM_KIND_COUNT]; /* each kind's; 0 if none */
  uint64_t host_cap;           /* each host memory's (DLRUN_SETTING_HOST) */
  dlrun_memory_settings settings;
  uint64_t memory_total;       /* capacities of all memories of all devices,
                                  UINT64_MAX when their sum overflows */
  char memory_note[320];       /* dlrun_runtime_memory_note; empty when none */
  /* Transfer statistics (dlrun_transfer_stats_get). */
  atomic_uint_fast64_t bytes_moved, local_bytes, copies, shares, bytes_sent, bytes_received,
      ipc_bytes;
  atomic_uint_fast64_t bytes_queued, bytes_done; /* transfer progress */
};

/* Parsed device spec: counts per platform, in spec order. */
typedef struct dlrun_device_spec {
  dlrun_device_group groups[DLRUN_MAX_PLATFORMS]; /* one per platform present */
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
