/* x:__cuda_array_interface__() for arrays on one CUDA device: the CUDA Array
 * Interface, version 3, as a table {shape, typestr, data = {ptr, readonly},
 * version = 3, strides = nil (C order)}. The array's data is waited for
 * first (as JAX does), so `stream` is nil: the consumer need not
 * synchronise. The pointer stays valid while the array lives. */
#include <lauxlib.h>
#include <lua.h>
#include <stdio.h>

#include "binding.h"
#include "dlrun/array.h"
#include "dlrun/dlpack.h"
#include "dlrun/dtype.h"
#include "dlrun/device.h"

#define FN "__cuda_array_interface__"

/* NumPy's typestr of a dtype ("<f4"). bfloat16 and the float8 family have
 * none of their own: "<V2" and "<V1", as ml_dtypes writes them (its dtypes
 * say byteorder '=', so even a 1-byte one gets '<', not '|'). */
static void typestr(dlrun_dtype dtype, char *buf, size_t n) {
  const dlrun_dtype_info *info = dlrun_dtype_get(dtype);
  char kind = 'V';
  switch (info->kind) {
  case DLRUN_KIND_BOOL: kind = 'b'; break;
  case DLRUN_KIND_INT: kind = 'i'; break;
  case DLRUN_KIND_UINT: kind = 'u'; break;
  case DLRUN_KIND_FLOAT:
    kind = dtype == DLRUN_FLOAT16 || dtype == DLRUN_FLOAT32 || dtype == DLRUN_FLOAT64 ? 'f' : 'V';
    break;
  case DLRUN_KIND_COMPLEX: kind = 'c'; break;
  }
  snprintf(buf, n, "%c%c%zu", info->size == 1 && kind != 'V' ? '|' : '<', kind, info->size);
}

int dlrun_lua_cuda_array_interface(lua_State *L) {
  dlrun_array *a = dlrun_lua_check_array(L, 1, FN);
  dlrun_lua_check_nargs(L, FN, 1);
  dlrun_lua_check(L, dlrun_array_check_live(a));
  /* AttributeError, as JAX's property raises it: a probe for the attribute
   * (Python's hasattr, dl.errors.probe) reads a sharded array as having none. */
  if (dlrun_array_shard_count(a) != 1)
    return dlrun_lua_raise(L, "AttributeError",
                           "__cuda_array_interface__() is supported only for unsharded arrays.");
  /* A packed sub-byte dtype has no typestr: the interface counts whole bytes
   * per element (ml_dtypes' int4 is "<V1", one element a byte), where
   * dlrun's bytes each hold several elements. */
  const dlrun_dtype_info *info = dlrun_dtype_get(dlrun_array_dtype(a));
  if (info->dl_bits < 8)
    return dlrun_lua_raise(L, "TypeError",
                           "__cuda_array_interface__() cannot describe %s: its elements are "
                           "packed, %u bits each (DLPack 1.1's layout), and the interface's "
                           "typestr has whole bytes per element; use __dlpack__ with "
                           "max_version (1, 1)",
                           info->name, (unsigned)info->dl_bits);
  int32_t type, id;
  dlrun_lua_check(L, dlrun_export_device(a, &type, &id));
  dlrun_device *dev = dlrun_array_device(a);
  dlrun_memory_kind kind = dlrun_sharding_memory_kind(dlrun_array_sharding(a));
  if (type == kDLCUDAHost) /* a CUDA device's, but host memory: the kind is why */
    return dlrun_lua_raise(L, "ValueError",
                           "__cuda_array_interface__() is supported only for arrays in CUDA device "
                           "memory; this array is in %s memory of %s (host memory, kDLCUDAHost)",
                           dlrun_memory_kind_name(kind), dlrun_device_name(dev));
  if (type != kDLCUDA) {
    return dlrun_lua_raise(L, "ValueError",
                           "__cuda_array_interface__() is supported only for arrays on CUDA "
                           "devices; this array is on %s (platform %s)",
                           dlrun_device_name(dev), dlrun_device_platform(dev));
  }
  /* The device pointer, through an export that shares the array's memory
   * (and waits for its data); the array keeps the memory once it is gone. */
  /* dlrun's own DLPack version: the interface reads every dtype's bytes */
  dlrun_export_options o = {.has_max_version = true, .max_major = DLRUN_DLPACK_MAJOR,
                            .max_minor = DLRUN_DLPACK_MINOR, .copy = DLRUN_COPY_NEVER};
  dlrun_exported e;
  dlrun_lua_check(L, dlrun_export(a, &o, &e));
  const DLTensor *t = &e.versioned->dl_tensor;
  uintptr_t ptr = (uintptr_t)t->data + (uintptr_t)t->byte_offset;
  e.versioned->deleter(e.versioned);
  char ts[8];
  typestr(dlrun_array_dtype(a), ts, sizeof ts);
  lua_createtable(L, 0, 5);
  int ndim = dlrun_array_ndim(a);
  const int64_t *dims = dlrun_array_shape(a);
  lua_createtable(L, ndim, 0);
  for (int i = 0; i < ndim; i++) {
    lua_pushinteger(L, dims[i]);
    lua_rawseti(L, -2, i + 1);
  }
  lua_setfield(L, -2, "shape");
  lua_pushstring(L, ts);
  lua_setfield(L, -2, "typestr");
  lua_createtable(L, 2, 0);
  lua_pushinteger(L, (lua_Integer)ptr);
  lua_rawseti(L, -2, 1);
  lua_pushboolean(L, 0);
  lua_rawseti(L, -2, 2);
  lua_setfield(L, -2, "data");
  lua_pushinteger(L, 3);
  lua_setfield(L, -2, "version");
  return 1; /* strides and stream: nil */
}
