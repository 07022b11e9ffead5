/* The double's library entry: the guard every entry passes (configuration,
 * stub mode, initialisation, injected failures), cuInit, the driver
 * version, cuGetProcAddress_v2 and its table, the error names, and the
 * teardown at unload. Built twice: libcuda.so.1, and with
 * CUDA_DOUBLE_NO_GPA a library without cuGetProcAddress_v2 at all (a driver
 * older than CUDA 12), for the loader's dlsym path. */
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

#include "double.h"

dbl_state dbl = {.lock = PTHREAD_MUTEX_INITIALIZER, .changed = PTHREAD_COND_INITIALIZER};

static pthread_once_t config_once = PTHREAD_ONCE_INIT;
static void config_load(void) { dbl_config_read(&dbl.cfg); }

/* What still answers in a context with a sticky error: device queries,
 * context management, and frees and destroys (so that nothing leaks). */
static bool sticky_exempt(dbl_id id) {
  switch (id) {
  case DBL_ID_DeviceGet: case DBL_ID_DeviceGetCount: case DBL_ID_DeviceGetName:
  case DBL_ID_DeviceGetAttribute: case DBL_ID_DeviceTotalMem: case DBL_ID_DeviceCanAccessPeer:
  case DBL_ID_DevicePrimaryCtxRetain: case DBL_ID_DevicePrimaryCtxRelease:
  case DBL_ID_CtxSetCurrent: case DBL_ID_MemFree: case DBL_ID_MemFreeHost:
  case DBL_ID_MemUnmap: case DBL_ID_MemRelease: case DBL_ID_MemAddressFree:
  case DBL_ID_StreamDestroy: case DBL_ID_EventDestroy: case DBL_ID_ModuleUnload:
    return true;
  default:
    return false;
  }
}

dlcu_result dbl_enter(dbl_id id, dlcu_result *async) {
  pthread_once(&config_once, config_load);
  if (dbl.cfg.stub) return DLCU_ERROR_STUB_LIBRARY;
  pthread_mutex_lock(&dbl.lock);
  if (id != DBL_ID_Init && id != DBL_ID_DriverGetVersion && !dbl.initialized) {
    dlcu_result rc = dbl.init_error ? dbl.init_error : DLCU_ERROR_NOT_INITIALIZED;
    pthread_mutex_unlock(&dbl.lock);
    return rc;
  }
  unsigned long n = ++dbl.calls[id];
  dlcu_context ctx = dbl_current();
  if (ctx && ctx->sticky && !sticky_exempt(id)) {
    pthread_mutex_unlock(&dbl.lock);
    return ctx->sticky;
  }
  for (int i = 0; i < dbl.cfg.nfails; i++) {
    const dbl_fail *f = &dbl.cfg.fails[i];
    if (f->id != id || !(n == f->n || (f->from_n && n > f->n))) continue;
    if (f->async && async) {
      *async = f->code | (f->sticky ? DBL_STICKY : 0);
      break;
    }
    pthread_mutex_unlock(&dbl.lock);
    return f->code;
  }
  return DLCU_SUCCESS;
}

dlcu_result dbl_leave(dlcu_result rc) {
  pthread_mutex_unlock(&dbl.lock);
  return rc;
}

