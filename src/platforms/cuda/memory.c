/* CUDA memories under the pools.
 *
 * Device memory, where the device supports virtual memory management: the
 * pool's range (in whole granules) is cuMemAddressReserve-d, and backed in
 * chunks of CHUNK bytes rounded up to the granularity, when first used or
 * preallocated (commit: cuMemCreate + cuMemMap + cuMemSetAccess, a chunk at
 * a time; the last chunk, or a pool's only one, stops at the range's end)
 * and given back by decommit (cuMemUnmap + cuMemRelease) when wholly
 * unused; release frees the range (cuMemAddressFree). Chunks, not granules:
 * on an H200, memory mapped as a 2 MiB handle per granule copies at 0.80 and
 * memsets at 0.87 of cuMemAlloc memory's speed at 1 GiB and more; handles
 * of 32 MiB or more reach 0.98. The addresses are the driver's own device
 * pointers. Fresh memory is zeroed on the device's stream (freed pages read
 * as zero when next used).
 *
 * Otherwise: host address space the host cannot read, cut into segments
 * (at most 1 GiB; a pool block never straddles one), each a cuMemAlloc made
 * on first use, as the OpenCL module's buffers, freed by decommit when a
 * whole segment is unused; an address is translated to (segment pointer +
 * offset) for the driver and for DLPack.
 *
 * pinned_host memory: one cuMemHostAlloc (portable, mapped) per pool, its
 * addresses host pointers (host-readable, exported as kDLCUDAHost). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cu.h"

#define PAGE 4096u
#define SEGMENT (1ull << 30)
#define CHUNK (32ull << 20) /* VMM backing unit, before rounding to the granularity */
#define PINNED_DEFAULT_MAX (1ull << 30)

bool cu_is_host_memory(const dlrun_device *dev, dlrun_memory_kind kind) {
  (void)dev;
  return kind == DLRUN_MEM_PINNED_HOST;
}

void cu_memory_info(const dlrun_device *dev, dlrun_memory_kind kind, dlrun_memory_info *out) {
  cu_device *d = cu_dev(dev);
  *out = (dlrun_memory_info){0};
  if (kind == DLRUN_MEM_PINNED_HOST) {
    out->total = cu_svc->host_ram();
    out->host_ram = true;
    return;
  }
  size_t free_b = 0, total = 0;
  if (!cu_make_current(d->ctx) && !cu_api.MemGetInfo(&free_b, &total)) out->free = free_b;
  out->total = total ? total : d->total_mem;
  out->max_allocation = d->vmm ? 0 : SEGMENT;
}

/* Device memory: three quarters of what cuMemGetInfo reports free when the
 * runtime starts (JAX's default fraction), in whole granules. pinned_host:
 * one cuMemHostAlloc per pool, made when the pool is first used: an
 * eighth of host RAM split among the devices, at most 1 GiB each. */
uint64_t cu_default_capacity(const dlrun_device *dev, dlrun_memory_kind kind, size_t ndevices) {
  cu_device *d = cu_dev(dev);
  size_t n = ndevices ? ndevices : 1;
  uint64_t cap;
  if (kind == DLRUN_MEM_PINNED_HOST) {
    cap = cu_svc->host_ram() / 8 / n;
    if (cap > PINNED_DEFAULT_MAX) cap = PINNED_DEFAULT_MAX;
    return cap & ~(uint64_t)(PAGE - 1);
  }
  dlrun_memory_info info;
  cu_memory_info(dev, kind, &info);
  cap = (info.free ? info.free : info.total) / 4 * 3;
  uint64_t unit = d->vmm && d->granularity > PAGE ? d->granularity : PAGE;
  return cap / unit * unit;
}

static uint64_t round_up(uint64_t v, uint64_t unit) { return (v + unit - 1) / unit * unit; }

static dlrun_status driver_failure(const char *call, uint64_t size, dlcu_result r) {
  return cu_svc->fail(r == DLCU_ERROR_OUT_OF_MEMORY ? DLRUN_ERR_RESOURCE_EXHAUSTED
                                                    : DLRUN_ERR_RUNTIME,
                      "%s of %llu bytes failed: %s (%d)", call, (unsigned long long)size,
                      cu_error_name(r), r);
}

