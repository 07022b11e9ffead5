/* The CUDA platform against what the driver double says (docs/cuda.md):
 * what the driver holds around release_unused (its cuMemGetInfo), on VMM
 * granules and on cuMemAlloc segments (CUDA_DOUBLE_NO_VMM, in a child:
 * the double reads its configuration once); and a consumer's unknown
 * stream refused the same way while the array is being written (the
 * double held) and once it is. Skipped without the double. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
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

/* 4 MiB + 16 bytes used, then freed and released: the driver gives back
 * all it held (VMM: the three 2 MiB granules touched; no VMM: the pool's
 * one segment, 3/4 of the double's 256 MiB), and bytes_reserved, what the
 * driver holds (platform slot bytes_held), is 0. While a block lives it
 * keeps its granule or segment, and bytes_reserved says so. */
static int release_case(dlrun_runtime *rt, uint64_t want_held, uint64_t y_unit) {
  dlrun_device *dev = dlrun_device_get(rt, "cuda", 0);
  dlrun_array *x = zeros(dev, 1 << 20), *y = zeros(dev, 4);
  TEST("arrays of 4 MiB and 16 bytes on CudaDevice(id=0)") {
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
    CHECK(reserved(dev) == y_unit && held() == y_unit, "bytes_reserved %llu, held %llu",
          (unsigned long long)reserved(dev), (unsigned long long)held());
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

static dlrun_runtime *runtime(void) {
  dlrun_config cfg = {.devices = "cuda:1"};
  dlrun_runtime *rt = NULL;
  if (dlrun_runtime_create(&cfg, &rt) != DLRUN_OK) printf("  %s\n", dlrun_last_error());
  return rt;
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
    int failed = !rt || release_case(rt, 201326592, 201326592);
    dlrun_runtime_release(rt);
    fflush(stdout);
    _exit(failed);
  }
  int status = 0;
  TEST("without VMM: a wholly unused cuMemAlloc segment goes back (the child's checks above)") {
    CHECK(pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
              WEXITSTATUS(status) == 0,
          "child status %d", status);
  }
  unsetenv("CUDA_DOUBLE_NO_VMM");
  lib = dlopen(path, RTLD_NOW | RTLD_LOCAL); /* the same library the module opens */
  dlrun_runtime *rt = runtime();
  TEST("a runtime on cuda:1 over the driver double") { CHECK(rt != NULL, "no runtime"); }
  if (!rt) return check_summary("cuda_platform");
  release_case(rt, 6291456, 2097152);
  stream_case(rt);
  dlrun_runtime_release(rt);
  return check_summary("cuda_platform");
}
