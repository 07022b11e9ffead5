/* CUDA bandwidth: dlrun's copies and fills on CUDA devices against the
 * driver's own cuMemcpy / cuMemcpy2DAsync / cuMemcpyPeer / cuMemsetD*Async
 * of the same bytes, timed in the same run (scripts/gpu-check.sh runs it;
 * docs/cuda.md, "Verifying on a GPU").
 *
 *   gpu_bandwidth [--bytes SIZE] [--runs N]
 *
 * SIZE: the bytes of every case (default 256MiB; a multiple of 8 KiB), N:
 * timed runs of each side, alternating, the best kept (default 5), after one
 * untimed warm-up each (dlrun's pools committed, pages touched). Prints
 *   <name>: dlrun <GB/s> GB/s, driver <GB/s> GB/s, ratio <dlrun/driver>
 * per case, then "gpu_bandwidth: values ok" when every dlrun result (and the
 * driver's device-to-host copy) read back equal to what was written.
 * The driver is the one the CUDA platform loads (DLRUN_CUDA_LIBRARY, else
 * libcuda.so.1), through the platform's own loader (loader.c, linked in);
 * DLRUN_CUDA_MODULE must name the platform module (the program links
 * libdlrun.a statically, so the module is not beside it).
 * Exit status: 0 when every value checked, 1 on a failed call or a wrong
 * value, 2 when the CUDA platform is not available (the reason is printed). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dlrun/dlrun.h"
#include "platforms/cuda/cu.h"

#define COLS 1024 /* float32 columns: 4 KiB rows */

typedef struct bench {
  size_t bytes;
  int64_t dims[2];
  int runs, ngpu;
  dlcu_context ctx[2];
  dlcu_ptr dst, src, peer; /* driver buffers: dst and src on GPU 0, peer on GPU 1 */
  void *pinned;            /* cuMemHostAlloc, holding the pattern */
  unsigned char *host;     /* pageable, holding the pattern */
  unsigned char *halves;   /* the pattern's two column halves, each contiguous */
  unsigned char *back;     /* pageable, read into */
  dlrun_runtime *rt;
  dlrun_sharding *gpu0, *gpu1, *gpu0_pinned, *cpu_cols;
  dlrun_array *on_gpu0, *on_pinned, *on_cpus; /* the pattern, as dlrun holds it */
  dlrun_array *out;                           /* the last dlrun result */
  float fill;                                 /* what a fill case writes */
  int failures;
} bench;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void *xmalloc(size_t n) {
  void *p = malloc(n ? n : 1);
  if (!p) {
    fprintf(stderr, "gpu_bandwidth: out of host memory (%zu bytes)\n", n);
    exit(1);
  }
  return p;
}

#define DL(call)                                                                           \
  do {                                                                                     \
    dlrun_status st_ = (call);                                                             \
    if (st_ != DLRUN_OK) {                                                                 \
      fprintf(stderr, "gpu_bandwidth: %s failed: %s: %s\n", #call, dlrun_status_name(st_),  \
              dlrun_last_error());                                                         \
      exit(1);                                                                             \
    }                                                                                      \
  } while (0)

#define CU(call)                                                                           \
  do {                                                                                     \
    dlcu_result r_ = cu_api.call;                                                          \
    if (r_ != DLCU_SUCCESS) {                                                              \
      fprintf(stderr, "gpu_bandwidth: cu%s failed: %s (%d)\n", #call, cu_error_name(r_),   \
              r_);                                                                         \
      exit(1);                                                                             \
    }                                                                                      \
  } while (0)

/* ---- the dlrun side: one run each, its result kept in b->out ---- */

static void keep(bench *b, dlrun_array *a) {
  DL(dlrun_array_block_until_ready(a));
  b->out = a;
}

static dlrun_array *put(dlrun_array *src, dlrun_sharding *to, dlrun_alias_mode alias) {
  dlrun_put_options o = {.may_alias = alias};
  dlrun_array *a;
  DL(dlrun_device_put(src, to, &o, &a));
  return a;
}

