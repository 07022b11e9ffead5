/* Platforms: the device layer's plug-in interface, one vtable per device
 * kind (cpu, sim, opencl, ...).
 *
 * A platform is a device queue behind this vtable, in the manner of IREE's
 * HAL and ggml-backend: each device has a context of the platform's own
 * (device_init/device_destroy), memory the pools carve (reserve/release),
 * and a queue on which work is enqueued (copy_box, fill, wait) and whose
 * points are events. Every work slot returns a status; work that fails on
 * the device fails its event, and whoever waits on the event sees the
 * failure. Nothing above the device layer touches device bytes or asks a
 * platform's name: what differs by platform is a slot here.
 *
 * A platform is built into libdlrun (cpu, sim) or is a module loaded at run
 * time (libdlrun_opencl.so): the module exports
 *   int dlrun_platform_module_open(int abi, const dlrun_platform_services *svc,
 *                                  const dlrun_platform **out, char *err, size_t n);
 * and is handed the services of the library that loads it (so that a
 * module never links a second copy of dlrun). A host application may also
 * register a platform of its own with dlrun_platform_register.
 *
 * Versioned: DLRUN_PLATFORM_ABI changes whenever a struct here changes
 * layout or a slot changes meaning; registration refuses another number. */
#ifndef DLRUN_PLATFORM_H
#define DLRUN_PLATFORM_H

#include <stdbool.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "device.h"
#include "dtype.h"
#include "export.h"
#include "status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define DLRUN_PLATFORM_ABI 3

typedef struct dlrun_platform dlrun_platform;

/* Bytes of dlrun_copy_op.reserved. */
#define DLRUN_COPY_OP_RESERVED 256

/* An event: a point in one device queue's work. Only its platform's event
 * slots make and read one; to all other code it is an opaque value, held
 * by value and valid as long as the device that made it. {0} (no platform)
 * is an event that is already done. */
typedef struct dlrun_event {
  const dlrun_platform *platform; /* whose slots read it */
  uintptr_t handle[2];            /* the platform's own */
} dlrun_event;

/* One end of a box copy: a block at `data` in dev's `kind` memory, or host
 * memory when dev is NULL; its element [0...] is at global coordinates
 * `origin`, laid out with element strides `strides` (may be negative). */
typedef struct dlrun_box_end {
  dlrun_device *dev;
  dlrun_memory_kind kind;
  const void *data;
  const int64_t *origin, *strides;
} dlrun_box_end;

/* One piece of a copy: the box [lo, hi) (global coordinates, ndim each)
 * read from `src`. */
typedef struct dlrun_copy_piece {
  dlrun_box_end src;
  const int64_t *lo, *hi;
} dlrun_copy_piece;

/* A copy enqueued on one device's queue: pieces of esize-byte elements of
 * rank ndim into `dst` (none: a marker, the point after its waits). The device layer hands a platform only ends it can
 * reach: each end is host memory (dev NULL) or memory of a device of this
 * platform (device memory or its own pinned_host memory). The op and all
 * it points to stay the caller's and valid until the work completes. */
typedef struct dlrun_copy_op {
  size_t esize;
  int ndim;
  dlrun_box_end dst;
  size_t npieces;
  const dlrun_copy_piece *pieces;
  /* The caller waits for the result at once (a read): a platform that runs
   * work on host threads may run it on the calling thread when its queue is
   * idle. */
  bool sync;
  /* The call this copy belongs to writes more than the caches hold
   * (DLRUN_STREAM_BYTES): a platform copying on the host may store around
   * the caches (svc->host_copy_box's `stream`), as memcpy does for its
   * largest copies. A hint: ignoring it is correct. */
  bool stream;
  /* Set by the caller (NULL: none); every platform calls it once when the
   * work is complete, done or failed, just before its point reads
   * complete, from its completion path (any thread): it releases what the
   * work held, so that whoever waits for the point finds it released. It
   * does not block. The platform must not touch the op afterwards: the
   * callback may free it. */
  void (*complete)(void *ctx);
  void *complete_ctx;
  /* The platform's own, from copy_box until the work completes: room for
   * its bookkeeping of this op, so that enqueueing need not allocate (host
   * execution keeps its queue node here). */
  union {
    unsigned char bytes[DLRUN_COPY_OP_RESERVED];
    uint64_t align_u64;
    void *align_ptr;
    double align_double;
  } reserved;
} dlrun_copy_op;

