/* The CUDA platform against what the driver double says (docs/cuda.md):
 * what the driver holds around release_unused (its cuMemGetInfo), on VMM
 * chunks and on cuMemAlloc segments (CUDA_DOUBLE_NO_VMM, in a child:
 * the double reads its configuration once); the chunks a VMM pool is
 * backed in (the double's cuMemCreate record), with the default 2 MiB
 * granularity and with 64 MiB (in a child); and a consumer's unknown
 * stream refused the same way while the array is being written (the
 * double held) and once it is. Skipped without the double. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "dlrun/dlpack.h"
#include "dlrun/dlrun.h"
#include "platforms/cuda/driver_api.h"

static void *lib;

/* Bytes the driver holds on ordinal 0: total - free of its cuMemGetInfo,
 * asked on a thread of its own (the platform remembers which context is
 * current on each of its threads). */
static void *held_main(void *out) {
  dlcu_result (*retain)(dlcu_context *, dlcu_device), (*set)(dlcu_context),
      (*info)(size_t *, size_t *), (*release)(dlcu_device);
  *(void **)&retain = dlsym(lib, "cuDevicePrimaryCtxRetain");
  *(void **)&set = dlsym(lib, "cuCtxSetCurrent");
  *(void **)&info = dlsym(lib, "cuMemGetInfo_v2");
  *(void **)&release = dlsym(lib, "cuDevicePrimaryCtxRelease_v2");
  dlcu_context ctx;
  size_t free_b = 0, total = 0;
  *(uint64_t *)out = UINT64_MAX;
  if (retain(&ctx, 0)) return NULL;
  if (!set(ctx) && !info(&free_b, &total)) *(uint64_t *)out = total - free_b;
  release(0);
  return NULL;
}

static uint64_t held(void) {
  uint64_t out = UINT64_MAX;
  pthread_t t;
  if (pthread_create(&t, NULL, held_main, &out) == 0) pthread_join(t, NULL);
  return out;
}

static dlrun_array *zeros(dlrun_device *dev, int64_t n) {
  dlrun_sharding *s = NULL;
  dlrun_array *a = NULL;
  dlrun_scalar zero = {.kind = DLRUN_SCALAR_INT};
  if (dlrun_single_device_sharding_create(dev, DLRUN_MEM_DEVICE, &s) == DLRUN_OK)
    dlrun_array_full(s, DLRUN_FLOAT32, 1, &n, &zero, &a);
  dlrun_sharding_release(s);
  return a;
}

static uint64_t reserved(dlrun_device *dev) {
  dlrun_memory_stats m = {0};
  dlrun_device_memory_stats(dev, DLRUN_MEM_DEVICE, &m);
  return m.bytes_reserved;
}

/* dev's bytes_reserved and what the driver holds are both `want`. */
#define CHECK_HELD(dev, want)                                                            \
  CHECK(reserved(dev) == (want) && held() == (want), "bytes_reserved %llu, held %llu",  \
        (unsigned long long)reserved(dev), (unsigned long long)held())

/* x_mib MiB + 16 bytes used, then freed and released: the driver gives
 * back all it held (VMM, 40 MiB: the two 32 MiB chunks touched; no VMM,
 * 4 MiB: the pool's one segment, 3/4 of the double's 256 MiB), and
 * bytes_reserved, what the driver holds (platform slot bytes_held), is 0.
 * While a block lives it keeps its chunk or segment, and bytes_reserved
 * says so. */
