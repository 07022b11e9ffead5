/* Internal: platforms (one vtable per device kind), devices and the runtime. */
#ifndef DLRUN_DEVICE_IMPL_H
#define DLRUN_DEVICE_IMPL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

#include "dlrun/device.h"
#include "core/ref.h"
#include "device/stream.h"
#include "mem/pool.h"

typedef struct dlrun_box_end dlrun_box_end;
typedef struct dlrun_fill dlrun_fill;

/* What differs between device kinds: one vtable per platform, and the only
 * code that touches device bytes (device/buffer.h says how it is called).
 * Slots are required unless marked optional. */
typedef struct dlrun_platform {
  const char *name;        /* spec and API name: "sim" */
  const char *class_name;  /* for tostring: "SimDevice" */
  bool is_accelerator;     /* counts for "auto" and the default backend */
  /* (optional) Whether the platform's hardware is on this machine: true
   * with how many devices it has, or false with why not in `why`. NULL: a
   * simulated platform, always there with as many devices as asked for.
   * "auto" takes the first accelerator platform that probes true. */
  bool (*probe)(size_t *ndevices, char *why, size_t n);
  /* Capacity of each device memory when the user sets none. */
  uint64_t (*default_capacity)(dlrun_memory_kind kind, size_t ndevices, uint64_t host_ram);
  /* The memory under a pool (as BFC's SubAllocator): reserve `size` bytes
   * of dev's `kind` memory, handing out device addresses in *base, and
   * release them when the pool goes. Nothing is committed until written. */
  dlrun_status (*reserve)(dlrun_device *dev, dlrun_memory_kind kind, uint64_t size, void **base);
  void (*release)(dlrun_device *dev, dlrun_memory_kind kind, void *base, uint64_t size);
  /* (optional) Commit [data, data + size) of that memory now
   * (preallocation); and give the pages of the page-aligned [data, data +
   * size) back to the system, keeping the addresses (every mapping of them:
   * a platform with a second view releases both), returning the bytes that
   * were resident. NULL: it cannot. */
  dlrun_status (*commit)(dlrun_device *dev, dlrun_memory_kind kind, void *data, uint64_t size);
  uint64_t (*decommit)(dlrun_device *dev, dlrun_memory_kind kind, void *data, uint64_t size);
  /* Whether [data, data + n) lies in dev's `kind` memory (an imported
   * tensor that names this device must). */
  bool (*owns)(const dlrun_device *dev, dlrun_memory_kind kind, const void *data, uint64_t n);
  /* Whether host code may read dev's `kind` memory at its device addresses. */
  bool (*host_readable)(const dlrun_device *dev, dlrun_memory_kind kind);
  /* Copy the box [lo, hi) between two ends: each is host memory or memory
   * of a device of this platform. */
  void (*copy_box)(size_t esize, int ndim, const int64_t *lo, const int64_t *hi,
                   const dlrun_box_end *dst, const dlrun_box_end *src);
  /* Fill nbytes at device address `data` of dev's `kind` memory. */
  void (*fill)(const dlrun_device *dev, dlrun_memory_kind kind, void *data, uint64_t nbytes,
               const dlrun_fill *f);
  /* Ordering, on each device's stream of work: queue fn(ctx) on dev's
   * stream to run after every event in deps (from any device's stream);
   * `node` and `deps` are the caller's until fn starts (stream.h). And the
   * platform's events (dlrun_event: this platform and a handle that only
   * these slots read): record the point after all work queued on dev so
   * far, whether an event of this platform is done (without blocking), and
   * wait for it on the host. submit's events are the event slots' kind: the
   * four go together. */
  dlrun_status (*submit)(dlrun_device *dev, dlrun_task *node, const dlrun_event *deps,
                         size_t ndeps, dlrun_task_fn fn, void *ctx, dlrun_event *done);
  dlrun_event (*event_record)(dlrun_device *dev);
  bool (*event_query)(dlrun_event ev);
  void (*event_synchronize)(dlrun_event ev);
  /* (optional) Where a transport between processes (MPI) reads and writes
   * the bytes at device address `data` of dev's `kind` memory, as a
   * CUDA-aware MPI reaches device memory; NULL (slot or result): it cannot,
   * and device_put between processes refuses that memory. */
  void *(*transport_view)(const dlrun_device *dev, dlrun_memory_kind kind, const void *data);
  /* DLPack: the (device_type, device_id) that dev's `kind` memory exports
   * as; and which of this platform's devices (its index among them, or -1)
   * and memory a producer's (device_type, device_id) names. */
  void (*dlpack_device)(const dlrun_device *dev, dlrun_memory_kind kind, int32_t *type,
                        int32_t *id);
  ptrdiff_t (*dlpack_lookup)(int32_t type, int32_t id, size_t ndevices, dlrun_memory_kind *kind);
} dlrun_platform;

/* RuntimeError: dev is another process's ("... belongs to process 1: its
 * memory is not addressable from process 0"). */
dlrun_status dlrun_not_local(const dlrun_device *dev);

/* Events, whatever their platform: whether ev is done; wait for it (a
 * zero event is done). */
