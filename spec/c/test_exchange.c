/* C tests of DLPack 1.3's exchange functions for C hosts
 * (include/dlrun/exchange.h): the allocator and the work stream on the bound
 * runtime, every refusal with its kind and message, tensors written and
 * taken back by dlrun_import, deleters on other threads, the pools back to
 * zero, and the opencl (pocl) and cuda (driver double) platforms when they
 * are built here (skipped otherwise). */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "device/device_impl.h" /* dlrun_runtime_synchronize */
#include "dlrun/dlrun.h"
#include "dlrun/exchange.h"

/* What SetError received: how many calls, the last kind and message, and
 * the context it was given. */
typedef struct errors {
  int calls;
  char kind[64];
  char msg[1024];
  void *ctx;
} errors;

static void set_error(void *ctx, const char *kind, const char *msg) {
  errors *e = ctx;
  e->calls++;
  e->ctx = ctx;
  snprintf(e->kind, sizeof e->kind, "%s", kind);
  snprintf(e->msg, sizeof e->msg, "%s", msg);
}

/* A prototype of a float32 tensor of ndim dims on (type, id). */
static DLTensor proto(int32_t type, int32_t id, int ndim, int64_t *dims) {
  return (DLTensor){.device = {(DLDeviceType)type, id}, .ndim = ndim,
                    .dtype = {kDLFloat, 32, 1}, .shape = dims};
}

/* Allocate with the prototype, expecting a refusal of `kind` whose message
 * is exactly `msg` (or starts with it when prefix is set). */
static void refused(DLTensor *p, const char *kind, const char *msg, int prefix) {
  errors e = {0};
  DLManagedTensorVersioned *m = (void *)1;
  int rc = dlrun_exchange_allocator(p, &m, &e, set_error);
  CHECK(rc == -1 && m == NULL, "rc %d, out %p", rc, (void *)m);
  CHECK(e.calls == 1 && e.ctx == &e, "SetError called %d times", e.calls);
  CHECK(strcmp(e.kind, kind) == 0, "kind %s, %s expected", e.kind, kind);
  if (prefix) CHECK(strncmp(e.msg, msg, strlen(msg)) == 0, "message \"%s\"", e.msg);
  else CHECK(strcmp(e.msg, msg) == 0, "message \"%s\"", e.msg);
  CHECK(strcmp(dlrun_last_error(), e.msg) == 0, "last error \"%s\"", dlrun_last_error());
  if (rc == 0 && m) m->deleter(m);
}

static uint64_t in_use(dlrun_device *dev, dlrun_memory_kind kind) {
  dlrun_memory_stats st = {0};
  dlrun_device_memory_stats(dev, kind, &st);
  return st.bytes_in_use;
}

static DLManagedTensorVersioned *allocated(DLTensor *p) {
  errors e = {0};
  DLManagedTensorVersioned *m = NULL;
  int rc = dlrun_exchange_allocator(p, &m, &e, set_error);
  CHECK(rc == 0 && m && e.calls == 0, "rc %d, %d SetError calls: %s %s", rc, e.calls, e.kind,
        e.msg);
  return rc == 0 ? m : NULL;
}

/* The layout every allocation has: version, flags, shape and row-major
 * strides, the device asked for. */
static void check_layout(const DLManagedTensorVersioned *m, const DLTensor *p) {
  const DLTensor *t = &m->dl_tensor;
  CHECK(m->version.major == 1 && m->version.minor == 2, "version {%u, %u}", m->version.major,
        m->version.minor);
  CHECK(m->flags == 0, "flags %llu", (unsigned long long)m->flags);
  CHECK(t->device.device_type == p->device.device_type && t->device.device_id == p->device.device_id,
        "device (%d, %d)", (int)t->device.device_type, (int)t->device.device_id);
  CHECK(t->ndim == p->ndim && t->shape && t->strides && t->shape != p->shape, "ndim/shape");
  CHECK(t->dtype.code == p->dtype.code && t->dtype.bits == p->dtype.bits && t->dtype.lanes == 1,
        "dtype");
  int64_t stride = 1;
  for (int d = t->ndim - 1; d >= 0; d--) {
    CHECK(t->shape[d] == p->shape[d], "dim %d is %lld", d, (long long)t->shape[d]);
    CHECK(t->strides[d] == stride, "stride %d is %lld, %lld expected", d,
          (long long)t->strides[d], (long long)stride);
    stride *= t->shape[d] ? t->shape[d] : 1;
  }
}