/* What a fill writes: one repeated element, or an arithmetic sequence
 * (arange) whose element i is start + (first + i) * step, stored in dtype
 * (every stored value was checked to fit when the fill was planned). */
typedef struct dlrun_fill {
  bool sequence;
  size_t esize;
  unsigned char pattern[16]; /* the element, for a repeated fill */
  dlrun_dtype dtype;         /* a sequence: values stored in this dtype */
  bool integral;             /* exact int64 arithmetic (start.i, step.i) */
  dlrun_scalar start, step;
  int64_t first;
} dlrun_fill;

/* A region of one process's memory that other processes on its host may
 * map (the one-copy path between processes): what a peer needs to map it. */
typedef struct dlrun_shared_region {
  uint64_t id;    /* unique among its process's regions: peers cache mappings by it */
  uint64_t size;  /* bytes */
  int64_t handle; /* the platform's own: a file descriptor of its process, for host RAM */
} dlrun_shared_region;

/* What a memory of a device is, for capacities and listings. */
typedef struct dlrun_memory_info {
  uint64_t total;          /* the memory's size (global memory); 0: unknown */
  uint64_t free;           /* free now as the driver sees it; 0: unknown */
  uint64_t max_allocation; /* largest single block; a pool never lets a block
                              straddle a multiple of it; 0: no limit */
  bool host_ram;           /* the bytes are host RAM (the runtime keeps the
                              default capacities of all such memories within
                              host RAM together) */
} dlrun_memory_info;

/* Which operation a failure is injected into (tests; inject_failure). */
typedef enum dlrun_work_kind { DLRUN_WORK_COPY = 0, DLRUN_WORK_FILL = 1 } dlrun_work_kind;

/* The vtable. Slots are required unless marked optional. Slots taking a
 * device are only called for devices of this process, after device_init
 * succeeded and before device_destroy. Every status-returning slot sets the
 * message with svc->fail on failure. */
struct dlrun_platform {
  int abi;                /* DLRUN_PLATFORM_ABI */
  const char *name;       /* spec and API name: "sim", "opencl" */
  const char *class_name; /* for tostring: "SimDevice" */
  bool is_accelerator;    /* counts for "auto" and the default backend */

  /* (optional) Whether the hardware is here: true with how many devices it
   * has (the most "--devices NAME:N" can take), or false with why not in
   * `why`. NULL: a simulated platform, there with as many devices as asked.
   * `for_auto`: asked by "auto", which wants accelerators only (an OpenCL
   * CPU device counts only when named). */
  bool (*probe)(bool for_auto, size_t *ndevices, char *why, size_t n);

  /* ---- devices ---- */
  /* Make the context of the local_index-th device of this platform in this
   * process (of ndevices in all here); *impl is handed to no one else and
   * read back with svc->device_impl(dev). */
  dlrun_status (*device_init)(dlrun_device *dev, size_t local_index, size_t ndevices,
                              void **impl);
  /* Free it, after every queue's work is done and every pool is gone. */
  void (*device_destroy)(dlrun_device *dev, void *impl);

  /* ---- memory ---- */
  /* Whether dev's `kind` memory is host memory: its device addresses are
   * host pointers any host consumer may read (it exports as the host's). */
  bool (*is_host_memory)(const dlrun_device *dev, dlrun_memory_kind kind);
  /* Whether host code may read dev's `kind` memory at its device addresses
   * (true for host memory; also for a simulated memory in shared mode). */
  bool (*host_readable)(const dlrun_device *dev, dlrun_memory_kind kind);
  /* What dev's `kind` memory is; the default capacity of its pool when the
   * user sets none (ndevices: this process's devices of this platform). */
  void (*memory_info)(const dlrun_device *dev, dlrun_memory_kind kind, dlrun_memory_info *out);
  uint64_t (*default_capacity)(const dlrun_device *dev, dlrun_memory_kind kind,
                               size_t ndevices);
  /* The memory under a pool (as BFC's SubAllocator): reserve `size` bytes
   * of dev's `kind` memory, handing out device addresses in *base (never a
   * host pointer unless is_host_memory), released when the pool goes. */
  dlrun_status (*reserve)(dlrun_device *dev, dlrun_memory_kind kind, uint64_t size, void **base);
  void (*release)(dlrun_device *dev, dlrun_memory_kind kind, void *base, uint64_t size);
  /* (optional) Commit [data, data + size) now (preallocation); give the
   * pages of the page-aligned [data, data + size) back, keeping the
   * addresses, returning the bytes that were resident. NULL: cannot. */
  dlrun_status (*commit)(dlrun_device *dev, dlrun_memory_kind kind, void *data, uint64_t size);
  uint64_t (*decommit)(dlrun_device *dev, dlrun_memory_kind kind, void *data, uint64_t size);
  /* Whether [data, data + n) lies in dev's `kind` memory. */
  bool (*owns)(const dlrun_device *dev, dlrun_memory_kind kind, const void *data, uint64_t n);

