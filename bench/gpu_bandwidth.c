/* CUDA bandwidth: dlrun's copies and fills on CUDA devices against the
 * driver's own cuMemcpy / cuMemcpy2DAsync / cuMemcpyPeer / cuMemset*Async
 * of the same bytes, timed in the same run, at each size asked for; then
 * what small operations cost (gpu_latency.c). scripts/gpu-check.sh runs it;
 * docs/cuda.md, "Verifying on a GPU".
 *
 *   gpu_bandwidth [--bytes SIZE[,SIZE...]] [--runs N] [--latency-runs N]
 *
 * SIZE: the bytes of every case (default 16MiB,256MiB,1GiB; each a multiple
 * of 8 KiB), N: timed runs of each side, alternating, the best kept
 * (default 5), after one untimed warm-up each (dlrun's pools committed,
 * pages touched). Prints, per size and case,
 *   <name>, <size>: dlrun <GB/s> GB/s, driver <GB/s> GB/s, ratio <dlrun/driver>
 * The fill kernel lines (8- and 16-byte patterns, arange) set dlrun's PTX
 * kernels against a cuMemsetD32Async of the same bytes, their values
 * against dlrun's host computation of the same call. Then the latency
 * lines (--latency-runs, default 2000 each; 0: none), and
 * "gpu_bandwidth: values ok" when every dlrun result (and the driver's
 * device-to-host copy) read back equal to what was written.
 * The driver is the one the CUDA platform loads (DLRUN_CUDA_LIBRARY, else
 * libcuda.so.1), through the platform's own loader (loader.c, linked in);
 * DLRUN_CUDA_MODULE must name the platform module (the program links
 * libdlrun.a statically, so the module is not beside it).
 * Exit status: 0 when every value checked, 1 on a failed call or a wrong
 * value, 2 when the CUDA platform is not available (the reason is printed). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <string.h>

#include "gpu_bench.h"

#define COLS 1024 /* float32 columns: 4 KiB rows */

#define MAX_SIZES 8

/* A fill made by dlrun's kernels: a repeated value or a sequence. */
typedef struct made {
  const char *name;
  dlrun_dtype dtype;
  bool sequence; /* arange(0, n), else full(value) */
  double value;
} made;

typedef struct bench {
  size_t bytes;
  size_t sizes[MAX_SIZES];
  int nsizes;
  char label[32]; /* the size, as lines name it */
  int64_t dims[2];
  int runs, latency_runs, ngpu;
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
  dlrun_sharding *cpu0;                       /* the host computation of a made fill */
  float fill;                                 /* what a fill case writes */
  const made *mk;                             /* what a kernel fill case makes */
  unsigned char *want;                        /* what it should hold */
  int failures;
} bench;

static void *xmalloc(size_t n) {
  void *p = malloc(n ? n : 1);
  if (!p) {
    fprintf(stderr, "gpu_bandwidth: out of host memory (%zu bytes)\n", n);
    exit(1);
  }
  return p;
}

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

/* b->mk on `to`, a 1-d array of b->bytes. */
static dlrun_array *make(bench *b, dlrun_sharding *to) {
  const made *m = b->mk;
  int64_t n = (int64_t)(b->bytes / dlrun_dtype_get(m->dtype)->size);
  dlrun_scalar v = {.kind = DLRUN_SCALAR_FLOAT, .re = m->value}, zero = {.kind = DLRUN_SCALAR_INT},
               one = {.kind = DLRUN_SCALAR_INT, .i = 1};
  dlrun_array *a;
  if (m->sequence) DL(dlrun_array_arange(to, m->dtype, &zero, &one, n, &a));
  else DL(dlrun_array_full(to, m->dtype, 1, &n, &v, &a));
  return a;
}
static void dl_made(bench *b) { keep(b, make(b, b->gpu0)); }

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
    double t0 = gpu_bench_now();
    dl(b);
    double t1 = gpu_bench_now();
    cu(b);
    double t2 = gpu_bench_now();
    if (r < 0) continue;
    if (t1 - t0 < best_dl) best_dl = t1 - t0;
    if (t2 - t1 < best_cu) best_cu = t2 - t1;
  }
  double gb = (double)b->bytes / 1e9;
  printf("%s, %s: dlrun %.2f GB/s, driver %.2f GB/s, ratio %.2f\n", name, b->label,
         gb / best_dl, gb / best_cu, best_cu / best_dl);
  if (b->out) check_out(b, name, want);
  else if (dl == dl_d2h) check(b, name, b->back, b->host); /* the driver's read, last */
  if (b->out) dlrun_array_release(b->out);
  b->out = NULL;
}