/* Which driver call failed while backing memory, and for what. */
typedef struct backing {
  const char *call, *purpose;
  uint64_t bytes;
} backing;

/* Its failures do not name the device: the pool prefixes its label. */
dlrun_status cu_reserve(dlrun_device *dev, dlrun_memory_kind kind, uint64_t size, void **base) {
  cu_device *d = cu_dev(dev);
  cu_range *r = calloc(1, sizeof *r);
  if (!r) return cu_svc->fail(DLRUN_ERR_RESOURCE_EXHAUSTED, "out of host memory");
  *r = (cu_range){.kind = kind, .size = size, .vmm = kind == DLRUN_MEM_DEVICE && d->vmm};
  dlcu_result res = cu_make_current(d->ctx);
  dlrun_status st = DLRUN_OK;
  if (kind == DLRUN_MEM_PINNED_HOST) {
    void *p = NULL;
    if (!res) res = cu_api.MemHostAlloc(&p, size, DLCU_MEMHOSTALLOC_PORTABLE |
                                                       DLCU_MEMHOSTALLOC_DEVICEMAP);
    if (res) st = driver_failure("cuMemHostAlloc", size, res);
    r->base = p;
  } else {
    r->span = r->vmm ? round_up(size, d->granularity) : size;
    r->seg = r->vmm ? round_up(CHUNK, d->granularity) : (size < SEGMENT ? size : SEGMENT);
    r->nsegs = (size_t)((r->span + r->seg - 1) / r->seg);
    if (r->vmm) r->handles = calloc(r->nsegs, sizeof *r->handles);
    else r->segs = calloc(r->nsegs, sizeof *r->segs);
    r->touched = calloc(r->nsegs, sizeof *r->touched);
    if ((!r->handles && !r->segs) || !r->touched) {
      st = cu_svc->fail(DLRUN_ERR_RESOURCE_EXHAUSTED, "out of host memory");
    } else if (r->vmm) {
      dlcu_ptr p = 0;
      if (!res) res = cu_api.MemAddressReserve(&p, r->span, d->granularity, 0, 0);
      if (res) st = driver_failure("cuMemAddressReserve", r->span, res);
      r->base = (unsigned char *)(uintptr_t)p;
    } else {
      void *p = NULL;
      st = cu_svc->map_inaccessible(size, &p);
      r->base = p;
    }
  }
  if (st) {
    free(r->handles);
    free(r->segs);
    free(r->touched);
    free(r);
    return st;
  }
  pthread_mutex_lock(&d->mem_lock);
  r->next = d->ranges;
  d->ranges = r;
  pthread_mutex_unlock(&d->mem_lock);
  *base = r->base;
  return DLRUN_OK;
}

/* The bytes of unit i of r: a chunk or segment, shorter at the span's end. */
static uint64_t unit_bytes(const cu_range *r, size_t i) {
  uint64_t start = (uint64_t)i * r->seg;
  return r->span - start < r->seg ? r->span - start : r->seg;
}

/* Unmap chunk i of a VMM range; the bytes it held. */
static uint64_t unmap_chunk(cu_range *r, size_t i) {
  if (!r->handles[i]) return 0;
  dlcu_ptr at = (dlcu_ptr)(uintptr_t)r->base + (dlcu_ptr)i * r->seg;
  cu_api.MemUnmap(at, unit_bytes(r, i));
  cu_api.MemRelease(r->handles[i]);
  r->handles[i] = 0;
  r->touched[i] = 0;
  return unit_bytes(r, i);
}

