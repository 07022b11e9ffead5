/* Internal: device buffers and the operations that touch device bytes.
 *
 * This is the line the layers above do not cross: they plan and name
 * buffers, and ask the device layer to allocate, fill, copy and read them.
 * Each operation goes to the platform of the memory involved (a slot of
 * dlrun_platform), so a platform whose memory the host cannot read (sim by
 * default, a real accelerator later) plugs in without the planners knowing.
 * A buffer's `data` is a device address: never dereference it above here. */
#ifndef DLRUN_DEVICE_BUFFER_H
#define DLRUN_DEVICE_BUFFER_H

#include <stdatomic.h>

#include "device/device_impl.h"
#include "distributed/transport.h"
#include "dlrun/dtype.h"
#include "dlrun/shape.h"

/* Who holds a buffer, for memory snapshots: set by the layers above. One
 * record serves every shard of an array (reference counted), so that
 * tagging thousands of shards costs no allocation each. */
typedef struct dlrun_buffer_owner {
  atomic_size_t refs;
  const char *dtype; /* static */
  int ndim;
  int64_t dims[DLRUN_MAX_NDIM];
  char sharding[]; /* a description */
} dlrun_buffer_owner;

/* Device memory holding one shard, reference counted: arrays, queued work
 * and exports each hold a reference. The memory returns to the pool when the
 * last one is released. */
typedef struct dlrun_buffer {
  dlrun_ref ref; /* first: the object base */
  dlrun_device *dev;
  dlrun_memory_kind kind;
  dlrun_block *block; /* NULL for zero bytes and for outside memory */
  void *data;         /* device address; NULL for zero bytes */
  uint64_t nbytes;
  int64_t *strides;   /* element strides of the data; NULL: row-major */
  dlrun_event ready;  /* the data is written once this is done */
  /* Outside memory (an imported tensor): not from a pool; release, when
   * set, is called once when the buffer goes. */
  bool external;
  void (*release)(void *ctx);
  void *release_ctx;
  /* Snapshot tags: the first array wrapping it, and how many arrays and
   * exports hold it now. */
  _Atomic(dlrun_buffer_owner *) owner;
  atomic_int arrays, exports;
} dlrun_buffer;

/* An owner record (dtype name static, sharding copied) with one reference
 * for the caller. */
dlrun_status dlrun_buffer_owner_create(const char *dtype, int ndim, const int64_t *dims,
                                       const char *sharding, dlrun_buffer_owner **out);
void dlrun_buffer_owner_release(dlrun_buffer_owner *o); /* NULL: nothing */
/* Tag b as held by one more array (the first array's record is kept, with
 * a reference of b's own), or one fewer. */
void dlrun_buffer_tag_array(dlrun_buffer *b, dlrun_buffer_owner *o);
void dlrun_buffer_untag_array(dlrun_buffer *b);
/* Whether tagging b would keep an owner record: pool memory not yet tagged
 * (outside memory and tagged buffers keep none, so none need be made). */
bool dlrun_buffer_wants_owner(dlrun_buffer *b);
/* One more (+1) or one fewer (-1) DLPack export holds b. */
void dlrun_buffer_tag_export(dlrun_buffer *b, int delta);

/* Allocate nbytes on dev's `kind` memory. *out holds one reference. The
 * ready event starts done. */
dlrun_status dlrun_buffer_create(dlrun_device *dev, dlrun_memory_kind kind, uint64_t nbytes,
                                 dlrun_buffer **out);
/* A buffer over memory dlrun does not own (e.g. an imported tensor) at the
 * device address `data` of dev's `kind` memory, with ctx_bytes of zeroed
 * memory for its release hook's context at b->release_ctx (8-byte aligned,
 * part of the buffer's allocation: one allocation per import). The caller
 * sets b->release when it wants the hook: it then runs once, with
 * release_ctx, when the last reference goes. Memory the platform does not
 * recognise as dev's (an address outside its device memory) is refused with
 * DLRUN_ERR_BUFFER. */
dlrun_status dlrun_buffer_wrap(dlrun_device *dev, dlrun_memory_kind kind, void *data,
                               uint64_t nbytes, size_t ctx_bytes, dlrun_buffer **out);
