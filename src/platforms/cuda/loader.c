/* Loading the CUDA driver at run time: libcuda.so.1 (DLRUN_CUDA_LIBRARY
 * names another file), its entry points through cuGetProcAddress_v2 with
 * each entry's base name and the version of the ABI dlrun calls (CUDA 12
 * and later), else dlsym of the versioned symbol names (cuMemAlloc_v2, ...).
 * The driver is absent, with the reason, when the library is not there, is
 * the toolkit's stub (every call returns CUDA_ERROR_STUB_LIBRARY, even
 * cuGetErrorName: the names here are dlrun's own) or has no device. */
#include <dlfcn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cu.h"

dlcu_api cu_api;

static pthread_once_t once = PTHREAD_ONCE_INIT;
static bool loaded;
static int device_count;
static char why_not[200];

typedef struct cu_entry {
  const char *name, *symbol;
  int version;
  size_t offset; /* of its pointer in dlcu_api */
} cu_entry;

#define DLCU_ROW(field, name, version, symbol, params)                                      \
  {name, #symbol, version, offsetof(dlcu_api, field)},
static const cu_entry entries[] = {DLCU_ENTRIES(DLCU_ROW)};
#undef DLCU_ROW

typedef struct cu_error_row {
  dlcu_result code;
  const char *name;
} cu_error_row;

static const cu_error_row names[] = {
    {DLCU_SUCCESS, "CUDA_SUCCESS"},
    {DLCU_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE"},
    {DLCU_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY"},
    {DLCU_ERROR_NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED"},
    {DLCU_ERROR_DEINITIALIZED, "CUDA_ERROR_DEINITIALIZED"},
    {DLCU_ERROR_STUB_LIBRARY, "CUDA_ERROR_STUB_LIBRARY"},
    {DLCU_ERROR_NO_DEVICE, "CUDA_ERROR_NO_DEVICE"},
    {DLCU_ERROR_INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE"},
    {DLCU_ERROR_INVALID_IMAGE, "CUDA_ERROR_INVALID_IMAGE"},
    {DLCU_ERROR_INVALID_CONTEXT, "CUDA_ERROR_INVALID_CONTEXT"},
    {DLCU_ERROR_NO_BINARY_FOR_GPU, "CUDA_ERROR_NO_BINARY_FOR_GPU"},
    {DLCU_ERROR_PEER_ACCESS_UNSUPPORTED, "CUDA_ERROR_PEER_ACCESS_UNSUPPORTED"},
    {DLCU_ERROR_INVALID_PTX, "CUDA_ERROR_INVALID_PTX"},
    {DLCU_ERROR_UNSUPPORTED_PTX_VERSION, "CUDA_ERROR_UNSUPPORTED_PTX_VERSION"},
    {DLCU_ERROR_OPERATING_SYSTEM, "CUDA_ERROR_OPERATING_SYSTEM"},
    {DLCU_ERROR_INVALID_HANDLE, "CUDA_ERROR_INVALID_HANDLE"},
    {DLCU_ERROR_NOT_FOUND, "CUDA_ERROR_NOT_FOUND"},
    {DLCU_ERROR_NOT_READY, "CUDA_ERROR_NOT_READY"},
    {DLCU_ERROR_ILLEGAL_ADDRESS, "CUDA_ERROR_ILLEGAL_ADDRESS"},
    {DLCU_ERROR_LAUNCH_OUT_OF_RESOURCES, "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES"},
    {DLCU_ERROR_PEER_ACCESS_ALREADY_ENABLED, "CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED"},
    {DLCU_ERROR_PEER_ACCESS_NOT_ENABLED, "CUDA_ERROR_PEER_ACCESS_NOT_ENABLED"},
    {DLCU_ERROR_LAUNCH_FAILED, "CUDA_ERROR_LAUNCH_FAILED"},
    {DLCU_ERROR_NOT_PERMITTED, "CUDA_ERROR_NOT_PERMITTED"},
    {DLCU_ERROR_NOT_SUPPORTED, "CUDA_ERROR_NOT_SUPPORTED"},
    {DLCU_ERROR_SYSTEM_DRIVER_MISMATCH, "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH"},
    {DLCU_ERROR_UNKNOWN, "CUDA_ERROR_UNKNOWN"},
};

const char *cu_error_name(dlcu_result r) {
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    if (names[i].code == r) return names[i].name;
  return "CUDA_ERROR";
}

/* Why a call that must succeed for the driver to be usable failed. */
static void say_failed(const char *call, dlcu_result r) {
  if (r == DLCU_ERROR_STUB_LIBRARY)
    snprintf(why_not, sizeof why_not,
             "the CUDA driver is a stub library (CUDA_ERROR_STUB_LIBRARY, 34): no NVIDIA driver "
             "is installed");
  else if (r == DLCU_ERROR_NO_DEVICE)
    snprintf(why_not, sizeof why_not, "no CUDA device (CUDA_ERROR_NO_DEVICE, 100)");
  else
    snprintf(why_not, sizeof why_not, "%s failed: %s (%d)", call, cu_error_name(r), r);
}

/* Every entry: through cuGetProcAddress_v2 where the driver has it (CUDA
 * 12+), else dlsym of the versioned symbol. */
static bool resolve(void *lib, const char *path) {
  dlcu_get_proc_address_fn gpa;
  *(void **)&gpa = dlsym(lib, DLCU_GET_PROC_ADDRESS_SYMBOL);
  if (cu_api.driver_version < DLCU_GET_PROC_ADDRESS_SINCE) gpa = NULL;
  for (size_t i = 0; i < sizeof entries / sizeof entries[0]; i++) {
    const cu_entry *e = &entries[i];
    void *fn = NULL;
    dlcu_proc_address_status qs = DLCU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    if (gpa && (gpa(e->name, &fn, e->version, DLCU_GET_PROC_ADDRESS_DEFAULT, &qs) !=
                    DLCU_SUCCESS ||
                qs != DLCU_GET_PROC_ADDRESS_SUCCESS))
      fn = NULL;
    if (!fn) fn = dlsym(lib, e->symbol);
    if (!fn) {
      snprintf(why_not, sizeof why_not, "%s has no %s (CUDA driver %d.%d)", path, e->symbol,
               cu_api.driver_version / 1000, cu_api.driver_version % 1000 / 10);
      return false;
    }
    memcpy((char *)&cu_api + e->offset, &fn, sizeof fn);
  }
  return true;
}

static void load_once(void) {
  const char *env = getenv("DLRUN_CUDA_LIBRARY");
  const char *path = env && *env ? env : "libcuda.so.1";
  void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char *e = dlerror();
    snprintf(why_not, sizeof why_not, "%s", e ? e : path);
    return;
  }
  dlcu_result (*init)(unsigned int), (*version)(int *);
  *(void **)&init = dlsym(lib, "cuInit");
  *(void **)&version = dlsym(lib, "cuDriverGetVersion");
  if (!init || !version) {
    snprintf(why_not, sizeof why_not, "%s is not a CUDA driver (no cuInit)", path);
    return;
  }
  dlcu_result r = init(0);
  if (r != DLCU_SUCCESS) return say_failed("cuInit", r);
  if ((r = version(&cu_api.driver_version)) != DLCU_SUCCESS)
    return say_failed("cuDriverGetVersion", r);
  if (!resolve(lib, path)) return;
  if ((r = cu_api.DeviceGetCount(&device_count)) != DLCU_SUCCESS)
    return say_failed("cuDeviceGetCount", r);
  if (device_count <= 0) return say_failed("cuDeviceGetCount", DLCU_ERROR_NO_DEVICE);
  loaded = true; /* the library stays loaded: the driver has threads of its own */
}

bool cu_load(int *ndevices, char *why, size_t n) {
  pthread_once(&once, load_once);
  if (!loaded) {
    snprintf(why, n, "%s", why_not);
    return false;
  }
  *ndevices = device_count;
  return true;
}

bool cu_probe(bool for_auto, size_t *ndevices, char *why, size_t n) {
  (void)for_auto; /* every CUDA device is a GPU */
  int count;
  if (!cu_load(&count, why, n)) return false;
  *ndevices = (size_t)count;
  return true;
}

/* The context each thread made current, valid while no primary context was
 * released or retained since (a released one may come back as another).
 * Initial-exec: a loaded module's dynamic TLS is what LeakSanitizer's scan of
 * threads at exit trips over (clang 14, glibc 2.36); 16 bytes fit the static
 * room glibc keeps for modules. */
#define CU_TLS __attribute__((tls_model("initial-exec")))
static _Thread_local dlcu_context current CU_TLS;
static _Thread_local unsigned current_generation CU_TLS;
static atomic_uint generation = 1;

void cu_contexts_changed(void) { atomic_fetch_add(&generation, 1); }

dlcu_result cu_make_current(dlcu_context ctx) {
  unsigned g = atomic_load(&generation);
  if (current == ctx && current_generation == g) return DLCU_SUCCESS;
  dlcu_result r = cu_api.CtxSetCurrent(ctx);
  if (r == DLCU_SUCCESS) {
    current = ctx;
    current_generation = g;
  }
  return r;
}
