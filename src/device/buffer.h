/* Internal: device buffers, the line the layers above do not cross: they
 * plan and name buffers, and ask the device layer to allocate, fill, copy
 * and read them (copy_route.h, fill.h, buffer_transport.h, dlpack_codes.h).
 * Each operation goes to the platform of the memory involved (a slot of
 * dlrun_platform), so a platform whose memory the host cannot read (sim by
 * default, a real accelerator) plugs in without the planners knowing.
 * A buffer's `data` is a device address: never dereference it above here.
 * Implemented by buffer.c. */
#ifndef DLRUN_DEVICE_BUFFER_H
#define DLRUN_DEVICE_BUFFER_H

#include <stdatomic.h>

#include "device/device_impl.h"
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

#endif
