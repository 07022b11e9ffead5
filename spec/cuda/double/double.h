/* The CUDA driver double: a TEST TOOL, never installed. A libcuda.so.1
 * stand-in that implements the driver API subset dlrun declares
 * (src/platforms/cuda/driver_api.h) on the host, so that the CUDA platform
 * and its tests run without a GPU: device memory the host cannot read,
 * streams on threads, events, virtual memory reserve/map, peer access and
 * injected failures. It models the API's rules, not a GPU: no parallelism
 * model (one lock serialises all work), no PTX execution (kernels run as C
 * functions found by their .entry name). See README.md beside it.
 *
 * Internal header shared by the double's files. One global state `dbl`,
 * guarded by dbl.lock; every queued operation runs on its stream's worker
 * thread while holding that lock. */
#ifndef CUDA_DOUBLE_H
#define CUDA_DOUBLE_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "platforms/cuda/driver_api.h"

#define DBL_EXPORT __attribute__((visibility("default")))
#define DBL_MAX_DEVICES 64
#define DBL_MAX_FAILS 16
#define DBL_MAX_ARGS 12
#define DBL_MAX_CREATES 1024 /* cuMemCreate calls remembered for cuda_double_creates */

/* Every exported entry has the signature driver_api.h declares. */
#define DBL_DECLARE(field, name, version, symbol, params) DBL_EXPORT dlcu_result symbol params;
DLCU_ENTRIES(DBL_DECLARE)
#undef DBL_DECLARE
DBL_EXPORT dlcu_result cuGetErrorName(dlcu_result error, const char **str);
DBL_EXPORT dlcu_result cuGetErrorString(dlcu_result error, const char **str);
/* Test hook, not CUDA: while `hold` is nonzero no stream starts an
 * operation, so that a test sees work pending (cuEventQuery's NOT_READY)
 * and orders streams deterministically. */
DBL_EXPORT void cuda_double_hold(int hold);
/* Test hook, not CUDA: the cuMemCreate calls that made a handle since the
 * library loaded or the last `clear` (README.md). */
DBL_EXPORT size_t cuda_double_creates(uint64_t *sizes, int *devices, size_t max, int clear);

/* An id per entry, for call counts and injected failures. */
typedef enum dbl_id {
#define DBL_ID(field, name, version, symbol, params) DBL_ID_##field,
  DLCU_ENTRIES(DBL_ID)
#undef DBL_ID
  DBL_ID_COUNT
} dbl_id;

/* One CUDA_DOUBLE_FAIL item: the n-th call of entry `id` (and every later
 * one with `from_n`) fails with `code`, at the call or, `async`, later at
 * the stream; `sticky` (async too): the context keeps the error. */
typedef struct dbl_fail {
  dbl_id id;
  unsigned long n;
  bool from_n, async, sticky;
  dlcu_result code;
} dbl_fail;

/* Marks an injected async failure as sticky on its way to the op
 * (dbl_enter's `async`; dbl_op_new takes it off). */
#define DBL_STICKY 0x40000000

typedef struct dbl_config {
  int devices;
  uint64_t memory;      /* bytes per device */
  uint64_t granularity; /* VMM granularity */
  int version;
  bool no_vmm, stub, no_proc_address, report_leaks;
  uint64_t no_peer[DBL_MAX_DEVICES]; /* bit j of no_peer[i]: i cannot reach j */
  dbl_fail fails[DBL_MAX_FAILS];
  int nfails;
  dlcu_result error; /* a malformed variable: cuInit fails with it */
} dbl_config;

/* ---- memory regions ---- */
typedef enum dbl_region_kind {
  DBL_ALLOC,   /* cuMemAlloc: device bytes at a device address */
  DBL_RESERVE, /* cuMemAddressReserve: addresses only */
  DBL_MAP,     /* cuMemMap: a handle's bytes at reserved addresses */
  DBL_HOST,    /* cuMemHostAlloc: host memory */
} dbl_region_kind;

typedef struct dbl_handle {
  struct dbl_handle *next;
  dlcu_mem_handle id;
  uint64_t size;
  int device;
  unsigned char *bytes;
  int refs; /* the user's (until cuMemRelease) and one per mapping */
} dbl_handle;

