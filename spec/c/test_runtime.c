/* C tests of the runtime: device specs, sizes, devices, work queues, and arrays
 * on one device through the public C API. */
#include <dirent.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "core/trace_impl.h"
#include "device/device_impl.h"
#include "platforms/host/hostexec.h"
#include "dlrun/dlrun.h"

static dlrun_runtime *make_runtime(const char *spec, uint64_t memory) {
  dlrun_config cfg = {.devices = spec, .device_memory = memory};
  dlrun_runtime *rt = NULL;
  dlrun_status st = dlrun_runtime_create(&cfg, &rt);
  if (st) printf("  runtime_create(%s): %s\n", spec, dlrun_last_error());
  return rt;
}

static void test_specs(void) {
  TEST("device specs parse") {
    const char *good[] = {"sim:8", "cpu:4", "sim:8,cpu:2", "auto", " sim : 2 , cpu ", "sim"};
    for (size_t i = 0; i < sizeof good / sizeof *good; i++)
      CHECK(dlrun_check_device_spec(good[i]) == DLRUN_OK, "%s: %s", good[i], dlrun_last_error());
  }
  TEST("bad device specs name the bad part") {
    struct { const char *spec, *msg; } bad[] = {
        {"", "empty device spec \"\""},
        {"sim:0", "invalid device count \"0\" for sim in device spec \"sim:0\" (expected an integer from 1 to 65536)"},
        {"sim:-3", "invalid device count \"-3\" for sim"},
        {"sim:x", "invalid device count \"x\" for sim"},
        {"sim:65537", "invalid device count \"65537\""},
        {"sim:99999999999999999999", "invalid device count"},
        {"gpu:2", "unknown platform \"gpu\" in device spec \"gpu:2\" (expected "},
        {"sim:2,sim:3", "platform sim appears twice in device spec \"sim:2,sim:3\""},
        {"sim:8,,cpu:1", "invalid device spec \"sim:8,,cpu:1\": empty entry"},
        {"auto,sim:2", "\"auto\" must stand alone"},
        {"sim:40000,cpu:40000", "asks for 80000 devices (at most 65536)"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
      CHECK(dlrun_check_device_spec(bad[i].spec) == DLRUN_ERR_VALUE, "%s accepted", bad[i].spec);
      CHECK_STR_CONTAINS(dlrun_last_error(), bad[i].msg);
    }
    char want[320];
    snprintf(want, sizeof want, "(expected %s)", check_known_platforms());
    dlrun_check_device_spec("gpu:2");
    CHECK_STR_CONTAINS(dlrun_last_error(), want);
  }
}

static void test_sizes(void) {
  TEST("sizes parse with units") {
    struct { const char *text; uint64_t v; } cases[] = {
        {"1024", 1024},        {"64KiB", 65536},          {"2GiB", 2ull << 30},
        {"1.5MiB", 1572864},   {"1GB", 1000000000},       {"3 MiB", 3u << 20},
        {"512B", 512},         {"1TiB", 1ull << 40},      {"2G", 2ull << 30},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
      uint64_t v = 0;
      CHECK(dlrun_parse_size(cases[i].text, &v) == DLRUN_OK, "%s: %s", cases[i].text, dlrun_last_error());
      CHECK(v == cases[i].v, "%s gave %llu", cases[i].text, (unsigned long long)v);
    }
  }
  TEST("bad sizes are errors") {
    const char *bad[] = {"", "abc", "2XB", "-1GiB", "0", "0x10", "1e400", "nan", "2 GiB extra"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
      uint64_t v;
      CHECK(dlrun_parse_size(bad[i], &v) == DLRUN_ERR_VALUE, "%s accepted", bad[i]);
      CHECK_STR_CONTAINS(dlrun_last_error(), "memory size");
    }
    uint64_t v;
    CHECK(dlrun_parse_size("100000000TiB", &v) == DLRUN_ERR_VALUE, "huge size accepted");
    CHECK_STR_CONTAINS(dlrun_last_error(), "too large");
  }
}

static void test_devices(void) {
  TEST("runtime lays out devices, always with a host cpu") {
    dlrun_runtime *rt = make_runtime("sim:3", 1 << 20);
    CHECK(rt != NULL, "no runtime");
    if (!rt) return;
    CHECK(dlrun_device_count(rt, NULL) == 3, "default count");
    CHECK(dlrun_device_count(rt, "sim") == 3, "sim count");
    CHECK(dlrun_device_count(rt, "cpu") == 1, "cpu count");
    CHECK(dlrun_device_count(rt, "gpu") == 0, "gpu count");
    CHECK(strcmp(dlrun_default_backend(rt), "sim") == 0, "backend");
    CHECK(strcmp(dlrun_runtime_spec(rt), "sim:3,cpu:1") == 0, "spec %s", dlrun_runtime_spec(rt));
    dlrun_device *d2 = dlrun_device_get(rt, "sim", 2);
    CHECK(d2 && dlrun_device_id(d2) == 2, "id");
    CHECK(strcmp(dlrun_device_name(d2), "SimDevice(id=2)") == 0, "%s", dlrun_device_name(d2));
    CHECK(dlrun_device_get(rt, "sim", 3) == NULL, "out of range");
    CHECK(strcmp(dlrun_device_name(dlrun_host_device(rt)), "CpuDevice(id=0)") == 0, "host");
    dlrun_memory_stats s;
    CHECK(dlrun_device_memory_stats(d2, DLRUN_MEM_DEVICE, &s) == DLRUN_OK, "stats");
    CHECK(s.bytes_limit == 1 << 20 && s.bytes_in_use == 0 && s.bytes_reserved == 0, "limit %llu",
          (unsigned long long)s.bytes_limit);
    dlrun_runtime_release(rt);
  }
  TEST("cpu-only runtime has cpu as default backend") {
    dlrun_runtime *rt = make_runtime("cpu:4", 0);
    CHECK(rt && strcmp(dlrun_default_backend(rt), "cpu") == 0, "backend");
    CHECK(rt && dlrun_device_count(rt, NULL) == 4, "count");
    dlrun_runtime_release(rt);
  }
  TEST("4096 sim devices are cheap to create") {
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    dlrun_runtime *rt = make_runtime("sim:4096", 1ull << 30);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    CHECK(rt && dlrun_device_count(rt, "sim") == 4096, "count");
    CHECK(secs < 1.0, "took %.3fs", secs);
    CHECK(rt && rt->workers != NULL, "workers");
    dlrun_runtime_release(rt);
  }
  TEST("a too-small device memory is an error") {
    dlrun_config cfg = {.devices = "sim:1", .device_memory = 100};
    dlrun_runtime *rt;
    CHECK(dlrun_runtime_create(&cfg, &rt) == DLRUN_ERR_VALUE, "accepted");
    CHECK_STR_CONTAINS(dlrun_last_error(), "too small");
  }
}

/* ---- work queues ---- */

typedef struct order_ctx {
  dlrun_task node; /* its place in the work queue */
  int *log;
  int *n;
  int value;
  pthread_mutex_t *mu;
} order_ctx;

static dlrun_status append(void *p, dlrun_status prior) {
  order_ctx *c = p;
  pthread_mutex_lock(c->mu);
  c->log[(*c->n)++] = c->value;
  pthread_mutex_unlock(c->mu);
  return prior;
}

/* Queue a task on a host-executed device's work queue. */
static dlrun_status device_submit(dlrun_device *d, dlrun_task *node, const dlrun_event *deps,
                                  size_t ndeps, dlrun_task_fn fn, void *ctx, dlrun_event *done) {
  dlrun_host_queue *q = d->impl;
  return dlrun_work_queue_submit(&q->work, node, deps, ndeps, fn, ctx, done);
}

static dlrun_event device_record(dlrun_device *d) {
  dlrun_event ev = {0};
  dlrun_device_record(d, &ev);
  return ev;
}

/* A task that blocks its work queue until the test opens the gate. */
typedef struct gate {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int open;
} gate;

static dlrun_status wait_gate(void *p, dlrun_status prior) {
  gate *g = p;
  pthread_mutex_lock(&g->mu);
  while (!g->open) pthread_cond_wait(&g->cv, &g->mu);
  pthread_mutex_unlock(&g->mu);
  return prior;
}

static void open_gate(gate *g) {
  pthread_mutex_lock(&g->mu);
  g->open = 1;
  pthread_cond_broadcast(&g->cv);
  pthread_mutex_unlock(&g->mu);
}

static void test_streams(void) {
  TEST("a work queue runs its tasks in order; events wait") {
    dlrun_runtime *rt = make_runtime("sim:4", 1 << 20);
    if (!rt) return;
    enum { N = 2000 };
    static int log[N];
    static order_ctx ctx[N];
    int n = 0;
    pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    dlrun_device *d = dlrun_device_get(rt, "sim", 1);
    dlrun_event last = {0};
    for (int i = 0; i < N; i++) {
      ctx[i] = (order_ctx){.log = log, .n = &n, .value = i, .mu = &mu};
      CHECK(device_submit(d, &ctx[i].node, NULL, 0, append, &ctx[i], &last) == DLRUN_OK,
            "submit");
    }
    dlrun_event_wait(last);
    CHECK(dlrun_event_done(last), "done");
    CHECK(n == N, "ran %d", n);
    int in_order = 1;
    for (int i = 0; i < N; i++) in_order &= log[i] == i;
    CHECK(in_order, "out of order");
    dlrun_runtime_release(rt);
  }
  TEST("many work queues make progress together; no thread per device") {
    dlrun_runtime *rt = make_runtime("sim:512", 1 << 20);
    if (!rt) return;
    enum { PER = 8 };
    static int log[512 * PER];
    static order_ctx ctx[512 * PER];
    int n = 0;
    pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    for (int k = 0; k < PER; k++)
      for (int i = 0; i < 512; i++) {
        dlrun_device *d = dlrun_device_get(rt, "sim", (size_t)i);
        ctx[k * 512 + i] = (order_ctx){.log = log, .n = &n, .value = i * PER + k, .mu = &mu};
        order_ctx *c = &ctx[k * 512 + i];
        CHECK(device_submit(d, &c->node, NULL, 0, append, c, NULL) == DLRUN_OK, "submit");
      }
    for (int i = 0; i < 512; i++) dlrun_device_synchronize(dlrun_device_get(rt, "sim", (size_t)i));
    CHECK(n == 512 * PER, "ran %d", n);
    /* Per device, its tasks ran in queue order. */
    int next[512] = {0}, ordered = 1;
    for (int i = 0; i < n; i++) {
      int dev = log[i] / PER, k = log[i] % PER;
      ordered &= next[dev] == k;
      next[dev] = k + 1;
    }
    CHECK(ordered, "a device's tasks ran out of order");
    dlrun_runtime_release(rt);
  }
  TEST("a task waits for events of other work queues, parked without a thread") {
    /* The gate holds one worker thread: another must run c's work. */
    setenv("DLRUN_WORKERS", "2", 1);
    dlrun_runtime *rt = make_runtime("sim:4", 1 << 20);
    unsetenv("DLRUN_WORKERS");
    if (!rt) return;
    gate g = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
    static int log[8];
    int n = 0;
    pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    dlrun_device *a = dlrun_device_get(rt, "sim", 0), *b = dlrun_device_get(rt, "sim", 1),
                 *c = dlrun_device_get(rt, "sim", 2);
    dlrun_task gate_node;
    order_ctx first = {.log = log, .n = &n, .value = 1, .mu = &mu};
    order_ctx after = {.log = log, .n = &n, .value = 2, .mu = &mu};
    order_ctx free_run = {.log = log, .n = &n, .value = 3, .mu = &mu};
    dlrun_event deps[2];
    CHECK(device_submit(a, &gate_node, NULL, 0, wait_gate, &g, NULL) == DLRUN_OK, "gate");
    CHECK(device_submit(a, &first.node, NULL, 0, append, &first, &deps[0]) == DLRUN_OK,
          "first");
    deps[1] = device_record(c); /* nothing queued on c: done */
    CHECK(dlrun_event_done(deps[1]), "an event of an idle work queue is done");
    CHECK(!dlrun_event_done(deps[0]), "the gated event is pending");
    dlrun_event done;
    CHECK(device_submit(b, &after.node, deps, 2, append, &after, &done) == DLRUN_OK,
          "after");
    /* With a's work queue held and b's parked, the workers still run c's work. */
    CHECK(device_submit(c, &free_run.node, NULL, 0, append, &free_run, NULL) == DLRUN_OK,
          "free");
    dlrun_device_synchronize(c);
    CHECK(n == 1 && log[0] == 3, "c ran first (n=%d)", n);
    CHECK(!dlrun_event_done(done), "b's task waits for a's event");
    open_gate(&g);
    dlrun_event_wait(done);
    CHECK(n == 3 && log[1] == 1 && log[2] == 2, "order 3 1 2 (n=%d)", n);
    dlrun_runtime_release(rt);
  }
}

/* ---- arrays ---- */

static void test_arrays(void) {
  dlrun_runtime *rt = make_runtime("sim:2", 1 << 20);
  if (!rt) return;
  dlrun_device *d0 = dlrun_device_get(rt, "sim", 0);
  dlrun_sharding *s0;
  if (dlrun_single_device_sharding_create(d0, DLRUN_MEM_DEVICE, &s0)) return;
  TEST("from_host copies, read returns the bytes") {
    float data[6] = {1, 2, 3, 4, 5, 6};
    int64_t dims[2] = {2, 3};
    dlrun_array *a = NULL;
    CHECK(dlrun_array_from_host(s0, DLRUN_FLOAT32, 2, dims, data, sizeof data, &a) == DLRUN_OK,
          "%s", dlrun_last_error());
    data[0] = 99; /* the array keeps its own copy */
    float back[6] = {0};
    CHECK(dlrun_array_read(a, 0, sizeof back, back) == DLRUN_OK, "read");
    CHECK(back[0] == 1 && back[5] == 6, "values %g %g", back[0], back[5]);
    CHECK(dlrun_array_size(a) == 6 && dlrun_array_nbytes(a) == 24 && dlrun_array_ndim(a) == 2, "meta");
    /* alone, every array is held whole (jobs: spec/distributed/distributed_arrays_spec.lua) */
    CHECK(dlrun_array_has_full_value(a) && !dlrun_array_has_full_value(NULL), "has_full_value");
    CHECK(dlrun_array_read(a, 20, 8, back) == DLRUN_ERR_VALUE, "read past the end accepted");
    dlrun_memory_stats s;
    dlrun_device_memory_stats(d0, DLRUN_MEM_DEVICE, &s);
    CHECK(s.bytes_in_use == 256, "in use %llu", (unsigned long long)s.bytes_in_use);
    dlrun_array_delete(a);
    dlrun_device_memory_stats(d0, DLRUN_MEM_DEVICE, &s);
    CHECK(s.bytes_in_use == 0, "delete did not free: %llu", (unsigned long long)s.bytes_in_use);
    CHECK(dlrun_array_read(a, 0, 4, back) == DLRUN_ERR_RUNTIME, "read after delete");
    CHECK(strcmp(dlrun_last_error(), "Array has been deleted with shape=float32[2,3].") == 0, "%s",
          dlrun_last_error());
    dlrun_array_delete(a); /* idempotent */
    CHECK(dlrun_array_is_deleted(a), "is_deleted");
    dlrun_array_release(a);
  }
  TEST("wrong byte count is an error and allocates nothing") {
    int64_t dims[1] = {4};
    dlrun_array *a = (dlrun_array *)1;
    char buf[12];
    CHECK(dlrun_array_from_host(s0, DLRUN_FLOAT32, 1, dims, buf, 12, &a) == DLRUN_ERR_VALUE, "accepted");
    CHECK(a == NULL, "out not cleared");
    CHECK_STR_CONTAINS(dlrun_last_error(), "got 12 bytes of data but the shape needs 16");
  }
  TEST("full and arange fill asynchronously and read back") {
    int64_t dims[1] = {1000};
    dlrun_scalar v = {.kind = DLRUN_SCALAR_FLOAT, .re = 2.5};
    dlrun_array *a, *r;
    CHECK(dlrun_array_full(s0, DLRUN_FLOAT64, 1, dims, &v, &a) == DLRUN_OK, "full");
    dlrun_scalar start = {.kind = DLRUN_SCALAR_INT, .i = -5}, step = {.kind = DLRUN_SCALAR_INT, .i = 3};
    CHECK(dlrun_array_arange(s0, DLRUN_INT16, &start, &step, 100, &r) == DLRUN_OK, "arange");
    double dv[1000];
    int16_t iv[100];
    dlrun_array_read(a, 0, sizeof dv, dv);
    dlrun_array_read(r, 0, sizeof iv, iv);
    int ok = 1;
    for (int i = 0; i < 1000; i++) ok &= dv[i] == 2.5;
    for (int i = 0; i < 100; i++) ok &= iv[i] == -5 + 3 * i;
    CHECK(ok, "wrong values");
    dlrun_array_release(a);
    dlrun_array_release(r);
  }
  TEST("arange out of range for its dtype fails before allocating") {
    dlrun_scalar start = {.kind = DLRUN_SCALAR_INT, .i = 250}, step = {.kind = DLRUN_SCALAR_INT, .i = 1};
    dlrun_array *r;
    CHECK(dlrun_array_arange(s0, DLRUN_UINT8, &start, &step, 10, &r) == DLRUN_ERR_VALUE, "accepted");
    CHECK_STR_CONTAINS(dlrun_last_error(), "arange: value 259 does not fit in uint8");
    dlrun_scalar fstep = {.kind = DLRUN_SCALAR_FLOAT, .re = 0.5};
    CHECK(dlrun_array_arange(s0, DLRUN_INT32, &start, &fstep, 10, &r) == DLRUN_ERR_VALUE, "accepted");
    CHECK_STR_CONTAINS(dlrun_last_error(), "needs integral start and step");
  }
  TEST("zero-size and 0-d arrays") {
    int64_t dims[2] = {0, 4};
    dlrun_scalar v = {.kind = DLRUN_SCALAR_INT, .i = 7};
    dlrun_array *a, *s;
    CHECK(dlrun_array_full(s0, DLRUN_INT32, 2, dims, &v, &a) == DLRUN_OK, "zero-size");
    CHECK(dlrun_array_size(a) == 0 && dlrun_array_nbytes(a) == 0, "size");
    CHECK(dlrun_array_block_until_ready(a) == DLRUN_OK, "ready");
    CHECK(dlrun_array_full(s0, DLRUN_INT32, 0, NULL, &v, &s) == DLRUN_OK, "0-d");
    int32_t x = 0;
    dlrun_array_read(s, 0, 4, &x);
    CHECK(x == 7 && dlrun_array_size(s) == 1, "0-d value %d", x);
    dlrun_array_release(a);
    dlrun_array_release(s);
  }
  TEST("overflowing shapes are errors") {
    int64_t dims[2] = {(int64_t)1 << 62, 4};
    dlrun_scalar v = {.kind = DLRUN_SCALAR_INT, .i = 0};
    dlrun_array *a;
    CHECK(dlrun_array_full(s0, DLRUN_FLOAT32, 2, dims, &v, &a) == DLRUN_ERR_VALUE, "accepted");
    CHECK_STR_CONTAINS(dlrun_last_error(), "overflows");
    int64_t neg[1] = {-1};
    CHECK(dlrun_array_full(s0, DLRUN_FLOAT32, 1, neg, &v, &a) == DLRUN_ERR_VALUE, "negative");
    CHECK_STR_CONTAINS(dlrun_last_error(), "negative dimension -1");
  }
  TEST("out of device memory is ResourceExhausted and leaves the pool as it was") {
    int64_t dims[1] = {1 << 20};
    dlrun_scalar v = {.kind = DLRUN_SCALAR_INT, .i = 0};
    dlrun_array *a;
    dlrun_memory_stats before, after;
    dlrun_device_memory_stats(d0, DLRUN_MEM_DEVICE, &before);
    CHECK(dlrun_array_full(s0, DLRUN_FLOAT32, 1, dims, &v, &a) == DLRUN_ERR_RESOURCE_EXHAUSTED, "accepted");
    CHECK_STR_CONTAINS(dlrun_last_error(), "Out of memory on SimDevice(id=0) while allocating 4194304 bytes");
    dlrun_device_memory_stats(d0, DLRUN_MEM_DEVICE, &after);
    CHECK(after.bytes_in_use == before.bytes_in_use, "pool changed");
  }
  TEST("the buffer outlives the runtime's last outside reference") {
    int64_t dims[1] = {8};
    dlrun_scalar v = {.kind = DLRUN_SCALAR_INT, .i = 3};
    dlrun_runtime *rt2 = make_runtime("sim:1", 1 << 20);
    dlrun_sharding *s2;
    dlrun_array *a;
    CHECK(dlrun_single_device_sharding_create(dlrun_device_get(rt2, NULL, 0), DLRUN_MEM_DEVICE, &s2) == DLRUN_OK, "sharding");
    CHECK(dlrun_array_full(s2, DLRUN_INT8, 1, dims, &v, &a) == DLRUN_OK, "full");
    dlrun_sharding_release(s2);
    dlrun_runtime_release(rt2); /* the array still holds the runtime */
    int8_t back[8];
    CHECK(dlrun_array_read(a, 0, 8, back) == DLRUN_OK && back[7] == 3, "read");
    dlrun_array_release(a);
  }
  dlrun_sharding_release(s0);
  dlrun_runtime_release(rt);
}

/* ---- configuration and default capacities (README.md, "Devices and memory") ---- */

static uint64_t pool_limit(dlrun_device *d, dlrun_memory_kind k) {
  dlrun_pool_stats s;
  dlrun_pool_get_stats(d->pools[k], &s);
  return s.bytes_limit;
}

static void test_config(void) {
  TEST("dlrun_check_config reads the environment as runtime creation does") {
    setenv("DLRUN_DEVICES", "bogus", 1);
    unsetenv("DLRUN_DEVICE_MEMORY");
    CHECK(dlrun_check_config(NULL) == DLRUN_ERR_VALUE, "bad DLRUN_DEVICES accepted");
    char want[400];
    snprintf(want, sizeof want, "DLRUN_DEVICES: unknown platform \"bogus\" in device spec "
             "\"bogus\" (expected %s)", check_known_platforms());
    CHECK(strcmp(dlrun_last_error(), want) == 0, "%s", dlrun_last_error());
    dlrun_runtime *rt = NULL;
    CHECK(dlrun_runtime_create(NULL, &rt) == DLRUN_ERR_VALUE && rt == NULL, "created");
    CHECK_STR_CONTAINS(dlrun_last_error(), "DLRUN_DEVICES: unknown platform");
    dlrun_config named = {.devices = "sim:1"};
    CHECK(dlrun_check_config(&named) == DLRUN_OK, "devices given: %s", dlrun_last_error());
    setenv("DLRUN_DEVICES", "", 1); /* empty counts as unset */
    setenv("DLRUN_DEVICE_MEMORY", "1KB", 1);
    CHECK(dlrun_check_config(NULL) == DLRUN_ERR_VALUE, "1KB accepted");
    CHECK(strcmp(dlrun_last_error(), "DLRUN_DEVICE_MEMORY: device memory of 1000 bytes is too "
                                     "small (at least 4096 bytes)") == 0,
          "%s", dlrun_last_error());
    dlrun_config sized = {.device_memory = 4096};
    CHECK(dlrun_check_config(&sized) == DLRUN_OK, "explicit size: %s", dlrun_last_error());
    unsetenv("DLRUN_DEVICES");
    unsetenv("DLRUN_DEVICE_MEMORY");
    CHECK(dlrun_check_config(NULL) == DLRUN_OK, "defaults: %s", dlrun_last_error());
  }
  TEST("a device memory below 4 KiB is refused on every way in") {
    dlrun_config small = {.devices = "sim:1", .device_memory = 4095};
    dlrun_runtime *rt = NULL;
    CHECK(dlrun_check_config(&small) == DLRUN_ERR_VALUE, "check accepted 4095");
    CHECK(dlrun_runtime_create(&small, &rt) == DLRUN_ERR_VALUE, "create accepted 4095");
    CHECK(strcmp(dlrun_last_error(),
                 "device memory of 4095 bytes is too small (at least 4096 bytes)") == 0,
          "%s", dlrun_last_error());
    CHECK(dlrun_default_configure(NULL, 1000) == DLRUN_ERR_VALUE, "configure accepted 1000");
    rt = make_runtime("sim:1", 5000); /* rounded down to 256 */
    CHECK(rt && pool_limit(dlrun_device_get(rt, "sim", 0), DLRUN_MEM_DEVICE) == 4864, "rounding");
    dlrun_runtime_release(rt);
  }
  TEST("default capacities of every memory of every device add up to at most host RAM") {
    const char *specs[] = {"sim:8", "sim:4096", "sim:1", "cpu:4", "sim:8,cpu:2", "cpu:1"};
    uint64_t ram = dlrun_host_ram_bytes();
    for (size_t i = 0; i < sizeof specs / sizeof *specs; i++) {
      dlrun_runtime *rt = make_runtime(specs[i], 0);
      if (!rt) continue;
      uint64_t sum = 0;
      for (size_t d = 0; d < rt->ndevices; d++)
        for (int k = 0; k < DLRUN_MEM_KIND_COUNT; k++) sum += pool_limit(&rt->devices[d], k);
      CHECK(sum <= ram && sum == rt->memory_total, "%s: %llu of %llu", specs[i],
            (unsigned long long)sum, (unsigned long long)ram);
      /* nothing wasted: within 4 KiB per memory of the whole */
      CHECK(sum + 4096 * 2 * rt->ndevices >= ram, "%s: only %llu", specs[i],
            (unsigned long long)sum);
      CHECK(dlrun_runtime_memory_note(rt) == NULL, "%s: note", specs[i]);
      dlrun_runtime_release(rt);
    }
  }
  TEST("sim:8: half of RAM for the sim devices' memory, a quarter of the rest for the pinned "
       "memories, what is left for the host memory") {
    uint64_t ram = dlrun_host_ram_bytes(), half = ram / 2;
    dlrun_runtime *rt = make_runtime("sim:8", 0);
    if (rt) {
      uint64_t sim = (half / 8) & ~4095ull, other = ((ram - half) / 4 / 9) & ~4095ull;
      if (sim > (16ull << 30)) sim = 16ull << 30;
      uint64_t host = (ram - 8 * (sim + other) - other) & ~4095ull;
      CHECK(pool_limit(&rt->devices[0], DLRUN_MEM_DEVICE) == sim, "sim device");
      CHECK(pool_limit(&rt->devices[7], DLRUN_MEM_PINNED_HOST) == other, "sim pinned");
      CHECK(pool_limit(rt->host, DLRUN_MEM_DEVICE) == host, "cpu device");
      CHECK(pool_limit(rt->host, DLRUN_MEM_PINNED_HOST) == other, "cpu pinned");
    }
    dlrun_runtime_release(rt);
  }
  TEST("dlrun_config.host_memory and host_memory_fraction set each cpu device's memory") {
    dlrun_config cfg = {.devices = "sim:2,cpu:2", .host_memory = 8u << 20};
    dlrun_runtime *rt = NULL;
    CHECK(dlrun_runtime_create(&cfg, &rt) == DLRUN_OK, "%s", dlrun_last_error());
    if (rt) {
      CHECK(pool_limit(dlrun_host_device(rt), DLRUN_MEM_DEVICE) == 8u << 20, "host");
      CHECK(pool_limit(dlrun_device_get(rt, "cpu", 1), DLRUN_MEM_DEVICE) == 8u << 20, "cpu 1");
      dlrun_runtime_release(rt);
    }
    cfg = (dlrun_config){.devices = "cpu:2", .host_memory_fraction = 0.25};
    CHECK(dlrun_runtime_create(&cfg, &rt) == DLRUN_OK, "%s", dlrun_last_error());
    if (rt) {
      uint64_t want = (dlrun_host_ram_bytes() / 2 / 4) & ~4095ull;
      CHECK(pool_limit(dlrun_host_device(rt), DLRUN_MEM_DEVICE) == want, "share");
      dlrun_runtime_release(rt);
    }
    cfg = (dlrun_config){.host_memory = 8u << 20, .host_memory_fraction = 0.5};
    CHECK(dlrun_check_config(&cfg) == DLRUN_ERR_VALUE &&
              strcmp(dlrun_last_error(), "host_memory and host_memory_fraction are both set "
                                         "(expected one of them)") == 0,
          "%s", dlrun_last_error());
  }
  TEST("an explicit device memory that over-commits host RAM has a note") {
    dlrun_runtime *rt = make_runtime("sim:2", 64ull << 20);
    CHECK(rt && dlrun_runtime_memory_note(rt) == NULL, "64 MiB noted");
    dlrun_runtime_release(rt);
    rt = make_runtime("sim:2", 1ull << 40);
    const char *note = dlrun_runtime_memory_note(rt);
    CHECK(note != NULL, "1 TiB not noted");
    if (note) {
      CHECK_STR_CONTAINS(note, "device memory of 1.00TiB on each of 2 sim devices over-commits "
                               "host RAM: the memories of all devices add up to 2.");
      CHECK_STR_CONTAINS(note, "so filling them may get the process killed instead of raising "
                               "ResourceExhaustedError");
    }
    CHECK(rt && rt->memory_total > 2ull << 40, "total");
    dlrun_runtime_release(rt);
  }
  TEST("capacities adding up past 2^64 saturate the total and still have the note") {
    dlrun_runtime *rt = make_runtime("sim:4", 1ull << 62);
    const char *note = dlrun_runtime_memory_note(rt);
    CHECK(note != NULL, "4 x 4 EiB not noted");
    if (note)
      CHECK_STR_CONTAINS(note, "device memory of 4.00EiB on each of 4 sim devices over-commits "
                               "host RAM: the memories of all devices add up to at least "
                               "16.00EiB, more than the ");
    CHECK(rt && rt->memory_total == UINT64_MAX, "total");
    dlrun_runtime_release(rt);
  }
}

/* ---- tracing: streamed to the file named at start ---- */

static void test_trace(void) {
  TEST("a trace streams to the file named at start and is finished by stop") {
    char path[] = "/tmp/dlrun_test_trace_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0, "mkstemp");
    close(fd);
    CHECK(dlrun_trace_start(path) == DLRUN_OK, "start: %s", dlrun_last_error());
    CHECK(dlrun_trace_start(path) == DLRUN_ERR_RUNTIME, "second start accepted");
    CHECK_STR_CONTAINS(dlrun_last_error(), "tracing is already on (writing \"");
    for (int i = 0; i < 3; i++)
      dlrun_trace_event("SimDevice(id=0)", "memory", "alloc", dlrun_trace_now(),
                        "\"bytes\": %d", i);
    CHECK(dlrun_trace_stop() == DLRUN_OK, "stop: %s", dlrun_last_error());
    const char *text = check_slurp(path);
    CHECK(text != NULL, "no file");
    if (text) {
      const char *head = "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [\n";
      CHECK(strncmp(text, head, strlen(head)) == 0, "%s", text);
      CHECK_STR_CONTAINS(text, "\"tid\": 1, \"args\": {\"name\": \"SimDevice(id=0)\"}}");
      CHECK_STR_CONTAINS(text, "\"name\": \"alloc\", \"pid\": 1, \"tid\": 1,");
      CHECK_STR_CONTAINS(text, "\"args\": {\"bytes\": 2}}\n]}\n");
      size_t len = strlen(text);
      CHECK(len > 4 && strcmp(text + len - 4, "\n]}\n") == 0, "ends %s", text);
    }
    CHECK(dlrun_trace_stop() == DLRUN_ERR_RUNTIME, "second stop accepted");
    CHECK(strcmp(dlrun_last_error(), "tracing is not on") == 0, "%s",
          dlrun_last_error());
    /* events after stop go nowhere, and a new trace starts empty */
    dlrun_trace_event(NULL, "memory", "free", 0, NULL);
    CHECK(dlrun_trace_start(path) == DLRUN_OK && dlrun_trace_stop() == DLRUN_OK, "restart");
    text = check_slurp(path);
    CHECK(text && !strstr(text, "\"name\": \"alloc\"") && !strstr(text, "\"name\": \"free\""),
          "%s", text ? text : "(none)");
    remove(path);
  }
  TEST("an unwritable trace path fails at start, naming it and why") {
    CHECK(dlrun_trace_start("/nonexistent-dir/t.json") == DLRUN_ERR_RUNTIME, "accepted");
    CHECK(strcmp(dlrun_last_error(), "cannot write the trace file \"/nonexistent-dir/t.json\": "
                                     "No such file or directory") == 0,
          "%s", dlrun_last_error());
    CHECK(dlrun_trace_stop() == DLRUN_ERR_RUNTIME, "tracing is on");
  }
}

/* Threads of this process now. */
static int thread_count(void) {
  DIR *d = opendir("/proc/self/task");
  int n = 0;
  for (struct dirent *e; d && (e = readdir(d));) n += e->d_name[0] != '.';
  if (d) closedir(d);
  return n;
}

/* The threads a runtime made with $DLRUN_WORKERS = `workers` (NULL: unset)
 * starts for a 64 MiB copy between two cpu devices, cut into units that
 * every worker may share; -1 when the runtime was refused. *count and note
 * get what it says. */
static int threads_for_copy(const char *workers, int *count, char *note, size_t n) {
  if (workers) setenv("DLRUN_WORKERS", workers, 1);
  else unsetenv("DLRUN_WORKERS");
  int before = thread_count();
  dlrun_runtime *rt = make_runtime("cpu:2", 0);
  unsetenv("DLRUN_WORKERS");
  if (!rt) return -1;
  const char *text = NULL;
  *count = dlrun_runtime_workers(rt, &text);
  snprintf(note, n, "%s", text ? text : "(null)");
  dlrun_sharding *s0 = NULL, *s1 = NULL;
  int64_t dims[1] = {16 << 20};
  dlrun_scalar v = {.kind = DLRUN_SCALAR_FLOAT, .re = 1.5};
  dlrun_array *a = NULL, *b = NULL;
  int grown = -1;
  if (dlrun_single_device_sharding_create(dlrun_device_get(rt, "cpu", 0), DLRUN_MEM_DEVICE, &s0) ==
          DLRUN_OK &&
      dlrun_single_device_sharding_create(dlrun_device_get(rt, "cpu", 1), DLRUN_MEM_DEVICE, &s1) ==
          DLRUN_OK &&
      dlrun_array_full(s0, DLRUN_FLOAT32, 1, dims, &v, &a) == DLRUN_OK &&
      dlrun_device_put(a, s1, NULL, &b) == DLRUN_OK && dlrun_array_block_until_ready(b) == DLRUN_OK)
    grown = thread_count() - before;
  dlrun_array_release(a);
  dlrun_array_release(b);
  dlrun_sharding_release(s0);
  dlrun_sharding_release(s1);
  dlrun_runtime_release(rt);
  return grown;
}

#define CHECK_STR_SAME(got, want) CHECK(strcmp((got), (want)) == 0, "got \"%s\"", (got))

static void test_workers(void) {
  char note[200], want[200];
  int count;
  TEST("DLRUN_WORKERS sets how many worker threads run") {
    int grown = threads_for_copy("1", &count, note, sizeof note);
    CHECK(count == 1 && grown == 1, "count %d, %d threads started", count, grown);
    CHECK_STR_SAME(note, "1 worker thread (DLRUN_WORKERS=1)");
    grown = threads_for_copy("3", &count, note, sizeof note);
    CHECK(count == 3 && grown >= 1 && grown <= 3, "count %d, %d threads started", count, grown);
    CHECK_STR_SAME(note, "3 worker threads (DLRUN_WORKERS=3)");
    CHECK(threads_for_copy("auto", &count, note, sizeof note) >= 1, "auto refused");
  }
  TEST("a bad DLRUN_WORKERS is a ValueError naming it, at creation and in the check") {
    const char *bad[] = {"0", "65", "-1", "x", "2x", " 2", "1.5"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
      CHECK(threads_for_copy(bad[i], &count, note, sizeof note) == -1, "%s accepted", bad[i]);
      snprintf(want, sizeof want,
               "DLRUN_WORKERS=\"%s\" is not auto or a whole number from 1 to 64", bad[i]);
      CHECK_STR_SAME(dlrun_last_error(), want);
      setenv("DLRUN_WORKERS", bad[i], 1);
      CHECK(dlrun_check_config(NULL) == DLRUN_ERR_VALUE, "%s passed the check", bad[i]);
      unsetenv("DLRUN_WORKERS");
    }
  }
  TEST("by default, one worker per core of this process's affinity") {
    cpu_set_t mine, one;
    CHECK(sched_getaffinity(0, sizeof mine, &mine) == 0, "affinity");
    int cores = CPU_COUNT(&mine);
    int grown = threads_for_copy(NULL, &count, note, sizeof note);
    CHECK(count == (cores < 64 ? cores : 64) && grown >= 1 && grown <= count,
          "count %d for %d cores, %d threads started", count, cores, grown);
    snprintf(want, sizeof want,
             "%d worker thread%s: the %d core%s this process may use (DLRUN_WORKERS sets it)",
             count, count == 1 ? "" : "s", cores, cores == 1 ? "" : "s");
    CHECK_STR_SAME(note, want);
    /* Bound to one core (as mpirun binds each of two processes): one worker. */
    int first = 0;
    while (!CPU_ISSET(first, &mine)) first++;
    CPU_ZERO(&one);
    CPU_SET(first, &one);
    CHECK(sched_setaffinity(0, sizeof one, &one) == 0, "bind");
    grown = threads_for_copy(NULL, &count, note, sizeof note);
    sched_setaffinity(0, sizeof mine, &mine);
    CHECK(count == 1 && grown == 1, "count %d, %d threads started", count, grown);
    CHECK_STR_SAME(note, "1 worker thread: the 1 core this process may use (DLRUN_WORKERS sets it)");
    const char *none = "x";
    CHECK(dlrun_runtime_workers(NULL, &none) == 0 && none == NULL, "NULL runtime");
  }
}

static void test_default_runtime(void) {
  TEST("the default runtime is configured before first use only") {
    CHECK(dlrun_default_configure("sim:2", 1 << 20) == DLRUN_OK, "configure");
    CHECK(dlrun_default_configure("sim:0", 0) == DLRUN_ERR_VALUE, "bad spec accepted");
    dlrun_runtime *a = NULL, *b = NULL;
    CHECK(dlrun_default_runtime(&a) == DLRUN_OK && dlrun_default_runtime(&b) == DLRUN_OK, "get");
    CHECK(a == b && dlrun_device_count(a, "sim") == 2, "same runtime");
    CHECK(dlrun_default_configure("sim:2", 1 << 20) == DLRUN_OK, "same config refused");
    CHECK(dlrun_default_configure("sim:3", 0) == DLRUN_ERR_RUNTIME, "late configure accepted");
    CHECK_STR_CONTAINS(dlrun_last_error(), "already running with devices sim:2,cpu:1");
    dlrun_runtime_release(a);
    dlrun_runtime_release(b);
  }
}

int main(void) {
  test_specs();
  test_sizes();
  test_devices();
  test_streams();
  test_arrays();
  test_config();
  test_trace();
  test_workers();
  test_default_runtime();
  return check_summary("runtime");
}
