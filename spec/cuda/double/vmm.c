/* Virtual memory management with the real rules: a reserved range holds no
 * memory; cuMemCreate makes a physical handle of a granularity multiple,
 * charged to its device; cuMemMap maps a whole handle at a granularity-
 * aligned address inside one reserved range, without access; cuMemSetAccess
 * grants devices read or read-write; work touching a mapping its device may
 * not access, or reserved addresses with nothing mapped, fails with
 * CUDA_ERROR_ILLEGAL_ADDRESS at the stream (memory.c, dbl_resolve).
 * Stricter than the documentation where it is silent: cuMemAddressFree
 * refuses a range that still has mappings, cuMemUnmap and cuMemSetAccess
 * take whole mappings only. */
#include <stdlib.h>
#include <sys/mman.h>

#include "double.h"

static dlcu_result check_prop(const dlcu_mem_allocation_prop *prop) {
  if (!prop || prop->type != DLCU_MEM_ALLOCATION_TYPE_PINNED ||
      prop->location.type != DLCU_MEM_LOCATION_TYPE_DEVICE ||
      (prop->requestedHandleTypes != DLCU_MEM_HANDLE_TYPE_NONE &&
       prop->requestedHandleTypes != DLCU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR))
    return DLCU_ERROR_INVALID_VALUE;
  if (!dbl_device_valid(prop->location.id)) return DLCU_ERROR_INVALID_DEVICE;
  return dbl.cfg.no_vmm ? DLCU_ERROR_NOT_SUPPORTED : DLCU_SUCCESS;
}

static bool aligned(uint64_t v) { return (v & (dbl.cfg.granularity - 1)) == 0; }

dlcu_result cuMemGetAllocationGranularity(size_t *granularity,
                                          const dlcu_mem_allocation_prop *prop,
                                          dlcu_mem_granularity_flags option) {
  DBL_ENTER(MemGetAllocationGranularity);
  if (!granularity || (option != DLCU_MEM_ALLOC_GRANULARITY_MINIMUM &&
                       option != DLCU_MEM_ALLOC_GRANULARITY_RECOMMENDED))
    return dbl_leave(DLCU_ERROR_INVALID_VALUE);
  dlcu_result rc = check_prop(prop);
  if (rc) return dbl_leave(rc);
  *granularity = dbl.cfg.granularity;
  return dbl_leave(DLCU_SUCCESS);
}

dlcu_result cuMemAddressReserve(dlcu_ptr *ptr, size_t size, size_t alignment, dlcu_ptr addr,
                                unsigned long long flags) {
  DBL_ENTER(MemAddressReserve);
  (void)addr; /* a hint only */
  if (!dbl_current()) return dbl_leave(DLCU_ERROR_INVALID_CONTEXT);
  if (!ptr || size == 0 || !aligned(size) || flags || (alignment & (alignment - 1)))
    return dbl_leave(DLCU_ERROR_INVALID_VALUE);
  uint64_t align = alignment > dbl.cfg.granularity ? alignment : dbl.cfg.granularity, start;
  if (!dbl_va_find(size, align, &start)) return dbl_leave(DLCU_ERROR_OUT_OF_MEMORY);
  dbl_region *r = calloc(1, sizeof *r);
  if (r) *r = (dbl_region){.start = start, .size = size, .kind = DBL_RESERVE, .device = -1};
  if (!r || dbl_regions_insert(&dbl.space, r)) {
    free(r);
    return dbl_leave(DLCU_ERROR_OUT_OF_MEMORY);
  }
  *ptr = start;
  return dbl_leave(DLCU_SUCCESS);
}

/* The first mapping overlapping [start, start + size), or NULL. */
static dbl_region *first_map(uint64_t start, uint64_t size) {
  for (size_t i = 0; i < dbl.maps.n; i++) {
    dbl_region *m = dbl.maps.at[i];
    if (m->start < start + size && m->start + m->size > start) return m;
  }
  return NULL;
}