typedef struct dbl_region {
  uint64_t start, size;
  dbl_region_kind kind;
  int device;            /* the memory's device (HOST: its context's) */
  dlcu_context ctx;      /* ALLOC, HOST: the allocating context */
  unsigned char *bytes;  /* where the bytes live (HOST: at start) */
  dbl_handle *handle;    /* MAP */
  uint64_t readable, writable; /* MAP: a bit per device (cuMemSetAccess) */
} dbl_region;

/* A sorted array of regions that do not overlap. */
typedef struct dbl_regions {
  dbl_region **at;
  size_t n, cap;
} dbl_regions;

/* ---- contexts, streams, events, modules ---- */
struct dlcu_ctx_st {
  int device;
  int refs; /* primary context retains; active while > 0 */
  uint64_t peers; /* bit j: peer access to device j enabled */
  dlcu_result sticky; /* a sticky error: every later call in the context returns it */
  dlcu_stream null_stream; /* the legacy default stream, made on first use */
};

typedef enum dbl_op_kind { DBL_OP_COPY, DBL_OP_SET, DBL_OP_KERNEL, DBL_OP_RECORD, DBL_OP_WAIT } dbl_op_kind;

/* One end of a copy: device ends are resolved through the regions when the
 * copy runs; `accessor` is the device whose access rights apply (-1: the
 * memory's own device). */
typedef struct dbl_end {
  bool device;
  uint64_t base; /* address of (x, y, z) = (0, 0, 0) */
  uint64_t x, y, z, pitch, height;
  int accessor;
} dbl_end;

typedef struct dbl_copy {
  dbl_end src, dst;
  uint64_t width, height, depth;
} dbl_copy;

struct dbl_kernel;
typedef struct dbl_op {
  struct dbl_op *next;
  dbl_op_kind kind;
  dlcu_result fail; /* injected, surfaces at the stream */
  bool sticky;      /* the failure then stays with the context */
  union {
    dbl_copy copy;
    struct { uint64_t dst, n; uint32_t value; unsigned size; } set;
    struct { const struct dbl_kernel *k; uint64_t args[DBL_MAX_ARGS]; } kernel;
    struct { dlcu_event event; uint64_t seq; } ev;
  } u;
} dbl_op;

struct dlcu_stream_st {
  struct dlcu_stream_st *next; /* in dbl.streams */
  dlcu_context ctx;
  dbl_op *head, *tail;
  bool stop, discard;
  dlcu_result error; /* first failure since the last cuStreamSynchronize */
  pthread_t thread;
};

struct dlcu_event_st {
  struct dlcu_event_st *next; /* in dbl.events while not destroyed */
  dlcu_context ctx;
  uint64_t recorded, done; /* record sequence numbers: complete when done >= recorded */
  dlcu_result error;       /* of the stream when the last record ran */
  int refs;                /* the user's and one per queued op */
  bool destroyed;
};

struct dlcu_function_st {
  struct dlcu_function_st *next;
  dlcu_module module;
  char *name;
  const struct dbl_kernel *kernel; /* NULL: no native implementation */
};

struct dlcu_module_st {
  struct dlcu_module_st *next; /* in dbl.modules */
  dlcu_context ctx;
  struct dlcu_function_st *functions;
};

typedef struct dbl_state {
  pthread_mutex_t lock;
  pthread_cond_t changed; /* any queue, event or stream change */
  dbl_config cfg;
  bool config_read, initialized;
  dlcu_result init_error;
  unsigned long calls[DBL_ID_COUNT];
  struct dlcu_ctx_st ctx[DBL_MAX_DEVICES];
  uint64_t used[DBL_MAX_DEVICES]; /* bytes charged per device */
  unsigned char *va; /* the device address space: PROT_NONE */
  uint64_t va_size;
  dbl_regions space; /* ALLOC and RESERVE regions, in va */
  dbl_regions maps;  /* MAP regions, inside RESERVE ones */
  dbl_regions host;  /* HOST regions */
  dbl_handle *handles;
  dlcu_mem_handle next_handle;
  dlcu_stream streams;
  dlcu_event events;
  dlcu_module modules;
  bool hold; /* cuda_double_hold: workers start nothing new */
  size_t ncreates; /* cuMemCreate calls that made a handle (cuda_double_creates) */
  struct { uint64_t size; int device; } creates[DBL_MAX_CREATES]; /* the first ones */
} dbl_state;

extern dbl_state dbl;

