/* Helpers of the platform conformance suite (test_conformance.c): memories
 * of any (device, kind) or plain host memory, N-d blocks and their
 * reference copies, bounded waits, and the platforms the suite runs
 * (testnative, loaded from beside the test; opencl when its module loads
 * and probes available). */
#ifndef DLRUN_CONFORMANCE_H
#define DLRUN_CONFORMANCE_H

#include <dlfcn.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "array/array_impl.h"
#include "check.h"
#include "device/buffer.h"
#include "device/copy_route.h"
#include "dlrun/dlrun.h"
#include "dlrun/platform.h"

/* ---- case names: one line per case and platform ---- */

/* The watchdog (SIGALRM) gives each case this long: a wait that never ends
 * fails the run, however long the whole run takes (minutes under valgrind
 * on a loaded machine). */
#define CTS_CASE_SECONDS 120

static char cts_name_buf[256];
static const char *cts_name(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static const char *cts_name(const char *fmt, ...) {
  alarm(CTS_CASE_SECONDS); /* a case begins: its own time */
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(cts_name_buf, sizeof cts_name_buf, fmt, ap);
  va_end(ap);
  return cts_name_buf;
}

/* ---- memories: a buffer of dev's `kind` memory, or host memory (dev NULL) ---- */

typedef struct cts_mem {
  dlrun_device *dev;
  dlrun_memory_kind kind;
  dlrun_buffer *buf; /* dev's */
  unsigned char *host;
  unsigned char *data; /* device address (or host pointer) */
  uint64_t n;
} cts_mem;

static const int64_t cts_zero[1] = {0}, cts_one[1] = {1};

static dlrun_status cts_mem_alloc(cts_mem *m, dlrun_device *dev, dlrun_memory_kind kind,
                                  uint64_t n) {
  *m = (cts_mem){.dev = dev, .kind = kind, .n = n};
  if (!dev) {
    m->data = m->host = malloc(n);
    return DLRUN_OK;
  }
  dlrun_status st = dlrun_buffer_create(dev, kind, n, &m->buf);
  if (!st) m->data = m->buf->data;
  return st;
}

static void cts_mem_free(cts_mem *m) {
  if (m->buf) dlrun_buffer_release(m->buf);
  free(m->host);
  *m = (cts_mem){0};
}

/* The end of m for a block whose element [0...] is `first` elements of
 * esize bytes into it. */
static dlrun_box_end cts_end(const cts_mem *m, size_t esize, int64_t first,
                             const int64_t *origin, const int64_t *strides) {
  return (dlrun_box_end){.dev = m->dev, .kind = m->kind,
                         .data = m->data + first * (int64_t)esize, .origin = origin,
                         .strides = strides};
}

/* Write or read all of m's bytes (through the device layer's copies). */
static dlrun_status cts_mem_write(const cts_mem *m, const void *src) {
  int64_t hi[1] = {(int64_t)m->n};
  dlrun_box_end d = cts_end(m, 1, 0, cts_zero, cts_one);
  dlrun_box_end s = dlrun_host_end(src, cts_zero, cts_one);
  return dlrun_copy_sync(1, 1, cts_zero, hi, &d, &s);
}

static dlrun_status cts_mem_read(const cts_mem *m, void *dst) {
  int64_t hi[1] = {(int64_t)m->n};
  dlrun_box_end s = cts_end(m, 1, 0, cts_zero, cts_one);
  dlrun_box_end d = dlrun_host_end(dst, cts_zero, cts_one);
  return dlrun_copy_sync(1, 1, cts_zero, hi, &d, &s);
}

static const char *cts_mem_name(const cts_mem *m) {
  static char buf[4][80];
  static int next;
  char *b = buf[next++ % 4];
  if (!m->dev) snprintf(b, 80, "host");
  else snprintf(b, 80, "%s %s", dlrun_device_name(m->dev), dlrun_memory_kind_name(m->kind));
  return b;
}

/* ---- N-d blocks ---- */

/* A block of a global array: element [0...] at global coordinates origin,
 * dims elements along each axis, element strides (any sign). */
typedef struct cts_block {
  int ndim;
  int64_t origin[4], dims[4], strides[4];
  int64_t first, span; /* element [0...]'s place in the memory; elements spanned */
} cts_block;

static void cts_block_layout(cts_block *b) {
  int64_t lo = 0, hi = 0;
  for (int d = 0; d < b->ndim; d++) {
    int64_t reach = (b->dims[d] - 1) * b->strides[d];
    if (reach < 0) lo += reach;
    else hi += reach;
  }
  b->first = -lo;
  b->span = hi - lo + 1;
}

static int64_t cts_block_at(const cts_block *b, const int64_t *coord) {
  int64_t off = b->first;
  for (int d = 0; d < b->ndim; d++) off += (coord[d] - b->origin[d]) * b->strides[d];
  return off;
}

/* Strides: row-major, each row padded by `pad` elements, optionally
 * negated along some axes (bit d of `negate`); or column-major. */
static void cts_row_major(cts_block *b, int64_t pad, unsigned negate) {
  int64_t s = 1;
  for (int d = b->ndim - 1; d >= 0; d--) {
    b->strides[d] = (negate >> d) & 1 ? -s : s;
    s *= b->dims[d] + pad;
  }
  cts_block_layout(b);
}

static void cts_column_major(cts_block *b) {
  int64_t s = 1;
  for (int d = 0; d < b->ndim; d++) {
    b->strides[d] = s;
    s *= b->dims[d];
  }
  cts_block_layout(b);
}

/* Next coordinates of the box [lo, hi) in row-major order; false after the last. */
static bool cts_next(int ndim, const int64_t *lo, const int64_t *hi, int64_t *c) {
  for (int d = ndim - 1; d >= 0; d--) {
    if (++c[d] < hi[d]) return true;
    c[d] = lo[d];
  }
  return false;
}

/* The reference copy of the box [lo, hi) of esize-byte elements. */
static void cts_reference_copy(size_t esize, int ndim, const int64_t *lo, const int64_t *hi,
                               unsigned char *dst, const cts_block *db, const unsigned char *src,
                               const cts_block *sb) {
  int64_t c[4];
  memcpy(c, lo, (size_t)ndim * sizeof *c);
  do {
    memcpy(dst + cts_block_at(db, c) * (int64_t)esize, src + cts_block_at(sb, c) * (int64_t)esize,
           esize);
  } while (cts_next(ndim, lo, hi, c));
}

/* Index of the first byte where a and b differ, or -1. */
static long cts_diff(const unsigned char *a, const unsigned char *b, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (a[i] != b[i]) return (long)i;
  return -1;
}

/* ---- waits with a bound ---- */

static double cts_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Whether ev completes within `ms` milliseconds. */
static bool cts_wait_done(dlrun_event ev, int ms) {
  double until = cts_now() + ms / 1000.0;
  while (!dlrun_event_done(ev)) {
    if (cts_now() > until) return false;
    usleep(500);
  }
  return true;
}

/* The ready event of a single-device array. */
static dlrun_event cts_ready(dlrun_array *a) { return a->bufs[0]->ready; }

/* ---- arrays on one device ---- */

static dlrun_status cts_full(dlrun_device *dev, dlrun_memory_kind kind, int64_t n, int64_t v,
                             dlrun_array **out) {
  dlrun_sharding *s = NULL;
  dlrun_scalar value = {.kind = DLRUN_SCALAR_INT, .i = v};
  dlrun_status st = dlrun_single_device_sharding_create(dev, kind, &s);
  if (!st) st = dlrun_array_full(s, DLRUN_INT32, 1, &n, &value, out);
  dlrun_sharding_release(s);
  return st;
}

static dlrun_status cts_put(dlrun_array *a, dlrun_device *dev, dlrun_memory_kind kind,
                            dlrun_array **out) {
  dlrun_sharding *s = NULL;
  dlrun_status st = dlrun_single_device_sharding_create(dev, kind, &s);
  if (!st) st = dlrun_device_put(a, s, NULL, out);
  dlrun_sharding_release(s);
  return st;
}

/* Whether the int32 array a holds n copies of v (after waiting for it). */
static bool cts_holds(dlrun_array *a, int64_t n, int32_t v) {
  int32_t *got = calloc((size_t)n, sizeof *got);
  bool ok = dlrun_array_read(a, 0, (uint64_t)n * sizeof *got, got) == DLRUN_OK;
  for (int64_t i = 0; ok && i < n; i++) ok = got[i] == v;
  free(got);
  return ok;
}

/* ---- the platforms run ---- */

/* testnative's hooks (spec/c/modules/native_platform.c). */
static void (*cts_hold)(dlrun_device *dev, int hold);
static unsigned (*cts_ran)(dlrun_device *dev);
static void *cts_native_handle;

static void cts_here(char *dir, size_t n) {
  ssize_t len = readlink("/proc/self/exe", dir, n - 1);
  dir[len > 0 ? len : 0] = 0;
  char *slash = strrchr(dir, '/');
  if (slash) *slash = 0;
}

/* Open testnative (beside this test) and register it. */
static bool cts_load_native(char *why, size_t n) {
  char dir[1024], path[1100];
  cts_here(dir, sizeof dir);
  snprintf(path, sizeof path, "%s/libdlrun_testnative.so", dir);
  void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    snprintf(why, n, "%s", dlerror());
    return false;
  }
  dlrun_platform_module_open_fn open_fn;
  *(void **)&open_fn = dlsym(h, "dlrun_platform_module_open");
  *(void **)&cts_hold = dlsym(h, "dlrun_testnative_hold");
  *(void **)&cts_ran = dlsym(h, "dlrun_testnative_ran");
  const dlrun_platform *pl = NULL;
  if (!open_fn || !cts_hold || !cts_ran ||
      open_fn(DLRUN_PLATFORM_ABI, dlrun_platform_services_get(), &pl, why, n) ||
      dlrun_platform_register(pl)) {
    if (!why[0]) snprintf(why, n, "%s", dlrun_last_error());
    dlclose(h);
    return false;
  }
  cts_native_handle = h;
  return true;
}

