/* Devices: one per (platform, id), owned by their runtime.
 *
 * A device pointer stays valid while its runtime is alive. Every device has
 * one memory pool per memory kind and one ordered stream of work. */
#ifndef DLRUN_DEVICE_H
#define DLRUN_DEVICE_H

#include <stddef.h>
#include <stdint.h>

#include "export.h"
#include "runtime.h"
#include "shape.h"
#include "status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* No runtime has more devices than this, all platforms together. */
#define DLRUN_MAX_DEVICES 65536

typedef enum dlrun_memory_kind {
  DLRUN_MEM_DEVICE = 0,      /* the device's own memory */
  DLRUN_MEM_PINNED_HOST = 1, /* host memory the device can reach */
  DLRUN_MEM_KIND_COUNT
} dlrun_memory_kind;

/* "pinned_host" for DLRUN_MEM_PINNED_HOST, else "device". */
DLRUN_API const char *dlrun_memory_kind_name(dlrun_memory_kind kind);

typedef struct dlrun_memory_stats {
  uint64_t bytes_in_use;
  uint64_t peak_bytes_in_use;
  uint64_t bytes_limit;
  uint64_t bytes_reserved;
  uint64_t num_allocs;
  uint64_t largest_alloc_size;
  uint64_t largest_free_block_bytes;
  double fragmentation; /* 1 - largest free block / free bytes */
} dlrun_memory_stats;

/* Devices of a runtime. `platform` NULL means the default backend's devices;
 * otherwise a platform name ("sim", "cpu"). Count 0 for a platform the
 * runtime lacks. */
DLRUN_API size_t dlrun_device_count(dlrun_runtime *rt, const char *platform);
/* The i-th device (0-based, ordered by id) of `platform` (NULL: default
 * backend), or NULL when out of range. Borrowed: owned by the runtime. */
DLRUN_API dlrun_device *dlrun_device_get(dlrun_runtime *rt, const char *platform, size_t i);
/* This process's devices of `platform` (NULL: the default backend): in a
 * job of several processes dlrun_device_count and dlrun_device_get see
 * every process's devices, ordered by process, and these only the local
 * ones. Borrowed. */
DLRUN_API size_t dlrun_local_device_count(dlrun_runtime *rt, const char *platform);
DLRUN_API dlrun_device *dlrun_local_device_get(dlrun_runtime *rt, const char *platform, size_t i);
/* Name of the default backend, the platform of the default devices
 * (dlrun_device_get(rt, NULL, 0)'s): the first accelerator platform of the
 * device spec ("cuda:2,sim:2": "cuda"), else "cpu". Borrowed. */
DLRUN_API const char *dlrun_default_backend(dlrun_runtime *rt);
/* The host cpu device (always present). Borrowed. */
DLRUN_API dlrun_device *dlrun_host_device(dlrun_runtime *rt);
/* The host device of process `process` of the job (this process's is
 * dlrun_host_device's); NULL when there is no such process. Borrowed. */
DLRUN_API dlrun_device *dlrun_process_host_device(dlrun_runtime *rt, int process);
/* Comma-separated list of the platforms present ("sim,cpu"). Static storage
 * of the runtime, valid while it lives. */
DLRUN_API const char *dlrun_runtime_platforms(dlrun_runtime *rt);
/* Canonical spec the runtime was made from ("sim:8,cpu:1"). */
DLRUN_API const char *dlrun_runtime_spec(dlrun_runtime *rt);

DLRUN_API int dlrun_device_id(const dlrun_device *dev);
DLRUN_API const char *dlrun_device_platform(const dlrun_device *dev); /* "sim" */
DLRUN_API int dlrun_device_process_index(const dlrun_device *dev); /* the process holding it */
/* "SimDevice(id=3)", "CpuDevice(id=0)". Owned by the device. */
DLRUN_API const char *dlrun_device_name(const dlrun_device *dev);
DLRUN_API dlrun_runtime *dlrun_device_runtime(const dlrun_device *dev);
DLRUN_API dlrun_status dlrun_device_memory_stats(dlrun_device *dev, dlrun_memory_kind kind,
                                                 dlrun_memory_stats *out);
/* Wait until all work queued on the device so far has finished. */
DLRUN_API void dlrun_device_synchronize(dlrun_device *dev);

/* peak_bytes_in_use := bytes_in_use and largest_alloc_size := the largest
 * live allocation, for dev's `kind` memory (as PyTorch's
 * reset_peak_memory_stats). DLRUN_ERR_VALUE for a bad kind, RUNTIME for
 * another process's device. */
