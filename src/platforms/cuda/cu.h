/* The CUDA platform's own declarations, shared by the files of the module
 * libdlrun_cuda.so. Like the OpenCL module it is built on
 * include/dlrun/platform.h alone and reaches the library only through the
 * services handed to its open function (cu_svc). The driver is loaded at
 * run time (loader.c); no CUDA header or library is needed to build it. */
#ifndef DLRUN_CU_H
#define DLRUN_CU_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dlrun/platform.h"
#include "driver_api.h"
#include "platforms/common/op_queue.h"

/* The library's services, this platform's vtable (module.c) and the driver's
 * entry points (loader.c, valid once cu_load succeeded). */
extern const dlrun_platform_services *cu_svc;
extern dlrun_platform cu_platform;
extern dlcu_api cu_api;

/* ---- the driver (loader.c) ---- */
/* Load and initialise the driver once: true with its device count, or
 * false with why it is absent (no library, a stub library, no device). */
bool cu_load(int *ndevices, char *why, size_t n);
/* "CUDA_ERROR_OUT_OF_MEMORY" for 2; "CUDA_ERROR" for a code it does not know
 * (never the driver's cuGetErrorName: a stub library fails that too). */
const char *cu_error_name(dlcu_result r);
/* Make the device's primary context current on the calling thread (cached
 * per thread: the driver is told only when it changes). */
dlcu_result cu_make_current(dlcu_context ctx);
/* A primary context was retained or released: every thread's remembered
 * current context is asked again. */
void cu_contexts_changed(void);

/* ---- memory (memory.c) ---- */
/* A range reserved for a pool. VMM: the device addresses are the range's
 * own, mapped in chunks on first use (commit) and unmapped by decommit.
 * Otherwise: host address space the host cannot read, cut into segments of
 * `seg` bytes, each one cuMemAlloc made on first use; pinned_host: one
 * cuMemHostAlloc, its addresses host pointers. Unit i covers
 * [i * seg, min((i + 1) * seg, span)). */
typedef struct cu_range {
  struct cu_range *next;
  dlrun_memory_kind kind;
  bool vmm;
  unsigned char *base;
  uint64_t size, seg; /* seg: the chunk (VMM) or the segment */
  uint64_t span;      /* what the units cover: VMM the size in whole granules (reserved) */
  size_t nsegs;
  dlcu_mem_handle *handles; /* VMM: one per chunk, 0 while unmapped */
  dlcu_ptr *segs;           /* cuMemAlloc segments, 0 until used */
  uint64_t *touched;        /* per chunk or segment: the bytes from its start used */
} cu_range;

/* The bytes of dev's `kind` memory the driver holds: the chunks mapped,
 * the segments made, a pinned_host allocation whole (platform.h). */
uint64_t cu_bytes_held(const dlrun_device *dev, dlrun_memory_kind kind);

/* ---- devices (device.c) ---- */
typedef struct cu_op cu_op;

#define CU_SPARE_EVENTS 16

typedef struct cu_device {
  struct cu_device *next; /* every live device of the module */
  dlrun_device *dev;
  const char *name;
  size_t index; /* the CUDA ordinal: kDLCUDA device_id */
  dlcu_device cu;
  dlcu_context ctx; /* the primary context, retained */
  dlcu_stream stream;
  dlcu_event unrecorded; /* never recorded: a wait on it checks a stream handle */
  uint64_t total_mem;
  bool vmm;              /* VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED */
  size_t granularity;    /* VMM: cuMemGetAllocationGranularity (minimum) */
  size_t ndevices;
  int peer[64];          /* cuDeviceCanAccessPeer to ordinal i: -1 unknown, 0, 1 (enabled) */

  opq_queue q;              /* its ops; q.lock: also the stream's order, kernels */
  pthread_mutex_t mem_lock; /* ranges */
  pthread_cond_t wake;      /* the completion thread: work or a gate opened */
  bool stop;
  pthread_t thread;         /* submits gated ops, completes recorded ones */
  dlcu_result broken;       /* a sticky error of the context (atomic): the device is unusable */
  cu_range *ranges;
  pthread_mutex_t ev_lock;  /* spare and nspare */
  dlcu_event spare[CU_SPARE_EVENTS]; /* events of ops that ended, for the next ones */
  size_t nspare;
  dlcu_module module;       /* the PTX kernels, loaded on first use */
  dlcu_function kernels[3];
} cu_device;

/* Every live device (a lookup by stream or by ordinal). */
extern pthread_mutex_t cu_devices_lock;
extern cu_device *cu_devices;

cu_device *cu_dev(const dlrun_device *dev);
cu_device *cu_device_of_ordinal(int ordinal);