/* Take m back as a dlrun array and read its n floats. */
static int import_read(dlrun_runtime *rt, DLManagedTensorVersioned *m, float *out, size_t n) {
  dlrun_array *a = NULL;
  dlrun_import_outcome how = DLRUN_IMPORT_REFUSED;
  dlrun_status st = dlrun_import(rt, NULL, m, NULL, &a, &how);
  CHECK(st == DLRUN_OK && how == DLRUN_IMPORT_WRAPPED, "import: %d, outcome %d: %s", (int)st,
        (int)how, dlrun_last_error());
  if (st) return 0;
  st = dlrun_array_read(a, 0, n * sizeof *out, out);
  CHECK(st == DLRUN_OK, "read: %s", dlrun_last_error());
  dlrun_array_release(a); /* the deleter runs here */
  return st == DLRUN_OK;
}

static void *delete_on_thread(void *m) {
  ((DLManagedTensorVersioned *)m)->deleter(m);
  return NULL;
}

/* ---- threads allocating while the binding changes ---- */

enum { THREADS = 4, ROUNDS = 300 };
static dlrun_runtime *rts[2];
static int thread_failures;

static void *alloc_loop(void *arg) {
  (void)arg;
  int64_t dims[1] = {16};
  DLTensor p = proto(kDLCPU, 0, 1, dims);
  for (int i = 0; i < ROUNDS; i++) {
    DLManagedTensorVersioned *m = NULL;
    if (dlrun_exchange_allocator(&p, &m, NULL, NULL) != 0 || !m) {
      __atomic_fetch_add(&thread_failures, 1, __ATOMIC_RELAXED);
      continue;
    }
    ((float *)m->dl_tensor.data)[15] = (float)i; /* host memory: written in place */
    m->deleter(m);
  }
  return NULL;
}

static void *rebind_loop(void *arg) {
  (void)arg;
  for (int i = 0; i < ROUNDS; i++) dlrun_exchange_bind(rts[i % 2]);
  return NULL;
}

/* ---- platforms built here ---- */

static void module_paths(void) {
  char dir[1024], path[1100];
  ssize_t len = readlink("/proc/self/exe", dir, sizeof dir - 1);
  dir[len > 0 ? len : 0] = 0;
  if (strrchr(dir, '/')) *strrchr(dir, '/') = 0;
  snprintf(path, sizeof path, "%s/../libdlrun_opencl.so", dir);
  if (!getenv("DLRUN_OPENCL_MODULE") && access(path, R_OK) == 0)
    setenv("DLRUN_OPENCL_MODULE", path, 1);
  setenv("POCL_DEVICES", "pthread pthread", 0);
  char lib[1100], mod[1100];
  check_cuda_double(lib, sizeof lib, mod, sizeof mod);
}

/* Whether platform `name` is available with a device; why not in `why`. */
static int platform_here(const char *name, char *why, size_t n) {
  dlrun_platform_status list[16];
  size_t count = dlrun_platforms_list(list, 16);
  for (size_t i = 0; i < count && i < 16; i++) {
    if (strcmp(list[i].name, name) != 0) continue;
    if (list[i].available && list[i].ndevices >= 1) return 1;
    snprintf(why, n, "%s", list[i].available ? "no device" : list[i].why);
    return 0;
  }
  snprintf(why, n, "no %s platform is known", name);
  return 0;
}

/* An accelerator platform: allocation on device 0's memory, labelled as
 * asked, the work stream dlrun's consumer stream for it, taken back by
 * dlrun_import, the pool back where it was. */