void cu_release(dlrun_device *dev, dlrun_memory_kind kind, void *base, uint64_t size) {
  cu_device *d = cu_dev(dev);
  pthread_mutex_lock(&d->mem_lock);
  cu_range **p = &d->ranges;
  while (*p && (*p)->base != base) p = &(*p)->next;
  cu_range *r = *p;
  if (r) *p = r->next;
  pthread_mutex_unlock(&d->mem_lock);
  if (!r) return;
  cu_make_current(d->ctx);
  if (kind == DLRUN_MEM_PINNED_HOST) {
    cu_api.MemFreeHost(base);
  } else if (r->vmm) {
    for (size_t i = 0; i < r->nsegs; i++) unmap_chunk(r, i);
    cu_api.MemAddressFree((dlcu_ptr)(uintptr_t)base, r->span);
  } else {
    for (size_t i = 0; i < r->nsegs; i++)
      if (r->segs[i]) cu_api.MemFree(r->segs[i]);
    cu_svc->unmap(base, size);
  }
  free(r->handles);
  free(r->segs);
  free(r->touched);
  free(r);
}

/* The range of d's `kind` memory holding [p, p + n) (mem_lock held). */
static cu_range *range_of(cu_device *d, dlrun_memory_kind kind, const void *p, uint64_t n) {
  uintptr_t a = (uintptr_t)p;
  for (cu_range *r = d->ranges; r; r = r->next) {
    uintptr_t b = (uintptr_t)r->base;
    if (r->kind == kind && a >= b && a - b <= r->size && n <= r->size - (a - b)) return r;
  }
  return NULL;
}

/* Whether [p, p + n) is CUDA device memory of d's ordinal the driver
 * knows (a producer's own allocation, as PyTorch's): cuPointerGetAttribute.
 * 0 when it is, else the driver's error (DLCU_ERROR_INVALID_VALUE: another
 * kind of memory), with what it found. */
static dlcu_result foreign(cu_device *d, dlcu_ptr p, uint64_t n, unsigned *type, int *ordinal,
                           dlcu_ptr *start, size_t *size) {
  dlcu_result r = cu_make_current(d->ctx);
  if (!r) r = cu_api.PointerGetAttribute(type, DLCU_POINTER_ATTRIBUTE_MEMORY_TYPE, p);
  if (!r) r = cu_api.PointerGetAttribute(ordinal, DLCU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, p);
  if (!r) r = cu_api.PointerGetAttribute(start, DLCU_POINTER_ATTRIBUTE_RANGE_START_ADDR, p);
  if (!r) r = cu_api.PointerGetAttribute(size, DLCU_POINTER_ATTRIBUTE_RANGE_SIZE, p);
  if (!r && (*type != DLCU_MEMORYTYPE_DEVICE || *ordinal != d->cu || p < *start ||
             p - *start > *size || n > *size - (p - *start)))
    r = DLCU_ERROR_INVALID_VALUE;
  return r;
}

/* dlrun's own ranges; for device memory also a producer's allocation on
 * this device that an import wraps. */
bool cu_owns(const dlrun_device *dev, dlrun_memory_kind kind, const void *data, uint64_t n) {
  cu_device *d = cu_dev(dev);
  pthread_mutex_lock(&d->mem_lock);
  bool in = range_of(d, kind, data, n) != NULL;
  pthread_mutex_unlock(&d->mem_lock);
  unsigned type;
  int ordinal;
  dlcu_ptr start;
  size_t size;
  return in || (kind == DLRUN_MEM_DEVICE &&
                !foreign(d, (dlcu_ptr)(uintptr_t)data, n, &type, &ordinal, &start, &size));
}

/* Back chunk i of a VMM range (mem_lock held): readable and writable by
 * the device and by every device that can reach it as a peer. */