/* ---- config.c ---- */
void dbl_config_read(dbl_config *cfg);
dbl_id dbl_id_of(const char *name); /* base or versioned name; DBL_ID_COUNT if none */

/* ---- entry.c ---- */
/* The guard at the top of every entry: configuration, stub mode,
 * initialisation, call counting and injected failures. Takes dbl.lock and
 * returns with it held on success; on failure returns the code unlocked.
 * `async`, when not NULL, receives an injected failure meant for the stream. */
dlcu_result dbl_enter(dbl_id id, dlcu_result *async);
dlcu_result dbl_leave(dlcu_result rc); /* unlocks; returns rc */
#define DBL_ENTER(field)                                  \
  do {                                                    \
    dlcu_result enter_rc_ = dbl_enter(DBL_ID_##field, NULL); \
    if (enter_rc_) return enter_rc_;                      \
  } while (0)

/* ---- devices.c ---- */
dlcu_context dbl_current(void); /* the thread's active current context or NULL */
bool dbl_device_valid(dlcu_device dev);
void dbl_context_teardown(dlcu_context ctx); /* frees what the context owns */

/* ---- regions.c ---- */
dbl_region *dbl_regions_find(const dbl_regions *r, uint64_t addr);
dlcu_result dbl_regions_insert(dbl_regions *r, dbl_region *reg);
void dbl_regions_remove(dbl_regions *r, dbl_region *reg);
/* The first free, aligned gap of `size` bytes in the device address space. */
bool dbl_va_find(uint64_t size, uint64_t align, uint64_t *out);

/* ---- memory.c ---- */
bool dbl_in_va(uint64_t addr);
/* The host address of device bytes [addr, addr + n) as `accessor` reaches
 * them (writing or reading): *len receives how many bytes from addr are in
 * one piece (<= n). DLCU_ERROR_ILLEGAL_ADDRESS when unmapped, freed or
 * without access. */
dlcu_result dbl_resolve(uint64_t addr, uint64_t n, int accessor, bool write, unsigned char **host,
                        uint64_t *len);
/* Whether [addr, addr + n) lies in one known region of any kind (a device
 * allocation, a reserved range, a host allocation): the check at enqueue.
 * *device receives its device (-1 for reserved ranges and host memory). */
bool dbl_known_range(uint64_t addr, uint64_t n, int *device, bool *host);
void dbl_memory_teardown(dlcu_context ctx); /* ctx NULL: everything */
unsigned char *dbl_bytes_new(uint64_t size);  /* zeroed private bytes, or NULL */

/* ---- vmm.c ---- */
void dbl_vmm_teardown(void); /* every mapping, handle and reserved range */

/* ---- stream.c ---- */
/* The stream an entry names: a live stream, or the context's default for
 * NULL and the legacy and per-thread handles (1, 2). NULL if invalid. */
dlcu_stream dbl_stream_of(dlcu_stream s, dlcu_context ctx);
/* The stream argument of an entry (dbl_stream_of), or the error to return:
 * INVALID_CONTEXT without a current context where one is needed (always
 * for the default stream), INVALID_HANDLE for an unknown stream. */
dlcu_result dbl_stream_arg(dlcu_stream stream, bool need_context, dlcu_stream *out);
dbl_op *dbl_op_new(dbl_op_kind kind, dlcu_result fail);
void dbl_enqueue(dlcu_stream s, dbl_op *op);
void dbl_stream_destroy_locked(dlcu_stream s, bool discard);
void dbl_event_unref(dlcu_event e);
void dbl_streams_teardown(dlcu_context ctx); /* ctx NULL: all */

/* ---- copy.c ---- */
dlcu_result dbl_copy_run(const dbl_copy *c);
/* Byte transfers between two ends (device or host addresses). */
dlcu_result dbl_transfer(uint64_t dst, bool dst_dev, int dst_acc, uint64_t src, bool src_dev,
                         int src_acc, uint64_t n);

/* ---- kernels.c ---- */
typedef struct dbl_kernel {
  const char *name;
  int nargs;
  const unsigned char *sizes; /* bytes of each argument */
  dlcu_result (*run)(const uint64_t *args, int accessor);
} dbl_kernel;
const dbl_kernel *dbl_kernel_find(const char *name);
dlcu_result dbl_set_run(uint64_t dst, uint64_t n, uint32_t value, unsigned size, int accessor);
void dbl_modules_teardown(dlcu_context ctx); /* ctx NULL: all */

#endif
