/* Import of foreign CUDA memory (docs/cuda.md, "DLPack and the CUDA Array
 * Interface"): memory a producer allocated itself with cuMemAlloc, as PyTorch
 * or CuPy would, handed over as a kDLCUDA tensor. The CUDA platform
 * recognises it with cuPointerGetAttribute and wraps it without a copy (the
 * deleter runs when the array goes); memory of another ordinal, and a range
 * past the allocation, are BufferErrors. On the driver double of the tests
 * (tests/cuda-double/libcuda.so.1 beside this test); skipped without it. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "dlrun/dlpack.h"
#include "dlrun/dlrun.h"
#include "platforms/cuda/driver_api.h"

static int deleted;
static void deleter(DLManagedTensor *m) {
  deleted++;
  free(m);
}

static int64_t shape4[1] = {4};

static DLManagedTensor *tensor(dlcu_ptr p, int ordinal) {
  DLManagedTensor *m = calloc(1, sizeof *m);
  m->dl_tensor = (DLTensor){.data = (void *)(uintptr_t)p, .device = {kDLCUDA, ordinal},
                            .ndim = 1, .dtype = {kDLFloat, 32, 1}, .shape = shape4};
  m->deleter = deleter;
  return m;
}

int main(void) {
  char lib[1100], mod[1100];
  if (!check_cuda_double(lib, sizeof lib, mod, sizeof mod)) {
    TEST("cuda import # SKIP the driver double or the CUDA module is not built") {}
    return check_summary("cuda_import");
  }
  void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL); /* the same library the module opens */
  dlcu_result (*retain)(dlcu_context *, dlcu_device), (*set)(dlcu_context),
      (*alloc)(dlcu_ptr *, size_t), (*copy)(dlcu_ptr, dlcu_ptr, size_t), (*init)(unsigned);
  *(void **)&init = dlsym(h, "cuInit");
  *(void **)&retain = dlsym(h, "cuDevicePrimaryCtxRetain");
  *(void **)&set = dlsym(h, "cuCtxSetCurrent");
  *(void **)&alloc = dlsym(h, "cuMemAlloc_v2");
  *(void **)&copy = dlsym(h, "cuMemcpy");
  dlrun_config cfg = {.devices = "cuda:2"};
  dlrun_runtime *rt = NULL;
  TEST("a runtime on cuda:2 over the driver double") {
    CHECK(dlrun_runtime_create(&cfg, &rt) == DLRUN_OK, "%s", dlrun_last_error());
  }
  if (!rt) return check_summary("cuda_import");
  dlcu_context ctx;
  dlcu_ptr p = 0;
  float values[4] = {1.5f, -2.0f, 3.25f, 8.0f}, back[4] = {0};
  TEST("the producer's own cuMemAlloc memory on ordinal 1") {
    CHECK(init(0) == 0 && retain(&ctx, 1) == 0 && set(ctx) == 0 && alloc(&p, 64) == 0 &&
              copy(p, (dlcu_ptr)(uintptr_t)values, sizeof values) == 0,
          "the driver double refused");
  }
  TEST("imported without a copy, values intact, the deleter run when the array goes") {
    dlrun_array *a = NULL;
    dlrun_import_outcome how = DLRUN_IMPORT_REFUSED;
    CHECK(dlrun_import(rt, tensor(p, 1), NULL, NULL, &a, &how) == DLRUN_OK, "%s",
          dlrun_last_error());
    CHECK(how == DLRUN_IMPORT_WRAPPED, "outcome %d", (int)how);
    dlrun_device *dev = a ? dlrun_array_device(a) : NULL;
    CHECK(dev && strcmp(dlrun_device_name(dev), "CudaDevice(id=1)") == 0, "device");
    CHECK(a && dlrun_array_read(a, 0, sizeof back, back) == DLRUN_OK &&
              memcmp(back, values, sizeof back) == 0,
          "read %g %g %g %g: %s", back[0], back[1], back[2], back[3], dlrun_last_error());
    CHECK(deleted == 0, "deleted early");
    dlrun_array_release(a);
    if (dev) dlrun_device_synchronize(dev);
    CHECK(deleted == 1, "deleter ran %d times", deleted);
  }
  TEST("memory of another ordinal is a BufferError naming it, the tensor still the caller's") {
    dlrun_array *a = NULL;
    dlrun_import_outcome how = DLRUN_IMPORT_WRAPPED;
    DLManagedTensor *m = tensor(p, 0);
    CHECK(dlrun_import(rt, m, NULL, NULL, &a, &how) == DLRUN_ERR_BUFFER && !a, "imported");
    CHECK(how == DLRUN_IMPORT_REFUSED, "outcome %d", (int)how);
    CHECK_STR_CONTAINS(dlrun_last_error(), "is memory of CUDA device 1, not 0");
    m->deleter(m);
  }
  TEST("a tensor reaching past the allocation is a BufferError") {
    dlrun_array *a = NULL;
    DLManagedTensor *m = tensor(p + 60, 1);
    CHECK(dlrun_import(rt, m, NULL, NULL, &a, NULL) == DLRUN_ERR_BUFFER && !a, "imported");
    CHECK_STR_CONTAINS(dlrun_last_error(), "is past the end of the CUDA allocation");
    m->deleter(m);
  }
  dlrun_runtime_release(rt);
  return check_summary("cuda_import");
}