  /* ---- work on dev's queue ----
   * Each enqueues after every event in waits[0..nwaits) (of any platform:
   * the queue waits device-side; one that cannot wait on a foreign event
   * natively is released by svc->event_then, never by a thread blocking)
   * and after all work enqueued on dev before, and on success sets *done
   * (may be NULL) to the point after it. On failure nothing is enqueued.
   * Work that fails on the device fails *done: work that waits on a
   * failed event fails too, with that event's message. `waits` stays the
   * caller's and valid until *done completes. */
  dlrun_status (*copy_box)(dlrun_device *dev, dlrun_copy_op *op, const dlrun_event *waits,
                           size_t nwaits, dlrun_event *done);
  /* (optional) Copies that read the same sources (a reshard's, to several
   * devices), enqueued as one unit of work on dev's queue: each op as
   * copy_box would copy it, after waits; *done after all of them. Their
   * destinations may be memory of any device of this platform, and no op
   * reads or writes bytes another writes. A platform that copies on the
   * host reads each source once for all of them (host execution: a band of
   * its rows at a time, every op's part of the band in turn). ops[] is read
   * during the call; the ops stay as copy_box's. NULL: the library enqueues
   * each op with copy_box. */
  dlrun_status (*copy_boxes)(dlrun_device *dev, dlrun_copy_op *const *ops, size_t nops,
                             const dlrun_event *waits, size_t nwaits, dlrun_event *done);
  /* Fill nbytes at device address `data` of dev's `kind` memory. */
  dlrun_status (*fill)(dlrun_device *dev, dlrun_memory_kind kind, void *data, uint64_t nbytes,
                       const dlrun_fill *f, const dlrun_event *waits, size_t nwaits,
                       dlrun_event *done);
  /* A point after everything enqueued on dev so far and after waits. */
  dlrun_status (*record)(dlrun_device *dev, const dlrun_event *waits, size_t nwaits,
                         dlrun_event *done);

  /* ---- events of this platform ---- */
  /* Whether ev is complete (done or failed), without blocking. */
  bool (*event_query)(dlrun_event ev);
  /* Wait on the host until ev is complete; return its status (with the
   * failure's message: device, operation and driver error). */
  dlrun_status (*event_wait)(dlrun_event ev);
  /* Call fn(ctx) once when ev is complete, from any thread (at once, on
   * the calling thread, when it already is). fn must not block or call
   * into this platform's driver. Fails only for lack of memory. */
  dlrun_status (*event_then)(dlrun_event ev, void (*fn)(void *ctx), void *ctx);

  /* ---- DLPack ---- */
  /* The (device_type, device_id) dev's `kind` memory exports as; and which
   * of this platform's local devices (its index, or -1) and memory kind a
   * producer's (device_type, device_id) names. */
  void (*dlpack_device)(const dlrun_device *dev, dlrun_memory_kind kind, int32_t *type,
                        int32_t *id);
  ptrdiff_t (*dlpack_lookup)(int32_t type, int32_t id, size_t ndevices, dlrun_memory_kind *kind);
  /* (optional) The DLTensor (data, byte_offset) for the device address
   * `addr` of dev's `kind` memory (an OpenCL buffer handle and the offset
   * inside it). NULL: data = addr, byte_offset = 0. */
  dlrun_status (*export_data)(const dlrun_device *dev, dlrun_memory_kind kind, const void *addr,
                              void **data, uint64_t *byte_offset);
  /* (optional) The device address of a producer's (data, byte_offset) of
   * nbytes in dev's `kind` memory, or DLRUN_ERR_BUFFER naming why it is not
   * this platform's memory (never pass an unknown handle to a driver).
   * NULL: the address is data + byte_offset and must satisfy owns. */
  dlrun_status (*import_data)(const dlrun_device *dev, dlrun_memory_kind kind, void *data,
                              uint64_t byte_offset, uint64_t nbytes, void **addr);
  /* (optional) The DLPack stream protocol, for platforms with queues a
   * consumer can name: the handle of dev's queue a consumer passes as
   * `stream` to a producer; and make the consumer's queue `stream` (a
   * handle of this platform's kind) wait for ev. NULL: only stream=None or
   * -1, the producer waits on the host (sim, cpu). */
  int64_t (*consumer_stream)(const dlrun_device *dev);
  dlrun_status (*stream_wait)(const dlrun_device *dev, int64_t stream, dlrun_event ev);

