/* The `__partitioned__` description of a sharded array: its global shape, a
 * regular grid of partitions, and for each partition where it starts, its
 * shape, every place holding it, and a DLPack tensor of a local copy.
 * Offsets and grid positions are 0-based (the protocol is language-neutral). */
#ifndef DLRUN_PARTITIONED_H
#define DLRUN_PARTITIONED_H

#include <stddef.h>
#include <stdint.h>

#include "array.h"
#include "dlpack.h"
#include "shape.h"
#include "status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One place holding a partition. The device is borrowed from the runtime. */
typedef struct dlrun_partition_location {
  int process;        /* the process holding the device */
  dlrun_device *device;
  int64_t replica_id; /* 0 for the first holder in the sharding's device order */
} dlrun_partition_location;

typedef struct dlrun_partition {
  int64_t position[DLRUN_MAX_NDIM]; /* grid position, 0-based */
  int64_t start[DLRUN_MAX_NDIM];    /* offset into the global array, 0-based */
  int64_t shape[DLRUN_MAX_NDIM];
  size_t nlocations; /* every holder, by ascending replica_id */
  dlrun_partition_location *locations;
  /* A local copy's tensor, the description's until taken: a consumer that
   * takes it sets `data` to all zero, and then owns it (calls its deleter).
   * All zero when no holder is on this process. */
  dlrun_exported data;
  dlrun_device *data_device; /* the holder `data` exports (its first local one); NULL */
} dlrun_partition;

typedef struct dlrun_partitioned {
  int ndim;
  int64_t shape[DLRUN_MAX_NDIM];
  int64_t tiling[DLRUN_MAX_NDIM]; /* partitions per dimension */
  dlrun_dtype dtype;
  size_t npartitions; /* product of tiling, in row-major order of position */
  dlrun_partition *partitions;
  size_t nlocals;     /* partitions with data, ascending indices into partitions */
  size_t *locals;
} dlrun_partitioned;

/* Describe `a` (live; a job's global arrays too). Each local partition's
 * data exports the holder the "shards" strategy picks: its first replica on
 * this process. `options` as dlrun_export's, for every tensor; NULL means
 * versioned tensors (max_version 1.1), which share dlrun's memory read-only:
 * describing then copies nothing. A non-NULL options without max_version asks
 * for legacy tensors, copies unless legacy_sharing says share. options->stats,
 * when set, receives the sum of every export's copies. On success *out is the
 * caller's, to free with dlrun_partitioned_release; on failure *out is NULL
 * and nothing is left to release (tensors already made are deleted). */
DLRUN_API dlrun_status dlrun_array_partitioned(dlrun_array *a,
                                               const dlrun_export_options *options,
                                               dlrun_partitioned **out);

/* Free a description, calling the deleter of every tensor still in it.
 * NULL does nothing. */
DLRUN_API void dlrun_partitioned_release(dlrun_partitioned *p);

#ifdef __cplusplus
}
#endif
#endif
