/* Internal: a best-fit, coalescing memory pool over one address range, in the
 * manner of TensorFlow's BFC allocator.
 *
 * The range (`capacity` bytes) is obtained lazily, on the first allocation,
 * from a range source (by default mmap(MAP_NORESERVE); a platform can give
 * memory the host cannot read), so a pool costs no memory until used. Nothing is
 * committed either: filling pools beyond host RAM meets the kernel's OOM
 * killer, not an error, which is why the runtime's default capacities of all
 * pools together fit in host RAM (device/runtime.c). Blocks are
 * 256-byte aligned and sized in multiples of 256. Chunk metadata lives in host
 * memory outside the range (device memory need not be host-addressable).
 * All functions are thread-safe (one mutex per pool). */
#ifndef DLRUN_POOL_H
#define DLRUN_POOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dlrun/status.h"

#define DLRUN_POOL_ALIGN 256u

typedef struct dlrun_pool dlrun_pool;
typedef struct dlrun_block dlrun_block; /* an allocated chunk (opaque) */

typedef struct dlrun_pool_stats {
  uint64_t bytes_in_use;        /* sum of sizes of allocated chunks (rounded) */
  uint64_t peak_bytes_in_use;
  uint64_t bytes_limit;         /* capacity */
  uint64_t bytes_reserved;      /* the range holding memory: up to the end of the highest
                                 * block since the last release (all when preallocated) */
  uint64_t num_allocs;          /* allocations made so far (cumulative) */
  uint64_t num_live_allocs;     /* allocated chunks now */
  uint64_t largest_alloc_size;  /* largest single allocation so far (rounded) */
  uint64_t largest_free_block_bytes;
  uint64_t free_bytes;          /* capacity - bytes_in_use */
  uint64_t requested_bytes_in_use; /* sum of sizes as requested */
  double fragmentation;         /* 1 - largest_free / free_bytes (segmented: / the smaller
                                 * of free_bytes and the segment); 0 when none free */
} dlrun_pool_stats;

/* Where a pool's range comes from (as BFC's SubAllocator): reserve `size`
 * bytes of address space on first use, release it when the pool goes. The
 * range need not be host-readable: the pool never touches it. */
typedef struct dlrun_range_source {
  dlrun_status (*reserve)(void *ctx, uint64_t size, void **base);
  void (*release)(void *ctx, void *base, uint64_t size);
  void *ctx;
  /* (optional) Commit [data, data + size) now (preallocation), and give the
   * memory of a page-aligned range back to the system, keeping the range
   * (its contents become zero), returning the bytes it held. NULL: that
   * cannot be done for this range. */
  dlrun_status (*commit)(void *ctx, void *data, uint64_t size);
  uint64_t (*decommit)(void *ctx, void *data, uint64_t size);
  /* 0, or the size of the pieces the range is made of, a multiple of
   * DLRUN_POOL_ALIGN (an OpenCL range is several buffers of at most the
   * device's maximum allocation): no block crosses a multiple of it from
   * the base, free chunks never merge across one, and a request larger
   * than it fails. A segment of at least the capacity is none. */
  uint64_t segment;
} dlrun_range_source;

/* Anonymous address space of `size` bytes, committed on first touch:
 * readable and writable, or (accessible false) reserved only, any access
 * faulting. The default range source; platforms build theirs on it. */
dlrun_status dlrun_map_range(uint64_t size, bool accessible, void **base);
void dlrun_unmap_range(void *base, uint64_t size);
/* Commit host memory at an accessible range (every page written);
 * DLRUN_ERR_RESOURCE_EXHAUSTED when the system cannot back it. Decommit:
 * the pages of a page-aligned range go back to the system (read as zero);
 * returns how many bytes of them were resident. */
dlrun_status dlrun_commit_range(void *base, uint64_t size);
uint64_t dlrun_decommit_range(void *base, uint64_t size);

/* Create a pool of `capacity` bytes (rounded down to 256; must be >= 256).
 * `label` names the pool's owner in messages ("SimDevice(id=3)"); copied.
 * The caller owns *out and destroys it with dlrun_pool_destroy. */
dlrun_status dlrun_pool_create(const char *label, uint64_t capacity, dlrun_pool **out);
/* The same over a range from `source` (copied; NULL: anonymous memory).
 * A segment that is not a multiple of 256 is DLRUN_ERR_VALUE. */