static void cts_unload_native(void) {
  if (!cts_native_handle) return;
  const dlrun_platform *pl = dlrun_platform_find("testnative", 10);
  if (pl) dlrun_platform_unregister(pl);
  dlclose(cts_native_handle);
  cts_native_handle = NULL;
}

/* The modules built beside libdlrun and their drivers for the tests, unless
 * the environment names others: pocl's pthread driver with 4 devices for
 * opencl, the driver double (tests/cuda-double/libcuda.so.1, 4 devices)
 * for cuda. Set before the first listing, which loads every module once. */
static void cts_module_paths(void) {
  char dir[1024], path[1100];
  cts_here(dir, sizeof dir);
  snprintf(path, sizeof path, "%s/../libdlrun_opencl.so", dir);
  if (!getenv("DLRUN_OPENCL_MODULE") && access(path, R_OK) == 0)
    setenv("DLRUN_OPENCL_MODULE", path, 1);
  setenv("POCL_DEVICES", "pthread pthread pthread pthread", 0);
  snprintf(path, sizeof path, "%s/../libdlrun_cuda.so", dir);
  if (!getenv("DLRUN_CUDA_MODULE") && access(path, R_OK) == 0)
    setenv("DLRUN_CUDA_MODULE", path, 1);
  snprintf(path, sizeof path, "%s/cuda-double/libcuda.so.1", dir);
  if (!getenv("DLRUN_CUDA_LIBRARY") && access(path, R_OK) == 0)
    setenv("DLRUN_CUDA_LIBRARY", path, 1);
}

