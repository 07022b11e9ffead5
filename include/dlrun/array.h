/* Arrays: a global shape, a dtype, a sharding, and one buffer per device of
 * the sharding holding that device's shard.
 *
 * Ownership: every function that makes an array gives the caller one
 * reference (*out), released with dlrun_array_release. Functions taking an
 * array or a sharding borrow it (an array keeps its sharding alive). Work is
 * asynchronous: creation and transfers may return before the data is
 * written; readers wait for it. */
#ifndef DLRUN_ARRAY_H
#define DLRUN_ARRAY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "device.h"
#include "dtype.h"
#include "export.h"
#include "shape.h"
#include "sharding.h"
#include "status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dlrun_array dlrun_array;

/* A new array laid out by `sharding` holding a copy of `nbytes` bytes at
 * `data` (the whole array, row-major, native byte order): each shard is
 * copied straight from `data`. `nbytes` must equal the shape's byte size.
 * `data` is only read during the call. */
DLRUN_API dlrun_status dlrun_array_from_host(dlrun_sharding *sharding, dlrun_dtype dtype,
                                             int ndim, const int64_t *dims, const void *data,
                                             uint64_t nbytes, dlrun_array **out);

/* A new array with every element equal to `value` (converted by the dtype
 * rules; a value that does not fit is DLRUN_ERR_VALUE). Each shard is filled
 * in place on its device. */
DLRUN_API dlrun_status dlrun_array_full(dlrun_sharding *sharding, dlrun_dtype dtype, int ndim,
                                        const int64_t *dims, const dlrun_scalar *value,
                                        dlrun_array **out);

/* A new 1-d array of `n` elements start + i*step, i = 0..n-1, each shard
 * computed in place. Integer dtypes need integral start and step and every
 * value in range; floats are computed in double precision then converted. */
DLRUN_API dlrun_status dlrun_array_arange(dlrun_sharding *sharding, dlrun_dtype dtype,
                                          const dlrun_scalar *start, const dlrun_scalar *step,
                                          int64_t n, dlrun_array **out);

DLRUN_API void dlrun_array_retain(dlrun_array *a);
/* Drop one reference; the last one frees the array and, when nothing else
 * holds them, its buffers. NULL is a no-op. */
DLRUN_API void dlrun_array_release(dlrun_array *a);

/* Metadata; valid even after dlrun_array_delete. `shape` is owned by the
 * array; the sharding is borrowed from it. */
DLRUN_API dlrun_dtype dlrun_array_dtype(const dlrun_array *a);
DLRUN_API int dlrun_array_ndim(const dlrun_array *a);
DLRUN_API const int64_t *dlrun_array_shape(const dlrun_array *a);
DLRUN_API int64_t dlrun_array_size(const dlrun_array *a);
DLRUN_API uint64_t dlrun_array_nbytes(const dlrun_array *a);
DLRUN_API dlrun_sharding *dlrun_array_sharding(const dlrun_array *a);
/* The first device of the sharding (the only one for single-device arrays). */
DLRUN_API dlrun_device *dlrun_array_device(const dlrun_array *a);

/* DLRUN_OK while live; after deletion DLRUN_ERR_RUNTIME with JAX's message
 * "Array has been deleted with shape=float32[3]." */
DLRUN_API dlrun_status dlrun_array_check_live(const dlrun_array *a);

/* Wait until every shard is written. DLRUN_ERR_RUNTIME when deleted. */
DLRUN_API dlrun_status dlrun_array_block_until_ready(dlrun_array *a);

/* Whether this process holds the array's whole value: every element is in
 * one of its shards here. Always alone; in a job, for an array of this
 * process's devices, or one whose shards here cover it (a replicated array
 * with a replica here). False for NULL, and when the check runs out of
 * memory. */
DLRUN_API bool dlrun_array_has_full_value(const dlrun_array *a);

/* Copy `nbytes` bytes starting at byte `offset` of the whole array in
 * row-major order into `dst` (caller's memory), gathering from the shards,
 * after waiting for them. The range must lie inside the array and start and
 * end on element boundaries. In a job only this process's shards are read,
 * without any collective: an array it does not hold whole
 * (dlrun_array_has_full_value) fails with DLRUN_ERR_RUNTIME, JAX's fetch
 * error ("Fetching value for an Array that spans non-addressable ..."). */
DLRUN_API dlrun_status dlrun_array_read(dlrun_array *a, uint64_t offset, uint64_t nbytes,
                                        void *dst);

/* Drop the array's hold on its device memory now (idempotent). The memory
 * is freed at once unless something else (a transfer in flight, an export)
 * still references it. Metadata stays readable; everything else then fails. */
DLRUN_API void dlrun_array_delete(dlrun_array *a);
DLRUN_API bool dlrun_array_is_deleted(const dlrun_array *a);

/* ---- shards ---- */

