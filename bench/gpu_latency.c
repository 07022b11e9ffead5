/* Small operations: what a 4 KiB copy or fill costs from the call until
 * its wait returns, dlrun against the driver's own call plus a
 * cuStreamSynchronize of one stream (the cost an application pays for a
 * small operation it waits for). The two alternate, run by run; each line
 * is the median of its runs (a scheduler hiccup moves a best or a mean, not
 * a median), after warm-up runs:
 *   latency 4 KiB <case>: dlrun <us> us, driver <us> us, ratio <dlrun/driver>
 * dlrun's side makes its result as an application does (a new array each
 * time: from its pool, released after the clock stops). */
#include <string.h>

#include "gpu_bench.h"

#define LAT_BYTES 4096
#define WARMUP 50

typedef struct lat {
  dlrun_runtime *rt;
  dlrun_sharding *gpu;
  dlrun_array *src, *out;
  dlcu_stream stream;
  dlcu_ptr dsrc, ddst;
  unsigned char host[LAT_BYTES], back[LAT_BYTES];
  int64_t dims[1];
} lat;

typedef void (*lat_fn)(lat *l);

static const float FILL = 2.5f;

static void dl_d2d(lat *l) {
  dlrun_put_options o = {.may_alias = DLRUN_ALIAS_NEVER};
  DL(dlrun_device_put(l->src, l->gpu, &o, &l->out));
  DL(dlrun_array_block_until_ready(l->out));
}
static void dl_fill(lat *l) {
  dlrun_scalar v = {.kind = DLRUN_SCALAR_FLOAT, .re = FILL};
  DL(dlrun_array_full(l->gpu, DLRUN_FLOAT32, 1, l->dims, &v, &l->out));
  DL(dlrun_array_block_until_ready(l->out));
}
static void dl_h2d(lat *l) {
  DL(dlrun_array_from_host(l->gpu, DLRUN_FLOAT32, 1, l->dims, l->host, LAT_BYTES, &l->out));
  DL(dlrun_array_block_until_ready(l->out));
}
static void dl_d2h(lat *l) { DL(dlrun_array_read(l->src, 0, LAT_BYTES, l->back)); }

static void drv_sync(lat *l) { CU(StreamSynchronize(l->stream)); }
static void drv_d2d(lat *l) {
  CU(MemcpyAsync(l->ddst, l->dsrc, LAT_BYTES, l->stream));
  drv_sync(l);
}
static void drv_fill(lat *l) {
  unsigned bits;
  memcpy(&bits, &FILL, sizeof bits);
  CU(MemsetD32Async(l->ddst, bits, LAT_BYTES / 4, l->stream));
  drv_sync(l);
}
static void drv_h2d(lat *l) {
  CU(MemcpyAsync(l->ddst, (dlcu_ptr)(uintptr_t)l->host, LAT_BYTES, l->stream));
  drv_sync(l);
}
static void drv_d2h(lat *l) {
  CU(MemcpyAsync((dlcu_ptr)(uintptr_t)l->back, l->dsrc, LAT_BYTES, l->stream));
  drv_sync(l);
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double median(double *t, int n) {
  qsort(t, (size_t)n, sizeof *t, cmp_double);
  return n % 2 ? t[n / 2] : (t[n / 2 - 1] + t[n / 2]) / 2;
}

/* Whether dlrun's last result (or the bytes read) hold what was written. */
static bool right(lat *l, lat_fn dl) {
  unsigned char got[LAT_BYTES];
  if (dl == dl_d2h) return !memcmp(l->back, l->host, LAT_BYTES);
  memset(got, 0xEE, sizeof got);
  DL(dlrun_array_read(l->out, 0, LAT_BYTES, got));
  if (dl != dl_fill) return !memcmp(got, l->host, LAT_BYTES);
  for (size_t i = 0; i < LAT_BYTES; i += sizeof FILL)
    if (memcmp(got + i, &FILL, sizeof FILL)) return false;
  return true;
}

static int measure(lat *l, const char *name, lat_fn dl, lat_fn cu, int runs) {
  double *t_dl = malloc((size_t)runs * sizeof *t_dl), *t_cu = malloc((size_t)runs * sizeof *t_cu);
  if (!t_dl || !t_cu) {
    fprintf(stderr, "gpu_bandwidth: out of host memory\n");
    exit(1);
  }
  bool ok = true;
  for (int r = -WARMUP; r < runs; r++) {
    double t0 = gpu_bench_now();
    dl(l);
    double t1 = gpu_bench_now();
    cu(l);
    double t2 = gpu_bench_now();
    if (r == runs - 1) ok = right(l, dl);
    dlrun_array_release(l->out);
    l->out = NULL;
    if (r < 0) continue;
    t_dl[r] = t1 - t0;
    t_cu[r] = t2 - t1;
  }
  double m_dl = median(t_dl, runs), m_cu = median(t_cu, runs);
  printf("latency 4 KiB %s: dlrun %.1f us, driver %.1f us, ratio %.2f\n", name, m_dl * 1e6,
         m_cu * 1e6, m_dl / m_cu);
  if (!ok) printf("latency 4 KiB %s: FAIL: wrong values read back\n", name);
  free(t_dl);
  free(t_cu);
  return ok ? 0 : 1;
}

int gpu_latency(int runs) {
  lat *l = calloc(1, sizeof *l);
  if (!l) exit(1);
  l->dims[0] = LAT_BYTES / 4;
  for (size_t i = 0; i < LAT_BYTES / 4; i++) ((float *)l->host)[i] = (float)i + 0.25f;
  dlrun_config cfg = {.devices = "cuda:1", .device_memory = 64u << 20,
                      .pinned_host_memory = 1u << 20};
  DL(dlrun_runtime_create(&cfg, &l->rt));
  l->gpu = gpu_bench_single(dlrun_local_device_get(l->rt, "cuda", 0), DLRUN_MEM_DEVICE);
  DL(dlrun_array_from_host(l->gpu, DLRUN_FLOAT32, 1, l->dims, l->host, LAT_BYTES, &l->src));
  DL(dlrun_array_block_until_ready(l->src));
  CU(StreamCreate(&l->stream, DLCU_STREAM_NON_BLOCKING));
  CU(MemAlloc(&l->dsrc, LAT_BYTES));
  CU(MemAlloc(&l->ddst, LAT_BYTES));
  CU(Memcpy(l->dsrc, (dlcu_ptr)(uintptr_t)l->host, LAT_BYTES));

  printf("latency: 4 KiB operations on device 0, each waited for; median of %d runs; the "
         "driver: the call plus cuStreamSynchronize of one stream\n",
         runs);
  int wrong = measure(l, "device to device", dl_d2d, drv_d2d, runs);
  wrong += measure(l, "fill float32", dl_fill, drv_fill, runs);
  wrong += measure(l, "host to device (pageable)", dl_h2d, drv_h2d, runs);
  wrong += measure(l, "device to host (pageable)", dl_d2h, drv_d2h, runs);

  CU(MemFree(l->dsrc));
  CU(MemFree(l->ddst));
  CU(StreamDestroy(l->stream));
  dlrun_array_release(l->src);
  dlrun_sharding_release(l->gpu);
  dlrun_runtime_release(l->rt);
  free(l);
  return wrong;
}
