/* The SingleDeviceSharding each import, export copy and shard view needs,
 * made once per device and memory kind and kept by the device: making a
 * mesh and a sharding per import was a fifth of an import's instructions. The kept
 * sharding lends the runtime with every reference it hands out
 * (dlrun_sharding_lend_runtime), so the device holding it makes no cycle. */
#include "array_impl.h"

dlrun_status dlrun_device_sharding(dlrun_device *dev, dlrun_memory_kind kind,
                                   dlrun_sharding **out) {
  if (!dev || (int)kind < 0 || kind >= DLRUN_MEM_KIND_COUNT) /* its message */
    return dlrun_single_device_sharding_create(dev, kind, out);
  _Atomic(dlrun_ref *) *slot = &dev->kept_sharding[kind];
  dlrun_ref *kept = atomic_load_explicit(slot, memory_order_acquire);
  if (!kept) {
    dlrun_sharding *made;
    dlrun_status st = dlrun_single_device_sharding_create(dev, kind, &made);
    if (st) return st;
    dlrun_sharding_lend_runtime(made);
    if (atomic_compare_exchange_strong_explicit(slot, &kept, &made->ref, memory_order_acq_rel,
                                                memory_order_acquire))
      kept = &made->ref;
    else
      dlrun_ref_release(&made->ref); /* another thread's came first (now in kept) */
  }
  dlrun_sharding *s = (dlrun_sharding *)(void *)kept;
  dlrun_sharding_retain(s);
  *out = s;
  return DLRUN_OK;
}