static int release_case(dlrun_runtime *rt, int64_t x_mib, uint64_t want_held, uint64_t y_unit) {
  dlrun_device *dev = dlrun_device_get(rt, "cuda", 0);
  dlrun_array *x = zeros(dev, x_mib << 18), *y = zeros(dev, 4);
  char name[80];
  snprintf(name, sizeof name, "arrays of %lld MiB and 16 bytes on CudaDevice(id=0)",
           (long long)x_mib);
  TEST(name) {
    CHECK(x && y && !dlrun_array_block_until_ready(x) && !dlrun_array_block_until_ready(y),
          "%s", dlrun_last_error());
    CHECK(reserved(dev) == want_held, "bytes_reserved %llu", (unsigned long long)reserved(dev));
    CHECK(held() == want_held, "held %llu", (unsigned long long)held());
  }
  dlrun_array_release(x);
  dlrun_device_synchronize(dev);
  TEST("with the 16 bytes alive, release_unused keeps their unit; bytes_reserved agrees") {
    uint64_t released = 0;
    CHECK(dlrun_device_release_unused(dev, &released) == DLRUN_OK, "%s", dlrun_last_error());
    CHECK(released == want_held - y_unit, "released %llu", (unsigned long long)released);
    CHECK_HELD(dev, y_unit);
  }
  dlrun_array_release(y);
  dlrun_device_synchronize(dev);
  TEST("release_unused gives back what the driver held; bytes_reserved agrees (0)") {
    uint64_t released = 0;
    CHECK(dlrun_device_release_unused(dev, &released) == DLRUN_OK, "%s", dlrun_last_error());
    CHECK(released == y_unit, "released %llu", (unsigned long long)released);
    CHECK(reserved(dev) == 0, "bytes_reserved %llu", (unsigned long long)reserved(dev));
    CHECK(held() == 0, "held %llu", (unsigned long long)held());
    CHECK(dlrun_device_release_unused(dev, &released) == DLRUN_OK && released == 0,
          "released again %llu", (unsigned long long)released);
  }
  return check_failed;
}

/* An export with `stream`: DLRUN_OK, or the error's message in msg. */
static dlrun_status export_with(dlrun_array *a, int64_t stream, char *msg, size_t n) {
  dlrun_export_options o = {.has_max_version = true, .max_major = 1, .has_stream = true,
                            .stream = stream};
  dlrun_exported e = {0};
  dlrun_status st = dlrun_export(a, &o, &e);
  snprintf(msg, n, "%s", st ? dlrun_last_error() : "");
  if (!st) e.versioned->deleter(e.versioned);
  return st;
}

static void stream_case(dlrun_runtime *rt) {
  void (*hold)(int);
  *(void **)&hold = dlsym(lib, "cuda_double_hold");
  dlrun_device *dev = dlrun_device_get(rt, "cuda", 0);
  const char *want = "CudaDevice(id=0): the consumer's stream 0x1000 cannot wait: "
                     "cuStreamWaitEvent: CUDA_ERROR_INVALID_HANDLE (400)";
  char msg[512];
  hold(1);
  dlrun_array *a = zeros(dev, 4);
  TEST("stream 4096 (no stream of the driver's) while the array is being written") {
    CHECK(a != NULL, "%s", dlrun_last_error());
    CHECK(export_with(a, 4096, msg, sizeof msg) == DLRUN_ERR_BUFFER, "exported");
    CHECK(strcmp(msg, want) == 0, "%s", msg);
    CHECK(export_with(a, 1, msg, sizeof msg) == DLRUN_OK, "stream 1: %s", msg);
  }
  hold(0);
  TEST("the same stream once the array is written: the same BufferError") {
    CHECK(a && dlrun_array_block_until_ready(a) == DLRUN_OK, "%s", dlrun_last_error());
    CHECK(export_with(a, 4096, msg, sizeof msg) == DLRUN_ERR_BUFFER, "exported");
    CHECK(strcmp(msg, want) == 0, "%s", msg);
    CHECK(export_with(a, 2, msg, sizeof msg) == DLRUN_OK, "stream 2: %s", msg);
  }
  dlrun_array_release(a);
}

static dlrun_runtime *runtime_with(uint64_t device_memory, dlrun_preallocate preallocate) {
  dlrun_config cfg = {.devices = "cuda:1", .device_memory = device_memory,
                      .device_preallocate = preallocate};
  dlrun_runtime *rt = NULL;
  if (dlrun_runtime_create(&cfg, &rt) != DLRUN_OK) printf("  %s\n", dlrun_last_error());
  return rt;
}

static dlrun_runtime *runtime(void) { return runtime_with(0, DLRUN_PREALLOCATE_DEFAULT); }

#define MiB (1ull << 20)
#define MAX_CREATES 16

/* The double's cuMemCreate calls since the last look (cuda_double_creates,
 * cleared): their count; sizes in `sizes`; -1 if any was not on device 0. */
static size_t created(uint64_t sizes[MAX_CREATES]) {
  size_t (*creates)(uint64_t *, int *, size_t, int);
  *(void **)&creates = dlsym(lib, "cuda_double_creates");
  int devices[MAX_CREATES];
  size_t n = creates ? creates(sizes, devices, MAX_CREATES, 1) : (size_t)-1;
  for (size_t i = 0; i < n && i < MAX_CREATES; i++)
    if (devices[i] != 0) return (size_t)-1;
  return n;
}

