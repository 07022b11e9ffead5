/* The CUDA driver double (spec/cuda/double/), tested as the CUDA platform
 * uses it: loaded with dlopen, every entry resolved through
 * cuGetProcAddress_v2. Each test runs in a forked child that sets its
 * environment, loads the library fresh and unloads it (so the double's
 * configuration is read anew, and leak checkers see its teardown). */
#include <dirent.h>
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "platforms/cuda/driver_api.h"

static char here[1024], lib_path[1100], nogpa_path[1100];
static void *lib;
static dlcu_api cu;
static dlcu_get_proc_address_fn gpa;
static dlcu_result (*error_name)(dlcu_result, const char **);
static void (*hold)(int);
static dlcu_context ctx[4];
static int ndev;

#define OK(call) CHECK((call) == DLCU_SUCCESS, "%s", #call)
#define IS(call, want)                                                  \
  do {                                                                  \
    dlcu_result got_ = (call);                                          \
    CHECK(got_ == (want), "%s gave %d, expected %d", #call, got_, (want)); \
  } while (0)

/* fn in a child with exactly the double's variables of `env` ("A=1 B=2"). */
static int in_child(void (*fn)(void), const char *env) {
  fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    static const char *const vars[] = {
        "CUDA_DOUBLE_DEVICES", "CUDA_DOUBLE_MEMORY", "CUDA_DOUBLE_GRANULARITY",
        "CUDA_DOUBLE_VERSION", "CUDA_DOUBLE_NO_VMM", "CUDA_DOUBLE_NO_PEER", "CUDA_DOUBLE_STUB",
        "CUDA_DOUBLE_NO_PROC_ADDRESS", "CUDA_DOUBLE_FAIL", "CUDA_DOUBLE_REPORT_LEAKS"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) unsetenv(vars[i]);
    char buf[512];
    snprintf(buf, sizeof buf, "%s", env ? env : "");
    char *save = NULL;
    for (char *kv = strtok_r(buf, " ", &save); kv; kv = strtok_r(NULL, " ", &save)) {
      char *eq = strchr(kv, '=');
      *eq = '\0';
      setenv(kv, eq + 1, 1);
    }
    fn();
    fflush(stdout);
    exit(check_current_failed ? 1 : 0); /* exit: leak checkers look at the child too */
  }
  int status;
  return check_child_passed(pid, &status);
}

