/* OpenCL memories under the pools.
 *
 * Device memory: reserve takes an address range the host cannot read (an
 * OpenCL buffer has no address, and the layers above must never read device
 * bytes through one), cut into segments of the device's maximum allocation;
 * each segment is one cl_mem, made on first use of an address in it. The
 * pool never lets a block straddle a segment boundary (max_allocation), so a
 * block is always (one cl_mem, an offset).
 *
 * pinned_host memory: host memory (mmap), its addresses host pointers,
 * which Read/WriteBuffer commands take as they are (a driver pins them as
 * it needs); a copy or fill between host memories is host work in the
 * queue's order (ocl_enqueue_host), never a buffer over host memory. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "ocl.h"

#define PAGE 4096u

bool ocl_is_host_memory(const dlrun_device *dev, dlrun_memory_kind kind) {
  (void)dev;
  return kind == DLRUN_MEM_PINNED_HOST;
}

void ocl_memory_info(const dlrun_device *dev, dlrun_memory_kind kind, dlrun_memory_info *out) {
  ocl_device *d = ocl_dev(dev);
  *out = (dlrun_memory_info){.max_allocation = d->max_alloc};
  if (kind == DLRUN_MEM_PINNED_HOST) {
    out->total = ocl_svc->host_ram();
    out->host_ram = true;
  } else {
    out->total = d->global_mem;
  }
}

/* Device memory: half of the device's global memory, so that other
 * programs keep room on it. Devices whose memory is host RAM
 * (CL_DEVICE_HOST_UNIFIED_MEMORY: pocl's CPU devices, integrated GPUs) all
 * report that one RAM as theirs, so the half is split among them; a device
 * with memory of its own (a discrete GPU) takes half of its own.
 * pinned_host: host RAM, as sim's memories (half, split among the devices,
 * at most 16 GiB each). Rounded down to 4 KiB. */
uint64_t ocl_default_capacity(const dlrun_device *dev, dlrun_memory_kind kind, size_t ndevices) {
  ocl_device *d = ocl_dev(dev);
  size_t n = ndevices ? ndevices : 1;
  uint64_t cap;
  if (kind == DLRUN_MEM_PINNED_HOST) {
    cap = ocl_svc->host_ram() / 2 / n;
    if (cap > (16ull << 30)) cap = 16ull << 30;
  } else {
    cap = d->global_mem / 2 / (d->unified ? n : 1);
  }
  return cap & ~(uint64_t)(PAGE - 1);
}

dlrun_status ocl_reserve(dlrun_device *dev, dlrun_memory_kind kind, uint64_t size, void **base) {
  ocl_device *d = ocl_dev(dev);
  ocl_range *r = calloc(1, sizeof *r);
  uint64_t seg = d->max_alloc && d->max_alloc < size ? d->max_alloc : size;
  size_t nsegs = seg ? (size_t)((size + seg - 1) / seg) : 0;
  if (r) r->mems = calloc(nsegs ? nsegs : 1, sizeof *r->mems);
  if (!r || !r->mems) {
    free(r);
    return ocl_svc->fail(DLRUN_ERR_RESOURCE_EXHAUSTED, "%s: out of host memory", d->name);
  }
  dlrun_status st = DLRUN_OK;
  void *p = NULL;
  if (kind == DLRUN_MEM_DEVICE) {
    st = ocl_svc->map_inaccessible(size, &p);
  } else {
    p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1,
             0);
    if (p == MAP_FAILED)
      st = ocl_svc->fail(DLRUN_ERR_RESOURCE_EXHAUSTED,
                         "%s: cannot reserve %llu bytes of pinned_host memory", d->name,
                         (unsigned long long)size);
  }
  if (st) {
    free(r->mems);
    free(r);
    return st;
  }
  *r = (ocl_range){.kind = kind, .base = p, .size = size, .seg = seg, .nsegs = nsegs,
                   .mems = r->mems};
  pthread_mutex_lock(&d->mem_lock);
  r->next = d->ranges;
  d->ranges = r;
  pthread_mutex_unlock(&d->mem_lock);
  *base = p;
  return DLRUN_OK;
}