/* What created() found since the last look is exactly `want` (n sizes). */
static bool created_exactly(const uint64_t *want, size_t n) {
  uint64_t sizes[MAX_CREATES] = {0};
  size_t got = created(sizes);
  bool same = got == n;
  for (size_t i = 0; same && i < n; i++) same = sizes[i] == want[i];
  if (!same) {
    printf("  cuMemCreate calls: %zu:", got);
    for (size_t i = 0; i < got && i < MAX_CREATES; i++)
      printf(" %llu", (unsigned long long)sizes[i]);
    printf("\n");
  }
  return same;
}

/* Everything freed, release_unused gives back `want` bytes; then nothing
 * is held, by dlrun's count and by the driver's, and nothing was created. */
static void release_all(dlrun_device *dev, uint64_t want) {
  uint64_t released = 0;
  dlrun_device_synchronize(dev);
  CHECK(dlrun_device_release_unused(dev, &released) == DLRUN_OK, "%s", dlrun_last_error());
  CHECK(released == want, "released %llu", (unsigned long long)released);
  CHECK_HELD(dev, 0);
  CHECK(created_exactly(NULL, 0), "created");
}

/* A VMM pool is backed in chunks of 32 MiB (the default capacity, 3/4 of
 * the double's 256 MiB, holds six): the first use creates one, blocks
 * inside it create nothing, the first block past it one more. */
static void chunk_case(dlrun_runtime *rt) {
  dlrun_device *dev = dlrun_device_get(rt, "cuda", 0);
  const uint64_t chunk[] = {32 * MiB};
  created(NULL);
  dlrun_array *a = zeros(dev, 1 << 20); /* [0, 4 MiB) */
  TEST("a VMM pool's first block of 4 MiB creates one chunk of 32 MiB") {
    CHECK(a && !dlrun_array_block_until_ready(a), "%s", dlrun_last_error());
    CHECK(created_exactly(chunk, 1), "created");
    CHECK_HELD(dev, 32 * MiB);
  }
  dlrun_array *b = zeros(dev, 7 << 20); /* [4, 32 MiB) */
  TEST("a block of 28 MiB that ends the first chunk creates nothing") {
    CHECK(b && !dlrun_array_block_until_ready(b), "%s", dlrun_last_error());
    CHECK(created_exactly(NULL, 0), "created");
    CHECK_HELD(dev, 32 * MiB);
  }
  dlrun_array *c = zeros(dev, 4); /* [32 MiB, + 16) */
  TEST("16 bytes past the first chunk create a second one of 32 MiB") {
    CHECK(c && !dlrun_array_block_until_ready(c), "%s", dlrun_last_error());
    CHECK(created_exactly(chunk, 1), "created");
    CHECK_HELD(dev, 64 * MiB);
  }
  dlrun_array_release(a);
  dlrun_array_release(b);
  dlrun_array_release(c);
  TEST("freed, release_unused gives both chunks back (64 MiB)") { release_all(dev, 64 * MiB); }
}

/* A pool of `capacity` bytes (preallocated, or `count` blocks of `n`
 * bytes): the chunks `want` (the last cut at the pool's end in whole
 * granules), all held, all given back. */
static void small_pool_case(const char *name, uint64_t capacity, bool preallocate, int64_t n,
                            int count, const uint64_t *want, size_t nwant) {
  created(NULL);
  dlrun_runtime *rt =
      runtime_with(capacity, preallocate ? DLRUN_PREALLOCATE_ON : DLRUN_PREALLOCATE_OFF);
  dlrun_device *dev = rt ? dlrun_device_get(rt, "cuda", 0) : NULL;
  dlrun_array *a[4] = {0};
  uint64_t sum = 0;
  for (size_t i = 0; i < nwant; i++) sum += want[i];
  for (int i = 0; dev && i < count && i < 4; i++) a[i] = zeros(dev, n / 4);
  TEST(name) {
    CHECK(dev != NULL, "no device");
    for (int i = 0; i < count && i < 4; i++)
      CHECK(a[i] && !dlrun_array_block_until_ready(a[i]), "%s", dlrun_last_error());
    CHECK(created_exactly(want, nwant), "created");
    if (dev) CHECK_HELD(dev, sum);
    for (int i = 0; i < count && i < 4; i++) dlrun_array_release(a[i]);
    if (dev) release_all(dev, sum);
  }
  dlrun_runtime_release(rt);
}

