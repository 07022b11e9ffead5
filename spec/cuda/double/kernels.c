/* cuMemsetD8/D16/D32Async, modules and kernels. No PTX runs: a module is
 * accepted when its text starts with a .version directive (after comments)
 * and lists its .entry names; cuModuleGetFunction hands out a function for
 * each; cuLaunchKernel runs the native C version of dlrun's kernels
 * (src/platforms/cuda/kernels.cu: the same names, parameters and
 * arithmetic) on the stream's worker. Grid and block sizes only have to be
 * non-zero. A kernel touching memory it may not reach fails with
 * CUDA_ERROR_ILLEGAL_ADDRESS at the stream, as on a GPU. */
#include <stdlib.h>
#include <string.h>

#include "double.h"
#include "dlrun/dtype.h"

/* ---- writing elements to device memory ---- */

typedef void (*element_fn)(uint64_t i, unsigned char *out, const uint64_t *args);

/* Elements 0..count-1 of `esize` bytes at dst, each made by `make`; an
 * element across two mappings goes through a buffer. */
static dlcu_result write_elements(uint64_t dst, uint64_t count, unsigned esize, int accessor,
                                  element_fn make, const uint64_t *args) {
  uint64_t total;
  if (__builtin_mul_overflow(count, esize, &total)) return DLCU_ERROR_ILLEGAL_ADDRESS;
  for (uint64_t i = 0; i < count;) {
    unsigned char *host, tmp[16];
    uint64_t len;
    dlcu_result rc = dbl_resolve(dst + i * esize, (count - i) * esize, accessor, true, &host, &len);
    if (rc) return rc;
    uint64_t whole = len / esize;
    for (uint64_t k = 0; k < whole; k++) make(i + k, host + k * esize, args);
    i += whole;
    if (len % esize && i < count) {
      make(i, tmp, args);
      if ((rc = dbl_transfer(dst + i * esize, true, accessor, (uint64_t)(uintptr_t)tmp, false, -1,
                             esize)))
        return rc;
      i++;
    }
  }
  return DLCU_SUCCESS;
}

static void store_int(unsigned char *p, size_t size, int64_t v) {
  uint8_t v8 = (uint8_t)v;
  uint16_t v16 = (uint16_t)v;
  uint32_t v32 = (uint32_t)v;
  switch (size) {
  case 1: memcpy(p, &v8, 1); break;
  case 2: memcpy(p, &v16, 2); break;
  case 4: memcpy(p, &v32, 4); break;
  default: memcpy(p, &v, 8); break;
  }
}

static void set_element(uint64_t i, unsigned char *out, const uint64_t *args) {
  (void)i;
  store_int(out, args[1], (int64_t)args[0]);
}

dlcu_result dbl_set_run(uint64_t dst, uint64_t n, uint32_t value, unsigned size, int accessor) {
  uint64_t args[2] = {value, size};
  return write_elements(dst, n, size, accessor, set_element, args);
}

static dlcu_result memset_async(dbl_id id, dlcu_ptr dst, uint32_t value, unsigned size, size_t n,
                                dlcu_stream stream) {
  dlcu_result fail = DLCU_SUCCESS, rc = dbl_enter(id, &fail);
  if (rc) return rc;
  dlcu_stream s;
  if ((rc = dbl_stream_arg(stream, true, &s))) return dbl_leave(rc);
  int dev;
  bool host;
  uint64_t bytes;
  if (dst % size || __builtin_mul_overflow((uint64_t)n, size, &bytes) || !dbl_in_va(dst) ||
      (n && !dbl_known_range(dst, bytes, &dev, &host)))
    return dbl_leave(DLCU_ERROR_INVALID_VALUE);
  dbl_op *op = dbl_op_new(DBL_OP_SET, fail);
  if (!op) return dbl_leave(DLCU_ERROR_OUT_OF_MEMORY);
  op->u.set.dst = dst;
  op->u.set.n = n;
  op->u.set.value = value;
  op->u.set.size = size;
  dbl_enqueue(s, op);
  return dbl_leave(DLCU_SUCCESS);
}