/* Loads the library and resolves every entry as the platform does. */
static bool load(void) {
  lib = dlopen(lib_path, RTLD_NOW | RTLD_LOCAL);
  CHECK(lib, "dlopen: %s", dlerror());
  if (!lib) return false;
  gpa = (dlcu_get_proc_address_fn)dlsym(lib, DLCU_GET_PROC_ADDRESS_SYMBOL);
  hold = (void (*)(int))dlsym(lib, "cuda_double_hold");
  CHECK(gpa && hold, "cuGetProcAddress_v2 and the hold hook are exported");
  dlcu_proc_address_status st;
  bool all = true;
#define RESOLVE(field, name, version, symbol, params)                                  \
  all &= gpa(name, (void **)&cu.field, version, 0, &st) == DLCU_SUCCESS &&             \
         st == DLCU_GET_PROC_ADDRESS_SUCCESS && cu.field == dlsym(lib, #symbol);
  DLCU_ENTRIES(RESOLVE)
#undef RESOLVE
  CHECK(all, "every entry resolves by base name to its versioned symbol");
  all &= gpa("cuGetErrorName", (void **)&error_name, 6000, 0, &st) == DLCU_SUCCESS;
  return all;
}

static void unload(void) {
  if (lib) dlclose(lib);
  lib = NULL;
}

/* The double's worker threads alive (they are named "cuda-double"). */
static int threads(void) {
  int n = 0;
  char path[300], comm[32];
  DIR *d = opendir("/proc/self/task");
  for (struct dirent *e; d && (e = readdir(d));) {
    if (e->d_name[0] == '.') continue;
    snprintf(path, sizeof path, "/proc/self/task/%.200s/comm", e->d_name);
    FILE *f = fopen(path, "r");
    n += f && fgets(comm, sizeof comm, f) && strncmp(comm, "cuda-double", 11) == 0;
    if (f) fclose(f);
  }
  if (d) closedir(d);
  return n;
}

/* The workers alive once the count reaches want, or after 2 s: a joined thread's
 * /proc entry can outlive pthread_join by a moment, as the kernel reaps it after
 * waking the joiner. */
static int threads_settled(int want) {
  int n = threads();
  for (int i = 0; n != want && i < 2000; i++) {
    usleep(1000);
    n = threads();
  }
  return n;
}

/* cuInit, every device's primary context retained, device 0's current. */
static bool setup(void) {
  if (!load()) return false;
  OK(cu.Init(0));
  OK(cu.DeviceGetCount(&ndev));
  for (int i = 0; i < ndev && i < 4; i++) OK(cu.DevicePrimaryCtxRetain(&ctx[i], i));
  OK(cu.CtxSetCurrent(ctx[0]));
  return !check_current_failed;
}


/* Releases the contexts: no worker thread of the double is left. */
static void teardown(void) {
  for (int i = 0; i < ndev && i < 4; i++) OK(cu.DevicePrimaryCtxRelease(i));
  int left = threads_settled(0);
  CHECK(left == 0, "%d workers left after the contexts went", left);
  unload();
}

static void *dev_ptr(dlcu_ptr p) { return (void *)(uintptr_t)p; }
static dlcu_ptr host_ptr(const void *p) { return (dlcu_ptr)(uintptr_t)p; }

/* ---- entry points, versions, names ---- */
static void entry_points(void) {
  if (!load()) return;
  int v = 0;
  OK(cu.DriverGetVersion(&v));
  CHECK(v == 12080, "version %d", v);
  IS(cu.DeviceGetCount(&v), DLCU_ERROR_NOT_INITIALIZED);
  void *fn = &v;
  dlcu_proc_address_status st = 0;
  IS(gpa("cuNoSuchThing", &fn, 12080, 0, &st), DLCU_ERROR_NOT_FOUND);
  CHECK(st == DLCU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND && !fn, "status %d", st);
  IS(gpa("cuMemAlloc", &fn, 3000, 0, &st), DLCU_ERROR_NOT_FOUND);
  CHECK(st == DLCU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT, "status %d", st);
  OK(gpa("cuMemAlloc", &fn, 12080, 0, &st));
  CHECK(fn == dlsym(lib, "cuMemAlloc_v2") && !dlsym(lib, "cuMemAlloc"), "only the _v2 ABI");
  OK(gpa("cuGetProcAddress", &fn, 12000, 0, &st));
  CHECK(fn == (void *)gpa, "itself");
  const char *s = NULL;
  OK(error_name(DLCU_ERROR_ILLEGAL_ADDRESS, &s));
  CHECK(s && strcmp(s, "CUDA_ERROR_ILLEGAL_ADDRESS") == 0, "%s", s);
  dlcu_result (*error_string)(dlcu_result, const char **) = NULL;
  OK(gpa("cuGetErrorString", (void **)&error_string, 6000, 0, &st));
  OK(error_string(DLCU_ERROR_OUT_OF_MEMORY, &s));
  CHECK(strcmp(s, "out of memory") == 0, "%s", s);
  IS(error_name(12345, &s), DLCU_ERROR_INVALID_VALUE);
  IS(cu.Init(1), DLCU_ERROR_INVALID_VALUE);
  unload();
}

/* ---- devices, contexts, memory ---- */
static void devices_and_memory(void) {
  if (!setup()) return;
  CHECK(ndev == 4, "%d devices", ndev);
  char name[64];
  OK(cu.DeviceGetName(name, sizeof name, 2));
  CHECK(strcmp(name, "dlrun CUDA double 2") == 0, "%s", name);
  int a = -1;
  OK(cu.DeviceGetAttribute(&a, DLCU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, 1));
  CHECK(a == 1, "vmm %d", a);
  OK(cu.DeviceGetAttribute(&a, DLCU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING, 0));
  CHECK(a == 1, "uva %d", a);
  IS(cu.DeviceGetAttribute(&a, DLCU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING, 4),
     DLCU_ERROR_INVALID_DEVICE);
  dlcu_device d;
  IS(cu.DeviceGet(&d, 4), DLCU_ERROR_INVALID_DEVICE);
  size_t total = 0, free_bytes = 0;
  OK(cu.DeviceTotalMem(&total, 3));
  CHECK(total == 256u << 20, "total %zu", total);
  dlcu_ptr p = 0, q = 0;
  OK(cu.MemAlloc(&p, 1000));
  OK(cu.MemAlloc(&q, 1));
  CHECK(p % 256 == 0 && q % 256 == 0 && p != q, "aligned %llx %llx", p, q);
  OK(cu.MemGetInfo(&free_bytes, &total));
  CHECK(total == 256u << 20 && free_bytes == total - 1024 - 256, "free %zu", free_bytes);
  dlcu_ptr big;
  IS(cu.MemAlloc(&big, (256u << 20) - 1024), DLCU_ERROR_OUT_OF_MEMORY);
  IS(cu.MemAlloc(&big, 0), DLCU_ERROR_INVALID_VALUE);
  IS(cu.MemFree(p + 256), DLCU_ERROR_INVALID_VALUE);
  OK(cu.MemFree(p));
  IS(cu.MemFree(p), DLCU_ERROR_INVALID_VALUE);
  OK(cu.MemFree(q));
  OK(cu.MemGetInfo(&free_bytes, &total));
  CHECK(free_bytes == total, "all given back: %zu", free_bytes);
  teardown();
}

static dlcu_result alloc_on_thread(void) {
  dlcu_ptr p;
  return cu.MemAlloc(&p, 64);
}
static void *no_context_thread(void *arg) {
  (void)arg;
  return (void *)(intptr_t)alloc_on_thread();
}

static void contexts(void) {
  if (!setup()) return;
  pthread_t t;
  void *rc = NULL;
  pthread_create(&t, NULL, no_context_thread, NULL);
  pthread_join(t, &rc);
  CHECK((intptr_t)rc == DLCU_ERROR_INVALID_CONTEXT, "a thread without a context: %d",
        (int)(intptr_t)rc);
  dlcu_context again;
  OK(cu.DevicePrimaryCtxRetain(&again, 0));
  CHECK(again == ctx[0], "one primary context per device");
  OK(cu.DevicePrimaryCtxRelease(0));
  dlcu_ptr p;
  OK(cu.MemAlloc(&p, 64)); /* still retained once */
  OK(cu.CtxSetCurrent(NULL));
  IS(cu.MemAlloc(&p, 64), DLCU_ERROR_INVALID_CONTEXT);
  OK(cu.CtxSetCurrent(ctx[0]));
  OK(cu.DevicePrimaryCtxRelease(0)); /* gone, with its memory */
  IS(cu.MemAlloc(&p, 64), DLCU_ERROR_INVALID_CONTEXT);
  IS(cu.CtxSetCurrent(ctx[0]), DLCU_ERROR_INVALID_CONTEXT);
  IS(cu.DevicePrimaryCtxRelease(0), DLCU_ERROR_INVALID_CONTEXT);
  OK(cu.DevicePrimaryCtxRetain(&ctx[0], 0)); /* for teardown */
  teardown();
}

/* ---- memory the host cannot read ---- */
static void on_segv(int sig) {
  (void)sig;
  _exit(42);
}

/* Whether addr lies in a mapping of this process with no access. */
static bool inaccessible(dlcu_ptr addr) {
  FILE *f = fopen("/proc/self/maps", "r");
  char line[512];
  bool found = false;
  while (f && fgets(line, sizeof line, f)) {
    unsigned long long lo, hi;
    char perms[8];
    if (sscanf(line, "%llx-%llx %7s", &lo, &hi, perms) == 3 && addr >= lo && addr < hi)
      found = strncmp(perms, "---", 3) == 0;
  }
  if (f) fclose(f);
  return found;
}

static void not_host_readable(void) {
  if (!setup()) return;
  dlcu_ptr p;
  OK(cu.MemAlloc(&p, 4096));
  unsigned char in[4096], out[4096];
  for (int i = 0; i < 4096; i++) in[i] = (unsigned char)(i * 7);
  OK(cu.Memcpy(p, host_ptr(in), sizeof in));
  OK(cu.Memcpy(host_ptr(out), p, sizeof out));
  CHECK(memcmp(in, out, sizeof in) == 0, "round trip");
  fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    struct sigaction sa = {.sa_handler = on_segv};
    sigaction(SIGSEGV, &sa, NULL);
    volatile unsigned char *bytes = dev_ptr(p);
    _exit(bytes[1] == 7 ? 1 : 2);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  /* under valgrind the read is reported, and its exit code says so */
  const char *preload = getenv("LD_PRELOAD");
  int vg = preload && strstr(preload, "vgpreload") ? 99 : 42;
  CHECK(WIFEXITED(status) && (WEXITSTATUS(status) == 42 || WEXITSTATUS(status) == vg),
        "a host read of device memory faults (status 0x%x)", status);
  CHECK(inaccessible(p), "the device address is mapped without access");
  void *h = NULL;
  OK(cu.MemHostAlloc(&h, 100, DLCU_MEMHOSTALLOC_PORTABLE));
  OK(cu.Memcpy(host_ptr(h), p, 100));
  CHECK(((unsigned char *)h)[1] == 7, "pinned memory is host memory");
  OK(cu.MemFreeHost(h));
  IS(cu.MemFreeHost(h), DLCU_ERROR_INVALID_VALUE);
  OK(cu.MemFree(p));
  teardown();
}

/* ---- pointer attributes ---- */
static void pointer_attributes(void) {
  if (!setup()) return;
  dlcu_ptr p0, p1;
  OK(cu.MemAlloc(&p0, 1000));
  OK(cu.CtxSetCurrent(ctx[1]));
  OK(cu.MemAlloc(&p1, 1000));
  dlcu_context c = NULL;
  unsigned int type = 0, managed = 9;
  int ordinal = -1;
  dlcu_ptr start = 0, dp = 0;
  size_t size = 0;
  OK(cu.PointerGetAttribute(&c, DLCU_POINTER_ATTRIBUTE_CONTEXT, p1 + 10));
  OK(cu.PointerGetAttribute(&type, DLCU_POINTER_ATTRIBUTE_MEMORY_TYPE, p1 + 10));
  OK(cu.PointerGetAttribute(&ordinal, DLCU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, p1 + 10));
  OK(cu.PointerGetAttribute(&start, DLCU_POINTER_ATTRIBUTE_RANGE_START_ADDR, p1 + 10));
  OK(cu.PointerGetAttribute(&size, DLCU_POINTER_ATTRIBUTE_RANGE_SIZE, p1 + 10));
  OK(cu.PointerGetAttribute(&managed, DLCU_POINTER_ATTRIBUTE_IS_MANAGED, p1 + 10));
  OK(cu.PointerGetAttribute(&dp, DLCU_POINTER_ATTRIBUTE_DEVICE_POINTER, p1 + 10));
  CHECK(c == ctx[1] && type == DLCU_MEMORYTYPE_DEVICE && ordinal == 1 && start == p1 &&
            size == 1000 && managed == 0 && dp == p1 + 10,
        "device 1: ctx %d type %u ordinal %d size %zu", c == ctx[1], type, ordinal, size);
  void *hp;
  IS(cu.PointerGetAttribute(&hp, DLCU_POINTER_ATTRIBUTE_HOST_POINTER, p1),
     DLCU_ERROR_INVALID_VALUE);
  OK(cu.PointerGetAttribute(&ordinal, DLCU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, p0));
  CHECK(ordinal == 0, "device 0: %d", ordinal);
  IS(cu.PointerGetAttribute(&type, DLCU_POINTER_ATTRIBUTE_MEMORY_TYPE, p0 + 1000),
     DLCU_ERROR_INVALID_VALUE);
  void *h;
  OK(cu.MemHostAlloc(&h, 64, 0));
  OK(cu.PointerGetAttribute(&type, DLCU_POINTER_ATTRIBUTE_MEMORY_TYPE, host_ptr(h) + 3));
  OK(cu.PointerGetAttribute(&hp, DLCU_POINTER_ATTRIBUTE_HOST_POINTER, host_ptr(h)));
  CHECK(type == DLCU_MEMORYTYPE_HOST && hp == h, "pinned: type %u", type);
  char *plain = malloc(64);
  IS(cu.PointerGetAttribute(&type, DLCU_POINTER_ATTRIBUTE_MEMORY_TYPE, host_ptr(plain)),
     DLCU_ERROR_INVALID_VALUE);
  free(plain);
  OK(cu.MemFreeHost(h));
  OK(cu.MemFree(p1));
  OK(cu.CtxSetCurrent(ctx[0]));
  OK(cu.MemFree(p0));
  teardown();
}

/* ---- virtual memory management ---- */
static void vmm(void) {
  if (!setup()) return;
  dlcu_mem_allocation_prop prop = {.type = DLCU_MEM_ALLOCATION_TYPE_PINNED,
                                   .location = {DLCU_MEM_LOCATION_TYPE_DEVICE, 0}};
  size_t g = 0, free0, free1, total;
  OK(cu.MemGetAllocationGranularity(&g, &prop, DLCU_MEM_ALLOC_GRANULARITY_MINIMUM));
  CHECK(g == 2u << 20, "granularity %zu", g);
  dlcu_ptr r;
  IS(cu.MemAddressReserve(&r, g + 1, 0, 0, 0), DLCU_ERROR_INVALID_VALUE);
  OK(cu.MemAddressReserve(&r, 4 * g, 0, 0, 0));
  CHECK(r % g == 0, "aligned range");
  OK(cu.MemGetInfo(&free0, &total));
  size_t (*creates)(uint64_t *, int *, size_t, int);
  *(void **)&creates = dlsym(lib, "cuda_double_creates");
  CHECK(creates && creates(NULL, NULL, 0, 1) == 0, "the creates hook, none made yet");
  dlcu_mem_handle h1, h2, h3, h4;
  IS(cu.MemCreate(&h1, g + 4096, &prop, 0), DLCU_ERROR_INVALID_VALUE);
  OK(cu.MemCreate(&h1, g, &prop, 0));
  OK(cu.MemCreate(&h2, g, &prop, 0));
  OK(cu.MemCreate(&h3, 2 * g, &prop, 0));
  OK(cu.MemGetInfo(&free1, &total));
  CHECK(free0 - free1 == 4 * g, "handles are charged: %zu", free0 - free1);
  IS(cu.MemCreate(&h3, 256u << 20, &prop, 0), DLCU_ERROR_OUT_OF_MEMORY);
  dlcu_mem_allocation_prop on1 = {.type = DLCU_MEM_ALLOCATION_TYPE_PINNED,
                                  .location = {DLCU_MEM_LOCATION_TYPE_DEVICE, 1}};
  OK(cu.MemCreate(&h4, 3 * g, &on1, 0));
  uint64_t sizes[5] = {0};
  int devs[5] = {-1, -1, -1, -1, -1};
  /* the calls that made a handle, in order; at most `max` copied */
  CHECK(creates && creates(sizes, devs, 2, 0) == 4 && sizes[0] == g && sizes[1] == g &&
            sizes[2] == 0 && devs[0] == 0 && devs[1] == 0 && devs[2] == -1,
        "the first two of four creates");
  CHECK(creates && creates(sizes, devs, 5, 1) == 4 && sizes[2] == 2 * g && sizes[3] == 3 * g &&
            sizes[4] == 0 && devs[2] == 0 && devs[3] == 1 && devs[4] == -1,
        "four creates: %llu %llu on %d %d", (unsigned long long)sizes[2],
        (unsigned long long)sizes[3], devs[2], devs[3]);
  CHECK(creates && creates(sizes, devs, 5, 0) == 0, "cleared");
  OK(cu.MemRelease(h4));
  IS(cu.MemMap(r + g / 2, g, 0, h1, 0), DLCU_ERROR_INVALID_VALUE);     /* misaligned */
  IS(cu.MemMap(r, 2 * g, 0, h1, 0), DLCU_ERROR_INVALID_VALUE);         /* not the whole handle */
  IS(cu.MemMap(r, g, g / 2, h1, 0), DLCU_ERROR_INVALID_VALUE);         /* offset */
  IS(cu.MemMap(r + 3 * g, 2 * g, 0, h3, 0), DLCU_ERROR_INVALID_VALUE); /* past the range */
  OK(cu.MemMap(r, g, 0, h1, 0));
  IS(cu.MemMap(r, g, 0, h2, 0), DLCU_ERROR_INVALID_VALUE); /* overlaps */
  OK(cu.MemMap(r + g, g, 0, h2, 0));
  unsigned char in[64], out[64];
  for (int i = 0; i < 64; i++) in[i] = (unsigned char)(100 + i);
  dlcu_stream s;
  OK(cu.StreamCreate(&s, DLCU_STREAM_NON_BLOCKING));
  /* mapped without access: the copy is queued, the stream reports 700 */
  OK(cu.MemcpyAsync(r + g - 32, host_ptr(in), 64, s));
  IS(cu.StreamSynchronize(s), DLCU_ERROR_ILLEGAL_ADDRESS);
  OK(cu.StreamSynchronize(s)); /* reported once */
  dlcu_mem_access_desc rw = {{DLCU_MEM_LOCATION_TYPE_DEVICE, 0}, DLCU_MEM_ACCESS_FLAGS_PROT_READWRITE};
  IS(cu.MemSetAccess(r, 3 * g, &rw, 1), DLCU_ERROR_INVALID_VALUE); /* not all mapped */
  IS(cu.MemSetAccess(r, g / 2, &rw, 1), DLCU_ERROR_INVALID_VALUE); /* part of a mapping */
  OK(cu.MemSetAccess(r, 2 * g, &rw, 1));
  OK(cu.MemcpyAsync(r + g - 32, host_ptr(in), 64, s)); /* across the two handles */
  OK(cu.MemcpyAsync(host_ptr(out), r + g - 32, 64, s));
  OK(cu.StreamSynchronize(s));
  CHECK(memcmp(in, out, 64) == 0, "bytes across two mappings");
  /* the second handle's bytes, seen through another mapping of it */
  OK(cu.MemMap(r + 2 * g, g, 0, h2, 0));
  dlcu_mem_access_desc ro = {{DLCU_MEM_LOCATION_TYPE_DEVICE, 0}, DLCU_MEM_ACCESS_FLAGS_PROT_READ};
  OK(cu.MemSetAccess(r + 2 * g, g, &ro, 1));
  memset(out, 0, sizeof out);
  OK(cu.MemcpyAsync(host_ptr(out), r + 2 * g, 32, s));
  OK(cu.StreamSynchronize(s));
  CHECK(memcmp(in + 32, out, 32) == 0, "one handle mapped twice");
  OK(cu.MemcpyAsync(r + 2 * g, host_ptr(in), 8, s)); /* read-only */
  IS(cu.StreamSynchronize(s), DLCU_ERROR_ILLEGAL_ADDRESS);
  OK(cu.MemcpyAsync(r + 3 * g, host_ptr(in), 8, s)); /* reserved, nothing mapped */
  IS(cu.StreamSynchronize(s), DLCU_ERROR_ILLEGAL_ADDRESS);
  /* access for device 1 only: device 0's 2-D copy may not touch it */
  dlcu_mem_access_desc other = {{DLCU_MEM_LOCATION_TYPE_DEVICE, 1},
                                DLCU_MEM_ACCESS_FLAGS_PROT_READWRITE};
  dlcu_mem_access_desc none = {{DLCU_MEM_LOCATION_TYPE_DEVICE, 0}, DLCU_MEM_ACCESS_FLAGS_PROT_NONE};
  dlcu_mem_access_desc two[2] = {other, none};
  OK(cu.MemSetAccess(r, g, two, 2));
  dlcu_memcpy2d c2 = {.srcMemoryType = DLCU_MEMORYTYPE_HOST, .srcHost = in, .srcPitch = 64,
                      .dstMemoryType = DLCU_MEMORYTYPE_DEVICE, .dstDevice = r, .dstPitch = 64,
                      .WidthInBytes = 64, .Height = 1};
  OK(cu.Memcpy2DAsync(&c2, s));
  IS(cu.StreamSynchronize(s), DLCU_ERROR_ILLEGAL_ADDRESS);
  IS(cu.MemUnmap(r, g / 2), DLCU_ERROR_INVALID_VALUE);
  IS(cu.MemAddressFree(r, 4 * g), DLCU_ERROR_INVALID_VALUE); /* still mapped */
  OK(cu.MemRelease(h2)); /* mapped: its bytes stay */
  IS(cu.MemRelease(h2), DLCU_ERROR_INVALID_VALUE);
  OK(cu.MemcpyAsync(host_ptr(out), r + 2 * g, 32, s));
  OK(cu.StreamSynchronize(s));
  CHECK(memcmp(in + 32, out, 32) == 0, "a released handle's mapping still reads");
  OK(cu.MemUnmap(r, 3 * g)); /* three whole mappings */
  OK(cu.MemcpyAsync(host_ptr(out), r + g, 8, s));
  IS(cu.StreamSynchronize(s), DLCU_ERROR_ILLEGAL_ADDRESS);
  OK(cu.MemRelease(h1));
  OK(cu.MemRelease(h3));
  OK(cu.MemGetInfo(&free1, &total));
  CHECK(free1 == free0, "all given back: %zu of %zu", free1, free0);
  OK(cu.MemAddressFree(r, 4 * g));
  OK(cu.StreamDestroy(s));
  teardown();
}

/* ---- 2-D and 3-D copies ---- */
static void copies_2d_3d(void) {
  if (!setup()) return;
  /* host box 6 x 5 x 4 (pitch 6, height 5) into device 8 x 4 x 3 */
  unsigned char src[4][5][6], back[3][4][8], want[3][4][8];
  for (int z = 0; z < 4; z++)
    for (int y = 0; y < 5; y++)
      for (int x = 0; x < 6; x++) src[z][y][x] = (unsigned char)(z * 100 + y * 10 + x);
  dlcu_ptr d;
  OK(cu.MemAlloc(&d, sizeof back));
  dlcu_stream s;
  OK(cu.StreamCreate(&s, 0));
  OK(cu.MemsetD8Async(d, 0xEE, sizeof back, s));
  dlcu_memcpy3d c = {.srcXInBytes = 1, .srcY = 2, .srcZ = 1, .srcMemoryType = DLCU_MEMORYTYPE_HOST,
                     .srcHost = src, .srcPitch = 6, .srcHeight = 5,
                     .dstXInBytes = 2, .dstY = 1, .dstZ = 0, .dstMemoryType = DLCU_MEMORYTYPE_DEVICE,
                     .dstDevice = d, .dstPitch = 8, .dstHeight = 4,
                     .WidthInBytes = 3, .Height = 2, .Depth = 2};
  OK(cu.Memcpy3DAsync(&c, s));
  OK(cu.MemcpyAsync(host_ptr(back), d, sizeof back, s));
  OK(cu.StreamSynchronize(s));
  memset(want, 0xEE, sizeof want);
  for (int z = 0; z < 2; z++)
    for (int y = 0; y < 2; y++)
      for (int x = 0; x < 3; x++) want[z][1 + y][2 + x] = src[1 + z][2 + y][1 + x];
  CHECK(memcmp(back, want, sizeof want) == 0, "3-D box with offsets and pitches");
  /* 2-D device to host, unified source */
  unsigned char rows[3][5];
  memset(rows, 0, sizeof rows);
  dlcu_memcpy2d c2 = {.srcXInBytes = 2, .srcY = 1, .srcMemoryType = DLCU_MEMORYTYPE_UNIFIED,
                      .srcDevice = d, .srcPitch = 8, .dstXInBytes = 1,
                      .dstMemoryType = DLCU_MEMORYTYPE_HOST, .dstHost = rows, .dstPitch = 5,
                      .WidthInBytes = 3, .Height = 2};
  OK(cu.Memcpy2DAsync(&c2, s));
  OK(cu.StreamSynchronize(s));
  CHECK(rows[0][1] == src[1][2][1] && rows[1][3] == src[1][3][3] && rows[0][0] == 0 &&
            rows[2][1] == 0,
        "2-D rows");
  /* checks when queued */
  dlcu_memcpy3d bad = c;
  bad.dstPitch = 2; /* below the width */
  IS(cu.Memcpy3DAsync(&bad, s), DLCU_ERROR_INVALID_VALUE);
  bad = c;
  bad.dstZ = 2; /* past the allocation */
  IS(cu.Memcpy3DAsync(&bad, s), DLCU_ERROR_INVALID_VALUE);
  bad = c;
  bad.dstMemoryType = DLCU_MEMORYTYPE_ARRAY;
  IS(cu.Memcpy3DAsync(&bad, s), DLCU_ERROR_INVALID_VALUE);
  bad = c;
  bad.srcMemoryType = DLCU_MEMORYTYPE_HOST;
  bad.srcHost = dev_ptr(d); /* device memory named as host memory */
  IS(cu.Memcpy3DAsync(&bad, s), DLCU_ERROR_INVALID_VALUE);
  /* another device's memory: peer access first */
  OK(cu.CtxSetCurrent(ctx[1]));
  dlcu_ptr d1;
  OK(cu.MemAlloc(&d1, sizeof back));
  OK(cu.CtxSetCurrent(ctx[0]));
  dlcu_memcpy3d x = {.srcMemoryType = DLCU_MEMORYTYPE_DEVICE, .srcDevice = d, .srcPitch = 8,
                     .srcHeight = 4, .dstMemoryType = DLCU_MEMORYTYPE_DEVICE, .dstDevice = d1,
                     .dstPitch = 8, .dstHeight = 4, .WidthInBytes = 8, .Height = 4, .Depth = 3};
  IS(cu.Memcpy3DAsync(&x, s), DLCU_ERROR_INVALID_VALUE);
  OK(cu.CtxEnablePeerAccess(ctx[1], 0));
  OK(cu.Memcpy3DAsync(&x, s));
  memset(back, 0, sizeof back);
  OK(cu.MemcpyAsync(host_ptr(back), d1, sizeof back, s));
  OK(cu.StreamSynchronize(s));
  CHECK(memcmp(back, want, sizeof want) == 0, "device to device with peer access");
  OK(cu.StreamDestroy(s));
  OK(cu.MemFree(d));
  OK(cu.CtxSetCurrent(ctx[1]));
  OK(cu.MemFree(d1));
  teardown();
}

/* ---- peer access and peer copies ---- */
static int can_peer(int dev, int peer) {
  int can = -1;
  OK(cu.DeviceCanAccessPeer(&can, dev, peer));
  return can;
}

static void peers(void) {
  if (!setup()) return;
  CHECK(can_peer(0, 1) == 1, "0 reaches 1");
  CHECK(can_peer(2, 2) == 0, "not itself");
  OK(cu.CtxEnablePeerAccess(ctx[1], 0));
  IS(cu.CtxEnablePeerAccess(ctx[1], 0), DLCU_ERROR_PEER_ACCESS_ALREADY_ENABLED);
  IS(cu.CtxEnablePeerAccess(ctx[0], 0), DLCU_ERROR_INVALID_DEVICE);
  dlcu_ptr a[4];
  for (int i = 0; i < 4; i++) {
    OK(cu.CtxSetCurrent(ctx[i]));
    OK(cu.MemAlloc(&a[i], 256));
  }
  unsigned char in[256], out[256];
  for (int i = 0; i < 256; i++) in[i] = (unsigned char)(255 - i);
  OK(cu.Memcpy(a[2], host_ptr(in), 256));
  OK(cu.MemcpyPeer(a[3], ctx[3], a[2], ctx[2], 256));
  IS(cu.MemcpyPeer(a[3], ctx[2], a[2], ctx[2], 256), DLCU_ERROR_INVALID_VALUE);
  dlcu_stream s;
  OK(cu.StreamCreate(&s, DLCU_STREAM_NON_BLOCKING));
  /* no peer access between 3 and 0: the peer copy still works */
  dlcu_memcpy3d_peer p = {.srcMemoryType = DLCU_MEMORYTYPE_DEVICE, .srcDevice = a[3] + 16,
                          .srcContext = ctx[3], .dstMemoryType = DLCU_MEMORYTYPE_DEVICE,
                          .dstDevice = a[0], .dstContext = ctx[0], .WidthInBytes = 100,
                          .Height = 1, .Depth = 1};
  OK(cu.Memcpy3DPeerAsync(&p, s));
  OK(cu.MemcpyAsync(host_ptr(out), a[0], 100, s));
  OK(cu.StreamSynchronize(s));
  CHECK(memcmp(out, in + 16, 100) == 0, "peer copies");
  p.srcContext = ctx[1];
  IS(cu.Memcpy3DPeerAsync(&p, s), DLCU_ERROR_INVALID_VALUE);
  OK(cu.StreamDestroy(s));
  for (int i = 0; i < 4; i++) {
    OK(cu.CtxSetCurrent(ctx[i]));
    OK(cu.MemFree(a[i]));
  }
  teardown();
}

static void no_peer_pairs(void) {
  if (!setup()) return;
  CHECK(can_peer(1, 0) == 0, "1-0 refused");
  CHECK(can_peer(0, 2) == 1, "0-2 allowed");
  IS(cu.CtxEnablePeerAccess(ctx[1], 0), DLCU_ERROR_PEER_ACCESS_UNSUPPORTED);
  OK(cu.CtxEnablePeerAccess(ctx[2], 0));
  teardown();
}

static void no_peer_all(void) {
  if (!setup()) return;
  CHECK(can_peer(2, 3) == 0, "2-3 refused");
  IS(cu.CtxEnablePeerAccess(ctx[3], 0), DLCU_ERROR_PEER_ACCESS_UNSUPPORTED);
  teardown();
}

/* ---- memset ---- */
static void memsets(void) {
  if (!setup()) return;
  dlcu_ptr d;
  OK(cu.MemAlloc(&d, 64));
  dlcu_stream s;
  OK(cu.StreamCreate(&s, 0));
  OK(cu.MemsetD8Async(d, 0x11, 64, s));
  OK(cu.MemsetD16Async(d + 2, 0x2233, 3, s));
  OK(cu.MemsetD32Async(d + 16, 0x44556677u, 2, s));
  IS(cu.MemsetD16Async(d + 1, 1, 1, s), DLCU_ERROR_INVALID_VALUE);
  IS(cu.MemsetD32Async(d + 2, 1, 1, s), DLCU_ERROR_INVALID_VALUE);
  IS(cu.MemsetD32Async(d + 60, 1, 2, s), DLCU_ERROR_INVALID_VALUE); /* past the end */
  unsigned char out[64], want[64];
  OK(cu.MemcpyAsync(host_ptr(out), d, 64, s));
  OK(cu.StreamSynchronize(s));
  memset(want, 0x11, 64);
  uint16_t v16 = 0x2233;
  for (int i = 0; i < 3; i++) memcpy(want + 2 + 2 * i, &v16, 2);
  uint32_t v32 = 0x44556677u;
  for (int i = 0; i < 2; i++) memcpy(want + 16 + 4 * i, &v32, 4);
  CHECK(memcmp(out, want, 64) == 0, "memset values");
  OK(cu.StreamDestroy(s));
  OK(cu.MemFree(d));
  teardown();
}

/* ---- kernels ---- */
static const char ptx[] =
    "//\n// a test module\n//\n\n.version 7.0\n.target sm_60\n.address_size 64\n"
    ".visible .entry dlrun_fill8(\n\t.param .u64 a\n)\n{\n\tret;\n}\n"
    ".visible .entry dlrun_fill16(\n)\n{\n\tret;\n}\n"
    ".visible .entry dlrun_sequence(\n)\n{\n\tret;\n}\n"
    ".visible .entry other_kernel(\n)\n{\n\tret;\n}\n";

static void sequence(dlcu_function f, dlcu_stream s, dlcu_ptr d, uint64_t count, uint64_t first,
                     uint32_t dtype, uint32_t integral, int64_t si, int64_t sti, double sf,
                     double stf) {
  void *params[] = {&d, &count, &first, &dtype, &integral, &si, &sti, &sf, &stf};
  OK(cu.LaunchKernel(f, 1, 1, 1, 256, 1, 1, 0, s, params, NULL));
}

static void kernels(void) {
  if (!setup()) return;
  dlcu_module m, bad;
  IS(cu.ModuleLoadData(&bad, "// no version\n.entry x()\n"), DLCU_ERROR_INVALID_IMAGE);
  OK(cu.ModuleLoadData(&m, ptx));
  dlcu_function f8, f16, fseq, other, none;
  OK(cu.ModuleGetFunction(&f8, m, "dlrun_fill8"));
  OK(cu.ModuleGetFunction(&f16, m, "dlrun_fill16"));
  OK(cu.ModuleGetFunction(&fseq, m, "dlrun_sequence"));
  OK(cu.ModuleGetFunction(&other, m, "other_kernel"));
  IS(cu.ModuleGetFunction(&none, m, "dlrun_fill4"), DLCU_ERROR_NOT_FOUND);
  dlcu_ptr d;
  OK(cu.MemAlloc(&d, 256));
  dlcu_stream s;
  OK(cu.StreamCreate(&s, 0));
  uint64_t count = 4, pattern = 0x0102030405060708ull, hi = 0x1112131415161718ull;
  void *p8[] = {&d, &count, &pattern};
  OK(cu.LaunchKernel(f8, 1, 1, 1, 256, 1, 1, 0, s, p8, NULL));
  uint64_t out[32];
  OK(cu.MemcpyAsync(host_ptr(out), d, 40, s));
  OK(cu.StreamSynchronize(s));
  CHECK(out[0] == pattern && out[3] == pattern && out[4] == 0, "fill8");
  dlcu_ptr d16 = d + 64;
  void *p16[] = {&d16, &count, &pattern, &hi};
  OK(cu.LaunchKernel(f16, 2, 1, 1, 128, 1, 1, 0, s, p16, NULL));
  OK(cu.MemcpyAsync(host_ptr(out), d16, 64, s));
  OK(cu.StreamSynchronize(s));
  CHECK(out[0] == pattern && out[1] == hi && out[6] == pattern && out[7] == hi, "fill16");
  IS(cu.LaunchKernel(f8, 0, 1, 1, 256, 1, 1, 0, s, p8, NULL), DLCU_ERROR_INVALID_VALUE);
  IS(cu.LaunchKernel(f8, 1, 1, 1, 256, 1, 0, 0, s, p8, NULL), DLCU_ERROR_INVALID_VALUE);
  IS(cu.LaunchKernel(other, 1, 1, 1, 1, 1, 1, 0, s, p8, NULL), DLCU_ERROR_NOT_FOUND);
  /* int32 integral: 5 + (2 + i) * -3 */
  sequence(fseq, s, d, 4, 2, 3 /* int32 */, 1, 5, -3, 0, 0);
  int32_t i32[4];
  OK(cu.MemcpyAsync(host_ptr(i32), d, sizeof i32, s));
  OK(cu.StreamSynchronize(s));
  CHECK(i32[0] == -1 && i32[1] == -4 && i32[3] == -10, "int32 sequence %d %d", i32[0], i32[3]);
  /* float32: 0.5 + i * 0.25 */
  sequence(fseq, s, d, 3, 0, 11 /* float32 */, 0, 0, 0, 0.5, 0.25);
  float f32[3];
  OK(cu.MemcpyAsync(host_ptr(f32), d, sizeof f32, s));
  OK(cu.StreamSynchronize(s));
  CHECK(f32[0] == 0.5f && f32[2] == 1.0f, "float32 sequence");
  /* float16 and bfloat16 of 0.1, to nearest even: 0x2E66, 0x3DCD */
  uint16_t h[2];
  sequence(fseq, s, d, 1, 0, 9 /* float16 */, 0, 0, 0, 0.1, 0);
  sequence(fseq, s, d + 2, 1, 0, 10 /* bfloat16 */, 0, 0, 0, 0.1, 0);
  OK(cu.MemcpyAsync(host_ptr(h), d, sizeof h, s));
  OK(cu.StreamSynchronize(s));
  CHECK(h[0] == 0x2E66 && h[1] == 0x3DCD, "half %04x bfloat %04x", h[0], h[1]);
  /* bool: nonzero; complex64: imaginary 0 */
  unsigned char b[3];
  sequence(fseq, s, d, 3, 0, 0 /* bool */, 1, 0, 1, 0, 0);
  OK(cu.MemcpyAsync(host_ptr(b), d, 3, s));
  float cx[4] = {9, 9, 9, 9};
  sequence(fseq, s, d + 64, 2, 1, 13 /* complex64 */, 1, 10, 10, 0, 0);
  OK(cu.MemcpyAsync(host_ptr(cx), d + 64, sizeof cx, s));
  OK(cu.StreamSynchronize(s));
  CHECK(b[0] == 0 && b[1] == 1 && b[2] == 1, "bool");
  CHECK(cx[0] == 20 && cx[1] == 0 && cx[2] == 30 && cx[3] == 0, "complex64");
  /* past the allocation: an illegal address, at the stream */
  count = 64;
  OK(cu.LaunchKernel(f8, 1, 1, 1, 256, 1, 1, 0, s, p8, NULL));
  IS(cu.StreamSynchronize(s), DLCU_ERROR_ILLEGAL_ADDRESS);
  /* a function of device 0's module on device 1's stream */
  OK(cu.CtxSetCurrent(ctx[1]));
  dlcu_stream s1;
  OK(cu.StreamCreate(&s1, 0));
  count = 1;
  IS(cu.LaunchKernel(f8, 1, 1, 1, 1, 1, 1, 0, s1, p8, NULL), DLCU_ERROR_INVALID_HANDLE);
  OK(cu.StreamDestroy(s1));
  OK(cu.CtxSetCurrent(ctx[0]));
  OK(cu.ModuleUnload(m));
  IS(cu.ModuleGetFunction(&f8, m, "dlrun_fill8"), DLCU_ERROR_INVALID_HANDLE);
  OK(cu.StreamDestroy(s));
  OK(cu.MemFree(d));
  teardown();
}

/* ---- streams and events ---- */
static void events(void) {
  if (!setup()) return;
  dlcu_event e, e2, never;
  OK(cu.EventCreate(&never, DLCU_EVENT_DISABLE_TIMING));
  OK(cu.EventQuery(never)); /* never recorded: complete */
  OK(cu.EventSynchronize(never));
  dlcu_stream s0, s1;
  OK(cu.StreamCreate(&s0, DLCU_STREAM_NON_BLOCKING));
  OK(cu.EventCreate(&e, DLCU_EVENT_DISABLE_TIMING));
  dlcu_ptr a, b;
  OK(cu.MemAlloc(&a, 1 << 20));
  OK(cu.CtxSetCurrent(ctx[1]));
  OK(cu.StreamCreate(&s1, DLCU_STREAM_NON_BLOCKING));
  OK(cu.EventCreate(&e2, DLCU_EVENT_DISABLE_TIMING));
  OK(cu.MemAlloc(&b, 1 << 20));
  IS(cu.EventRecord(e, s1), DLCU_ERROR_INVALID_HANDLE); /* e is device 0's */
  static unsigned char big[1 << 20], out[1 << 20];
  memset(big, 0x5A, sizeof big);
  hold(1);
  OK(cu.CtxSetCurrent(ctx[0]));
  OK(cu.MemcpyAsync(a, host_ptr(big), sizeof big, s0));
  OK(cu.EventRecord(e, s0));
  OK(cu.CtxSetCurrent(ctx[1]));
  OK(cu.StreamWaitEvent(s1, e, 0)); /* across streams and devices */
  OK(cu.MemcpyAsync(b, a, sizeof big, s1));
  OK(cu.EventRecord(e2, s1));
  IS(cu.EventQuery(e), DLCU_ERROR_NOT_READY);
  IS(cu.EventQuery(e2), DLCU_ERROR_NOT_READY);
  OK(cu.EventDestroy(e)); /* the wait still holds */
  hold(0);
  OK(cu.EventSynchronize(e2));
  OK(cu.EventQuery(e2));
  OK(cu.Memcpy(host_ptr(out), b, sizeof out));
  CHECK(memcmp(out, big, sizeof out) == 0, "the waiting stream saw the first one's copy");
  IS(cu.EventQuery(e), DLCU_ERROR_INVALID_HANDLE);
  /* destroying a stream drains it */
  memset(big, 0x33, sizeof big);
  OK(cu.MemcpyAsync(b, host_ptr(big), sizeof big, s1));
  OK(cu.StreamDestroy(s1));
  OK(cu.Memcpy(host_ptr(out), b, sizeof out));
  CHECK(out[0] == 0x33 && out[sizeof out - 1] == 0x33, "drained");
  IS(cu.StreamSynchronize(s1), DLCU_ERROR_INVALID_HANDLE);
  OK(cu.EventDestroy(e2));
  OK(cu.MemFree(b));
  OK(cu.CtxSetCurrent(ctx[0]));
  OK(cu.MemFree(a));
  OK(cu.EventDestroy(never));
  OK(cu.StreamDestroy(s0));
  teardown();
}

/* ---- injected failures ---- */
static void fail_sync(void) { /* CUDA_DOUBLE_FAIL=cuMemAlloc:2:2,cuStreamCreate:1+ */
  if (!setup()) return;
  dlcu_ptr p, q;
  OK(cu.MemAlloc(&p, 64));
  IS(cu.MemAlloc(&q, 64), DLCU_ERROR_OUT_OF_MEMORY);
  OK(cu.MemAlloc(&q, 64));
  dlcu_stream s;
  IS(cu.StreamCreate(&s, 0), DLCU_ERROR_UNKNOWN);
  IS(cu.StreamCreate(&s, 0), DLCU_ERROR_UNKNOWN);
  OK(cu.MemFree(p));
  OK(cu.MemFree(q));
  teardown();
}

static void fail_async(void) { /* CUDA_DOUBLE_FAIL=cuMemcpyAsync:2:719:async */
  if (!setup()) return;
  dlcu_ptr p;
  OK(cu.MemAlloc(&p, 64));
  unsigned char in[64] = {1};
  dlcu_stream s, t;
  dlcu_event before, after;
  OK(cu.StreamCreate(&s, 0));
  OK(cu.StreamCreate(&t, 0));
  OK(cu.EventCreate(&before, DLCU_EVENT_DISABLE_TIMING));
  OK(cu.EventCreate(&after, DLCU_EVENT_DISABLE_TIMING));
  OK(cu.MemcpyAsync(p, host_ptr(in), 64, s));
  OK(cu.EventRecord(before, s));
  OK(cu.MemcpyAsync(p, host_ptr(in), 64, s)); /* the second: fails at the stream */
  OK(cu.EventRecord(after, s));
  OK(cu.StreamWaitEvent(t, after, 0));
  OK(cu.EventSynchronize(before));
  IS(cu.EventSynchronize(after), DLCU_ERROR_LAUNCH_FAILED);
  IS(cu.EventQuery(after), DLCU_ERROR_LAUNCH_FAILED);
  IS(cu.StreamSynchronize(t), DLCU_ERROR_LAUNCH_FAILED); /* it waited on the failure */
  IS(cu.StreamSynchronize(s), DLCU_ERROR_LAUNCH_FAILED);
  OK(cu.StreamSynchronize(s));
  OK(cu.MemcpyAsync(p, host_ptr(in), 64, s));
  OK(cu.StreamSynchronize(s));
  OK(cu.EventDestroy(before));
  OK(cu.EventDestroy(after));
  OK(cu.StreamDestroy(s));
  OK(cu.StreamDestroy(t));
  OK(cu.MemFree(p));
  teardown();
}

/* ---- threads, and unloading with work left ---- */
static void *worker_thread(void *arg) {
  int i = (int)(intptr_t)arg, bad = 0;
  if (cu.CtxSetCurrent(ctx[i % ndev])) return (void *)1;
  for (int round = 0; round < 20; round++) {
    dlcu_stream s;
    dlcu_ptr d;
    uint32_t out[64];
    bad |= cu.StreamCreate(&s, DLCU_STREAM_NON_BLOCKING) != 0;
    bad |= cu.MemAlloc(&d, sizeof out) != 0;
    bad |= cu.MemsetD32Async(d, (uint32_t)(i * 1000 + round), 64, s) != 0;
    bad |= cu.MemcpyAsync(host_ptr(out), d, sizeof out, s) != 0;
    bad |= cu.StreamSynchronize(s) != 0;
    bad |= out[0] != (uint32_t)(i * 1000 + round) || out[63] != out[0];
    bad |= cu.MemFree(d) != 0;
    bad |= cu.StreamDestroy(s) != 0;
  }
  return (void *)(intptr_t)bad;
}

static void threads_at_once(void) {
  if (!setup()) return;
  pthread_t t[8];
  for (int i = 0; i < 8; i++) pthread_create(&t[i], NULL, worker_thread, (void *)(intptr_t)i);
  for (int i = 0; i < 8; i++) {
    void *bad = NULL;
    pthread_join(t[i], &bad);
    CHECK(!bad, "thread %d", i);
  }
  teardown();
}

static void unload_with_work_left(void) {
  if (!setup()) return;
  dlcu_stream s;
  dlcu_event e;
  dlcu_ptr d, r;
  void *h;
  OK(cu.StreamCreate(&s, 0));
  OK(cu.EventCreate(&e, DLCU_EVENT_DISABLE_TIMING));
  OK(cu.MemAlloc(&d, 4096));
  OK(cu.MemHostAlloc(&h, 4096, 0));
  OK(cu.MemAddressReserve(&r, 2u << 20, 0, 0, 0));
  hold(1);
  OK(cu.MemcpyAsync(d, host_ptr(h), 4096, s));
  OK(cu.EventRecord(e, s));
  int alive = threads_settled(1);
  CHECK(alive == 1, "one worker: %d", alive);
  unload(); /* contexts still retained, work still queued */
  alive = threads_settled(0);
  CHECK(alive == 0, "%d workers after unload", alive);
}

/* ---- environment switches ---- */
static void no_device(void) {
  if (!load()) return;
  IS(cu.Init(0), DLCU_ERROR_NO_DEVICE);
  int n;
  IS(cu.DeviceGetCount(&n), DLCU_ERROR_NO_DEVICE);
  unload();
}

static void two_small_devices(void) {
  if (!setup()) return;
  CHECK(ndev == 2, "%d devices", ndev);
  size_t total = 0;
  OK(cu.DeviceTotalMem(&total, 1));
  CHECK(total == 1u << 20, "total %zu", total);
  dlcu_ptr p;
  IS(cu.MemAlloc(&p, 2u << 20), DLCU_ERROR_OUT_OF_MEMORY);
  dlcu_mem_allocation_prop prop = {.type = DLCU_MEM_ALLOCATION_TYPE_PINNED,
                                   .location = {DLCU_MEM_LOCATION_TYPE_DEVICE, 1}};
  size_t g;
  OK(cu.MemGetAllocationGranularity(&g, &prop, DLCU_MEM_ALLOC_GRANULARITY_RECOMMENDED));
  CHECK(g == 65536, "granularity %zu", g);
  int v;
  OK(cu.DriverGetVersion(&v));
  CHECK(v == 12020, "version %d", v);
  teardown();
}

static void no_vmm(void) {
  if (!setup()) return;
  int a = -1;
  OK(cu.DeviceGetAttribute(&a, DLCU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, 0));
  CHECK(a == 0, "vmm %d", a);
  dlcu_mem_allocation_prop prop = {.type = DLCU_MEM_ALLOCATION_TYPE_PINNED,
                                   .location = {DLCU_MEM_LOCATION_TYPE_DEVICE, 0}};
  dlcu_mem_handle h;
  IS(cu.MemCreate(&h, 2u << 20, &prop, 0), DLCU_ERROR_NOT_SUPPORTED);
  teardown();
}

static void stub(void) {
  lib = dlopen(lib_path, RTLD_NOW | RTLD_LOCAL);
  CHECK(lib, "dlopen");
  if (!lib) return;
  dlcu_result (*init)(unsigned) = (dlcu_result(*)(unsigned))dlsym(lib, "cuInit");
  dlcu_result (*name)(dlcu_result, const char **) =
      (dlcu_result(*)(dlcu_result, const char **))dlsym(lib, "cuGetErrorName");
  gpa = (dlcu_get_proc_address_fn)dlsym(lib, DLCU_GET_PROC_ADDRESS_SYMBOL);
  const char *s = NULL;
  void *fn;
  IS(init(0), DLCU_ERROR_STUB_LIBRARY);
  IS(name(DLCU_SUCCESS, &s), DLCU_ERROR_STUB_LIBRARY);
  IS(gpa("cuInit", &fn, 12080, 0, NULL), DLCU_ERROR_STUB_LIBRARY);
  unload();
}

static void bad_setting(void) {
  if (!load()) return;
  IS(cu.Init(0), DLCU_ERROR_INVALID_VALUE);
  unload();
}

/* The dlsym path: CUDA_DOUBLE_NO_PROC_ADDRESS, then a library without it. */
static void dlsym_path(const char *path, bool has_gpa) {
  lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  CHECK(lib, "dlopen %s: %s", path, dlerror());
  if (!lib) return;
  gpa = (dlcu_get_proc_address_fn)dlsym(lib, DLCU_GET_PROC_ADDRESS_SYMBOL);
  CHECK(!gpa == !has_gpa, "cuGetProcAddress_v2 %s", gpa ? "present" : "absent");
  void *fn = &fn;
  dlcu_proc_address_status st = 0;
  if (gpa) {
    IS(gpa("cuInit", &fn, 12080, 0, &st), DLCU_ERROR_NOT_FOUND);
    CHECK(!fn && st == DLCU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND, "absent-like");
    IS(gpa("cuGetProcAddress", &fn, 12080, 0, &st), DLCU_ERROR_NOT_FOUND);
  }
  bool all = true;
#define BY_DLSYM(field, name, version, symbol, params) \
  all &= (*(void **)&cu.field = dlsym(lib, #symbol)) != NULL;
  DLCU_ENTRIES(BY_DLSYM)
#undef BY_DLSYM
  CHECK(all, "every versioned symbol is exported");
  OK(cu.Init(0));
  int n = 0;
  OK(cu.DeviceGetCount(&n));
  CHECK(n == 4, "%d devices", n);
  unload();
}
static void no_proc_address(void) { dlsym_path(lib_path, true); }
static void no_gpa_library(void) { dlsym_path(nogpa_path, false); }

int main(void) {
  ssize_t n = readlink("/proc/self/exe", here, sizeof here - 1);
  here[n > 0 ? n : 0] = '\0';
  if (strrchr(here, '/')) *strrchr(here, '/') = '\0';
  snprintf(lib_path, sizeof lib_path, "%s/cuda-double/libcuda.so.1", here);
  snprintf(nogpa_path, sizeof nogpa_path, "%s/cuda-double-nogpa/libcuda.so.1", here);
  TEST("entries resolve through cuGetProcAddress_v2 by base name and version; real error names")
    CHECK(in_child(entry_points, NULL), "child failed");
  TEST("four devices with their memory, 256-byte aligned allocations, capacity and OOM")
    CHECK(in_child(devices_and_memory, NULL), "child failed");
  TEST("primary contexts are counted; a thread without a current context gets 201")
    CHECK(in_child(contexts, NULL), "child failed");
  TEST("device memory faults on a host read; pinned memory is host memory")
    CHECK(in_child(not_host_readable, NULL), "child failed");
  TEST("pointer attributes of device, pinned and unknown memory")
    CHECK(in_child(pointer_attributes, NULL), "child failed");
  TEST("VMM: reserve, create (cuda_double_creates records it), map whole handles, access "
       "before use, 700 from the stream")
    CHECK(in_child(vmm, NULL), "child failed");
  TEST("2-D and 3-D copies with offsets and pitches, checked when queued")
    CHECK(in_child(copies_2d_3d, NULL), "child failed");
  TEST("peer access once, peer copies between contexts")
    CHECK(in_child(peers, NULL), "child failed");
  TEST("CUDA_DOUBLE_NO_PEER=0-1 refuses that pair only")
    CHECK(in_child(no_peer_pairs, "CUDA_DOUBLE_NO_PEER=0-1"), "child failed");
  TEST("CUDA_DOUBLE_NO_PEER=all refuses every pair")
    CHECK(in_child(no_peer_all, "CUDA_DOUBLE_NO_PEER=all"), "child failed");
  TEST("memsets of 8, 16 and 32 bits") CHECK(in_child(memsets, NULL), "child failed");
  TEST("PTX modules by .entry name; fill8, fill16 and sequences run natively")
    CHECK(in_child(kernels, NULL), "child failed");
  TEST("events and cross-stream, cross-device waits; destroy drains")
    CHECK(in_child(events, NULL), "child failed");
  TEST("CUDA_DOUBLE_FAIL: the n-th call, and every call from the n-th")
    CHECK(in_child(fail_sync, "CUDA_DOUBLE_FAIL=cuMemAlloc:2:2,cuStreamCreate:1+"), "x");
  TEST("CUDA_DOUBLE_FAIL ...:async: the failure surfaces from the stream and its events")
    CHECK(in_child(fail_async, "CUDA_DOUBLE_FAIL=cuMemcpyAsync:2:719:async"), "x");
  TEST("eight threads at once on four devices")
    CHECK(in_child(threads_at_once, NULL), "child failed");
  TEST("unloading ends the workers and gives back what the program left")
    CHECK(in_child(unload_with_work_left, NULL), "child failed");
  TEST("CUDA_DOUBLE_DEVICES=0: cuInit says no device (100)")
    CHECK(in_child(no_device, "CUDA_DOUBLE_DEVICES=0"), "child failed");
  TEST("CUDA_DOUBLE_DEVICES, _MEMORY, _GRANULARITY, _VERSION")
    CHECK(in_child(two_small_devices, "CUDA_DOUBLE_DEVICES=2 CUDA_DOUBLE_MEMORY=1M "
                                      "CUDA_DOUBLE_GRANULARITY=64K CUDA_DOUBLE_VERSION=12020"),
          "child failed");
  TEST("CUDA_DOUBLE_NO_VMM=1: no VMM, cuMemCreate not supported")
    CHECK(in_child(no_vmm, "CUDA_DOUBLE_NO_VMM=1"), "child failed");
  TEST("CUDA_DOUBLE_STUB=1: every call is 34, cuGetErrorName too")
    CHECK(in_child(stub, "CUDA_DOUBLE_STUB=1"), "child failed");
  TEST("a malformed setting fails cuInit")
    CHECK(in_child(bad_setting, "CUDA_DOUBLE_DEVICES=four"), "child failed");
  TEST("CUDA_DOUBLE_NO_PROC_ADDRESS=1: cuGetProcAddress_v2 finds nothing, dlsym does")
    CHECK(in_child(no_proc_address, "CUDA_DOUBLE_NO_PROC_ADDRESS=1"), "child failed");
  TEST("the library built without cuGetProcAddress_v2 serves dlsym")
    CHECK(in_child(no_gpa_library, NULL), "child failed");
  return check_summary("cuda_double");
}
