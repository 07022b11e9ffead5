/* The OpenCL platform's own declarations, shared by the files of the module
 * libdlrun_opencl.so. The module is built on include/dlrun/platform.h alone:
 * it reaches the library only through the services handed to its open
 * function (ocl_svc), never through an internal header of src/device. */
#ifndef DLRUN_OCL_H
#define DLRUN_OCL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 120
#endif
#include <CL/cl.h>

#include "dlrun/platform.h"
#include "platforms/common/op_queue.h"

/* The kernels (kernels.c): sequences by integer size, int64 arithmetic
 * (I), or double arithmetic stored as an integer (D) or a float type; the
 * strided box copy. */
enum {
  OCL_SEQ_I1, OCL_SEQ_I2, OCL_SEQ_I4, OCL_SEQ_I8,
  OCL_SEQ_D1, OCL_SEQ_D2, OCL_SEQ_D4, OCL_SEQ_D8,
  OCL_SEQ_F16, OCL_SEQ_BF16, OCL_SEQ_F32, OCL_SEQ_F64, OCL_SEQ_C64, OCL_SEQ_C128,
  OCL_COPY_STRIDED, /* a box copy between buffers that rects do not fit */
  OCL_KERNEL_COUNT
};
extern const char ocl_kernel_source[];
extern const char *const ocl_kernel_names[OCL_KERNEL_COUNT];


/* The library's services and this platform's vtable (module.c). */
extern const dlrun_platform_services *ocl_svc;
extern dlrun_platform ocl_platform;

/* ---- errors (errors.c) ---- */
/* "CL_INVALID_VALUE" for -30; "CL_ERROR" for a code it does not know. */
const char *ocl_error_name(cl_int code);

/* ---- discovery (discover.c) ---- */
/* The OpenCL platform dlrun uses (DLRUN_OPENCL_PLATFORM, else the first
 * with a GPU or accelerator, else the first with any device) and its
 * devices, GPUs and accelerators first. false with why on failure. *devs
 * is the caller's (free). */
bool ocl_discover(cl_platform_id *platform, cl_device_id **devs, size_t *ndevs, size_t *naccel,
                  char *why, size_t n);

/* ---- memory (memory.c) ---- */
/* One address range reserved for a pool: segments of `seg` bytes, each one
 * cl_mem made on first use. */
typedef struct ocl_range {
  struct ocl_range *next;
  dlrun_memory_kind kind;
  unsigned char *base;
  uint64_t size, seg;
  size_t nsegs;
  cl_mem *mems; /* NULL until used */
} ocl_range;

/* Where an address of one of this platform's memories is: a host pointer
 * (host memory, pinned_host) or a cl_mem and the offset in it. */
typedef struct ocl_place {
  cl_mem mem;          /* NULL: host pointer */
  size_t offset;       /* in mem */
  unsigned char *host; /* when mem is NULL */
  size_t room;         /* bytes from here to the end of the segment */
} ocl_place;

/* ---- devices (device.c) ---- */
typedef struct ocl_op ocl_op;

typedef struct ocl_device {
  struct ocl_device *next; /* every live device of the module */
  dlrun_device *dev;
  const char *name;
  size_t index; /* local index: kDLOpenCL device_id */
  cl_device_id id;
  cl_command_queue queue;
  cl_command_queue lane; /* a CPU device's second queue for big copies (lane.c); or NULL */
  uint64_t global_mem, max_alloc;
  bool unified;   /* CL_DEVICE_HOST_UNIFIED_MEMORY: its memory is host RAM */
  bool fp64;      /* doubles in kernels */
  cl_uint align;  /* CL_DEVICE_MEM_BASE_ADDR_ALIGN, in bytes */
  size_t ndevices; /* this process's devices of the platform */

  opq_queue q;              /* its ops; q.lock: also the queue's order, kernels */
  pthread_mutex_t mem_lock; /* ranges (never held while taking another lock) */
  ocl_range *ranges;
  cl_kernel kernels[OCL_KERNEL_COUNT]; /* this device's, made on first use */
} ocl_device;

/* The context all devices share (created by the first device_init). */
typedef struct ocl_shared {
  pthread_mutex_t lock;
  int refs;
  cl_platform_id platform;
  cl_context context;
  cl_device_id *devs;
  size_t ndevs;
  cl_program program; /* the fill kernels, built once on first use */
  cl_int program_status;
  ocl_device *devices;
} ocl_shared;

extern ocl_shared ocl_state;

ocl_device *ocl_dev(const dlrun_device *dev);
/* The live device whose queue is `queue`, or NULL. */
ocl_device *ocl_device_of_queue(cl_command_queue queue);

/* ---- memory (memory.c) ---- */
/* Where addr of d's `kind` memory is: for pinned_host a host pointer;
 * for device memory the segment's cl_mem, made on first use (failure:
 * ResourceExhausted naming the device, the size and the OpenCL error). An
 * address outside d's memory: DLRUN_ERR_VALUE. */
dlrun_status ocl_place_of(ocl_device *d, dlrun_memory_kind kind, const void *addr,
                          ocl_place *out);

/* ---- ops and events (ops.c) ---- */
/* The driver's part of the op protocol (common/op_queue.h). */
extern const opq_driver ocl_op_driver;
/* An op being enqueued: its waits resolved into a list of cl_events. */
typedef struct ocl_host_step ocl_host_step;
typedef struct ocl_enqueue {
  ocl_device *d;
  ocl_op *op;
  cl_event *waits;
  cl_uint nwaits;
  cl_event last; /* the op's last command so far */
  bool failed;   /* a wait had failed: enqueue nothing but the marker */
  ocl_host_step *host; /* host work in the queue's order (ocl_enqueue_host) */
} ocl_enqueue;