static void dl_h2d_pageable(bench *b) {
  dlrun_array *a;
  DL(dlrun_array_from_host(b->gpu0, DLRUN_FLOAT32, 2, b->dims, b->host, b->bytes, &a));
  keep(b, a);
}
static void dl_h2d_pinned(bench *b) { keep(b, put(b->on_pinned, b->gpu0, DLRUN_ALIAS_DEFAULT)); }
static void dl_d2h(bench *b) { DL(dlrun_array_read(b->on_gpu0, 0, b->bytes, b->back)); }
static void dl_d2d(bench *b) { keep(b, put(b->on_gpu0, b->gpu0, DLRUN_ALIAS_NEVER)); }
static void dl_peer(bench *b) { keep(b, put(b->on_gpu0, b->gpu1, DLRUN_ALIAS_DEFAULT)); }
static void dl_box(bench *b) { keep(b, put(b->on_cpus, b->gpu0, DLRUN_ALIAS_DEFAULT)); }
static void dl_full(bench *b) {
  dlrun_scalar v = {.kind = DLRUN_SCALAR_FLOAT, .re = b->fill};
  dlrun_array *a;
  DL(dlrun_array_full(b->gpu0, DLRUN_FLOAT32, 2, b->dims, &v, &a));
  keep(b, a);
}

/* ---- the driver side, on the legacy default stream, waited for ---- */

static void sync0(void) { CU(StreamSynchronize(NULL)); }
static dlcu_ptr addr(const void *p) { return (dlcu_ptr)(uintptr_t)p; }

static void cu_h2d_pageable(bench *b) { CU(Memcpy(b->dst, addr(b->host), b->bytes)); sync0(); }
static void cu_h2d_pinned(bench *b) { CU(Memcpy(b->dst, addr(b->pinned), b->bytes)); sync0(); }
static void cu_d2h(bench *b) { CU(Memcpy(addr(b->back), b->src, b->bytes)); sync0(); }
static void cu_d2d(bench *b) { CU(Memcpy(b->dst, b->src, b->bytes)); sync0(); }
static void cu_peer(bench *b) {
  CU(MemcpyPeer(b->peer, b->ctx[1], b->src, b->ctx[0], b->bytes));
  sync0();
}
/* Each column half (contiguous on the host) into its rows of the
 * destination, as dlrun gathers P(nil, 'x') shards: one 2-D box each. */
static void cu_box(bench *b) {
  size_t width = COLS / 2 * sizeof(float), rows = (size_t)b->dims[0];
  for (size_t h = 0; h < 2; h++) {
    dlcu_memcpy2d c = {.srcMemoryType = DLCU_MEMORYTYPE_HOST,
                       .srcHost = b->halves + h * (b->bytes / 2),
                       .srcPitch = width,
                       .dstXInBytes = h * width,
                       .dstMemoryType = DLCU_MEMORYTYPE_DEVICE,
                       .dstDevice = b->dst,
                       .dstPitch = COLS * sizeof(float),
                       .WidthInBytes = width,
                       .Height = rows};
    CU(Memcpy2DAsync(&c, NULL));
  }
  sync0();
}
static void cu_fill32(bench *b) {
  unsigned int bits;
  memcpy(&bits, &b->fill, sizeof bits);
  CU(MemsetD32Async(b->dst, bits, b->bytes / 4, NULL));
  sync0();
}
static void cu_fill8(bench *b) { CU(MemsetD8Async(b->dst, 0, b->bytes, NULL)); sync0(); }

/* ---- checks ---- */

static void check(bench *b, const char *name, const unsigned char *got, const void *want) {
  bool ok = true;
  if (want) ok = memcmp(got, want, b->bytes) == 0;
  else
    for (size_t i = 0; ok && i < b->bytes; i += sizeof(float)) ok = !memcmp(got + i, &b->fill, 4);
  if (!ok) {
    printf("%s: FAIL: wrong values read back\n", name);
    b->failures++;
  }
}

/* dlrun's last result, read back, against the pattern (want) or the fill. */
static void check_out(bench *b, const char *name, const void *want) {
  memset(b->back, 0xEE, b->bytes);
  DL(dlrun_array_read(b->out, 0, b->bytes, b->back));
  check(b, name, b->back, want);
}

typedef void (*side_fn)(bench *b);

