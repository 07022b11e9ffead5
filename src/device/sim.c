/* The sim platform: simulated accelerators.
 *
 * A sim device's memory models a discrete accelerator's: the addresses it
 * hands out (to the layers above, and to DLPack consumers as the data of a
 * kDLExtDev export) are inaccessible (PROT_NONE), so a host dereference
 * faults at once, as on a GPU. The bytes live in a second mapping, the
 * region's view, that only this file's slots use: copies and fills
 * translate device addresses to it by offset. DLRUN_SIM_MEMORY=shared keeps
 * a single host-readable mapping instead. pinned_host memory is host memory
 * either way. */
#include <stdatomic.h>

#include "buffer.h"
#include "platform_impl.h"

/* Each memory of a sim device: at most half of host RAM shared among the sim
 * devices, and at most 16 GiB; the runtime lowers it further so that all
 * memories together fit in host RAM. */
static uint64_t sim_capacity(dlrun_memory_kind kind, size_t ndevices, uint64_t host_ram) {
  (void)kind;
  uint64_t share = host_ram / 2 / (ndevices ? ndevices : 1);
  const uint64_t hi = 16ull << 30;
  if (share > hi) share = hi;
  return share & ~(uint64_t)4095;
}

/* Whether dev's `kind` memory is the inaccessible kind. */
static bool is_private(const dlrun_device *dev, dlrun_memory_kind kind) {
  return kind == DLRUN_MEM_DEVICE && !dev->rt->sim_memory_shared;
}

/* Device memory, in either mode, is a recorded region (so that imports
 * naming a sim device are checked against it); only the private mode puts
 * the bytes behind a second, inaccessible range of addresses. */
static dlrun_status sim_reserve(dlrun_device *dev, dlrun_memory_kind kind, uint64_t size,
                                void **base) {
  if (kind != DLRUN_MEM_DEVICE) return dlrun_map_range(size, true, base);
  void *view, *addr;
  dlrun_status st = dlrun_map_range(size, true, &view);
  if (st) return st;
  addr = view;
  if (is_private(dev, kind) && (st = dlrun_map_range(size, false, &addr))) {
    dlrun_unmap_range(view, size);
    return st;
  }
  dlrun_region *r = &dev->regions[kind];
  r->view = view;
  r->size = size;
  atomic_store_explicit(&r->base, (unsigned char *)addr, memory_order_release);
  *base = addr;
  return DLRUN_OK;
}

static void sim_release(dlrun_device *dev, dlrun_memory_kind kind, void *base, uint64_t size) {
  dlrun_region *r = &dev->regions[kind];
  if (kind == DLRUN_MEM_DEVICE && r->view != base) dlrun_unmap_range(r->view, r->size);
  dlrun_unmap_range(base, size);
  if (kind != DLRUN_MEM_DEVICE) return;
  atomic_store(&r->base, NULL);
  r->view = NULL;
}

static bool sim_owns(const dlrun_device *dev, dlrun_memory_kind kind, const void *data,
                     uint64_t n) {
  if (kind != DLRUN_MEM_DEVICE || n == 0) return true; /* host memory */
  const unsigned char *base =
      atomic_load_explicit(&((dlrun_device *)dev)->regions[kind].base, memory_order_acquire);
  const unsigned char *p = data;
  uint64_t size = dev->regions[kind].size;
  return base && p >= base && (uint64_t)(p - base) <= size && n <= size - (uint64_t)(p - base);
}

static bool sim_host_readable(const dlrun_device *dev, dlrun_memory_kind kind) {
  return !is_private(dev, kind);
}

/* Where the host reaches the bytes at device address `data`: memory this
 * file reserved (whichever vtable carries its slots) has a view. */
static void *view_of(const dlrun_device *dev, dlrun_memory_kind kind, const void *data) {
  if (!dev || dev->platform->reserve != sim_reserve || !is_private(dev, kind)) return (void *)data;
  dlrun_region *r = &((dlrun_device *)dev)->regions[kind];
  const unsigned char *base = atomic_load_explicit(&r->base, memory_order_acquire);
  return r->view + ((const unsigned char *)data - base);
}

/* The view is host memory, which MPI reaches as it would a GPU's through
 * a CUDA-aware build. */
static void *sim_transport_view(const dlrun_device *dev, dlrun_memory_kind kind,
                                const void *data) {
  return view_of(dev, kind, data);
}

/* Committing writes the bytes' own mapping; giving memory back clears both
 * mappings (the inaccessible one holds no pages, but a platform reusing
 * these slots with one object mapped twice would need both). */
static dlrun_status sim_commit(dlrun_device *dev, dlrun_memory_kind kind, void *data,
                               uint64_t size) {
  return dlrun_commit_range(view_of(dev, kind, data), size);
}

static uint64_t sim_decommit(dlrun_device *dev, dlrun_memory_kind kind, void *data,
                             uint64_t size) {
  void *view = view_of(dev, kind, data);
  uint64_t held = dlrun_decommit_range(view, size);
  if (view != data) held += dlrun_decommit_range(data, size);
  return held;
}

static void sim_copy_box(size_t esize, int ndim, const int64_t *lo, const int64_t *hi,
                         const dlrun_box_end *dst, const dlrun_box_end *src) {
  dlrun_host_copy_box(esize, ndim, lo, hi, view_of(dst->dev, dst->kind, dst->data), dst->origin,
                      dst->strides, view_of(src->dev, src->kind, src->data), src->origin,
                      src->strides);
}

static void sim_fill(const dlrun_device *dev, dlrun_memory_kind kind, void *data, uint64_t nbytes,
                     const dlrun_fill *f) {
  dlrun_host_fill(view_of(dev, kind, data), nbytes, f);
}

/* Device memory exports as (kDLExtDev, id); pinned_host memory as the host's. */
static void sim_dlpack_device(const dlrun_device *dev, dlrun_memory_kind kind, int32_t *type,
                              int32_t *id) {
  bool host = kind == DLRUN_MEM_PINNED_HOST;
  *type = host ? DL_CPU : DL_EXT_DEV;
  *id = host ? 0 : (int32_t)dev->local_index; /* a process-local ordinal, as CUDA's */
}

static ptrdiff_t sim_dlpack_lookup(int32_t type, int32_t id, size_t ndevices,
                                   dlrun_memory_kind *kind) {
  *kind = DLRUN_MEM_DEVICE;
  return type == DL_EXT_DEV && id >= 0 && (size_t)id < ndevices ? id : -1;
}

const dlrun_platform dlrun_sim_platform = {
    .name = "sim",
    .class_name = "SimDevice",
    .is_accelerator = true,
    .default_capacity = sim_capacity,
    .reserve = sim_reserve,
    .release = sim_release,
    .commit = sim_commit,
    .decommit = sim_decommit,
    .owns = sim_owns,
    .host_readable = sim_host_readable,
    .copy_box = sim_copy_box,
    .fill = sim_fill,
    .submit = dlrun_host_submit, /* simulated: the host's threads do the work */
    .event_record = dlrun_host_event_record,
    .event_query = dlrun_stream_reached,
    .event_synchronize = dlrun_stream_wait,
    .transport_view = sim_transport_view,
    .dlpack_device = sim_dlpack_device,
    .dlpack_lookup = sim_dlpack_lookup,
};