/* CUDA_DOUBLE_GRANULARITY=64M (in a child): chunks of the granularity. */
static int granularity_case(void) {
  dlrun_runtime *rt = runtime();
  dlrun_device *dev = rt ? dlrun_device_get(rt, "cuda", 0) : NULL;
  TEST("granularity 64 MiB: a runtime on cuda:1") { CHECK(dev != NULL, "no device"); }
  if (!dev) return dlrun_runtime_release(rt), check_failed;
  const uint64_t chunk[] = {64 * MiB};
  created(NULL);
  dlrun_array *a = zeros(dev, 4), *b = NULL;
  TEST("granularity 64 MiB: 16 bytes create one chunk of 64 MiB") {
    CHECK(a && !dlrun_array_block_until_ready(a), "%s", dlrun_last_error());
    CHECK(created_exactly(chunk, 1), "created");
    CHECK_HELD(dev, 64 * MiB);
  }
  b = zeros(dev, 16 << 20); /* [256, 64 MiB + 256) */
  TEST("granularity 64 MiB: 64 MiB more create a second chunk of 64 MiB") {
    CHECK(b && !dlrun_array_block_until_ready(b), "%s", dlrun_last_error());
    CHECK(created_exactly(chunk, 1), "created");
    CHECK_HELD(dev, 128 * MiB);
    dlrun_array_release(a);
    dlrun_array_release(b);
    release_all(dev, 128 * MiB);
  }
  dlrun_runtime_release(rt);
  return check_failed;
}

int main(void) {
  char path[1100], mod[1100];
  if (!check_cuda_double(path, sizeof path, mod, sizeof mod)) {
    TEST("cuda platform # SKIP the driver double or the CUDA module is not built") {}
    return check_summary("cuda_platform");
  }
  setenv("CUDA_DOUBLE_DEVICES", "2", 1);
  unsetenv("CUDA_DOUBLE_MEMORY");
  unsetenv("CUDA_DOUBLE_GRANULARITY");
  unsetenv("CUDA_DOUBLE_FAIL");
  fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) { /* cuMemAlloc segments: the double's configuration is the child's */
    setenv("CUDA_DOUBLE_NO_VMM", "1", 1);
    lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    dlrun_runtime *rt = runtime();
    int failed = !rt || release_case(rt, 4, 201326592, 201326592);
    dlrun_runtime_release(rt);
    fflush(stdout);
    _exit(failed);
  }
  int status = 0;
  TEST("without VMM: a wholly unused cuMemAlloc segment goes back (the child's checks above)") {
    CHECK(check_child_passed(pid, &status), "child status %d", status);
  }
  unsetenv("CUDA_DOUBLE_NO_VMM");
  fflush(stdout);
  pid = fork();
  if (pid == 0) {
    setenv("CUDA_DOUBLE_GRANULARITY", "64M", 1);
    lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    int failed = granularity_case();
    fflush(stdout);
    _exit(failed);
  }
  TEST("granularity 64 MiB: chunks of 64 MiB (the child's checks above)") {
    CHECK(check_child_passed(pid, &status), "child status %d", status);
  }
  lib = dlopen(path, RTLD_NOW | RTLD_LOCAL); /* the same library the module opens */
  dlrun_runtime *rt = runtime();
  TEST("a runtime on cuda:1 over the driver double") { CHECK(rt != NULL, "no runtime"); }
  if (!rt) return check_summary("cuda_platform");
  release_case(rt, 40, 64 * MiB, 32 * MiB);
  chunk_case(rt);
  stream_case(rt);
  dlrun_runtime_release(rt);
  const uint64_t small[] = {6 * MiB}, cut[] = {32 * MiB, 10 * MiB};
  small_pool_case("a pool of 5 MiB + 256 bytes: one allocation of 6 MiB", 5 * MiB + 256, false,
                  16, 1, small, 1);
  small_pool_case("a pool of 41 MiB filled: a chunk of 32 MiB, then 10 MiB to its end",
                  41 * MiB, false, 10 * (int64_t)MiB, 4, cut, 2);
  small_pool_case("a pool of 41 MiB preallocated: a chunk of 32 MiB, then 10 MiB", 41 * MiB,
                  true, 0, 0, cut, 2);
  return check_summary("cuda_platform");
}