/* Start an op of `what` ("copy", "fill", "record") on d after waits, a
 * failure of kind inject_kind (or -1) injected when one is due. On success
 * d->q.lock is held (the queue's order) until ocl_end, which must follow. */
dlrun_status ocl_begin(ocl_device *d, const char *what, int inject_kind, const dlrun_event *waits,
                       size_t nwaits, ocl_enqueue *q);
/* fn(ctx) when the op completes, just before its point does (a copy's
 * dlrun_copy_op.complete). */
void ocl_on_complete(ocl_enqueue *q, void (*fn)(void *ctx), void *ctx);
/* Whether the op must enqueue its work (false: it fails already, by a
 * failed wait or an injected failure: only its marker is enqueued). */
bool ocl_op_runs(const ocl_enqueue *q);
/* The wait list of the next command: the op's waits for its first one,
 * then none (the queue is in order). */
cl_uint ocl_wait_count(const ocl_enqueue *q);
const cl_event *ocl_wait_list(const ocl_enqueue *q);
/* Take the event of a command just enqueued (err its result). */
void ocl_enqueued(ocl_enqueue *q, cl_int err, cl_event ev);
/* Host work in the queue's order: fn(ctx) runs (on a driver thread, from a
 * completion callback) once the commands before it are done, and the
 * commands after it wait for it. For copies and fills whose memories are
 * all host memory: no OpenCL command can reach host memory that is not a
 * buffer, and a buffer over host memory (CL_MEM_USE_HOST_PTR) is coherent
 * with it only while mapped. ctx stays the caller's until the op completes. */
cl_int ocl_enqueue_host(ocl_enqueue *q, void (*fn)(void *ctx), void *ctx);
/* Keep `p` (malloc'ed host bytes a command reads) until the op completes. */
bool ocl_keep(ocl_enqueue *q, void *p); /* false: out of memory */
/* Finish (err: the enqueue that failed, or CL_SUCCESS) and unlock. When no
 * command was enqueued, the failure is returned and nothing is left
 * queued; after one was, the op's point fails instead. *done (may be NULL)
 * gets the point. */
dlrun_status ocl_end(ocl_enqueue *q, cl_int err, dlrun_event *done);

/* What a queue waits on to be after ev (retained; NULL: nothing): its
 * native event, or a user event released when it completes; ev already
 * failed: its status and message. */
dlrun_status ocl_wait_event(ocl_device *d, dlrun_event ev, cl_event *out);

/* ---- the lane (lane.c) ---- */
/* Open d's lane where the device is a CPU with more than one compute unit
 * (none when it cannot be made); close it, its commands done. */
void ocl_lane_open(ocl_device *d);
void ocl_lane_close(ocl_device *d);
/* n contiguous bytes from s to d as the op's next command(s): a big copy
 * on a device with a lane is split over both queues, in the op's order. */
cl_int ocl_plain_copy(ocl_enqueue *q, const ocl_place *s, const ocl_place *d, size_t n);

/* ---- the slots (one file each area) ---- */
dlrun_status ocl_device_init(dlrun_device *dev, size_t local_index, size_t ndevices, void **impl);
void ocl_device_destroy(dlrun_device *dev, void *impl);
dlrun_status ocl_native_handles(const dlrun_device *dev, void **handles, size_t n);
bool ocl_is_host_memory(const dlrun_device *dev, dlrun_memory_kind kind);
void ocl_memory_info(const dlrun_device *dev, dlrun_memory_kind kind, dlrun_memory_info *out);
uint64_t ocl_default_capacity(const dlrun_device *dev, dlrun_memory_kind kind, size_t ndevices);
dlrun_status ocl_reserve(dlrun_device *dev, dlrun_memory_kind kind, uint64_t size, void **base);
void ocl_release(dlrun_device *dev, dlrun_memory_kind kind, void *base, uint64_t size);
bool ocl_owns(const dlrun_device *dev, dlrun_memory_kind kind, const void *data, uint64_t n);
void ocl_dlpack_device(const dlrun_device *dev, dlrun_memory_kind kind, int32_t *type,
                       int32_t *id);
ptrdiff_t ocl_dlpack_lookup(int32_t type, int32_t id, size_t ndevices, dlrun_memory_kind *kind);
dlrun_status ocl_export_data(const dlrun_device *dev, dlrun_memory_kind kind, const void *addr,
                             void **data, uint64_t *byte_offset);
dlrun_status ocl_import_data(const dlrun_device *dev, dlrun_memory_kind kind, void *data,
                             uint64_t byte_offset, uint64_t nbytes, void **addr);
dlrun_status ocl_copy_box(dlrun_device *dev, dlrun_copy_op *op, const dlrun_event *waits,
                          size_t nwaits, dlrun_event *done);
dlrun_status ocl_fill(dlrun_device *dev, dlrun_memory_kind kind, void *data, uint64_t nbytes,
                      const dlrun_fill *f, const dlrun_event *waits, size_t nwaits,
                      dlrun_event *done);
/* d's kernel `which`, made on first use (the program built once); takes
 * d->q.lock: call before ocl_begin. */
dlrun_status ocl_kernel_of(ocl_device *d, int which, cl_kernel *out);

#endif
