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
#include "dist/transport.h"
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
/* One more (+1) or one fewer (-1) DLPack export holds b. */
void dlrun_buffer_tag_export(dlrun_buffer *b, int delta);

/* Allocate nbytes on dev's `kind` memory. *out holds one reference. The
 * ready event starts done. */
dlrun_status dlrun_buffer_create(dlrun_device *dev, dlrun_memory_kind kind, uint64_t nbytes,
                                 dlrun_buffer **out);
/* A buffer over memory dlrun does not own (e.g. an imported tensor) at the
 * device address `data` of dev's `kind` memory; release(ctx), when set,
 * runs once when the last reference goes. On failure release is not
 * called. Memory the platform does not recognise as dev's (an address
 * outside its device memory) is refused with DLRUN_ERR_BUFFER. */
dlrun_status dlrun_buffer_wrap(dlrun_device *dev, dlrun_memory_kind kind, void *data,
                               uint64_t nbytes, void (*release)(void *ctx), void *ctx,
                               dlrun_buffer **out);
void dlrun_buffer_retain(dlrun_buffer *b);
void dlrun_buffer_release(dlrun_buffer *b);
/* The element strides of b's data for a shard of shape `dims`: its own
 * (an imported layout) or row-major ones written to `scratch`. */
const int64_t *dlrun_buffer_layout(const dlrun_buffer *b, int ndim, const int64_t *dims,
                                   int64_t *scratch);

/* Row-major element strides of a shape. */
void dlrun_row_major_strides(int ndim, const int64_t *dims, int64_t *strides);

/* ---- operations on device bytes ----
 * They run on the calling thread; callers order them (streams, events). */

/* One end of a box copy: a block at `data` in dev's `kind` memory, or host
 * memory when dev is NULL; its element [0...] is at global coordinates
 * `origin`, laid out with element strides `strides`. */
typedef struct dlrun_box_end {
  dlrun_device *dev;
  dlrun_memory_kind kind;
  const void *data;
  const int64_t *origin, *strides;
} dlrun_box_end;

/* The end for buffer b, whose block starts at `origin` with `strides`. */
dlrun_box_end dlrun_buffer_end(const dlrun_buffer *b, const int64_t *origin,
                               const int64_t *strides);
/* The end for host memory. */
dlrun_box_end dlrun_host_end(const void *data, const int64_t *origin, const int64_t *strides);

/* Copy the N-d box [lo, hi) (global coordinates) of esize-byte elements
 * from src to dst: host to device, device to host, device to device. */
void dlrun_copy_box(size_t esize, int ndim, const int64_t *lo, const int64_t *hi,
                    const dlrun_box_end *dst, const dlrun_box_end *src);

/* What a device-side fill writes: one repeated element, or an arithmetic
 * sequence (arange) whose element i is start + (first + i) * step. */
typedef struct dlrun_fill {
  bool sequence;
  size_t esize;
  unsigned char pattern[16]; /* the element, for a repeated fill */
  dlrun_dtype dtype;         /* a sequence: values stored in this dtype */
  bool integral;             /* exact int64 arithmetic (start.i, step.i) */
  dlrun_scalar start, step;
  int64_t first;
} dlrun_fill;

/* Element i of a sequence fill (also what the planner checks up front, so
 * that every stored value fits). */
dlrun_scalar dlrun_fill_value(const dlrun_fill *f, int64_t i);

/* Fill the whole of buffer b, now. */
void dlrun_buffer_fill(dlrun_buffer *b, const dlrun_fill *f);
/* Queue the fill of b on its device's stream; b's ready event becomes the
 * fill's. On failure nothing is queued. */
dlrun_status dlrun_buffer_fill_async(dlrun_buffer *b, const dlrun_fill *f);

/* ---- the transport between processes ---- */

/* The message (dist/transport.h) that sends or receives the non-empty box
 * [lo, hi) (global coordinates) of b, whose block of shape shard_dims
 * starts at `origin`, straight from or into b's memory through its
 * platform's transport view; to or from process `peer`. Dimensions are
 * merged where contiguous. DLRUN_ERR_RUNTIME when the platform's transport
 * cannot reach b's memory. */
dlrun_status dlrun_buffer_piece(const dlrun_buffer *b, size_t esize, int ndim,
                                const int64_t *shard_dims, const int64_t *origin,
                                const int64_t *lo, const int64_t *hi, int peer,
                                dlrun_transport_piece *out);

/* ---- DLPack device codes ---- */

/* The (device_type, device_id) b's memory exports as. */
void dlrun_buffer_dlpack_device(const dlrun_buffer *b, int32_t *type, int32_t *id);
/* The device and memory kind a producer's (device_type, device_id) names in
 * rt, or NULL when none of rt's platforms knows it. */
dlrun_device *dlrun_device_from_dlpack(dlrun_runtime *rt, int32_t type, int32_t id,
                                       dlrun_memory_kind *kind);
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
/* Whether the host can read dev's `kind` memory at its device addresses. */
bool dlrun_memory_host_readable(const dlrun_device *dev, dlrun_memory_kind kind);

/* The host copy loop under the platforms' copy slots (boxcopy.c): both
 * blocks host-addressable. */
void dlrun_host_copy_box(size_t esize, int ndim, const int64_t *lo, const int64_t *hi, void *dst,
                         const int64_t *dst_origin, const int64_t *dst_strides, const void *src,
                         const int64_t *src_origin, const int64_t *src_strides);
/* The host fill under the platforms' fill slots. */
void dlrun_host_fill(void *data, uint64_t nbytes, const dlrun_fill *f);

#endif