void ocl_release(dlrun_device *dev, dlrun_memory_kind kind, void *base, uint64_t size) {
  ocl_device *d = ocl_dev(dev);
  pthread_mutex_lock(&d->mem_lock);
  ocl_range **p = &d->ranges;
  while (*p && (*p)->base != base) p = &(*p)->next;
  ocl_range *r = *p;
  if (r) *p = r->next;
  pthread_mutex_unlock(&d->mem_lock);
  if (!r) return;
  for (size_t i = 0; i < r->nsegs; i++)
    if (r->mems[i]) clReleaseMemObject(r->mems[i]);
  if (kind == DLRUN_MEM_DEVICE)
    ocl_svc->unmap(base, size);
  else
    munmap(base, size);
  free(r->mems);
  free(r);
}

/* The range of d's `kind` memory holding [p, p + n) (mem_lock held). */
static ocl_range *range_of(ocl_device *d, dlrun_memory_kind kind, const void *p, uint64_t n) {
  uintptr_t a = (uintptr_t)p;
  for (ocl_range *r = d->ranges; r; r = r->next) {
    uintptr_t b = (uintptr_t)r->base;
    if (r->kind == kind && a >= b && a - b <= r->size && n <= r->size - (a - b)) return r;
  }
  return NULL;
}

bool ocl_owns(const dlrun_device *dev, dlrun_memory_kind kind, const void *data, uint64_t n) {
  ocl_device *d = ocl_dev(dev);
  pthread_mutex_lock(&d->mem_lock);
  bool in = range_of(d, kind, data, n) != NULL;
  pthread_mutex_unlock(&d->mem_lock);
  return in;
}

/* Segment i's cl_mem, made now when it is not yet (mem_lock held). */
static cl_mem segment_mem(ocl_range *r, size_t i, cl_int *err) {
  if (r->mems[i]) return r->mems[i];
  uint64_t start = (uint64_t)i * r->seg;
  size_t len = (size_t)(r->size - start < r->seg ? r->size - start : r->seg);
  r->mems[i] = clCreateBuffer(ocl_state.context, CL_MEM_READ_WRITE, len, NULL, err);
  return r->mems[i];
}

dlrun_status ocl_place_of(ocl_device *d, dlrun_memory_kind kind, const void *addr,
                          ocl_place *out) {
  cl_int err = CL_SUCCESS;
  uint64_t seglen = 0;
  pthread_mutex_lock(&d->mem_lock);
  ocl_range *r = range_of(d, kind, addr, 1);
  if (r) {
    uint64_t off = (uint64_t)((const unsigned char *)addr - r->base);
    size_t i = (size_t)(off / r->seg);
    uint64_t start = (uint64_t)i * r->seg;
    seglen = r->size - start < r->seg ? r->size - start : r->seg;
    *out = (ocl_place){.offset = (size_t)(off - start), .room = (size_t)(seglen - (off - start))};
    if (kind == DLRUN_MEM_PINNED_HOST)
      out->host = (unsigned char *)addr;
    else
      out->mem = segment_mem(r, i, &err);
  }
  pthread_mutex_unlock(&d->mem_lock);
  if (!r)
    return ocl_svc->fail(DLRUN_ERR_VALUE, "%s: %p is not in its %s memory", d->name, addr,
                         kind == DLRUN_MEM_DEVICE ? "device" : "pinned_host");
  if (err != CL_SUCCESS)
    return ocl_svc->fail(DLRUN_ERR_RESOURCE_EXHAUSTED,
                         "%s: cannot allocate %llu bytes of OpenCL memory: %s (%d)", d->name,
                         (unsigned long long)seglen, ocl_error_name(err), err);
  return DLRUN_OK;
}

/* ---- DLPack ---- */