/* Both sides on the same bytes, alternating run by run, the best of each. */
static void measure(bench *b, const char *name, side_fn dl, side_fn cu, const void *want) {
  double best_dl = 1e30, best_cu = 1e30;
  for (int r = -1; r < b->runs; r++) { /* run -1: the untimed warm-up */
    if (b->out) dlrun_array_release(b->out);
    b->out = NULL;
    double t0 = now_s();
    dl(b);
    double t1 = now_s();
    cu(b);
    double t2 = now_s();
    if (r < 0) continue;
    if (t1 - t0 < best_dl) best_dl = t1 - t0;
    if (t2 - t1 < best_cu) best_cu = t2 - t1;
  }
  double gb = (double)b->bytes / 1e9;
  printf("%s: dlrun %.2f GB/s, driver %.2f GB/s, ratio %.2f\n", name, gb / best_dl,
         gb / best_cu, best_cu / best_dl);
  if (b->out) check_out(b, name, want);
  else if (dl == dl_d2h) check(b, name, b->back, b->host); /* the driver's read, last */
  if (b->out) dlrun_array_release(b->out);
  b->out = NULL;
}

/* ---- setup ---- */

static void parse_args(bench *b, int argc, char **argv) {
  b->bytes = 256u << 20;
  b->runs = 5;
  for (int i = 1; i < argc; i++) {
    uint64_t v;
    if (!strcmp(argv[i], "--bytes") && i + 1 < argc && !dlrun_parse_size(argv[i + 1], &v) &&
        v >= 8192 && v % 8192 == 0) {
      b->bytes = (size_t)v;
      i++;
    } else if (!strcmp(argv[i], "--runs") && i + 1 < argc && atoi(argv[i + 1]) > 0) {
      b->runs = atoi(argv[++i]);
    } else {
      fprintf(stderr, "usage: gpu_bandwidth [--bytes SIZE (a multiple of 8KiB)] [--runs N]\n");
      exit(2);
    }
  }
  b->dims[0] = (int64_t)(b->bytes / (COLS * sizeof(float)));
  b->dims[1] = COLS;
}

/* The pattern in pageable, pinned and dlrun memory; the driver's buffers. */
static void setup_memory(bench *b) {
  size_t rows = (size_t)b->dims[0], half = COLS / 2 * sizeof(float);
  b->host = xmalloc(b->bytes);
  b->halves = xmalloc(b->bytes);
  b->back = xmalloc(b->bytes);
  for (size_t i = 0; i < b->bytes / 4; i++) ((float *)b->host)[i] = (float)(i % 1000003);
  for (size_t r = 0; r < rows; r++)
    for (size_t h = 0; h < 2; h++)
      memcpy(b->halves + h * (b->bytes / 2) + r * half, b->host + r * COLS * 4 + h * half, half);
  memset(b->back, 0, b->bytes);
  if (b->ngpu > 1) {
    CU(CtxSetCurrent(b->ctx[1]));
    CU(MemAlloc(&b->peer, b->bytes));
  }
  CU(CtxSetCurrent(b->ctx[0])); /* this thread's context from here on */
  CU(MemAlloc(&b->dst, b->bytes));
  CU(MemAlloc(&b->src, b->bytes));
  CU(MemHostAlloc(&b->pinned, b->bytes, DLCU_MEMHOSTALLOC_PORTABLE));
  memcpy(b->pinned, b->host, b->bytes);
  CU(Memcpy(b->src, addr(b->host), b->bytes));
  sync0();
}

static dlrun_sharding *single(dlrun_device *d, dlrun_memory_kind kind) {
  dlrun_sharding *s;
  DL(dlrun_single_device_sharding_create(d, kind, &s));
  return s;
}

static void setup_dlrun(bench *b) {
  char spec[64];
  snprintf(spec, sizeof spec, "cuda:%d,cpu:2", b->ngpu);
  dlrun_config cfg = {.devices = spec, .device_memory = 3 * (uint64_t)b->bytes + (64u << 20),
                      .pinned_host_memory = (uint64_t)b->bytes + (16u << 20)};
  DL(dlrun_runtime_create(&cfg, &b->rt));
  b->gpu0 = single(dlrun_local_device_get(b->rt, "cuda", 0), DLRUN_MEM_DEVICE);
  b->gpu0_pinned = single(dlrun_local_device_get(b->rt, "cuda", 0), DLRUN_MEM_PINNED_HOST);
  if (b->ngpu > 1) b->gpu1 = single(dlrun_local_device_get(b->rt, "cuda", 1), DLRUN_MEM_DEVICE);
  dlrun_device *cpus[2] = {dlrun_local_device_get(b->rt, "cpu", 0),
                           dlrun_local_device_get(b->rt, "cpu", 1)};
  const char *axis = "x";
  int64_t two = 2;
  dlrun_mesh *m;
  DL(dlrun_mesh_create(cpus, 2, 1, &axis, &two, &m));
  dlrun_partition_spec cols = {.nentries = 2, .entries = {{0}, {1, {"x"}}}};
  DL(dlrun_named_sharding_create(m, &cols, DLRUN_MEM_DEVICE, &b->cpu_cols));
  dlrun_mesh_release(m);
  dlrun_sharding *from[3] = {b->gpu0, b->gpu0_pinned, b->cpu_cols};
  dlrun_array **to[3] = {&b->on_gpu0, &b->on_pinned, &b->on_cpus};
  for (int i = 0; i < 3; i++) {
    DL(dlrun_array_from_host(from[i], DLRUN_FLOAT32, 2, b->dims, b->host, b->bytes, to[i]));
    DL(dlrun_array_block_until_ready(*to[i]));
  }
}