void dlrun_buffer_retain(dlrun_buffer *b);
void dlrun_buffer_release(dlrun_buffer *b);
/* The element strides of b's data for a shard of shape `dims`: its own
 * (an imported layout) or row-major ones written to `scratch`. */
const int64_t *dlrun_buffer_layout(const dlrun_buffer *b, int ndim, const int64_t *dims,
                                   int64_t *scratch);

/* Row-major element strides of a shape. */
void dlrun_row_major_strides(int ndim, const int64_t *dims, int64_t *strides);

/* ---- operations on device bytes ----
 * They go to the device queue that can reach the memories involved
 * (dispatch.c): the platform of device memory the host cannot read, else
 * the destination's device. */

/* The end for buffer b, whose block starts at `origin` with `strides`. */
dlrun_box_end dlrun_buffer_end(const dlrun_buffer *b, const int64_t *origin,
                               const int64_t *strides);
/* The end for host memory. */
dlrun_box_end dlrun_host_end(const void *data, const int64_t *origin, const int64_t *strides);

/* Where a copy from src to dst runs: on `queue`'s device queue, with the
 * ends as that platform sees them (an end in another platform's host
 * memory becomes plain host memory); or, between device memories of two
 * different platforms, in two steps through host memory (staged: the
 * first on src_queue into a host block, the second on queue from it). */
typedef struct dlrun_copy_route {
  dlrun_device *queue;
  dlrun_device *src_queue; /* staged only */
  bool staged;
  dlrun_box_end dst, src;
} dlrun_copy_route;
void dlrun_copy_route_of(const dlrun_box_end *dst, const dlrun_box_end *src,
                         dlrun_copy_route *out);

/* The bytes of the box [lo, hi) of esize-byte elements. */
uint64_t dlrun_box_bytes(size_t esize, int ndim, const int64_t *lo, const int64_t *hi);

/* Copy the N-d box [lo, hi) (global coordinates) of esize-byte elements
 * from src to dst now: host to device, device to host, device to device,
 * between platforms (staged). Returns when it is done, with the device's
 * failure if it failed. */
dlrun_status dlrun_copy_sync(size_t esize, int ndim, const int64_t *lo, const int64_t *hi,
                             const dlrun_box_end *dst, const dlrun_box_end *src);

/* Element i of a sequence fill (also what the planner checks up front, so
 * that every stored value fits). */
dlrun_scalar dlrun_fill_value(const dlrun_fill *f, int64_t i);

/* Queue the fill of b on its device's queue; b's ready event becomes the
 * fill's. On failure nothing is queued. */
dlrun_status dlrun_buffer_fill_async(dlrun_buffer *b, const dlrun_fill *f);

/* ---- the transport between processes ---- */

/* Count `bytes` of a message between processes on b's device (its
 * dl.stats() bytes_moved_in when `in`, else bytes_moved_out); the peer's
 * device counts the other end. */
void dlrun_buffer_count_message(const dlrun_buffer *b, uint64_t bytes, bool in);

/* The message (distributed/transport.h) that sends or receives the non-empty box
 * [lo, hi) (global coordinates) of b, whose block of shape shard_dims
 * starts at `origin`, straight from or into b's memory through its
 * platform's transport view; to or from process `peer`. Dimensions are
 * merged where contiguous. DLRUN_ERR_RUNTIME when the platform's transport
 * cannot reach b's memory. */
dlrun_status dlrun_buffer_message(const dlrun_buffer *b, size_t esize, int ndim,
                                  const int64_t *shard_dims, const int64_t *origin,
                                  const int64_t *lo, const int64_t *hi, int peer,
                                  dlrun_transport_message *out);

/* How the transport reaches a memory (the distributed layer's
 * $DLRUN_DISTRIBUTED_DEVICE_MEMORY with what the transport says of itself). */
typedef enum dlrun_reach {
  DLRUN_REACH_HOST_VIEWS,   /* views that are host memory; stage the rest */
  DLRUN_REACH_DEVICE_VIEWS, /* device views too (a CUDA-aware transport) */
  DLRUN_REACH_DIRECT,       /* every view; a memory without one is refused */
  DLRUN_REACH_DIRECT_HOST,  /* the same, but the transport said it cannot
                               reach device memory: device views refused */
  DLRUN_REACH_STAGED,       /* stage every memory but host memory */
} dlrun_reach;
/* Whether the transport reads and writes b's memory through its view
 * (*direct), or the box goes through host memory, copied on b's device
 * queue (staged). Decided by the platform's slots alone: host memory and
 * views are direct; a view of device addresses (transport_view_device)
 * only when the transport reaches device memory. DLRUN_ERR_RUNTIME when
 * `reach` is DLRUN_REACH_DIRECT(_HOST) and b's memory has no view it may use. */