bool dlrun_event_done(dlrun_event ev);
void dlrun_event_wait(dlrun_event ev);
/* Wait for all of evs[0..n), last first: work queued last tends to finish
 * last, so the waiting thread usually sleeps once, not once per event. */
void dlrun_events_wait(const dlrun_event *evs, size_t n);
/* Through dev's platform: its submit and event_record slots. */
dlrun_status dlrun_device_submit(dlrun_device *dev, dlrun_task *node, const dlrun_event *deps,
                                 size_t ndeps, dlrun_task_fn fn, void *ctx, dlrun_event *done);
dlrun_event dlrun_device_record(dlrun_device *dev);

/* The host-stream slots (sim and cpu): work runs on the runtime's worker
 * threads, events are points on the device's dlrun_stream. */
dlrun_status dlrun_host_submit(dlrun_device *dev, dlrun_task *node, const dlrun_event *deps,
                               size_t ndeps, dlrun_task_fn fn, void *ctx, dlrun_event *done);
dlrun_event dlrun_host_event_record(dlrun_device *dev);

/* The registry of device kinds, in the order "auto" prefers them: those
 * registered at run time (newest last), then sim and cpu. */
const dlrun_platform *dlrun_platform_find(const char *name, size_t len);
/* Copy up to max registered platforms into out; returns how many. */
size_t dlrun_platform_list(const dlrun_platform **out, size_t max);
/* Add a platform (a hardware backend) ahead of the built-in ones. The
 * vtable must outlive every runtime that uses it. Fails when the name is
 * taken or the registry (8 platforms) is full. Runtimes created before see
 * no change. */
dlrun_status dlrun_platform_register(const dlrun_platform *pl);
/* Remove a registered platform (the built-in ones stay); runtimes already
 * using it keep working. */
void dlrun_platform_unregister(const dlrun_platform *pl);

/* A device memory the host cannot read (sim's by default): one memory
 * object mapped twice, inaccessible at the device addresses handed out
 * (`base`) and readable and writable at `view`, which only the platform's
 * own slots use. Set once, by the first reservation. */
typedef struct dlrun_region {
  dlrun_device *dev; /* the memory's device and kind */
  dlrun_memory_kind kind;
  _Atomic(unsigned char *) base; /* NULL until reserved */
  unsigned char *view;
  uint64_t size;
} dlrun_region;

/* A device of the job. Devices of other processes (local false) are
 * names only: no pools, no stream, no memory here. */
struct dlrun_device {
  const dlrun_platform *platform;
  dlrun_region regions[DLRUN_MEM_KIND_COUNT];
  dlrun_runtime *rt;
  int id;              /* across processes: process p's k-th is p * local_count + k */
  int process_index;   /* the process that holds it */
  size_t local_index;  /* k: its place among its process's devices of its platform */
  bool local;          /* held by this process */
  char name[40];
  dlrun_pool *pools[DLRUN_MEM_KIND_COUNT];
  dlrun_stream stream;
  atomic_uint_fast64_t bytes_in, bytes_out; /* copied from / to other devices */
  atomic_int_fast64_t live_exports;
};

/* A run of devices of one platform inside runtime->devices: every
 * process's, in process order, local_count each (count in all). */
typedef struct dlrun_device_group {
  const dlrun_platform *platform;
  size_t first, count, local_count;
} dlrun_device_group;


/* The memory settings of accelerators' memories a runtime resolved from its
 * configuration and environment, per kind. */
typedef struct dlrun_memory_settings {
  uint64_t bytes[DLRUN_MEM_KIND_COUNT];  /* explicit capacity; 0: none */
  double fraction[DLRUN_MEM_KIND_COUNT]; /* share of host RAM; 0: none */
  bool preallocate[DLRUN_MEM_KIND_COUNT];
} dlrun_memory_settings;

struct dlrun_runtime {
  dlrun_ref ref; /* first: the object base */
  char spec[128];      /* canonical, each process's: "sim:8,cpu:1" */
  int process_index, process_count; /* this process's place in the job */
  char platforms[64];  /* "sim,cpu" */
  dlrun_workers *workers;
  dlrun_device *devices;
  size_t ndevices;
  dlrun_device_group groups[4];
  size_t ngroups;
  const dlrun_device_group *default_group;
  dlrun_device *host;
  uint64_t accelerator_memory; /* capacity of each accelerator's memory; 0 if none */
  uint64_t accelerator_caps[DLRUN_MEM_KIND_COUNT]; /* each kind's; 0 if none */
  dlrun_memory_settings settings;
  bool sim_memory_shared;      /* DLRUN_SIM_MEMORY=shared: sim memory host-readable */
  uint64_t memory_total;       /* capacities of all memories of all devices,
                                  UINT64_MAX when their sum overflows */
  char memory_note[320];       /* dlrun_runtime_memory_note; empty when none */
  /* Transfer statistics (dlrun_transfer_stats_get). */
  atomic_uint_fast64_t bytes_moved, local_bytes, copies, shares, bytes_sent, bytes_received;
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
