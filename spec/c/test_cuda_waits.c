/* Waiting for CUDA work (docs/cuda.md, "Devices, streams and events"): a
 * thread that waits for an operation on the stream synchronises on its
 * event and completes it itself, alongside the device's completion thread.
 * Several threads waiting for the same operations, and for operations
 * after it, all return once (the double held until they are all waiting),
 * with the values written; an operation that fails on the stream fails
 * every waiter with the driver's error (in a child: the double reads its
 * failures once), and the device runs the next one. Skipped without the
 * double. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "dlrun/dlrun.h"

#define WAITERS 6
#define N 1024

static void (*hold)(int);

typedef struct waiter {
  pthread_t t;
  dlrun_array *a;
  dlrun_status st;
  char msg[256];
} waiter;

static atomic_int returned;

static void *wait_main(void *arg) {
  waiter *w = arg;
  w->st = dlrun_array_block_until_ready(w->a);
  snprintf(w->msg, sizeof w->msg, "%s", w->st ? dlrun_last_error() : "");
  atomic_fetch_add(&returned, 1);
  return NULL;
}

static dlrun_array *full(dlrun_sharding *s, double v) {
  int64_t n = N;
  dlrun_scalar x = {.kind = DLRUN_SCALAR_FLOAT, .re = v};
  dlrun_array *a = NULL;
  if (dlrun_array_full(s, DLRUN_FLOAT32, 1, &n, &x, &a)) printf("  %s\n", dlrun_last_error());
  return a;
}

static bool holds(dlrun_array *a, float v) {
  float got[N];
  if (dlrun_array_read(a, 0, sizeof got, got)) return false;
  for (int i = 0; i < N; i++)
    if (got[i] != v) return false;
  return true;
}

/* WAITERS threads, half on `first`, half on `second` (enqueued after it),
 * all asleep in their wait before the double runs anything. */
static void wait_all(waiter *w, dlrun_array *first, dlrun_array *second) {
  atomic_store(&returned, 0);
  for (int i = 0; i < WAITERS; i++) {
    w[i] = (waiter){.a = i % 2 ? second : first};
    pthread_create(&w[i].t, NULL, wait_main, &w[i]);
  }
  struct timespec pause = {0, 50 * 1000 * 1000};
  nanosleep(&pause, NULL);
}

static int ok_case(dlrun_sharding *s) {
  waiter w[WAITERS];
  hold(1);
  dlrun_array *first = full(s, 1.5), *second = full(s, 2.5);
  wait_all(w, first, second);
  TEST("threads waiting for held work all wait") {
    CHECK(first && second, "no arrays");
    CHECK(atomic_load(&returned) == 0, "%d returned while the double was held",
          atomic_load(&returned));
  }
  hold(0);
  for (int i = 0; i < WAITERS; i++) pthread_join(w[i].t, NULL);
  TEST("each returns once the work ran, with its values") {
    CHECK(atomic_load(&returned) == WAITERS, "%d returned", atomic_load(&returned));
    for (int i = 0; i < WAITERS; i++) CHECK(w[i].st == DLRUN_OK, "waiter %d: %s", i, w[i].msg);
    CHECK(holds(first, 1.5f) && holds(second, 2.5f), "wrong values");
  }
  dlrun_array_release(first);
  dlrun_array_release(second);
  int many = 0;
  for (int round = 0; round < 200; round++) { /* waiter and completion thread race */
    dlrun_array *a = full(s, round);
    many += a && dlrun_array_block_until_ready(a) == DLRUN_OK && holds(a, (float)round);
    dlrun_array_release(a);
  }
  TEST("200 fills, each waited for at once: every one right") {
    CHECK(many == 200, "%d right", many);
  }
  return 0;
}

/* The first cuMemsetD32Async fails on the stream (CUDA_DOUBLE_FAIL). */
static int failure_case(dlrun_sharding *s) {
  waiter w[WAITERS];
  const char *want = "CudaDevice(id=0): fill failed: CUDA_ERROR_UNKNOWN (999)";
  hold(1);
  dlrun_array *bad = full(s, 1.5), *after = full(s, 2.5);
  wait_all(w, bad, after);
  hold(0);
  for (int i = 0; i < WAITERS; i++) pthread_join(w[i].t, NULL);
  TEST("a fill that fails on the stream fails every waiter with the driver's error") {
    CHECK(bad && after, "no arrays");
    for (int i = 0; i < WAITERS; i += 2)
      CHECK(w[i].st == DLRUN_ERR_RUNTIME && !strcmp(w[i].msg, want), "waiter %d: %d %s", i,
            w[i].st, w[i].msg);
  }
  TEST("the work queued behind it fails with it; the next fill runs") {
    for (int i = 1; i < WAITERS; i += 2)
      CHECK(w[i].st == DLRUN_ERR_RUNTIME && !strcmp(w[i].msg, want), "waiter %d: %d %s", i,
            w[i].st, w[i].msg);
    dlrun_array *next = full(s, 3.5);
    CHECK(next && dlrun_array_block_until_ready(next) == DLRUN_OK && holds(next, 3.5f), "%s",
          dlrun_last_error());
    dlrun_array_release(next);
  }
  dlrun_array_release(bad);
  dlrun_array_release(after);
  return check_failed;
}

static dlrun_sharding *on_cuda0(dlrun_runtime **rt) {
  dlrun_config cfg = {.devices = "cuda:1"};
  dlrun_sharding *s = NULL;
  if (dlrun_runtime_create(&cfg, rt) != DLRUN_OK ||
      dlrun_single_device_sharding_create(dlrun_device_get(*rt, "cuda", 0), DLRUN_MEM_DEVICE,
                                          &s) != DLRUN_OK)
    printf("  %s\n", dlrun_last_error());
  return s;
}

static int run(const char *path, int (*body)(dlrun_sharding *)) {
  void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL); /* the library the module opens */
  *(void **)&hold = lib ? dlsym(lib, "cuda_double_hold") : NULL;
  dlrun_runtime *rt = NULL;
  dlrun_sharding *s = hold ? on_cuda0(&rt) : NULL;
  TEST("a runtime on cuda:1 over the driver double") { CHECK(s != NULL, "none"); }
  if (s) body(s);
  dlrun_sharding_release(s);
  dlrun_runtime_release(rt);
  return check_failed;
}

int main(void) {
  char path[1100], mod[1100];
  if (!check_cuda_double(path, sizeof path, mod, sizeof mod)) {
    TEST("cuda waits # SKIP the driver double or the CUDA module is not built") {}
    return check_summary("cuda_waits");
  }
  setenv("CUDA_DOUBLE_DEVICES", "1", 1);
  unsetenv("CUDA_DOUBLE_FAIL");
  fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    setenv("CUDA_DOUBLE_FAIL", "cuMemsetD32Async:1:async", 1);
    int failed = run(path, failure_case);
    fflush(stdout);
    _exit(failed != 0);
  }
  int status = 0;
  TEST("a failure on the stream (the child's checks above)") {
    CHECK(check_child_passed(pid, &status), "child status %d", status);
  }
  run(path, ok_case);
  return check_summary("cuda_waits");
}
