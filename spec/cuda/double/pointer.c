/* cuPointerGetAttribute under unified addressing: every address the double
 * hands out is unique across devices and the host. Memory it does not know
 * (plain malloc memory, reserved addresses with nothing mapped) is
 * CUDA_ERROR_INVALID_VALUE, as with the real driver. */
#include <string.h>

#include "double.h"

dlcu_result cuPointerGetAttribute(void *data, dlcu_pointer_attribute attribute, dlcu_ptr ptr) {
  DBL_ENTER(PointerGetAttribute);
  if (!data) return dbl_leave(DLCU_ERROR_INVALID_VALUE);
  dbl_region *r = dbl_in_va(ptr) ? dbl_regions_find(&dbl.space, ptr)
                                 : dbl_regions_find(&dbl.host, ptr);
  if (r && r->kind == DBL_RESERVE) r = dbl_regions_find(&dbl.maps, ptr);
  if (!r) return dbl_leave(DLCU_ERROR_INVALID_VALUE);
  bool host = r->kind == DBL_HOST;
  dlcu_context ctx = r->ctx ? r->ctx : &dbl.ctx[r->device];
  unsigned int u;
  int i;
  void *p;
  switch (attribute) {
  case DLCU_POINTER_ATTRIBUTE_CONTEXT: memcpy(data, &ctx, sizeof ctx); break;
  case DLCU_POINTER_ATTRIBUTE_MEMORY_TYPE:
    u = host ? DLCU_MEMORYTYPE_HOST : DLCU_MEMORYTYPE_DEVICE;
    memcpy(data, &u, sizeof u);
    break;
  case DLCU_POINTER_ATTRIBUTE_DEVICE_POINTER: memcpy(data, &ptr, sizeof ptr); break;
  case DLCU_POINTER_ATTRIBUTE_HOST_POINTER:
    if (!host) return dbl_leave(DLCU_ERROR_INVALID_VALUE); /* not host-accessible */
    p = (void *)(uintptr_t)ptr;
    memcpy(data, &p, sizeof p);
    break;
  case DLCU_POINTER_ATTRIBUTE_IS_MANAGED:
    u = 0;
    memcpy(data, &u, sizeof u);
    break;
  case DLCU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
    i = r->device;
    memcpy(data, &i, sizeof i);
    break;
  case DLCU_POINTER_ATTRIBUTE_RANGE_START_ADDR: memcpy(data, &r->start, sizeof r->start); break;
  case DLCU_POINTER_ATTRIBUTE_RANGE_SIZE: {
    size_t n = r->size;
    memcpy(data, &n, sizeof n);
    break;
  }
  default: return dbl_leave(DLCU_ERROR_INVALID_VALUE);
  }
  return dbl_leave(DLCU_SUCCESS);
}