  /* (optional) Where a transport between processes (MPI) reads and writes
   * the bytes at device address `data` (as a CUDA-aware MPI reaches device
   * memory); NULL (slot or result): it cannot, and device_put between
   * processes stages that memory through host memory (copy_box). */
  void *(*transport_view)(const dlrun_device *dev, dlrun_memory_kind kind, const void *data);
  /* Whether transport_view hands device addresses (CUDA's), which only a
   * transport that says it reaches device memory (a CUDA-aware MPI) may
   * use; otherwise that memory is staged through host memory. false: the
   * view is host memory (sim's private view). Host memory (is_host_memory)
   * is always reached through its view. */
  bool transport_view_device;
  /* (optional) Sharing memory with the other processes of the job on this
   * host ($DLRUN_DISTRIBUTED_IPC): the region of dev's `kind` memory that
   * holds [data, data + n), and data's offset in it; false when that
   * memory cannot be shared (its pieces then travel through the transport).
   * map_shared (required with share), called in another process of this
   * host with a region this platform shared from process `pid`: map it
   * read-only, once (the library caches it until the job ends), as host
   * memory that this process's copies read (*view; never a device address
   * of either process). It keeps the memory alive whatever its owner does
   * later, and reading it never faults. unmap_shared undoes it. */
  bool (*share)(const dlrun_device *dev, dlrun_memory_kind kind, const void *data, uint64_t n,
                dlrun_shared_region *out, uint64_t *offset);
  dlrun_status (*map_shared)(const dlrun_shared_region *r, int pid, const void **view);
  void (*unmap_shared)(const dlrun_shared_region *r, const void *view);
  /* (optional) The driver's own handles of dev, for host applications that
   * use its exported memory (OpenCL: cl_context, cl_command_queue,
   * cl_device_id, in that order): at most n written, borrowed, valid while
   * the runtime lives. NULL: none. */
  dlrun_status (*native_handles)(const dlrun_device *dev, void **handles, size_t n);
  /* (optional, tests) Make the next `count` operations of kind `what`
   * enqueued on dev fail on the device, as a driver error would. */
  dlrun_status (*inject_failure)(dlrun_device *dev, dlrun_work_kind what, unsigned count);
  /* (optional) The bytes of dev's `kind` memory the driver holds now, for
   * a platform that backs memory in units of its own (CUDA's chunks and
   * segments): memory_stats' bytes_reserved, so that it says what
   * release_unused could not give back. NULL: the pool's own figure, its
   * range up to the end of the last block handed out. */
  uint64_t (*bytes_held)(const dlrun_device *dev, dlrun_memory_kind kind);
  /* Whether the platform traces each unit of its work itself as it runs
   * (svc->trace_copy, svc->trace_work: host execution does). false: the
   * library records its copies and fills when their events complete. */
  bool traces_own_work;
  /* (optional) Check the platform's own settings (its environment
   * variables), so that a bad one fails dlrun_check_config, and
   * dlrun_runtime_create on every process before any collective; called
   * whether or not the spec names the platform. NULL: none. */
  dlrun_status (*check_config)(void);
};

/* A timeline: the events of one in-order queue, kept by the library for
 * platforms (every built-in one uses it). A point is a sequence number;
 * the queue completes points in order, each done or failed with a
 * message; waiting, querying and callbacks are the library's. */
typedef struct dlrun_timeline dlrun_timeline;

/* A waiter parked on a timeline's point (svc->timeline_park), in storage
 * of the caller's (inside a task, so that parking allocates nothing):
 * fn(w) runs once the point completes, on the thread that completes it.
 * An `early` waiter runs just before the point reads complete (to release
 * what the work held); the others after. */