static void platform_case(const char *name, int32_t type) {
  char why[512] = "", spec[64];
  if (!platform_here(name, why, sizeof why)) {
    char t[700];
    snprintf(t, sizeof t, "%s: allocator and work stream # SKIP %s", name, why);
    TEST(t) {}
    return;
  }
  snprintf(spec, sizeof spec, "%s:1,cpu:1", name);
  dlrun_config cfg = {.devices = spec, .device_memory = 1 << 20};
  dlrun_runtime *rt = NULL;
  char title[128];
  snprintf(title, sizeof title, "%s: a tensor in device 0's memory, on dlrun's queue", name);
  TEST(title) {
    CHECK(dlrun_runtime_create(&cfg, &rt) == DLRUN_OK, "%s", dlrun_last_error());
    if (!rt) break;
    dlrun_exchange_bind(rt);
    dlrun_device *dev = dlrun_local_device_get(rt, name, 0);
    uint64_t before = in_use(dev, DLRUN_MEM_DEVICE);
    int64_t dims[2] = {4, 8};
    DLTensor p = proto(type, 0, 2, dims);
    DLManagedTensorVersioned *m = allocated(&p);
    if (m) {
      check_layout(m, &p);
      CHECK(m->dl_tensor.data != NULL, "data NULL");
      CHECK(in_use(dev, DLRUN_MEM_DEVICE) >= before + 128, "%llu bytes in use",
            (unsigned long long)in_use(dev, DLRUN_MEM_DEVICE));
      CHECK(dlrun_live_exports(rt) == 1, "%lld live", (long long)dlrun_live_exports(rt));
    }
    void *stream = (void *)1;
    int64_t want = 0;
    CHECK(dlrun_exchange_work_stream((DLDeviceType)type, 0, &stream) == 0, "%s",
          dlrun_last_error());
    CHECK(dlrun_dlpack_consumer_stream(rt, type, 0, &want) && want != 0,
          "no consumer stream");
    CHECK(stream == (void *)(intptr_t)want && stream != NULL, "stream %p, %p expected", stream,
          (void *)(intptr_t)want);
    CHECK(dlrun_exchange_work_stream(kDLCPU, 0, &stream) == 0 && stream == NULL,
          "host stream %p", stream);
    if (m) {
      dlrun_array *a = NULL;
      dlrun_import_outcome how = DLRUN_IMPORT_REFUSED;
      CHECK(dlrun_import(rt, NULL, m, NULL, &a, &how) == DLRUN_OK &&
                how == DLRUN_IMPORT_WRAPPED,
            "import: outcome %d: %s", (int)how, dlrun_last_error());
      CHECK(a && dlrun_array_device(a) == dev, "imported elsewhere");
      dlrun_array_release(a);
    }
    dlrun_runtime_synchronize(rt);
    CHECK(dlrun_live_exports(rt) == 0, "%lld live", (long long)dlrun_live_exports(rt));
    CHECK(in_use(dev, DLRUN_MEM_DEVICE) == before, "%llu bytes in use, %llu before",
          (unsigned long long)in_use(dev, DLRUN_MEM_DEVICE), (unsigned long long)before);
    dlrun_exchange_bind(NULL);
  }
  if (rt && type == kDLCUDA) {
    TEST("cuda: pinned host memory as (kDLCUDAHost, 0), no stream") {
      dlrun_exchange_bind(rt);
      dlrun_device *dev = dlrun_local_device_get(rt, name, 0);
      uint64_t before = in_use(dev, DLRUN_MEM_PINNED_HOST);
      int64_t dims[1] = {64};
      DLTensor p = proto(kDLCUDAHost, 0, 1, dims);
      DLManagedTensorVersioned *m = allocated(&p);
      if (m) {
        check_layout(m, &p);
        CHECK(in_use(dev, DLRUN_MEM_PINNED_HOST) >= before + 256, "not in pinned memory");
        ((float *)m->dl_tensor.data)[63] = 2.5f; /* host memory */
        float back[64];
        if (import_read(rt, m, back, 64)) CHECK(back[63] == 2.5f, "read %g", back[63]);
      }
      void *stream = (void *)1;
      CHECK(dlrun_exchange_work_stream(kDLCUDAHost, 0, &stream) == 0 && stream == NULL,
            "stream %p", stream);
      dlrun_runtime_synchronize(rt);
      CHECK(in_use(dev, DLRUN_MEM_PINNED_HOST) == before, "pinned memory not back");
      dlrun_exchange_bind(NULL);
    }
  }
  if (rt) dlrun_runtime_synchronize(rt);
  dlrun_runtime_release(rt);
}