static dlcu_result map_chunk(cu_device *d, cu_range *r, size_t i, backing *b) {
  if (r->handles[i]) return DLCU_SUCCESS;
  uint64_t len = unit_bytes(r, i);
  dlcu_mem_allocation_prop prop = {.type = DLCU_MEM_ALLOCATION_TYPE_PINNED,
                                   .location = {DLCU_MEM_LOCATION_TYPE_DEVICE, d->cu}};
  dlcu_ptr at = (dlcu_ptr)(uintptr_t)r->base + (dlcu_ptr)i * r->seg;
  dlcu_mem_handle h = 0;
  b->call = "cuMemCreate";
  dlcu_result res = cu_api.MemCreate(&h, len, &prop, 0);
  if (res) return res;
  b->call = "cuMemMap";
  if ((res = cu_api.MemMap(at, len, 0, h, 0))) {
    cu_api.MemRelease(h);
    return res;
  }
  dlcu_mem_access_desc desc[64];
  size_t nd = 0;
  int count = 0;
  cu_api.DeviceGetCount(&count);
  for (int o = 0; o < count && nd < 64; o++) {
    int can = o == d->cu;
    if (!can) cu_api.DeviceCanAccessPeer(&can, o, d->cu);
    if (can)
      desc[nd++] = (dlcu_mem_access_desc){{DLCU_MEM_LOCATION_TYPE_DEVICE, o},
                                          DLCU_MEM_ACCESS_FLAGS_PROT_READWRITE};
  }
  b->call = "cuMemSetAccess";
  if ((res = cu_api.MemSetAccess(at, len, desc, nd))) {
    cu_api.MemUnmap(at, len);
    cu_api.MemRelease(h);
    return res;
  }
  r->handles[i] = h;
  return DLCU_SUCCESS;
}

/* Fresh memory reads as zero, as freed and given-back pages do on every
 * platform (the driver does not promise it): a memset on the device's
 * stream, ahead of any work that uses the memory. */
static dlcu_result zero(cu_device *d, dlcu_ptr p, uint64_t n) {
  return cu_api.MemsetD8Async(p, 0, (size_t)n, d->stream);
}

/* Back [off, off + n) of r (mem_lock held, context current), noting how
 * far into each chunk or segment memory was used (decommit's test of a
 * wholly unused one); *b: what failed. */
static dlcu_result back(cu_device *d, cu_range *r, uint64_t off, uint64_t n, backing *b) {
  size_t first = (size_t)(off / r->seg), last = (size_t)((off + (n ? n : 1) - 1) / r->seg);
  for (size_t i = first; i <= last && i < r->nsegs; i++) {
    dlcu_result res = DLCU_SUCCESS;
    uint64_t start = (uint64_t)i * r->seg, len = unit_bytes(r, i);
    uint64_t end = off + n - start < len ? off + n - start : len;
    b->bytes = len;
    if (r->vmm && !r->handles[i]) {
      b->purpose = "a chunk of the pool";
      if (!(res = map_chunk(d, r, i, b))) {
        b->call = "cuMemsetD8Async";
        b->purpose = "zeroing a fresh chunk";
        res = zero(d, (dlcu_ptr)(uintptr_t)r->base + start, len);
      }
    } else if (!r->vmm && !r->segs[i]) {
      b->call = "cuMemAlloc";
      b->purpose = "a segment of the pool";
      if (!(res = cu_api.MemAlloc(&r->segs[i], (size_t)len))) {
        b->call = "cuMemsetD8Async";
        b->purpose = "zeroing a fresh segment";
        res = zero(d, r->segs[i], len);
      }
    }
    if (res) return res;
    if (end > r->touched[i]) r->touched[i] = end;
  }
  return DLCU_SUCCESS;
}

uint64_t cu_bytes_held(const dlrun_device *dev, dlrun_memory_kind kind) {
  cu_device *d = cu_dev(dev);
  uint64_t held = 0;
  pthread_mutex_lock(&d->mem_lock);
  for (const cu_range *r = d->ranges; r; r = r->next) {
    if (r->kind != kind) continue;
    if (kind == DLRUN_MEM_PINNED_HOST) held += r->base ? r->size : 0; /* one cuMemHostAlloc */
    for (size_t i = 0; kind == DLRUN_MEM_DEVICE && i < r->nsegs; i++)
      if (r->vmm ? r->handles[i] != 0 : r->segs[i] != 0) held += unit_bytes(r, i);
  }
  pthread_mutex_unlock(&d->mem_lock);
  return held;
}