DLRUN_API dlrun_status dlrun_device_reset_peak_memory_stats(dlrun_device *dev,
                                                            dlrun_memory_kind kind);
/* Give the memory that dev's pools hold but have not allocated back to the
 * system (the pools keep their capacity; free pages read as zero when next
 * used). *released (may be NULL) gets the bytes given back. */
DLRUN_API dlrun_status dlrun_device_release_unused(dlrun_device *dev, uint64_t *released);
/* The same for every device of this process, all memories: the bytes given
 * back (as PyTorch's empty_cache). */
DLRUN_API uint64_t dlrun_runtime_release_unused(dlrun_runtime *rt);

/* ---- memory snapshots ---- */

typedef enum dlrun_owner_kind {
  DLRUN_OWNER_NONE = 0,   /* a free block */
  DLRUN_OWNER_ARRAY = 1,  /* a live array holds it (shape, dtype, sharding set) */
  DLRUN_OWNER_EXPORT = 2, /* only DLPack exports hold it (the array is gone) */
  DLRUN_OWNER_WORK = 3,   /* only queued work or dlrun itself holds it */
} dlrun_owner_kind;

/* "array", "export", "work", or "none". Static. */
DLRUN_API const char *dlrun_owner_kind_name(dlrun_owner_kind kind);

/* One chunk of a pool, in address order. */
typedef struct dlrun_memory_block {
  uint64_t offset;          /* from the start of the segment */
  uint64_t size;            /* bytes the block takes (a multiple of 256) */
  uint64_t requested_size;  /* bytes asked for; 0 when free */
  bool allocated;
  dlrun_owner_kind owner;
  /* The array that made the block (its first owner), when one did; also for
   * EXPORT. dtype static, sharding owned by the snapshot; NULL when none. */
  const char *dtype;
  int ndim;
  int64_t shape[DLRUN_MAX_NDIM];
  const char *sharding;
} dlrun_memory_block;

/* One address range of a pool (dlrun's pools have one each). */
typedef struct dlrun_memory_segment {
  uint64_t size;
  uint64_t bytes_reserved; /* its part holding memory of the system */
  size_t nblocks;
  dlrun_memory_block *blocks;
} dlrun_memory_segment;

typedef struct dlrun_memory_snapshot {
  dlrun_memory_kind kind;
  dlrun_memory_stats stats; /* taken with the blocks */
  size_t nsegments;
  dlrun_memory_segment *segments;
} dlrun_memory_snapshot;

/* Every segment and block of dev's `kind` memory now. *out is the
 * caller's: dlrun_memory_snapshot_free. */
DLRUN_API dlrun_status dlrun_device_memory_snapshot(dlrun_device *dev, dlrun_memory_kind kind,
                                                    dlrun_memory_snapshot **out);
/* NULL is a no-op. */
DLRUN_API void dlrun_memory_snapshot_free(dlrun_memory_snapshot *snap);

/* The driver's copies, as a consumer of a device export uses them (as a
 * CUDA consumer uses cudaMemcpy): copy `nbytes` between host memory and the
 * device address `device_data` of dev's `kind` memory (the data pointer of
 * an export of it, for instance). Device memory of a sim device is not
 * host-readable by default (DLRUN_SIM_MEMORY), so this is the way to read
 * it. Synchronous; the caller orders it after the producer's work (for
 * dlrun's own exports, the export's stream rules do). An address range
 * outside a device memory is DLRUN_ERR_VALUE; memory that is host memory
 * (cpu devices, pinned_host) cannot be told from other host memory, so any
 * address is taken there, as memcpy would. The host memory is the caller's. */
DLRUN_API dlrun_status dlrun_device_copy_to_host(dlrun_device *dev, dlrun_memory_kind kind,
                                                 const void *device_data, uint64_t nbytes,
                                                 void *host);
DLRUN_API dlrun_status dlrun_device_copy_from_host(dlrun_device *dev, dlrun_memory_kind kind,
                                                   void *device_data, const void *host,
                                                   uint64_t nbytes);

/* A test hook (beside include/dlrun/debug.h's): make the next `count`
 * operations of kind `what` ("copy" or "fill") enqueued on dev fail on the
 * device, as a driver error would (0 stops). The failure travels the real
 * path, so block_until_ready, reads, export and device_put raise it.
 * ValueError for another `what`; RuntimeError when dev's platform cannot
 * inject failures or dev is another process's. */
DLRUN_API dlrun_status dlrun_debug_inject_failure(dlrun_device *dev, const char *what,
                                                  unsigned count);

#ifdef __cplusplus
}
#endif
#endif