dlrun_status dlrun_pool_create_with(const char *label, uint64_t capacity,
                                    const dlrun_range_source *source, dlrun_pool **out);

/* Free the range and all metadata. Live blocks become invalid. NULL is a no-op. */
void dlrun_pool_destroy(dlrun_pool *pool);

/* Allocate `size` bytes (> 0). On success *out_block is owned by the caller
 * until dlrun_pool_free. Out of memory gives DLRUN_ERR_RESOURCE_EXHAUSTED with
 * the message:
 *   "Out of memory on <label> while allocating <size> bytes (<human>): <in use>
 *    bytes in use of a <limit> byte limit; largest free block <n> bytes."
 * or, for a request larger than the source's segment:
 *   "Out of memory on <label> while allocating <size> bytes (<human>): the
 *    request exceeds the largest block <label> can hold (<segment> bytes,
 *    <human>: the device's maximum allocation)."
 * (one line; see pool.c for the exact text). Size 0 is DLRUN_ERR_VALUE. */
dlrun_status dlrun_pool_alloc(dlrun_pool *pool, uint64_t size, dlrun_block **out_block);

/* Return a block to the pool, merging with free neighbours. NULL is a no-op. */
void dlrun_pool_free(dlrun_pool *pool, dlrun_block *block);

/* The same, recording `tag` (the caller's owner of the block, borrowed)
 * for dlrun_pool_visit. */
dlrun_status dlrun_pool_alloc_tagged(dlrun_pool *pool, uint64_t size, void *tag,
                                     dlrun_block **out_block);

/* Address and rounded size of a live block. */
void *dlrun_block_ptr(const dlrun_block *block);
uint64_t dlrun_block_size(const dlrun_block *block);

void dlrun_pool_get_stats(dlrun_pool *pool, dlrun_pool_stats *out);

/* Whether a free block could hold `size` bytes now. */
bool dlrun_pool_fits(dlrun_pool *pool, uint64_t size);

/* The setting that sizes this pool ("device_memory (dl.configure, ...)"),
 * named in out-of-memory advice; copied; NULL: no advice. DLRUN_OK or a
 * host out-of-memory status. */
dlrun_status dlrun_pool_set_hint(dlrun_pool *pool, const char *hint);

/* The trace counter that samples this pool's bytes in use at every
 * allocation and free while tracing ("SimDevice(id=0) device memory");
 * copied; NULL: none. */
dlrun_status dlrun_pool_set_counter(dlrun_pool *pool, const char *name);

/* Map the whole range now and commit all of it through the source's commit
 * (preallocation); bytes_reserved becomes the capacity. An error names the
 * pool; DLRUN_ERR_RUNTIME when the source cannot commit. */
dlrun_status dlrun_pool_preallocate(dlrun_pool *pool);

/* Give the memory of every free page back to the system through the
 * source's decommit (the pool keeps its range and stays usable);
 * bytes_reserved drops to the end of the last allocated block. Returns the
 * bytes given back (the resident part of whole pages inside free chunks). */
uint64_t dlrun_pool_release_unused(dlrun_pool *pool);

/* peak_bytes_in_use := bytes_in_use, largest_alloc_size := the largest live
 * block. */
void dlrun_pool_reset_peak(dlrun_pool *pool);

/* Call fn for every chunk in address order, with the mutex held (fn must
 * not call into the pool): offset, rounded size, requested size (0 when
 * free), whether allocated, and its tag. Stops at fn's first nonzero
 * return and passes it on. An unmapped pool is one free chunk (one per
 * segment). */
typedef int (*dlrun_pool_visit_fn)(void *ctx, uint64_t offset, uint64_t size,
                                   uint64_t requested, bool allocated, void *tag);
int dlrun_pool_visit(dlrun_pool *pool, dlrun_pool_visit_fn fn, void *ctx);

/* Number of free chunks (for tests: 1 after everything is freed; one per
 * segment in a segmented pool). */
size_t dlrun_pool_free_chunk_count(dlrun_pool *pool);

/* Check internal invariants (address order, no adjacent free chunks but at a
 * segment boundary, no chunk across one, sizes add up to capacity, free
 * index consistent). DLRUN_OK or DLRUN_ERR_RUNTIME with
 * a description. For tests. */
dlrun_status dlrun_pool_check(dlrun_pool *pool);

#endif