dlrun_status cu_place_of(cu_device *d, dlrun_memory_kind kind, const void *addr, uint64_t n,
                         dlcu_ptr *out, uint64_t *room) {
  backing b = {"cuCtxSetCurrent", "", 0};
  dlcu_result res = cu_make_current(d->ctx);
  pthread_mutex_lock(&d->mem_lock);
  cu_range *r = range_of(d, kind, addr, 1);
  uint64_t off = r ? (uint64_t)((const unsigned char *)addr - r->base) : 0;
  if (!r) { /* foreign memory an import wrapped: the driver's address */
    *out = (dlcu_ptr)(uintptr_t)addr;
    *room = UINT64_MAX;
  } else if (kind == DLRUN_MEM_PINNED_HOST || r->vmm) {
    *out = (dlcu_ptr)(uintptr_t)addr;
    *room = r->size - off;
    if (!res && r->vmm) res = back(d, r, off, n < *room ? n : *room, &b);
  } else {
    size_t i = (size_t)(off / r->seg);
    uint64_t start = (uint64_t)i * r->seg;
    *room = unit_bytes(r, i) - (off - start);
    if (!res) res = back(d, r, off, n < *room ? n : *room, &b);
    *out = res ? 0 : r->segs[i] + (off - start);
  }
  pthread_mutex_unlock(&d->mem_lock);
  if (res && !b.bytes)
    return cu_svc->fail(DLRUN_ERR_RUNTIME, "%s: %s failed: %s (%d)", d->name, b.call,
                        cu_error_name(res), res);
  if (res)
    return cu_svc->fail(res == DLCU_ERROR_OUT_OF_MEMORY ? DLRUN_ERR_RESOURCE_EXHAUSTED
                                                        : DLRUN_ERR_RUNTIME,
                        "%s: %s of %llu bytes (%s, for a request of %llu bytes) failed: %s (%d)",
                        d->name, b.call, (unsigned long long)b.bytes, b.purpose,
                        (unsigned long long)n, cu_error_name(res), res);
  return DLRUN_OK;
}

dlrun_status cu_commit(dlrun_device *dev, dlrun_memory_kind kind, void *data, uint64_t size) {
  dlcu_ptr p;
  uint64_t room;
  if (kind == DLRUN_MEM_PINNED_HOST) return DLRUN_OK; /* allocated whole */
  cu_device *d = cu_dev(dev);
  /* a segment at a time (VMM: the whole range, chunk by chunk) */
  for (uint64_t done = 0; done < size; done += room) {
    dlrun_status st = cu_place_of(d, kind, (unsigned char *)data + done, size - done, &p, &room);
    if (st) return st;
  }
  return DLRUN_OK;
}

uint64_t cu_decommit(dlrun_device *dev, dlrun_memory_kind kind, void *data, uint64_t size) {
  cu_device *d = cu_dev(dev);
  if (kind == DLRUN_MEM_PINNED_HOST) return 0;
  uint64_t freed = 0;
  cu_make_current(d->ctx);
  pthread_mutex_lock(&d->mem_lock);
  cu_range *r = range_of(d, kind, data, size);
  /* Whole chunks or segments only: one shared with a live block stays.
   * The pool's range stops where its blocks ever reached, short of a
   * segment's end: a unit is unused when the range covers what was used. */
  uint64_t off = r ? (uint64_t)((unsigned char *)data - r->base) : 0;
  for (uint64_t g = r ? round_up(off, r->seg) : 0; r && g < off + size; g += r->seg) {
    size_t i = (size_t)(g / r->seg);
    if (g + r->touched[i] > off + size) break;
    if (r->vmm) {
      freed += unmap_chunk(r, i);
    } else if (r->segs[i]) {
      cu_api.MemFree(r->segs[i]);
      r->segs[i] = 0;
      r->touched[i] = 0;
      freed += unit_bytes(r, i);
    }
  }
  pthread_mutex_unlock(&d->mem_lock);
  return freed;
}

/* ---- DLPack ---- */

void cu_dlpack_device(const dlrun_device *dev, dlrun_memory_kind kind, int32_t *type,
                      int32_t *id) {
  if (kind == DLRUN_MEM_PINNED_HOST) {
    *type = 3; /* kDLCUDAHost */
    *id = 0;
    return;
  }
  *type = 2; /* kDLCUDA */
  *id = (int32_t)cu_dev(dev)->cu;
}