typedef struct dlrun_event_waiter dlrun_event_waiter;
struct dlrun_event_waiter {
  uint64_t seq;                      /* the library's */
  void (*fn)(dlrun_event_waiter *w); /* the caller's */
  dlrun_event_waiter *next;          /* the library's */
  bool early;                        /* the caller's */
};

/* The runtime's shared worker threads, started as work needs them. */
typedef struct dlrun_workers dlrun_workers;
/* An item of work handed to the workers (svc->workers_post): run(it) runs
 * once on a worker thread. Storage of the caller's, kept until run starts. */
typedef struct dlrun_work_item dlrun_work_item;
struct dlrun_work_item {
  void (*run)(dlrun_work_item *it); /* the caller's */
  dlrun_work_item *next;            /* the workers' */
};

/* What the library gives a platform (the module's open gets it; a platform
 * built against libdlrun gets it from dlrun_platform_services_get). */
typedef struct dlrun_platform_services {
  int abi; /* DLRUN_PLATFORM_ABI */
  /* Record a failure message (printf format) for the calling thread and
   * return `code`. */
  dlrun_status (*fail)(dlrun_status code, const char *fmt, ...);
  /* The last failure message of the calling thread. */
  const char *(*last_error)(void);
  /* A device's context (device_init's *impl), platform, name
   * ("OpenclDevice(id=2)") and local index among its platform's devices. */
  void *(*device_impl)(const dlrun_device *dev);
  const dlrun_platform *(*device_platform)(const dlrun_device *dev);
  const char *(*device_name)(const dlrun_device *dev);
  uint64_t (*host_ram)(void);
  /* The host loops: copy a box between host-addressable blocks (`stream`:
   * the copy op's hint; long rows then bypass the caches, and the stores
   * are fenced before it returns); fill. */
  void (*host_copy_box)(size_t esize, int ndim, const int64_t *lo, const int64_t *hi, void *dst,
                        const int64_t *dst_origin, const int64_t *dst_strides, const void *src,
                        const int64_t *src_origin, const int64_t *src_strides, bool stream);
  void (*host_fill)(void *data, uint64_t nbytes, const dlrun_fill *f);
  /* Timelines (see above): create one whose events name `pl` (its slots
   * event_query/event_wait/event_then are then the timeline_ ones
   * themselves, set when the module opens, not wrappers: the library knows
   * timeline events by those slots, and releases what work held before its
   * point reads complete);
   * destroy (every point complete); the next point, enqueued now; complete
   * the points up to `seq` (status DLRUN_OK: done; else failed with `msg`,
   * which names the device, the operation and the driver's error); the
   * point after everything begun so far. */
  dlrun_status (*timeline_create)(const dlrun_platform *pl, dlrun_timeline **out);
  void (*timeline_destroy)(dlrun_timeline *tl);
  dlrun_event (*timeline_begin)(dlrun_timeline *tl);
  void (*timeline_complete)(dlrun_timeline *tl, dlrun_event point, dlrun_status st,
                            const char *msg);
  dlrun_event (*timeline_last)(dlrun_timeline *tl);
  bool (*timeline_query)(dlrun_event ev);
  dlrun_status (*timeline_wait)(dlrun_event ev);
  dlrun_status (*timeline_then)(dlrun_event ev, void (*fn)(void *ctx), void *ctx);
  /* Events of any platform: complete?; wait on the host (its status);
   * fn(ctx) once complete; its status once complete (DLRUN_OK while not). */
  bool (*event_query)(dlrun_event ev);
  dlrun_status (*event_wait)(dlrun_event ev);
  dlrun_status (*event_then)(dlrun_event ev, void (*fn)(void *ctx), void *ctx);
  dlrun_status (*event_status)(dlrun_event ev);
  /* Memory the host cannot read: anonymous address space of `size` bytes,
   * any access faulting (device addresses that are not host pointers). */
  dlrun_status (*map_inaccessible)(uint64_t size, void **base);
  void (*unmap)(void *base, uint64_t size);

  /* Host memory of the library's allocator (counted by the allocation
   * failure hook of dlrun/debug.h): n bytes, zeroed, the caller's to free
   * with svc->free; NULL with the message recorded when out of memory. */
  void *(*alloc)(size_t n);
  void (*free)(void *p);
  /* Host RAM, read-write, zeroed: anonymous address space of `size`
   * bytes (pages made when touched), given back with svc->unmap. Commit
   * [base, base + size) now; give the pages of a page-aligned range back
   * (they read as zero), returning the bytes that were resident. */
  dlrun_status (*map_host)(uint64_t size, void **base);
  dlrun_status (*commit_host)(void *base, uint64_t size);
  uint64_t (*decommit_host)(void *base, uint64_t size);
  /* Memory files that other processes of the job on this host may map
   * (the one-copy path between processes): when the job found such
   * processes, a sparse file of `size` bytes mapped read-write and shared
   * at *view, and its descriptor (the caller's to close; the mapping goes
   * with svc->unmap); -1 when it did not, or none can be made. Map process
   * pid's file descriptor `fd` read-only (checked to hold `size` bytes),
   * the mapping keeping the file alive until shared_file_unmap;
   * RuntimeError naming why not. */
  int (*shared_file_create)(uint64_t size, void **view);
  dlrun_status (*shared_file_map)(int pid, int64_t fd, uint64_t size, const void **view);
  void (*shared_file_unmap)(const void *view, uint64_t size);
  /* Park w (w->fn and w->early set) until the timeline event ev
   * completes: false, with nothing parked, when it already has. */
  bool (*timeline_park)(dlrun_event ev, dlrun_event_waiter *w);
  /* The runtime's shared worker threads (borrowed, living as long as the
   * runtime of dev). Make sure one runs (the only way queueing work fails);
   * hand a ready item to them (`batch`: the calling thread is queueing,
   * and a batch it holds keeps the item until released; else now); run
   * fn(ctx, i) for i in [0, n) on the calling thread and any idle worker,
   * returning when all are done. */
  dlrun_workers *(*device_workers)(const dlrun_device *dev);
  dlrun_status (*workers_start)(dlrun_workers *w);
  void (*workers_post)(dlrun_workers *w, dlrun_work_item *it, bool batch);
  void (*workers_parallel)(dlrun_workers *w, size_t n, void (*fn)(void *ctx, size_t i),
                           void *ctx);
  /* Tracing, for a platform that traces its own work (traces_own_work):
   * whether it is on; the trace clock (microseconds); a copy of `bytes` on
   * dev's queue from `start` to now, between the ends of a copy op; work
   * `name` ("fill") of `bytes` on dev's queue. */
  bool (*trace_enabled)(void);
  uint64_t (*trace_now)(void);
  void (*trace_copy)(const dlrun_device *dev, uint64_t start, uint64_t bytes,
                     const dlrun_box_end *src, const dlrun_box_end *dst);
  void (*trace_work)(const dlrun_device *dev, const char *name, uint64_t start, uint64_t bytes);
} dlrun_platform_services;