dlcu_result cuMemsetD8Async(dlcu_ptr dst, unsigned char value, size_t n, dlcu_stream stream) {
  return memset_async(DBL_ID_MemsetD8Async, dst, value, 1, n, stream);
}

dlcu_result cuMemsetD16Async(dlcu_ptr dst, unsigned short value, size_t n, dlcu_stream stream) {
  return memset_async(DBL_ID_MemsetD16Async, dst, value, 2, n, stream);
}

dlcu_result cuMemsetD32Async(dlcu_ptr dst, unsigned int value, size_t n, dlcu_stream stream) {
  return memset_async(DBL_ID_MemsetD32Async, dst, value, 4, n, stream);
}

/* ---- dlrun's kernels, natively ---- */

/* dlrun_fill8(ptr dst, u64 count, u64 pattern) */
static void fill8_element(uint64_t i, unsigned char *out, const uint64_t *args) {
  (void)i;
  memcpy(out, &args[2], 8);
}
static dlcu_result fill8_run(const uint64_t *args, int accessor) {
  return write_elements(args[0], args[1], 8, accessor, fill8_element, args);
}

/* dlrun_fill16(ptr dst, u64 count, u64 lo, u64 hi): lo at the lower address */
static void fill16_element(uint64_t i, unsigned char *out, const uint64_t *args) {
  (void)i;
  memcpy(out, &args[2], 8);
  memcpy(out + 8, &args[3], 8);
}
static dlcu_result fill16_run(const uint64_t *args, int accessor) {
  return write_elements(args[0], args[1], 16, accessor, fill16_element, args);
}

/* dlrun_sequence(ptr dst, u64 count, u64 first, u32 dtype, u32 integral,
 * s64 start_i, s64 step_i, f64 start_f, f64 step_f): element i is
 * start + (first + i) * step, in int64 when integral (wrapping), else in
 * double; stored as kernels.cu does: integers truncated toward zero and
 * wrapped, bool nonzero, float16 and bfloat16 rounded to nearest even
 * (dlrun's own conversions), complex with imaginary part 0. */

static void store_real(unsigned char *p, dlrun_dtype dtype, double v) {
  uint16_t h;
  float f = (float)v, zf = 0.0f;
  double zd = 0.0;
  switch (dtype) {
  case DLRUN_FLOAT16: h = dlrun_float16_from_double(v); memcpy(p, &h, 2); break;
  case DLRUN_BFLOAT16: h = dlrun_bfloat16_from_double(v); memcpy(p, &h, 2); break;
  case DLRUN_FLOAT32: memcpy(p, &f, 4); break;
  case DLRUN_COMPLEX64: memcpy(p, &f, 4); memcpy(p + 4, &zf, 4); break;
  case DLRUN_COMPLEX128: memcpy(p, &v, 8); memcpy(p + 8, &zd, 8); break;
  default: memcpy(p, &v, 8); break; /* float64 */
  }
}

static void sequence_element(uint64_t i, unsigned char *out, const uint64_t *args) {
  dlrun_dtype dtype = (dlrun_dtype)(uint32_t)args[3];
  const dlrun_dtype_info *info = dlrun_dtype_get(dtype);
  int64_t n = (int64_t)(args[2] + i);
  bool real = info->kind == DLRUN_KIND_FLOAT || info->kind == DLRUN_KIND_COMPLEX;
  if ((uint32_t)args[4]) {
    int64_t v = (int64_t)(args[5] + (uint64_t)n * args[6]);
    if (real)
      store_real(out, dtype, (double)v);
    else if (dtype == DLRUN_BOOL)
      *out = v != 0;
    else
      store_int(out, info->size, v);
    return;
  }
  double start, step;
  memcpy(&start, &args[7], 8);
  memcpy(&step, &args[8], 8);
  double v = start + (double)n * step;
  if (real)
    store_real(out, dtype, v);
  else if (dtype == DLRUN_BOOL)
    *out = v != 0;
  else
    store_int(out, info->size, v < 0 ? (int64_t)v : (int64_t)(uint64_t)v);
}