/* ---- memory (memory.c) ---- */
/* The driver's address of addr in d's `kind` memory for `n` bytes, mapping
 * or allocating what backs it on first use: a VMM range's own address, a
 * segment's pointer, a pinned host pointer, or addr itself when it is no
 * range of d's (foreign CUDA memory an import wrapped). *room: the bytes
 * from there to the end of what backs it contiguously. */
dlrun_status cu_place_of(cu_device *d, dlrun_memory_kind kind, const void *addr, uint64_t n,
                         dlcu_ptr *out, uint64_t *room);

/* ---- ops (ops.c) ---- */
/* The driver's part of the op protocol (common/op_queue.h). */
extern const opq_driver cu_op_driver;
/* An op's work, run when the op is submitted on d's stream (at once, or by
 * the completion thread when a wait on a foreign event gated it): enqueue
 * the driver calls; return the first failure (DLCU_SUCCESS: all queued). */
typedef dlcu_result (*cu_work_fn)(cu_device *d, void *arg, bool *enqueued);

/* Enqueue an op ("copy", "fill", "record") on d after waits: work(arg) (may
 * be NULL), a failure of kind inject_kind (or -1) injected when due;
 * on_complete(ctx) before its point completes; arg is the op's, freed with
 * free_arg (may be NULL) when the op is done or its enqueue failed. On
 * failure nothing is enqueued and on_complete is not called. */
dlrun_status cu_enqueue(cu_device *d, const char *what, int inject_kind, cu_work_fn work,
                        void *arg, void (*free_arg)(void *), void (*on_complete)(void *),
                        void *ctx, const dlrun_event *waits, size_t nwaits, dlrun_event *done);
/* DLRUN_OK, or the error that d's context is unusable after a sticky
 * driver error, naming `what` (the work refused). */
dlrun_status cu_usable(cu_device *d, const char *what);
/* Make `stream` (a driver stream handle) wait for ev. */
dlrun_status cu_stream_wait_event(cu_device *d, dlcu_stream stream, dlrun_event ev);
/* Destroy the events d's ended ops left for the next (d's context current;
 * no op of d left). */
void cu_spare_events_destroy(cu_device *d);
/* The platform's event_wait (a waiter ends a submitted op's work itself). */
dlrun_status cu_event_wait(dlrun_event ev);
/* The completion thread of d (device.c starts it). */
void *cu_completion_main(void *arg);

/* ---- kernels (kernels.c) ---- */
enum { CU_K_FILL8, CU_K_FILL16, CU_K_SEQUENCE };
extern const char cu_kernels_ptx[]; /* the generated string of kernels.ptx */
/* d's kernel `which`, the module loaded on first use (d->q.lock held). */
dlcu_result cu_kernel_of(cu_device *d, int which, dlcu_function *out);

/* ---- the slots (one file each area) ---- */
bool cu_probe(bool for_auto, size_t *ndevices, char *why, size_t n);
dlrun_status cu_device_init(dlrun_device *dev, size_t local_index, size_t ndevices, void **impl);
void cu_device_destroy(dlrun_device *dev, void *impl);
bool cu_is_host_memory(const dlrun_device *dev, dlrun_memory_kind kind);
void cu_memory_info(const dlrun_device *dev, dlrun_memory_kind kind, dlrun_memory_info *out);
uint64_t cu_default_capacity(const dlrun_device *dev, dlrun_memory_kind kind, size_t ndevices);
dlrun_status cu_reserve(dlrun_device *dev, dlrun_memory_kind kind, uint64_t size, void **base);
void cu_release(dlrun_device *dev, dlrun_memory_kind kind, void *base, uint64_t size);
dlrun_status cu_commit(dlrun_device *dev, dlrun_memory_kind kind, void *data, uint64_t size);
uint64_t cu_decommit(dlrun_device *dev, dlrun_memory_kind kind, void *data, uint64_t size);
bool cu_owns(const dlrun_device *dev, dlrun_memory_kind kind, const void *data, uint64_t n);
void cu_dlpack_device(const dlrun_device *dev, dlrun_memory_kind kind, int32_t *type,
                      int32_t *id);
ptrdiff_t cu_dlpack_lookup(int32_t type, int32_t id, size_t ndevices, dlrun_memory_kind *kind);
dlrun_status cu_export_data(const dlrun_device *dev, dlrun_memory_kind kind, const void *addr,
                            void **data, uint64_t *byte_offset);
dlrun_status cu_import_data(const dlrun_device *dev, dlrun_memory_kind kind, void *data,
                            uint64_t byte_offset, uint64_t nbytes, void **addr);
dlrun_status cu_copy_box(dlrun_device *dev, dlrun_copy_op *op, const dlrun_event *waits,
                         size_t nwaits, dlrun_event *done);
dlrun_status cu_fill(dlrun_device *dev, dlrun_memory_kind kind, void *data, uint64_t nbytes,
                     const dlrun_fill *f, const dlrun_event *waits, size_t nwaits,
                     dlrun_event *done);

#endif