dlrun_status dlrun_buffer_reach(const dlrun_buffer *b, dlrun_reach reach, bool *direct);
/* Copy the box [lo, hi) of b (block of shape shard_dims at origin)
 * out into the host block `block` (`out`), or back in from it, on b's
 * device queue, now: the block holds the box row-major, contiguous.
 * Returns once it is done, with the device's failure if it failed. */
dlrun_status dlrun_buffer_stage(const dlrun_buffer *b, size_t esize, int ndim,
                                const int64_t *shard_dims, const int64_t *origin,
                                const int64_t *lo, const int64_t *hi, void *block, bool out);

/* ---- DLPack device codes ---- */

/* The (device_type, device_id) b's memory exports as. */
void dlrun_buffer_dlpack_device(const dlrun_buffer *b, int32_t *type, int32_t *id);
/* The device and memory kind a producer's (device_type, device_id) names in
 * rt, or NULL when none of rt's platforms knows it. */
dlrun_device *dlrun_device_from_dlpack(dlrun_runtime *rt, int32_t type, int32_t id,
                                       dlrun_memory_kind *kind);
/* The device of this process whose device memory exports as (type, id): what
 * a consumer's dl_device may name, as the platforms say (host memory asked
 * for as (kDLCPU, 0) is the cpu device's). NULL when none; *type_known then
 * says whether some local device's memory exports with that type. */
dlrun_device *dlrun_device_exporting_as(dlrun_runtime *rt, int32_t type, int32_t id,
                                        bool *type_known);
/* Whether [data, data + n) lies in dev's `kind` memory (host memory for
 * platforms whose memory is the host's). */
bool dlrun_memory_owns(const dlrun_device *dev, dlrun_memory_kind kind, const void *data,
                       uint64_t n);
/* Whether dev's `kind` memory is host memory (it exports as kDLCPU): what
 * any host consumer may share, whatever mode the platform runs in. */
bool dlrun_memory_is_host(const dlrun_device *dev, dlrun_memory_kind kind);
/* Whether data in memory `have` can be used as memory `want` without a copy:
 * any host memory serves as any other (cpu devices, pinned_host memory);
 * device memory only as itself. */
bool dlrun_memory_same_place(const dlrun_device *have, dlrun_memory_kind have_kind,
                             const dlrun_device *want, dlrun_memory_kind want_kind);
/* The DLTensor (data, byte_offset) of b's memory (its platform's handle
 * and offset, or its address and 0). */
dlrun_status dlrun_buffer_export_data(const dlrun_buffer *b, void **data, uint64_t *byte_offset);
/* A producer's (data, byte_offset) in dev's `kind` memory, for a platform
 * whose memory is named by handles (import_data): *handled true, and the
 * address of element 0 in *elem0, whose tensor reaches `below` bytes
 * before it and spans `span` bytes in all; BufferError naming why when the
 * handle is not the platform's. *handled false: the platform's addresses
 * are plain (the caller checks them with dlrun_memory_owns). */
dlrun_status dlrun_memory_import(const dlrun_device *dev, dlrun_memory_kind kind, void *data,
                                 uint64_t byte_offset, uint64_t below, uint64_t span,
                                 const void **elem0, bool *handled);
/* The DLPack stream protocol: whether dev's platform has queues a consumer
 * names (else only stream nil or -1); make the consumer's queue `stream`
 * wait for ev; the handle of dev's queue, passed as `stream` to a
 * producer (0 when the platform has none). */
bool dlrun_device_has_streams(const dlrun_device *dev);
dlrun_status dlrun_device_stream_wait(const dlrun_device *dev, int64_t stream, dlrun_event ev);
int64_t dlrun_device_consumer_stream(const dlrun_device *dev);
/* Whether the host can read dev's `kind` memory at its device addresses. */
bool dlrun_memory_host_readable(const dlrun_device *dev, dlrun_memory_kind kind);

#endif