static dlcu_result sequence_run(const uint64_t *args, int accessor) {
  const dlrun_dtype_info *info = dlrun_dtype_get((dlrun_dtype)(uint32_t)args[3]);
  if (!info) return DLCU_ERROR_LAUNCH_FAILED; /* the GPU would read past its table */
  return write_elements(args[0], args[1], (unsigned)info->size, accessor, sequence_element, args);
}

static const unsigned char fill8_sizes[] = {8, 8, 8};
static const unsigned char fill16_sizes[] = {8, 8, 8, 8};
static const unsigned char sequence_sizes[] = {8, 8, 8, 4, 4, 8, 8, 8, 8};
static const dbl_kernel kernels[] = {
    {"dlrun_fill8", 3, fill8_sizes, fill8_run},
    {"dlrun_fill16", 4, fill16_sizes, fill16_run},
    {"dlrun_sequence", 9, sequence_sizes, sequence_run},
};

const dbl_kernel *dbl_kernel_find(const char *name) {
  for (size_t i = 0; i < sizeof kernels / sizeof kernels[0]; i++)
    if (strcmp(kernels[i].name, name) == 0) return &kernels[i];
  return NULL;
}

/* ---- modules ---- */

/* The text after blanks and // or slash-star comments. */
static const char *skip_blank(const char *p) {
  for (;;) {
    while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r') p++;
    if (p[0] == '/' && p[1] == '/') {
      p += strcspn(p, "\n");
    } else if (p[0] == '/' && p[1] == '*') {
      const char *end = strstr(p + 2, "*/");
      if (!end) return p + strlen(p);
      p = end + 2;
    } else {
      return p;
    }
  }
}

static void module_free(dlcu_module m) {
  while (m->functions) {
    struct dlcu_function_st *f = m->functions;
    m->functions = f->next;
    free(f->name);
    free(f);
  }
  free(m);
}

static const char name_chars[] =
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_$.";

dlcu_result cuModuleLoadData(dlcu_module *module, const void *image) {
  DBL_ENTER(ModuleLoadData);
  dlcu_context ctx = dbl_current();
  if (!ctx) return dbl_leave(DLCU_ERROR_INVALID_CONTEXT);
  if (!module || !image) return dbl_leave(DLCU_ERROR_INVALID_VALUE);
  const char *text = skip_blank(image);
  if (strncmp(text, ".version", 8) != 0 || (text[8] != ' ' && text[8] != '\t'))
    return dbl_leave(DLCU_ERROR_INVALID_IMAGE);
  dlcu_module m = calloc(1, sizeof *m);
  if (!m) return dbl_leave(DLCU_ERROR_OUT_OF_MEMORY);
  m->ctx = ctx;
  for (const char *p = strstr(text, ".entry"); p; p = strstr(p, ".entry")) {
    p += 6;
    if (*p != ' ' && *p != '\t' && *p != '\n') continue;
    while (*p == ' ' || *p == '\t' || *p == '\n') p++;
    size_t len = strspn(p, name_chars);
    struct dlcu_function_st *f = len ? calloc(1, sizeof *f) : NULL;
    char *name = f ? strndup(p, len) : NULL;
    if (!name) {
      free(f);
      module_free(m);
      return dbl_leave(len ? DLCU_ERROR_OUT_OF_MEMORY : DLCU_ERROR_INVALID_PTX);
    }
    *f = (struct dlcu_function_st){.next = m->functions, .module = m, .name = name,
                                   .kernel = dbl_kernel_find(name)};
    m->functions = f;
  }
  m->next = dbl.modules;
  dbl.modules = m;
  *module = m;
  return dbl_leave(DLCU_SUCCESS);
}

static dlcu_module module_arg(dlcu_module m) {
  for (dlcu_module t = dbl.modules; t; t = t->next)
    if (t == m) return m;
  return NULL;
}