/* Whether platform `name`'s module is here and has at least 2 devices. */
/* How many devices (0, 1 or 2) of module platform `name` the suite uses:
 * 0 with the reason in why when it is absent or has no device. */
static size_t cts_module_devices(const char *name, char *why, size_t n) {
  cts_module_paths();
  dlrun_platform_status list[16];
  size_t count = dlrun_platforms_list(list, 16);
  for (size_t i = 0; i < count && i < 16; i++) {
    if (strcmp(list[i].name, name) != 0) continue;
    if (list[i].available && list[i].ndevices >= 1) return list[i].ndevices < 2 ? 1 : 2;
    snprintf(why, n, "%s", list[i].available ? "no device" : list[i].why);
    return 0;
  }
  snprintf(why, n, "no %s platform is known", name);
  return 0;
}

static dlrun_runtime *cts_runtime(const dlrun_config *cfg) {
  dlrun_runtime *rt = NULL;
  if (dlrun_runtime_create(cfg, &rt))
    printf("  runtime \"%s\": %s\n", cfg->devices, dlrun_last_error());
  return rt;
}

/* Release a runtime once every queue is idle: released earlier, a task's
 * completion could drop the last reference on a platform's thread. */
static void cts_runtime_release(dlrun_runtime *rt) {
  if (rt) dlrun_runtime_synchronize(rt);
  dlrun_runtime_release(rt);
}

#endif
