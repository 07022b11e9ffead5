/* Internal: what device_put on one process and between processes share. */
#ifndef DLRUN_TRANSFER_IMPL_H
#define DLRUN_TRANSFER_IMPL_H

#include "array_impl.h"

/* The source shard to share for destination i of dst, whose index is
 * [lo, hi), or -1: one on the same device and memory kind, with that index. */
ptrdiff_t dlrun_put_shareable(const dlrun_array *src, const dlrun_sharding *dst, size_t i,
                              const int64_t *lo, const int64_t *hi);

/* device_put when the two shardings span more than one process: collective
 * (transfer_global.c). `valid` is this process's own check of the call,
 * which every process learns of. */
dlrun_status dlrun_device_put_global(dlrun_array *src, dlrun_sharding *dst,
                                     const dlrun_put_options *o, dlrun_status valid,
                                     dlrun_array **out);

/* A new array of shape dims laid out by dst whose shards on this process
 * are copied from src, which holds the box [offset, offset + src shape) of
 * it; the other processes' shards are not this process's to fill
 * (make_array_from_process_local_data). The caller has checked that every
 * local shard lies in that box. */
dlrun_status dlrun_put_slab(dlrun_array *src, dlrun_sharding *dst, const int64_t *dims,
                            const int64_t *offset, dlrun_array **out);

#endif