int main(void) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  module_paths();
  int64_t dims23[2] = {2, 3};

  TEST("refused before a runtime is bound: RuntimeError, and no stream") {
    DLTensor p = proto(kDLCPU, 0, 2, dims23);
    refused(&p, "RuntimeError",
            "dlrun_exchange_allocator: no runtime is bound: call dlrun_exchange_bind(rt) before "
            "handing dlrun's exchange functions to a library",
            0);
    void *stream = (void *)1;
    CHECK(dlrun_exchange_work_stream(kDLCPU, 0, &stream) == -1 && stream == NULL,
          "stream %p", stream);
    CHECK(strcmp(dlrun_last_error(),
                 "dlrun_exchange_work_stream: no runtime is bound: call dlrun_exchange_bind(rt) "
                 "before handing dlrun's exchange functions to a library") == 0,
          "%s", dlrun_last_error());
  }

  dlrun_config cfg = {.devices = "sim:2,cpu:1", .device_memory = 1 << 20,
                      .host_memory = 1 << 20};
  dlrun_runtime *rt = NULL;
  TEST("a runtime on sim:2,cpu:1, bound") {
    CHECK(dlrun_runtime_create(&cfg, &rt) == DLRUN_OK, "%s", dlrun_last_error());
  }
  if (!rt) return check_summary("exchange");
  dlrun_exchange_bind(rt);
  dlrun_device *host = dlrun_host_device(rt), *sim1 = dlrun_device_get(rt, "sim", 1);

  TEST("cpu: a writable row-major float32[2,3] in the host's pool, taken back by import") {
    uint64_t before = in_use(host, DLRUN_MEM_DEVICE);
    int64_t strides[2] = {1, 2}; /* ignored, as DLPack says */
    DLTensor p = proto(kDLCPU, 0, 2, dims23);
    p.strides = strides;
    p.data = (void *)0x10;
    p.byte_offset = 7;
    DLManagedTensorVersioned *m = allocated(&p);
    if (m) {
      check_layout(m, &p);
      CHECK(m->dl_tensor.data && m->dl_tensor.byte_offset == 0, "data %p, offset %llu",
            m->dl_tensor.data, (unsigned long long)m->dl_tensor.byte_offset);
      CHECK(in_use(host, DLRUN_MEM_DEVICE) >= before + 24, "%llu bytes in use",
            (unsigned long long)in_use(host, DLRUN_MEM_DEVICE));
      CHECK(dlrun_live_exports(rt) == 1, "%lld live", (long long)dlrun_live_exports(rt));
      float *v = m->dl_tensor.data;
      for (int i = 0; i < 6; i++) v[i] = 0.5f * (float)i; /* as a host library writes */
      float back[6] = {0};
      if (import_read(rt, m, back, 6))
        for (int i = 0; i < 6; i++) CHECK(back[i] == 0.5f * (float)i, "[%d] = %g", i, back[i]);
    }
    CHECK(dlrun_live_exports(rt) == 0, "%lld live", (long long)dlrun_live_exports(rt));
    CHECK(in_use(host, DLRUN_MEM_DEVICE) == before, "%llu bytes in use, %llu before",
          (unsigned long long)in_use(host, DLRUN_MEM_DEVICE), (unsigned long long)before);
  }

  TEST("cpu: a packed int4[5] holds 5 elements in 3 bytes, read back element by element") {
    int64_t dims5[1] = {5};
    DLTensor p = proto(kDLCPU, 0, 1, dims5);
    p.dtype = (DLDataType){kDLInt, 4, 1};
    DLManagedTensorVersioned *m = allocated(&p);
    if (m) {
      check_layout(m, &p);
      unsigned char *bytes = m->dl_tensor.data;
      for (int i = 0; i < 5; i++) /* element i is bits 4i .. 4i+3: -2, -1, 0, 1, 2 */
        dlrun_dtype_store_at(DLRUN_INT4, bytes, i,
                             &(dlrun_scalar){.kind = DLRUN_SCALAR_INT, .i = i - 2});
      CHECK(bytes[0] == 0xFE && bytes[1] == 0x10 && (bytes[2] & 0x0F) == 0x02,
            "bytes %02x %02x %02x", bytes[0], bytes[1], bytes[2]);
      dlrun_array *a = NULL;
      CHECK(dlrun_import(rt, NULL, m, NULL, &a, NULL) == DLRUN_OK, "%s", dlrun_last_error());
      CHECK(a && dlrun_array_dtype(a) == DLRUN_INT4 && dlrun_array_size(a) == 5 &&
                dlrun_array_nbytes(a) == 3,
            "int4[5] in 3 bytes");
      unsigned char back[3] = {0};
      CHECK(a && dlrun_array_read(a, 0, 3, back) == DLRUN_OK, "%s", dlrun_last_error());
      for (int i = 0; i < 5; i++) {
        dlrun_scalar v;
        dlrun_dtype_load_at(DLRUN_INT4, back, i, &v);
        CHECK(v.kind == DLRUN_SCALAR_INT && v.i == i - 2, "[%d] = %lld", i, (long long)v.i);
      }
      dlrun_array_release(a);
    }
    CHECK(dlrun_live_exports(rt) == 0, "%lld live", (long long)dlrun_live_exports(rt));
  }

  TEST("sim: device 1's memory as (kDLExtDev, 1), written by the driver's copy, no stream") {
    uint64_t before = in_use(sim1, DLRUN_MEM_DEVICE);
    int64_t dims[1] = {100};
    DLTensor p = proto(kDLExtDev, 1, 1, dims);
    p.dtype = (DLDataType){kDLInt, 64, 1};
    DLManagedTensorVersioned *m = allocated(&p);
    void *stream = (void *)1;
    CHECK(dlrun_exchange_work_stream(kDLExtDev, 1, &stream) == 0 && stream == NULL,
          "stream %p", stream);
    if (m) {
      check_layout(m, &p);
      CHECK(in_use(sim1, DLRUN_MEM_DEVICE) >= before + 800, "not in sim 1's pool");
      int64_t v[100];
      for (int i = 0; i < 100; i++) v[i] = 3 * i - 7;
      CHECK(dlrun_device_copy_from_host(sim1, DLRUN_MEM_DEVICE, m->dl_tensor.data, v, sizeof v) ==
                DLRUN_OK,
            "%s", dlrun_last_error());
      dlrun_array *a = NULL;
      dlrun_import_outcome how = DLRUN_IMPORT_REFUSED;
      CHECK(dlrun_import(rt, NULL, m, NULL, &a, &how) == DLRUN_OK && how == DLRUN_IMPORT_WRAPPED,
            "%s", dlrun_last_error());
      int64_t back[100] = {0};
      CHECK(a && dlrun_array_device(a) == sim1 && dlrun_array_dtype(a) == DLRUN_INT64 &&
                dlrun_array_read(a, 0, sizeof back, back) == DLRUN_OK && memcmp(back, v, sizeof v) == 0,
            "read back: %s", dlrun_last_error());
      dlrun_array_release(a);
    }
    dlrun_runtime_synchronize(rt);
    CHECK(in_use(sim1, DLRUN_MEM_DEVICE) == before, "%llu bytes in use, %llu before",
          (unsigned long long)in_use(sim1, DLRUN_MEM_DEVICE), (unsigned long long)before);
  }

  TEST("zero elements: data NULL, shape and strides set; ndim 0: one element") {
    int64_t dims[2] = {0, 4};
    DLTensor p = proto(kDLExtDev, 0, 2, dims);
    DLManagedTensorVersioned *m = allocated(&p);
    if (m) {
      check_layout(m, &p);
      CHECK(m->dl_tensor.data == NULL, "data %p", m->dl_tensor.data);
      m->deleter(m);
    }
    DLTensor s = proto(kDLCPU, 0, 0, NULL);
    s.dtype = (DLDataType){DLRUN_DL_BOOL, 8, 1};
    m = allocated(&s);
    if (m) {
      check_layout(m, &s);
      CHECK(m->dl_tensor.data != NULL && m->dl_tensor.shape != NULL, "scalar data/shape");
      m->deleter(m);
    }
    CHECK(dlrun_live_exports(rt) == 0, "%lld live", (long long)dlrun_live_exports(rt));
  }

  TEST("the deleter runs once, on another thread, and returns the block to the pool") {
    uint64_t before = in_use(host, DLRUN_MEM_DEVICE);
    int64_t dims[1] = {1000};
    DLTensor p = proto(kDLCPU, 0, 1, dims);
    DLManagedTensorVersioned *m = allocated(&p);
    CHECK(in_use(host, DLRUN_MEM_DEVICE) >= before + 4000, "not allocated");
    pthread_t t;
    if (m && pthread_create(&t, NULL, delete_on_thread, m) == 0) pthread_join(t, NULL);
    CHECK(dlrun_live_exports(rt) == 0, "%lld live", (long long)dlrun_live_exports(rt));
    CHECK(in_use(host, DLRUN_MEM_DEVICE) == before, "%llu bytes in use, %llu before",
          (unsigned long long)in_use(host, DLRUN_MEM_DEVICE), (unsigned long long)before);
  }

  TEST("a full pool: MemoryError naming the bytes asked for and those in use") {
    int64_t dims[1] = {300000}; /* 1.2 MB of float32: more than sim 0's 1 MiB */
    DLTensor p = proto(kDLExtDev, 0, 1, dims);
    refused(&p, "MemoryError",
            "dlrun_exchange_allocator: Out of memory on SimDevice(id=0) while allocating "
            "1200000 bytes (1.14MiB): 0 bytes in use of a 1048576 byte limit (0B of 1.00MiB); "
            "the largest free block is 1048576 bytes (1.00MiB) and 0 bytes (0B) are reserved "
            "but unallocated; raise device_memory (dl.configure, --device-memory, "
            "DLRUN_DEVICE_MEMORY) to at least 2097152 bytes (2.00MiB).",
            0);
    CHECK(in_use(dlrun_device_get(rt, "sim", 0), DLRUN_MEM_DEVICE) == 0, "left in use");
  }

  TEST("refusals: the kind and message of each") {
    DLTensor p = proto(kDLCPU, 0, 2, dims23);
    errors e = {0};
    CHECK(dlrun_exchange_allocator(&p, NULL, &e, set_error) == -1 && e.calls == 1 &&
              strcmp(e.kind, "ValueError") == 0 &&
              strcmp(e.msg, "dlrun_exchange_allocator: out is NULL") == 0,
          "NULL out: %s %s", e.kind, e.msg);
    refused(NULL, "ValueError", "dlrun_exchange_allocator: prototype is NULL", 0);
    p.ndim = -1;
    refused(&p, "ValueError",
            "dlrun_exchange_allocator: prototype: ndim -1 is out of range (0 to 32)", 0);
    p.ndim = 33;
    refused(&p, "ValueError",
            "dlrun_exchange_allocator: prototype: ndim 33 is out of range (0 to 32)", 0);
    p = proto(kDLCPU, 0, 2, NULL);
    refused(&p, "ValueError", "dlrun_exchange_allocator: prototype: shape is NULL with ndim 2",
            0);
    int64_t neg[2] = {2, -3};
    p = proto(kDLCPU, 0, 2, neg);
    refused(&p, "ValueError",
            "dlrun_exchange_allocator: prototype: negative dimension -3 in shape (2, -3)", 0);
    int64_t huge[2] = {INT64_C(1) << 40, INT64_C(1) << 30};
    p = proto(kDLCPU, 0, 2, huge);
    refused(&p, "ValueError",
            "dlrun_exchange_allocator: prototype: shape (1099511627776, 1073741824) has too "
            "many elements (overflows int64)",
            0);
    int64_t big[1] = {INT64_C(1) << 62};
    p = proto(kDLCPU, 0, 1, big);
    refused(&p, "ValueError",
            "dlrun_exchange_allocator: prototype: shape (4611686018427387904,) of float32 is too "
            "large: its byte size overflows int64",
            0);
    p = proto(kDLCPU, 0, 2, dims23);
    p.dtype.lanes = 4;
    refused(&p, "BufferError",
            "dlrun_exchange_allocator: prototype: DLPack dtype with lanes=4 is not supported "
            "(only lanes=1)",
            0);
    p.dtype = (DLDataType){kDLFloat, 24, 1};
    refused(&p, "BufferError",
            "dlrun_exchange_allocator: prototype: unsupported DLPack dtype (code=2 (kDLFloat), "
            "bits=24, lanes=1)",
            0);
    p.dtype = (DLDataType){17, 6, 1}; /* float4_e2m1fn is 4 bits */
    refused(&p, "BufferError",
            "dlrun_exchange_allocator: prototype: unsupported DLPack dtype "
            "(code=17 (kDLFloat4_e2m1fn), bits=6, lanes=1)",
            0);
    const char *has = "; it has kDLExtDev:0..1, kDLCPU:0";
    struct { int32_t type, id; const char *name; } missing[] = {
        {kDLCUDA, 0, "kDLCUDA:0"},     {kDLExtDev, 2, "kDLExtDev:2"},
        {kDLExtDev, -1, "kDLExtDev:-1"}, {kDLCPU, 3, "kDLCPU:3"},
        {kDLCUDAHost, 0, "kDLCUDAHost:0"}, {kDLOpenCL, 0, "kDLOpenCL:0"},
        {99, 0, "DLDeviceType 99:0"},
    };
    for (size_t i = 0; i < sizeof missing / sizeof *missing; i++) {
      char msg[256];
      snprintf(msg, sizeof msg,
               "dlrun_exchange_allocator: this runtime has no memory for device %s%s",
               missing[i].name, has);
      p = proto(missing[i].type, missing[i].id, 2, dims23);
      refused(&p, "BufferError", msg, 0);
      void *stream = (void *)1;
      CHECK(dlrun_exchange_work_stream((DLDeviceType)missing[i].type, missing[i].id, &stream) ==
                    -1 &&
                stream == NULL,
            "stream of %s: %p", missing[i].name, stream);
      snprintf(msg, sizeof msg,
               "dlrun_exchange_work_stream: this runtime has no memory for device %s%s",
               missing[i].name, has);
      CHECK(strcmp(dlrun_last_error(), msg) == 0, "%s", dlrun_last_error());
    }
    /* No SetError: only -1. */
    p = proto(kDLCUDA, 0, 2, dims23);
    DLManagedTensorVersioned *m = (void *)1;
    CHECK(dlrun_exchange_allocator(&p, &m, NULL, NULL) == -1 && m == NULL, "NULL SetError");
    CHECK(dlrun_exchange_work_stream(kDLCPU, 0, NULL) == -1 &&
              strcmp(dlrun_last_error(), "dlrun_exchange_work_stream: out_current_stream is NULL") ==
                  0,
          "%s", dlrun_last_error());
    CHECK(dlrun_live_exports(rt) == 0, "%lld live", (long long)dlrun_live_exports(rt));
  }

  TEST("the exchange table: version {1, 3}, the two functions, Python slots refusing") {
    const DLPackExchangeAPI *api = dlrun_exchange_api();
    CHECK(api == dlrun_exchange_api() && api->header.version.major == 1 &&
              api->header.version.minor == 3 && api->header.prev_api == NULL,
          "header");
    CHECK(api->managed_tensor_allocator == dlrun_exchange_allocator &&
              api->current_work_stream == dlrun_exchange_work_stream &&
              api->dltensor_from_py_object_no_sync == NULL,
          "slots");
    DLManagedTensorVersioned *m = (void *)1;
    CHECK(api->managed_tensor_from_py_object_no_sync((void *)1, &m) == -1 && m == NULL &&
              strncmp(dlrun_last_error(),
                      "managed_tensor_from_py_object_no_sync: dlrun's exchange table has no "
                      "Python objects",
                      80) == 0,
          "%s", dlrun_last_error());
    void *obj = (void *)1;
    CHECK(api->managed_tensor_to_py_object_no_sync(NULL, &obj) == -1 && obj == NULL,
          "to_py_object");
  }

  TEST("tensors outlive the binding and the host's reference to the runtime") {
    int64_t dims[1] = {8};
    DLTensor p = proto(kDLExtDev, 0, 1, dims);
    DLManagedTensorVersioned *m = allocated(&p);
    dlrun_runtime *other = NULL;
    dlrun_config c2 = {.devices = "cpu:1", .host_memory = 1 << 20};
    CHECK(dlrun_runtime_create(&c2, &other) == DLRUN_OK, "%s", dlrun_last_error());
    dlrun_exchange_bind(other); /* rt loses the binding's reference */
    CHECK(m && dlrun_live_exports(rt) == 1, "%lld live", (long long)dlrun_live_exports(rt));
    errors e = {0};
    DLManagedTensorVersioned *n = NULL;
    CHECK(dlrun_exchange_allocator(&p, &n, &e, set_error) == -1 &&
              strcmp(e.msg, "dlrun_exchange_allocator: this runtime has no memory for device "
                            "kDLExtDev:0; it has kDLCPU:0") == 0,
          "%s", e.msg);
    dlrun_exchange_bind(rt);
    dlrun_runtime_release(other);
    if (m) m->deleter(m);
    CHECK(dlrun_live_exports(rt) == 0, "%lld live", (long long)dlrun_live_exports(rt));
  }

  TEST("threads allocate and delete while another rebinds between two runtimes") {
    dlrun_config c2 = {.devices = "cpu:1", .host_memory = 1 << 20};
    rts[0] = rt;
    CHECK(dlrun_runtime_create(&c2, &rts[1]) == DLRUN_OK, "%s", dlrun_last_error());
    pthread_t t[THREADS + 1];
    for (int i = 0; i < THREADS; i++) pthread_create(&t[i], NULL, alloc_loop, NULL);
    pthread_create(&t[THREADS], NULL, rebind_loop, NULL);
    for (int i = 0; i <= THREADS; i++) pthread_join(t[i], NULL);
    CHECK(thread_failures == 0, "%d allocations failed", thread_failures);
    dlrun_exchange_bind(NULL);
    CHECK(dlrun_live_exports(rt) == 0 && dlrun_live_exports(rts[1]) == 0, "exports left");
    CHECK(in_use(host, DLRUN_MEM_DEVICE) == 0 &&
              in_use(dlrun_host_device(rts[1]), DLRUN_MEM_DEVICE) == 0,
          "host memory left in use");
    dlrun_runtime_release(rts[1]);
  }

  dlrun_exchange_bind(NULL);
  dlrun_runtime_synchronize(rt);
  dlrun_runtime_release(rt);

  platform_case("opencl", kDLOpenCL);
  platform_case("cuda", kDLCUDA);
  return check_summary("exchange");
}
