/* Devices, primary contexts (one per device, reference-counted), the
 * calling thread's current context, and peer access. */
#include <stdio.h>

#include "double.h"

/* Initial-exec, as the platform's (src/platforms/cuda/loader.c says why). */
static _Thread_local dlcu_context current __attribute__((tls_model("initial-exec")));

dlcu_context dbl_current(void) { return current && current->refs > 0 ? current : NULL; }

bool dbl_device_valid(dlcu_device dev) { return dev >= 0 && dev < dbl.cfg.devices; }

dlcu_result cuDeviceGetCount(int *count) {
  DBL_ENTER(DeviceGetCount);
  if (!count) return dbl_leave(DLCU_ERROR_INVALID_VALUE);
  *count = dbl.cfg.devices;
  return dbl_leave(DLCU_SUCCESS);
}

dlcu_result cuDeviceGet(dlcu_device *device, int ordinal) {
  DBL_ENTER(DeviceGet);
  if (!device) return dbl_leave(DLCU_ERROR_INVALID_VALUE);
  if (!dbl_device_valid(ordinal)) return dbl_leave(DLCU_ERROR_INVALID_DEVICE);
  *device = ordinal;
  return dbl_leave(DLCU_SUCCESS);
}

dlcu_result cuDeviceGetName(char *name, int len, dlcu_device dev) {
  DBL_ENTER(DeviceGetName);
  if (!name || len <= 0) return dbl_leave(DLCU_ERROR_INVALID_VALUE);
  if (!dbl_device_valid(dev)) return dbl_leave(DLCU_ERROR_INVALID_DEVICE);
  snprintf(name, (size_t)len, "dlrun CUDA double %d", dev);
  return dbl_leave(DLCU_SUCCESS);
}

dlcu_result cuDeviceGetAttribute(int *value, dlcu_device_attribute attrib, dlcu_device dev) {
  DBL_ENTER(DeviceGetAttribute);
  if (!value) return dbl_leave(DLCU_ERROR_INVALID_VALUE);
  if (!dbl_device_valid(dev)) return dbl_leave(DLCU_ERROR_INVALID_DEVICE);
  switch (attrib) {
  case DLCU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: *value = 8; break;
  case DLCU_DEVICE_ATTRIBUTE_PCI_BUS_ID: *value = dev + 1; break;
  case DLCU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID: *value = 0; break;
  case DLCU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID: *value = 0; break;
  case DLCU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING: *value = 1; break;
  case DLCU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *value = 9; break;
  case DLCU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *value = 0; break;
  case DLCU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED: *value = !dbl.cfg.no_vmm; break;
  default: return dbl_leave(DLCU_ERROR_INVALID_VALUE);
  }
  return dbl_leave(DLCU_SUCCESS);
}

dlcu_result cuDeviceTotalMem_v2(size_t *bytes, dlcu_device dev) {
  DBL_ENTER(DeviceTotalMem);
  if (!bytes) return dbl_leave(DLCU_ERROR_INVALID_VALUE);
  if (!dbl_device_valid(dev)) return dbl_leave(DLCU_ERROR_INVALID_DEVICE);
  *bytes = dbl.cfg.memory;
  return dbl_leave(DLCU_SUCCESS);
}

dlcu_result cuDevicePrimaryCtxRetain(dlcu_context *ctx, dlcu_device dev) {
  DBL_ENTER(DevicePrimaryCtxRetain);
  if (!ctx) return dbl_leave(DLCU_ERROR_INVALID_VALUE);
  if (!dbl_device_valid(dev)) return dbl_leave(DLCU_ERROR_INVALID_DEVICE);
  dbl.ctx[dev].refs++;
  *ctx = &dbl.ctx[dev];
  return dbl_leave(DLCU_SUCCESS);
}

/* What a context owns goes with it: streams (their queued work dropped),
 * events, modules, cuMemAlloc and cuMemHostAlloc memory; other contexts'
 * peer access to its device too. */
void dbl_context_teardown(dlcu_context ctx) {
  dbl_streams_teardown(ctx);
  dbl_modules_teardown(ctx);
  dbl_memory_teardown(ctx);
  ctx->peers = 0;
  ctx->sticky = DLCU_SUCCESS; /* a fresh primary context next time */
  for (int i = 0; i < DBL_MAX_DEVICES; i++) dbl.ctx[i].peers &= ~((uint64_t)1 << ctx->device);
}

dlcu_result cuDevicePrimaryCtxRelease_v2(dlcu_device dev) {
  DBL_ENTER(DevicePrimaryCtxRelease);
  if (!dbl_device_valid(dev)) return dbl_leave(DLCU_ERROR_INVALID_DEVICE);
  dlcu_context ctx = &dbl.ctx[dev];
  if (ctx->refs == 0) return dbl_leave(DLCU_ERROR_INVALID_CONTEXT);
  if (--ctx->refs == 0) dbl_context_teardown(ctx);
  return dbl_leave(DLCU_SUCCESS);
}

dlcu_result cuCtxSetCurrent(dlcu_context ctx) {
  DBL_ENTER(CtxSetCurrent);
  bool known = ctx >= &dbl.ctx[0] && ctx < &dbl.ctx[dbl.cfg.devices];
  if (ctx && (!known || ctx->refs == 0)) return dbl_leave(DLCU_ERROR_INVALID_CONTEXT);
  current = ctx;
  return dbl_leave(DLCU_SUCCESS);
}

static bool can_access(int dev, int peer) {
  return dev != peer && !(dbl.cfg.no_peer[dev] >> peer & 1);
}

dlcu_result cuDeviceCanAccessPeer(int *can, dlcu_device dev, dlcu_device peer) {
  DBL_ENTER(DeviceCanAccessPeer);
  if (!can) return dbl_leave(DLCU_ERROR_INVALID_VALUE);
  if (!dbl_device_valid(dev) || !dbl_device_valid(peer))
    return dbl_leave(DLCU_ERROR_INVALID_DEVICE);
  *can = can_access(dev, peer);
  return dbl_leave(DLCU_SUCCESS);
}

/* One direction: the current context's device reaches the peer's memory. */
dlcu_result cuCtxEnablePeerAccess(dlcu_context peer, unsigned int flags) {
  DBL_ENTER(CtxEnablePeerAccess);
  dlcu_context ctx = dbl_current();
  if (!ctx) return dbl_leave(DLCU_ERROR_INVALID_CONTEXT);
  if (flags) return dbl_leave(DLCU_ERROR_INVALID_VALUE);
  bool known = peer >= &dbl.ctx[0] && peer < &dbl.ctx[dbl.cfg.devices];
  if (!known || peer->refs == 0) return dbl_leave(DLCU_ERROR_INVALID_CONTEXT);
  if (peer == ctx) return dbl_leave(DLCU_ERROR_INVALID_DEVICE);
  if (!can_access(ctx->device, peer->device))
    return dbl_leave(DLCU_ERROR_PEER_ACCESS_UNSUPPORTED);
  uint64_t bit = (uint64_t)1 << peer->device;
  if (ctx->peers & bit) return dbl_leave(DLCU_ERROR_PEER_ACCESS_ALREADY_ENABLED);
  ctx->peers |= bit;
  return dbl_leave(DLCU_SUCCESS);
}