ptrdiff_t cu_dlpack_lookup(int32_t type, int32_t id, size_t ndevices, dlrun_memory_kind *kind) {
  if (type == 3 && id == 0 && ndevices > 0) {
    *kind = DLRUN_MEM_PINNED_HOST;
    return 0;
  }
  if (type != 2 || id < 0 || (size_t)id >= ndevices) return -1;
  *kind = DLRUN_MEM_DEVICE;
  return id;
}

dlrun_status cu_export_data(const dlrun_device *dev, dlrun_memory_kind kind, const void *addr,
                            void **data, uint64_t *byte_offset) {
  dlcu_ptr p;
  uint64_t room;
  *byte_offset = 0;
  if (kind == DLRUN_MEM_PINNED_HOST) {
    *data = (void *)addr;
    return DLRUN_OK;
  }
  dlrun_status st = cu_place_of(cu_dev(dev), kind, addr, 1, &p, &room);
  *data = (void *)(uintptr_t)p;
  return st;
}

/* The dlrun address of the driver's pointer p when it is in a segment of
 * d's (mem_lock held), or NULL. */
static void *segment_address(cu_device *d, dlcu_ptr p, uint64_t n) {
  for (cu_range *r = d->ranges; r; r = r->next) {
    if (r->vmm || r->kind != DLRUN_MEM_DEVICE) continue;
    for (size_t i = 0; i < r->nsegs; i++) {
      uint64_t start = (uint64_t)i * r->seg, len = unit_bytes(r, i);
      if (r->segs[i] && p >= r->segs[i] && p - r->segs[i] <= len && n <= len - (p - r->segs[i]))
        return r->base + start + (p - r->segs[i]);
    }
  }
  return NULL;
}

/* A producer's pointer: dlrun's own memory of d (translated back from a
 * segment), or foreign CUDA device memory of d's ordinal that the driver
 * knows (cuPointerGetAttribute), whose allocation holds the nbytes. */
dlrun_status cu_import_data(const dlrun_device *dev, dlrun_memory_kind kind, void *data,
                            uint64_t byte_offset, uint64_t nbytes, void **addr) {
  cu_device *d = cu_dev(dev);
  dlcu_ptr p = (dlcu_ptr)(uintptr_t)data + byte_offset;
  if (kind == DLRUN_MEM_PINNED_HOST || d->vmm) {
    if (cu_owns(dev, kind, (void *)(uintptr_t)p, nbytes)) {
      *addr = (void *)(uintptr_t)p;
      return DLRUN_OK;
    }
  } else {
    pthread_mutex_lock(&d->mem_lock);
    void *own = segment_address(d, p, nbytes);
    pthread_mutex_unlock(&d->mem_lock);
    if (own) {
      *addr = own;
      return DLRUN_OK;
    }
  }
  unsigned type = 0;
  int ordinal = -1;
  dlcu_ptr start = 0;
  size_t size = 0;
  dlcu_result r = foreign(d, p, nbytes, &type, &ordinal, &start, &size);
  if (r && r != DLCU_ERROR_INVALID_VALUE)
    return cu_svc->fail(DLRUN_ERR_BUFFER,
                        "%s: data %p is not CUDA memory (cuPointerGetAttribute: %s (%d))", d->name,
                        data, cu_error_name(r), r);
  if (type != DLCU_MEMORYTYPE_DEVICE)
    return cu_svc->fail(DLRUN_ERR_BUFFER, "%s: data %p is not CUDA device memory (memory type %u)",
                        d->name, data, type);
  if (ordinal != d->cu)
    return cu_svc->fail(DLRUN_ERR_BUFFER, "%s: data %p is memory of CUDA device %d, not %d",
                        d->name, data, ordinal, d->cu);
  if (r)
    return cu_svc->fail(DLRUN_ERR_BUFFER,
                        "%s: byte_offset %llu + %llu bytes is past the end of the CUDA allocation "
                        "at %p (%zu bytes)",
                        d->name, (unsigned long long)byte_offset, (unsigned long long)nbytes,
                        (void *)(uintptr_t)start, size);
  *addr = (void *)(uintptr_t)p;
  return DLRUN_OK;
}