static void teardown(bench *b) {
  dlrun_array *arrays[] = {b->on_gpu0, b->on_pinned, b->on_cpus};
  for (int i = 0; i < 3; i++) dlrun_array_release(arrays[i]);
  dlrun_sharding *shardings[] = {b->gpu0, b->gpu1, b->gpu0_pinned, b->cpu_cols};
  for (int i = 0; i < 4; i++)
    if (shardings[i]) dlrun_sharding_release(shardings[i]);
  dlrun_runtime_release(b->rt);
  CU(MemFree(b->dst));
  CU(MemFree(b->src));
  if (b->peer) CU(MemFree(b->peer));
  CU(MemFreeHost(b->pinned));
  for (int d = 0; d < b->ngpu; d++) CU(DevicePrimaryCtxRelease(d));
  free(b->host);
  free(b->halves);
  free(b->back);
}

/* Peer access from GPU 1 to GPU 0 (the direction dlrun's put reads), or why not. */
static bool peer_ok(const bench *b, char *why, size_t n) {
  int can = 0;
  if (b->ngpu < 2) {
    snprintf(why, n, "one CUDA device");
    return false;
  }
  CU(DeviceCanAccessPeer(&can, 1, 0));
  if (!can) snprintf(why, n, "cuDeviceCanAccessPeer says device 1 cannot reach device 0");
  return can != 0;
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  bench b = {0};
  parse_args(&b, argc, argv);
  char why[300];
  int count;
  if (!cu_load(&count, why, sizeof why)) {
    printf("gpu_bandwidth: CUDA not available: %s\n", why);
    return 2;
  }
  b.ngpu = count > 1 ? 2 : 1;
  char name[128] = "";
  CU(DeviceGetName(name, sizeof name, 0));
  printf("gpu_bandwidth: CUDA driver %d.%d, %d device(s), device 0: %s; %zu bytes per case, "
         "best of %d\n",
         cu_api.driver_version / 1000, cu_api.driver_version % 1000 / 10, count, name, b.bytes,
         b.runs);
  if (strstr(name, "double"))
    printf("gpu_bandwidth: note: this is the driver double of the tests (host memory and "
           "threads): its ratios mean nothing about a GPU\n");
  for (int d = 0; d < b.ngpu; d++) CU(DevicePrimaryCtxRetain(&b.ctx[d], d));
  setup_memory(&b);
  setup_dlrun(&b);

  measure(&b, "host to device (pageable)", dl_h2d_pageable, cu_h2d_pageable, b.host);
  measure(&b, "host to device (pinned)", dl_h2d_pinned, cu_h2d_pinned, b.host);
  measure(&b, "device to host (pageable)", dl_d2h, cu_d2h, b.host);
  measure(&b, "device to device", dl_d2d, cu_d2d, b.host);
  if (peer_ok(&b, why, sizeof why))
    measure(&b, "peer (device 0 to 1)", dl_peer, cu_peer, b.host);
  else printf("peer (device 0 to 1): skipped: %s\n", why);
  measure(&b, "2-D box (two column halves, host to device)", dl_box, cu_box, b.host);
  b.fill = 1.5f;
  measure(&b, "fill float32 1.5 (cuMemsetD32)", dl_full, cu_fill32, NULL);
  b.fill = 0.0f;
  measure(&b, "fill zeros (cuMemsetD8)", dl_full, cu_fill8, NULL);

  teardown(&b);
  if (b.failures) {
    printf("gpu_bandwidth: %d case(s) read back wrong values\n", b.failures);
    return 1;
  }
  printf("gpu_bandwidth: values ok\n");
  return 0;
}