void ocl_dlpack_device(const dlrun_device *dev, dlrun_memory_kind kind, int32_t *type,
                       int32_t *id) {
  if (kind == DLRUN_MEM_PINNED_HOST) {
    *type = 1; /* kDLCPU */
    *id = 0;
    return;
  }
  *type = 4; /* kDLOpenCL */
  *id = (int32_t)ocl_dev(dev)->index;
}

ptrdiff_t ocl_dlpack_lookup(int32_t type, int32_t id, size_t ndevices, dlrun_memory_kind *kind) {
  if (type != 4 || id < 0 || (size_t)id >= ndevices) return -1;
  *kind = DLRUN_MEM_DEVICE;
  return id;
}

dlrun_status ocl_export_data(const dlrun_device *dev, dlrun_memory_kind kind, const void *addr,
                             void **data, uint64_t *byte_offset) {
  ocl_device *d = ocl_dev(dev);
  if (kind == DLRUN_MEM_PINNED_HOST) {
    *data = (void *)addr;
    *byte_offset = 0;
    return DLRUN_OK;
  }
  ocl_place pl;
  dlrun_status st = ocl_place_of(d, kind, addr, &pl);
  if (st) return st;
  *data = pl.mem;
  *byte_offset = pl.offset;
  return DLRUN_OK;
}

/* Which device's range has `mem` as a segment (state lock held): the
 * device, the range and the segment's index. */
static ocl_device *owner_of(cl_mem mem, ocl_range **range, size_t *seg) {
  for (ocl_device *d = ocl_state.devices; d; d = d->next) {
    pthread_mutex_lock(&d->mem_lock);
    for (ocl_range *r = d->ranges; r; r = r->next)
      for (size_t i = 0; i < r->nsegs; i++)
        if (r->mems[i] == mem && r->kind == DLRUN_MEM_DEVICE) {
          pthread_mutex_unlock(&d->mem_lock);
          *range = r;
          *seg = i;
          return d;
        }
    pthread_mutex_unlock(&d->mem_lock);
  }
  return NULL;
}

/* A producer's (cl_mem, byte_offset): only a buffer of this module's own
 * table is taken; any other pointer is refused without being handed to
 * OpenCL (the ICD loader would read it as a dispatch table). */
dlrun_status ocl_import_data(const dlrun_device *dev, dlrun_memory_kind kind, void *data,
                             uint64_t byte_offset, uint64_t nbytes, void **addr) {
  ocl_device *d = ocl_dev(dev);
  if (kind == DLRUN_MEM_PINNED_HOST) {
    if (!ocl_owns(dev, kind, (const unsigned char *)data + byte_offset, nbytes))
      return ocl_svc->fail(DLRUN_ERR_BUFFER, "%s: %p is not in its pinned_host memory", d->name,
                           data);
    *addr = (unsigned char *)data + byte_offset;
    return DLRUN_OK;
  }
  ocl_range *r = NULL;
  size_t i = 0;
  pthread_mutex_lock(&ocl_state.lock);
  ocl_device *owner = data ? owner_of((cl_mem)data, &r, &i) : NULL;
  pthread_mutex_unlock(&ocl_state.lock);
  if (!owner)
    return ocl_svc->fail(DLRUN_ERR_BUFFER,
                         "%s: data %p is not an OpenCL buffer of dlrun (only buffers that dlrun "
                         "made can be imported)",
                         d->name, data);
  if (owner != d)
    return ocl_svc->fail(DLRUN_ERR_BUFFER, "%s: the OpenCL buffer %p belongs to %s", d->name,
                         data, owner->name);
  uint64_t start = (uint64_t)i * r->seg;
  uint64_t seglen = r->size - start < r->seg ? r->size - start : r->seg;
  if (byte_offset > seglen || nbytes > seglen - byte_offset)
    return ocl_svc->fail(DLRUN_ERR_BUFFER,
                         "%s: byte_offset %llu + %llu bytes is past the end of the OpenCL buffer "
                         "%p (%llu bytes)",
                         d->name, (unsigned long long)byte_offset, (unsigned long long)nbytes,
                         data, (unsigned long long)seglen);
  *addr = r->base + start + byte_offset;
  return DLRUN_OK;
}