static void module_unlink(dlcu_module m) {
  for (dlcu_module *p = &dbl.modules; *p; p = &(*p)->next)
    if (*p == m) {
      *p = m->next;
      return;
    }
}

dlcu_result cuModuleUnload(dlcu_module module) {
  DBL_ENTER(ModuleUnload);
  dlcu_module m = module_arg(module);
  if (!m) return dbl_leave(DLCU_ERROR_INVALID_HANDLE);
  module_unlink(m);
  module_free(m);
  return dbl_leave(DLCU_SUCCESS);
}

dlcu_result cuModuleGetFunction(dlcu_function *fn, dlcu_module module, const char *name) {
  DBL_ENTER(ModuleGetFunction);
  if (!fn || !name) return dbl_leave(DLCU_ERROR_INVALID_VALUE);
  dlcu_module m = module_arg(module);
  if (!m) return dbl_leave(DLCU_ERROR_INVALID_HANDLE);
  for (struct dlcu_function_st *f = m->functions; f; f = f->next)
    if (strcmp(f->name, name) == 0) {
      *fn = f;
      return dbl_leave(DLCU_SUCCESS);
    }
  return dbl_leave(DLCU_ERROR_NOT_FOUND);
}

static struct dlcu_function_st *function_arg(dlcu_function fn) {
  for (dlcu_module m = dbl.modules; m; m = m->next)
    for (struct dlcu_function_st *f = m->functions; f; f = f->next)
      if (f == fn) return f;
  return NULL;
}

/* The arguments are copied when the kernel is queued, as the driver does.
 * A function without a native version (a name dlrun does not define) is
 * CUDA_ERROR_NOT_FOUND; `extra` is not implemented (INVALID_VALUE). */
dlcu_result cuLaunchKernel(dlcu_function fn, unsigned int grid_x, unsigned int grid_y,
                           unsigned int grid_z, unsigned int block_x, unsigned int block_y,
                           unsigned int block_z, unsigned int shared_bytes, dlcu_stream stream,
                           void **params, void **extra) {
  dlcu_result fail = DLCU_SUCCESS, rc = dbl_enter(DBL_ID_LaunchKernel, &fail);
  if (rc) return rc;
  (void)shared_bytes;
  dlcu_context cur = dbl_current();
  if (!cur) return dbl_leave(DLCU_ERROR_INVALID_CONTEXT);
  struct dlcu_function_st *f = function_arg(fn);
  if (!f) return dbl_leave(DLCU_ERROR_INVALID_HANDLE);
  if (!grid_x || !grid_y || !grid_z || !block_x || !block_y || !block_z || extra)
    return dbl_leave(DLCU_ERROR_INVALID_VALUE);
  if (!f->kernel) return dbl_leave(DLCU_ERROR_NOT_FOUND);
  if (!params) return dbl_leave(DLCU_ERROR_INVALID_VALUE);
  dlcu_stream s;
  if ((rc = dbl_stream_arg(stream, true, &s))) return dbl_leave(rc);
  if (f->module->ctx != s->ctx) return dbl_leave(DLCU_ERROR_INVALID_HANDLE);
  dbl_op *op = dbl_op_new(DBL_OP_KERNEL, fail);
  if (!op) return dbl_leave(DLCU_ERROR_OUT_OF_MEMORY);
  op->u.kernel.k = f->kernel;
  for (int i = 0; i < f->kernel->nargs; i++) {
    if (!params[i]) {
      free(op);
      return dbl_leave(DLCU_ERROR_INVALID_VALUE);
    }
    memcpy(&op->u.kernel.args[i], params[i], f->kernel->sizes[i]); /* little-endian */
  }
  dbl_enqueue(s, op);
  return dbl_leave(DLCU_SUCCESS);
}

void dbl_modules_teardown(dlcu_context ctx) {
  for (dlcu_module m = dbl.modules, next; m; m = next) {
    next = m->next;
    if (ctx && m->ctx != ctx) continue;
    module_unlink(m);
    module_free(m);
  }
}