dlcu_result cuMemAddressFree(dlcu_ptr ptr, size_t size) {
  DBL_ENTER(MemAddressFree);
  if (!dbl_current()) return dbl_leave(DLCU_ERROR_INVALID_CONTEXT);
  dbl_region *r = dbl_regions_find(&dbl.space, ptr);
  if (!r || r->kind != DBL_RESERVE || r->start != ptr || r->size != size ||
      first_map(ptr, size))
    return dbl_leave(DLCU_ERROR_INVALID_VALUE);
  dbl_regions_remove(&dbl.space, r);
  free(r);
  return dbl_leave(DLCU_SUCCESS);
}

static dbl_handle *handle_find(dlcu_mem_handle id) {
  for (dbl_handle *h = dbl.handles; h; h = h->next)
    if (h->id == id) return h;
  return NULL;
}

static void handle_unref(dbl_handle *h) {
  if (--h->refs > 0) return;
  for (dbl_handle **p = &dbl.handles; *p; p = &(*p)->next)
    if (*p == h) {
      *p = h->next;
      break;
    }
  dbl.used[h->device] -= h->size;
  munmap(h->bytes, h->size);
  free(h);
}

dlcu_result cuMemCreate(dlcu_mem_handle *handle, size_t size, const dlcu_mem_allocation_prop *prop,
                        unsigned long long flags) {
  DBL_ENTER(MemCreate);
  if (!dbl_current()) return dbl_leave(DLCU_ERROR_INVALID_CONTEXT);
  dlcu_result rc = check_prop(prop);
  if (rc) return dbl_leave(rc);
  if (!handle || size == 0 || !aligned(size) || flags) return dbl_leave(DLCU_ERROR_INVALID_VALUE);
  int dev = prop->location.id;
  if (size > dbl.cfg.memory - dbl.used[dev]) return dbl_leave(DLCU_ERROR_OUT_OF_MEMORY);
  dbl_handle *h = calloc(1, sizeof *h);
  unsigned char *bytes = h ? dbl_bytes_new(size) : NULL;
  if (!bytes) {
    free(h);
    return dbl_leave(DLCU_ERROR_OUT_OF_MEMORY);
  }
  *h = (dbl_handle){.next = dbl.handles, .id = dbl.next_handle++, .size = size, .device = dev,
                    .bytes = bytes, .refs = 1};
  dbl.handles = h;
  dbl.used[dev] += size;
  if (dbl.ncreates < DBL_MAX_CREATES) {
    dbl.creates[dbl.ncreates].size = size;
    dbl.creates[dbl.ncreates].device = dev;
  }
  dbl.ncreates++;
  *handle = h->id;
  return dbl_leave(DLCU_SUCCESS);
}

size_t cuda_double_creates(uint64_t *sizes, int *devices, size_t max, int clear) {
  pthread_mutex_lock(&dbl.lock);
  size_t n = dbl.ncreates;
  for (size_t i = 0; i < n && i < max && i < DBL_MAX_CREATES; i++) {
    if (sizes) sizes[i] = dbl.creates[i].size;
    if (devices) devices[i] = dbl.creates[i].device;
  }
  if (clear) dbl.ncreates = 0;
  pthread_mutex_unlock(&dbl.lock);
  return n;
}

/* The bytes go when the last mapping of the handle goes too. */
dlcu_result cuMemRelease(dlcu_mem_handle handle) {
  DBL_ENTER(MemRelease);
  if (!dbl_current()) return dbl_leave(DLCU_ERROR_INVALID_CONTEXT);
  dbl_handle *h = handle_find(handle);
  if (!h) return dbl_leave(DLCU_ERROR_INVALID_VALUE);
  h->id = 0; /* the handle's name is gone; mappings keep the bytes */
  handle_unref(h);
  return dbl_leave(DLCU_SUCCESS);
}