/* ---- setup ---- */

/* SIZE[,SIZE...] into b->sizes; false when one is not a size, a multiple
 * of 8 KiB, or there are more than MAX_SIZES. */
static bool parse_sizes(bench *b, const char *list) {
  char buf[256];
  if (strlen(list) >= sizeof buf) return false;
  strcpy(buf, list);
  b->nsizes = 0;
  for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
    uint64_t v;
    if (b->nsizes == MAX_SIZES || dlrun_parse_size(t, &v) || v < 8192 || v % 8192) return false;
    b->sizes[b->nsizes++] = (size_t)v;
  }
  return b->nsizes > 0;
}

static void parse_args(bench *b, int argc, char **argv) {
  b->runs = 5;
  b->latency_runs = 2000;
  bool ok = parse_sizes(b, "16MiB,256MiB,1GiB");
  for (int i = 1; ok && i < argc; i += 2) { /* each option takes a value */
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(argv[i], "--bytes") && v) ok = parse_sizes(b, v);
    else if (!strcmp(argv[i], "--runs") && v && atoi(v) > 0) b->runs = atoi(v);
    else if (!strcmp(argv[i], "--latency-runs") && v && (atoi(v) > 0 || !strcmp(v, "0")))
      b->latency_runs = atoi(v);
    else ok = false;
  }
  if (!ok) {
    fprintf(stderr, "usage: gpu_bandwidth [--bytes SIZE[,SIZE...] (each a multiple of 8KiB, "
                    "at most %d)] [--runs N] [--latency-runs N]\n",
            MAX_SIZES);
    exit(2);
  }
}

/* "16 MiB": bytes as the lines name a size. */
static void size_label(size_t bytes, char *out, size_t n) {
  if (bytes % (1u << 30) == 0) snprintf(out, n, "%zu GiB", bytes >> 30);
  else if (bytes % (1u << 20) == 0) snprintf(out, n, "%zu MiB", bytes >> 20);
  else snprintf(out, n, "%zu KiB", bytes >> 10);
}

/* One size's cases use b->bytes, as a COLS-wide float32 matrix (setup
 * then gives every per-size field its value). */
static void use_size(bench *b, size_t bytes) {
  b->bytes = bytes;
  b->dims[0] = (int64_t)(bytes / (COLS * sizeof(float)));
  b->dims[1] = COLS;
  size_label(bytes, b->label, sizeof b->label);
}

