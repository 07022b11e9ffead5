/* dlrun's PTX kernels (kernels.ptx, embedded as cu_kernels_ptx by the
 * build), loaded into a device's primary context on first use. */
#include "cu.h"

static const char *const kernel_names[] = {
    [CU_K_FILL8] = "dlrun_fill8",
    [CU_K_FILL16] = "dlrun_fill16",
    [CU_K_SEQUENCE] = "dlrun_sequence",
};

dlcu_result cu_kernel_of(cu_device *d, int which, dlcu_function *out) {
  dlcu_result r = DLCU_SUCCESS;
  if (!d->module) r = cu_api.ModuleLoadData(&d->module, cu_kernels_ptx);
  if (r) {
    d->module = NULL;
    return r;
  }
  if (!d->kernels[which]) r = cu_api.ModuleGetFunction(&d->kernels[which], d->module,
                                                       kernel_names[which]);
  *out = d->kernels[which];
  return r;
}