/* The library's services. */
DLRUN_API const dlrun_platform_services *dlrun_platform_services_get(void);

/* Add a platform ahead of the built-in ones ("auto" prefers it). The
 * vtable is the caller's and must outlive every runtime that uses it.
 * ValueError when pl->abi is not DLRUN_PLATFORM_ABI, a required slot is
 * missing or the name is taken; ResourceExhaustedError when the registry
 * is full: it holds 8 platforms, the built-in sim and cpu and the modules
 * loaded so far (opencl, cuda, once a runtime or --list-devices asked for
 * them) included, so a host may add 6 at most, fewer after modules load.
 * Runtimes created before see no change. */
DLRUN_API dlrun_status dlrun_platform_register(const dlrun_platform *pl);
/* Remove a registered platform (the built-in ones stay); runtimes already
 * using it keep working. */
DLRUN_API void dlrun_platform_unregister(const dlrun_platform *pl);

/* The platforms dlrun knows, registered, built in, or modules (loaded on
 * first call): for each, its name, whether its hardware is here with how
 * many devices, or why not. At most max written; returns how many there
 * are (out may be NULL when max is 0: the count alone, to size the array).
 * Strings are static or the library's, valid until the next call. */
typedef struct dlrun_platform_status {
  const char *name;
  const char *class_name;
  bool is_accelerator;
  bool available;
  size_t ndevices; /* when available; 0 for a simulated platform (any count) */
  char why[200];   /* when not available */
} dlrun_platform_status;
DLRUN_API size_t dlrun_platforms_list(dlrun_platform_status *out, size_t max);

/* A module's entry point (see the top of this file). */
typedef int (*dlrun_platform_module_open_fn)(int abi, const dlrun_platform_services *svc,
                                             const dlrun_platform **out, char *err, size_t n);

#ifdef __cplusplus
}
#endif
#endif