/* One shard per device of the sharding, in its device order. */
DLRUN_API size_t dlrun_array_shard_count(const dlrun_array *a);
/* The i-th shard's device, index [lo, hi) per dimension (0-based, half-open;
 * lo and hi hold ndim entries) and replica id. */
DLRUN_API void dlrun_array_shard_index(const dlrun_array *a, size_t i, dlrun_device **device,
                                       int64_t *lo, int64_t *hi, int64_t *replica_id);
/* A single-device array sharing the i-th shard's buffer (no copy). */
DLRUN_API dlrun_status dlrun_array_shard_data(dlrun_array *a, size_t i, dlrun_array **out);

/* An array of global shape `dims` laid out by `sharding` from one
 * single-device array per addressable device of the sharding (every device,
 * alone; this process's, in a job), in any order, each holding that
 * device's shard (dtype and shard shape must match); their buffers are
 * shared, not copied. The arrays stay the caller's. JAX's checks and
 * messages. */
DLRUN_API dlrun_status dlrun_array_from_single_device_arrays(dlrun_sharding *sharding, int ndim,
                                                             const int64_t *dims,
                                                             dlrun_array *const *arrays,
                                                             size_t narrays, dlrun_array **out);

/* A global array from each process's slab of it, as JAX's
 * make_array_from_process_local_data: `local` (fully addressable, on any
 * device; it stays the caller's) holds the box of the global array that
 * this process's shards of `sharding` cover, and is copied into them.
 * Processes holding replicas of one slab pass equal data (not checked).
 * dims (ndim entries) is the global shape; with dims NULL (ndim ignored)
 * it is inferred: each dimension of local times the number of slabs that
 * split it. Errors (ValueError): this process's shards do not form one box;
 * local's shape is not that box's; dims NULL when the process holds no
 * shard, or when a dimension of local does not divide among the shards it
 * holds; and the shape checks of the sharding. No communication: every
 * process calls it, with the same sharding and global shape. The result is
 * the caller's (dlrun_array_release). */
DLRUN_API dlrun_status dlrun_array_from_process_local_data(dlrun_sharding *sharding,
                                                           dlrun_array *local, int ndim,
                                                           const int64_t *dims,
                                                           dlrun_array **out);

/* ---- transfers ---- */

/* Zero is the default. */
typedef enum dlrun_alias_mode {
  DLRUN_ALIAS_DEFAULT = 0, /* share buffers (and return the input) when possible */
  DLRUN_ALIAS_ALLOW = 1,   /* the same */
  DLRUN_ALIAS_NEVER = 2    /* always copy */
} dlrun_alias_mode;

typedef struct dlrun_transfer_stats {
  uint64_t bytes_moved; /* bytes copied from one device (or memory kind) to another */
  uint64_t local_bytes; /* bytes copied within one device memory (relayout) */
  uint64_t copies;      /* box copies made */
  uint64_t shares;      /* shards reused without a copy */
  /* Between processes (this process's share): bytes sent to and received
   * from other processes. Received bytes count in bytes_moved too. */
  uint64_t bytes_sent, bytes_received;
  /* Of bytes_received, those this process copied straight out of the
   * sender's memory (processes on one host; $DLRUN_DISTRIBUTED_IPC). */
  uint64_t ipc_bytes;
} dlrun_transfer_stats;

/* Options of dlrun_device_put; all zero (or a NULL pointer) asks for the
 * defaults: aliasing allowed, no donation, no stats. Read during the call. */
typedef struct dlrun_put_options {
  dlrun_alias_mode may_alias;
  bool donate; /* the input is deleted afterwards; its buffers may be reused */
  /* Optional (NULL: unused). Caller-owned; on success the put writes its own
   * counts here (all zero when `src` itself is returned), whatever other
   * threads do meanwhile; on failure it is left as it was. The runtime's
   * totals are counted as well. */
  dlrun_transfer_stats *stats;
} dlrun_put_options;

/* Lay `src` out by `sharding`: device to device, each needed byte moved
 * once, shards that already sit on the right device and memory shared. When
 * nothing needs to change (an equal sharding, aliasing allowed, no
 * donation), *out is `src` itself with a new reference; an equivalent one
 * gives a new array sharing every shard. Asynchronous: the
 * copies run on the destination devices' streams. On failure nothing is
 * allocated and `src` is untouched. `options` may be NULL. */
DLRUN_API dlrun_status dlrun_device_put(dlrun_array *src, dlrun_sharding *sharding,
                                        const dlrun_put_options *options, dlrun_array **out);

/* Transfer statistics of a runtime since its start or the last reset: one
 * set per runtime, shared by every thread and Lua state using it (a reset
 * anywhere resets them for all). To count one transfer's own copies, use
 * dlrun_put_options.stats instead of differences of these. */
DLRUN_API void dlrun_transfer_stats_get(dlrun_runtime *rt, dlrun_transfer_stats *out);
DLRUN_API void dlrun_transfer_stats_reset(dlrun_runtime *rt);

#ifdef __cplusplus
}
#endif
#endif