dlcu_result cuMemMap(dlcu_ptr ptr, size_t size, size_t offset, dlcu_mem_handle handle,
                     unsigned long long flags) {
  DBL_ENTER(MemMap);
  if (!dbl_current()) return dbl_leave(DLCU_ERROR_INVALID_CONTEXT);
  dbl_handle *h = handle ? handle_find(handle) : NULL;
  dbl_region *r = dbl_regions_find(&dbl.space, ptr);
  if (!h || !r || r->kind != DBL_RESERVE || !aligned(ptr) || offset || flags ||
      size != h->size || size > r->start + r->size - ptr || first_map(ptr, size))
    return dbl_leave(DLCU_ERROR_INVALID_VALUE);
  dbl_region *m = calloc(1, sizeof *m);
  if (m)
    *m = (dbl_region){.start = ptr, .size = size, .kind = DBL_MAP, .device = h->device,
                      .bytes = h->bytes, .handle = h};
  if (!m || dbl_regions_insert(&dbl.maps, m)) {
    free(m);
    return dbl_leave(DLCU_ERROR_OUT_OF_MEMORY);
  }
  h->refs++;
  return dbl_leave(DLCU_SUCCESS);
}

/* Whether [ptr, ptr + size) is exactly a run of whole, adjacent mappings. */
static bool whole_mappings(uint64_t ptr, uint64_t size) {
  if (size == 0) return false;
  for (uint64_t at = ptr; at < ptr + size;) {
    dbl_region *m = dbl_regions_find(&dbl.maps, at);
    if (!m || m->start != at || m->size > ptr + size - at) return false;
    at += m->size;
  }
  return true;
}

static void map_free(dbl_region *m) {
  dbl_regions_remove(&dbl.maps, m);
  handle_unref(m->handle);
  free(m);
}

dlcu_result cuMemUnmap(dlcu_ptr ptr, size_t size) {
  DBL_ENTER(MemUnmap);
  if (!dbl_current()) return dbl_leave(DLCU_ERROR_INVALID_CONTEXT);
  if (!whole_mappings(ptr, size)) return dbl_leave(DLCU_ERROR_INVALID_VALUE);
  for (uint64_t at = ptr; at < ptr + size;) {
    dbl_region *m = dbl_regions_find(&dbl.maps, at);
    at += m->size;
    map_free(m);
  }
  return dbl_leave(DLCU_SUCCESS);
}

dlcu_result cuMemSetAccess(dlcu_ptr ptr, size_t size, const dlcu_mem_access_desc *desc,
                           size_t count) {
  DBL_ENTER(MemSetAccess);
  if (!dbl_current()) return dbl_leave(DLCU_ERROR_INVALID_CONTEXT);
  if (!desc || count == 0 || !whole_mappings(ptr, size)) return dbl_leave(DLCU_ERROR_INVALID_VALUE);
  for (size_t i = 0; i < count; i++) {
    if (desc[i].location.type != DLCU_MEM_LOCATION_TYPE_DEVICE ||
        (desc[i].flags != DLCU_MEM_ACCESS_FLAGS_PROT_NONE &&
         desc[i].flags != DLCU_MEM_ACCESS_FLAGS_PROT_READ &&
         desc[i].flags != DLCU_MEM_ACCESS_FLAGS_PROT_READWRITE))
      return dbl_leave(DLCU_ERROR_INVALID_VALUE);
    if (!dbl_device_valid(desc[i].location.id)) return dbl_leave(DLCU_ERROR_INVALID_DEVICE);
  }
  for (uint64_t at = ptr; at < ptr + size;) {
    dbl_region *m = dbl_regions_find(&dbl.maps, at);
    for (size_t i = 0; i < count; i++) {
      uint64_t bit = (uint64_t)1 << desc[i].location.id;
      m->readable = desc[i].flags ? m->readable | bit : m->readable & ~bit;
      m->writable = desc[i].flags == DLCU_MEM_ACCESS_FLAGS_PROT_READWRITE ? m->writable | bit
                                                                           : m->writable & ~bit;
    }
    at += m->size;
  }
  return dbl_leave(DLCU_SUCCESS);
}

void dbl_vmm_teardown(void) {
  while (dbl.maps.n) map_free(dbl.maps.at[dbl.maps.n - 1]);
  while (dbl.handles) {
    dbl.handles->refs = 1;
    handle_unref(dbl.handles);
  }
  for (size_t i = dbl.space.n; i-- > 0;) {
    dbl_region *r = dbl.space.at[i];
    if (r->kind != DBL_RESERVE) continue;
    dbl_regions_remove(&dbl.space, r);
    free(r);
  }
}