/* The pattern in pageable, pinned and dlrun memory; the driver's buffers. */
static void setup_memory(bench *b) {
  size_t rows = (size_t)b->dims[0], half = COLS / 2 * sizeof(float);
  b->host = xmalloc(b->bytes);
  b->halves = xmalloc(b->bytes);
  b->back = xmalloc(b->bytes);
  b->want = xmalloc(b->bytes);
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

static void setup_dlrun(bench *b) {
  char spec[64];
  snprintf(spec, sizeof spec, "cuda:%d,cpu:2", b->ngpu);
  dlrun_config cfg = {.devices = spec, .device_memory = 3 * (uint64_t)b->bytes + (64u << 20),
                      .pinned_host_memory = (uint64_t)b->bytes + (16u << 20)};
  DL(dlrun_runtime_create(&cfg, &b->rt));
  b->gpu0 = gpu_bench_single(dlrun_local_device_get(b->rt, "cuda", 0), DLRUN_MEM_DEVICE);
  b->gpu0_pinned = gpu_bench_single(dlrun_local_device_get(b->rt, "cuda", 0), DLRUN_MEM_PINNED_HOST);
  if (b->ngpu > 1) b->gpu1 = gpu_bench_single(dlrun_local_device_get(b->rt, "cuda", 1), DLRUN_MEM_DEVICE);
  dlrun_device *cpus[2] = {dlrun_local_device_get(b->rt, "cpu", 0),
                           dlrun_local_device_get(b->rt, "cpu", 1)};
  b->cpu0 = gpu_bench_single(cpus[0], DLRUN_MEM_DEVICE);
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
  dlrun_sharding *shardings[] = {b->gpu0, b->gpu1, b->gpu0_pinned, b->cpu_cols, b->cpu0};
  for (int i = 0; i < 5; i++)
    if (shardings[i]) dlrun_sharding_release(shardings[i]);
  dlrun_runtime_release(b->rt);
  CU(MemFree(b->dst));
  CU(MemFree(b->src));
  if (b->peer) CU(MemFree(b->peer));
  CU(MemFreeHost(b->pinned));
  free(b->host);
  free(b->halves);
  free(b->back);
  free(b->want);
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

/* dlrun's kernels (8- and 16-byte patterns, sequences) against a memset
 * of the same bytes; their values against dlrun's host computation. */
static void kernel_fills(bench *b) {
  static const made kinds[] = {
      {"fill float64 1.5 (8-byte kernel)", DLRUN_FLOAT64, false, 1.5},
      {"fill complex128 1.5 (16-byte kernel)", DLRUN_COMPLEX128, false, 1.5},
      {"arange float32 (sequence kernel)", DLRUN_FLOAT32, true, 0},
      {"arange float64 (sequence kernel)", DLRUN_FLOAT64, true, 0},
      {"arange bfloat16 (sequence kernel)", DLRUN_BFLOAT16, true, 0},
      {"arange int64 (sequence kernel)", DLRUN_INT64, true, 0},
  };
  b->fill = 1.5f; /* the memset's value: any, it writes the same bytes */
  for (size_t k = 0; k < sizeof kinds / sizeof *kinds; k++) {
    char name[96];
    b->mk = &kinds[k];
    dlrun_array *ref = make(b, b->cpu0);
    DL(dlrun_array_read(ref, 0, b->bytes, b->want));
    dlrun_array_release(ref);
    snprintf(name, sizeof name, "%s vs cuMemsetD32", kinds[k].name);
    measure(b, name, dl_made, cu_fill32, b->want);
  }
}

/* Every case at b->bytes. */
static void cases(bench *b) {
  char why[300];
  measure(b, "host to device (pageable)", dl_h2d_pageable, cu_h2d_pageable, b->host);
  measure(b, "host to device (pinned)", dl_h2d_pinned, cu_h2d_pinned, b->host);
  measure(b, "device to host (pageable)", dl_d2h, cu_d2h, b->host);
  measure(b, "device to device", dl_d2d, cu_d2d, b->host);
  if (peer_ok(b, why, sizeof why))
    measure(b, "peer (device 0 to 1)", dl_peer, cu_peer, b->host);
  else printf("peer (device 0 to 1), %s: skipped: %s\n", b->label, why);
  measure(b, "2-D box (two column halves, host to device)", dl_box, cu_box, b->host);
  b->fill = 1.5f;
  measure(b, "fill float32 1.5 (cuMemsetD32)", dl_full, cu_fill32, NULL);
  b->fill = 0.0f;
  measure(b, "fill zeros (cuMemsetD8)", dl_full, cu_fill8, NULL);
  kernel_fills(b);
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
  char name[128] = "", sizes[160] = "";
  CU(DeviceGetName(name, sizeof name, 0));
  for (int i = 0; i < b.nsizes; i++) {
    char label[32];
    size_label(b.sizes[i], label, sizeof label);
    snprintf(sizes + strlen(sizes), sizeof sizes - strlen(sizes), "%s%s", i ? ", " : "", label);
  }
  printf("gpu_bandwidth: CUDA driver %d.%d, %d device(s), device 0: %s; cases of %s, best of "
         "%d\n",
         cu_api.driver_version / 1000, cu_api.driver_version % 1000 / 10, count, name, sizes,
         b.runs);
  if (strstr(name, "double"))
    printf("gpu_bandwidth: note: this is the driver double of the tests (host memory and "
           "threads): its ratios mean nothing about a GPU\n");
  for (int d = 0; d < b.ngpu; d++) CU(DevicePrimaryCtxRetain(&b.ctx[d], d));
  for (int i = 0; i < b.nsizes; i++) {
    use_size(&b, b.sizes[i]);
    setup_memory(&b);
    setup_dlrun(&b);
    cases(&b);
    teardown(&b);
  }
  if (b.latency_runs > 0) b.failures += gpu_latency(b.latency_runs);
  for (int d = 0; d < b.ngpu; d++) CU(DevicePrimaryCtxRelease(d));
  if (b.failures) {
    printf("gpu_bandwidth: %d case(s) read back wrong values\n", b.failures);
    return 1;
  }
  printf("gpu_bandwidth: values ok\n");
  return 0;
}