dlcu_result cuInit(unsigned int flags) {
  DBL_ENTER(Init);
  if (flags) return dbl_leave(DLCU_ERROR_INVALID_VALUE);
  if (dbl.initialized) return dbl_leave(DLCU_SUCCESS);
  if (dbl.cfg.error) return dbl_leave(dbl.init_error = dbl.cfg.error);
  if (dbl.cfg.devices == 0) return dbl_leave(dbl.init_error = DLCU_ERROR_NO_DEVICE);
  /* Room for every device's memory several times over: reserved ranges
   * and allocations share it, and a pool reserves before it commits. */
  uint64_t size = 8 * (uint64_t)dbl.cfg.devices * dbl.cfg.memory + (1ull << 30);
  size = (size + dbl.cfg.granularity - 1) & ~(dbl.cfg.granularity - 1);
  void *va = mmap(NULL, size + dbl.cfg.granularity, PROT_NONE,
                  MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (va == MAP_FAILED) return dbl_leave(dbl.init_error = DLCU_ERROR_OPERATING_SYSTEM);
  dbl.va = va;
  dbl.va_size = size + dbl.cfg.granularity;
  for (int i = 0; i < DBL_MAX_DEVICES; i++) dbl.ctx[i].device = i;
  dbl.next_handle = 0x1000;
  dbl.initialized = true;
  return dbl_leave(DLCU_SUCCESS);
}

dlcu_result cuDriverGetVersion(int *version) {
  DBL_ENTER(DriverGetVersion);
  if (!version) return dbl_leave(DLCU_ERROR_INVALID_VALUE);
  *version = dbl.cfg.version;
  return dbl_leave(DLCU_SUCCESS);
}

/* ---- error names: the real driver's, for the codes dlrun declares ---- */
static const struct {
  dlcu_result code;
  const char *name, *text;
} errors[] = {
    {DLCU_SUCCESS, "CUDA_SUCCESS", "no error"},
    {DLCU_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {DLCU_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {DLCU_ERROR_NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
    {DLCU_ERROR_DEINITIALIZED, "CUDA_ERROR_DEINITIALIZED", "driver shutting down"},
    {DLCU_ERROR_STUB_LIBRARY, "CUDA_ERROR_STUB_LIBRARY", "CUDA driver is a stub library"},
    {DLCU_ERROR_NO_DEVICE, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
    {DLCU_ERROR_INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
    {DLCU_ERROR_INVALID_IMAGE, "CUDA_ERROR_INVALID_IMAGE", "device kernel image is invalid"},
    {DLCU_ERROR_INVALID_CONTEXT, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
    {DLCU_ERROR_NO_BINARY_FOR_GPU, "CUDA_ERROR_NO_BINARY_FOR_GPU",
     "no kernel image is available for execution on the device"},
    {DLCU_ERROR_PEER_ACCESS_UNSUPPORTED, "CUDA_ERROR_PEER_ACCESS_UNSUPPORTED",
     "peer access is not supported between these two devices"},
    {DLCU_ERROR_INVALID_PTX, "CUDA_ERROR_INVALID_PTX", "a PTX JIT compilation failed"},
    {DLCU_ERROR_UNSUPPORTED_PTX_VERSION, "CUDA_ERROR_UNSUPPORTED_PTX_VERSION",
     "the provided PTX was compiled with an unsupported toolchain."},
    {DLCU_ERROR_OPERATING_SYSTEM, "CUDA_ERROR_OPERATING_SYSTEM",
     "OS call failed or operation not supported on this OS"},
    {DLCU_ERROR_INVALID_HANDLE, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
    {DLCU_ERROR_NOT_FOUND, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
    {DLCU_ERROR_NOT_READY, "CUDA_ERROR_NOT_READY", "device not ready"},
    {DLCU_ERROR_ILLEGAL_ADDRESS, "CUDA_ERROR_ILLEGAL_ADDRESS",
     "an illegal memory access was encountered"},
    {DLCU_ERROR_LAUNCH_OUT_OF_RESOURCES, "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES",
     "too many resources requested for launch"},
    {DLCU_ERROR_PEER_ACCESS_ALREADY_ENABLED, "CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED",
     "peer access is already enabled"},
    {DLCU_ERROR_PEER_ACCESS_NOT_ENABLED, "CUDA_ERROR_PEER_ACCESS_NOT_ENABLED",
     "peer access has not been enabled"},
    {DLCU_ERROR_LAUNCH_FAILED, "CUDA_ERROR_LAUNCH_FAILED", "unspecified launch failure"},
    {DLCU_ERROR_NOT_PERMITTED, "CUDA_ERROR_NOT_PERMITTED", "operation not permitted"},
    {DLCU_ERROR_NOT_SUPPORTED, "CUDA_ERROR_NOT_SUPPORTED", "operation not supported"},
    {DLCU_ERROR_SYSTEM_DRIVER_MISMATCH, "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH",
     "system has unsupported display driver / cuda driver combination"},
    {DLCU_ERROR_UNKNOWN, "CUDA_ERROR_UNKNOWN", "unknown error"},
};

static dlcu_result error_lookup(dlcu_result error, const char **str, bool name) {
  pthread_once(&config_once, config_load);
  if (dbl.cfg.stub) return DLCU_ERROR_STUB_LIBRARY; /* as NVIDIA's stub does */
  if (!str) return DLCU_ERROR_INVALID_VALUE;
  for (size_t i = 0; i < sizeof errors / sizeof errors[0]; i++)
    if (errors[i].code == error) {
      *str = name ? errors[i].name : errors[i].text;
      return DLCU_SUCCESS;
    }
  *str = NULL;
  return DLCU_ERROR_INVALID_VALUE;
}

dlcu_result cuGetErrorName(dlcu_result error, const char **str) {
  return error_lookup(error, str, true);
}

dlcu_result cuGetErrorString(dlcu_result error, const char **str) {
  return error_lookup(error, str, false);
}

/* ---- cuGetProcAddress_v2 ---- */
#ifndef CUDA_DOUBLE_NO_GPA
DBL_EXPORT dlcu_result cuGetProcAddress_v2(const char *symbol, void **fn, int cuda_version,
                                           uint64_t flags, dlcu_proc_address_status *status);

static const struct {
  const char *name;
  int version;
  void *fn;
} procs[] = {
#define DBL_PROC(field, name, version, symbol, params) {name, version, (void *)symbol},
    DLCU_ENTRIES(DBL_PROC)
#undef DBL_PROC
    {"cuGetErrorName", 6000, (void *)cuGetErrorName},
    {"cuGetErrorString", 6000, (void *)cuGetErrorString},
    {"cuGetProcAddress", DLCU_GET_PROC_ADDRESS_SINCE, (void *)cuGetProcAddress_v2},
};

/* By base name and the CUDA version the caller was written for: the
 * entry the double implements when that version is at least the one of
 * its ABI (driver_api.h's table); an older ABI is not implemented
 * (VERSION_NOT_SUFFICIENT). CUDA_DOUBLE_NO_PROC_ADDRESS, or a driver version
 * below 12.0, answers NOT_FOUND for every name, this one included. */
dlcu_result cuGetProcAddress_v2(const char *symbol, void **fn, int cuda_version, uint64_t flags,
                                dlcu_proc_address_status *status) {
  pthread_once(&config_once, config_load);
  if (dbl.cfg.stub) return DLCU_ERROR_STUB_LIBRARY;
  if (!symbol || !fn || flags > 2) return DLCU_ERROR_INVALID_VALUE;
  *fn = NULL;
  dlcu_proc_address_status st = DLCU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  if (!dbl.cfg.no_proc_address && dbl.cfg.version >= DLCU_GET_PROC_ADDRESS_SINCE) {
    for (size_t i = 0; i < sizeof procs / sizeof procs[0]; i++) {
      if (strcmp(procs[i].name, symbol) != 0) continue;
      if (cuda_version < procs[i].version) {
        st = DLCU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT;
        break;
      }
      *fn = procs[i].fn;
      st = DLCU_GET_PROC_ADDRESS_SUCCESS;
      break;
    }
  }
  if (status) *status = st;
  return st == DLCU_GET_PROC_ADDRESS_SUCCESS ? DLCU_SUCCESS : DLCU_ERROR_NOT_FOUND;
}
#endif

/* At unload: queued work is dropped (as at a process's exit), worker
 * threads are joined, and every resource is given back, so that leak
 * checkers see nothing of the double's. CUDA_DOUBLE_REPORT_LEAKS=1 first
 * says what the program left allocated. */
__attribute__((destructor)) static void dbl_unload(void) {
  pthread_mutex_lock(&dbl.lock);
  if (dbl.initialized) {
    dbl_streams_teardown(NULL);
    dbl_modules_teardown(NULL);
    dbl_memory_teardown(NULL);
    munmap(dbl.va, dbl.va_size);
    dbl.va = NULL;
    dbl.initialized = false;
  }
  pthread_mutex_unlock(&dbl.lock);
}
