/* Internal: meshes and shardings. */
#ifndef DLRUN_SHARD_IMPL_H
#define DLRUN_SHARD_IMPL_H

#include "core/ref.h"
#include "dlrun/sharding.h"

struct dlrun_mesh {
  dlrun_ref ref; /* first: the object base */
  dlrun_runtime *rt; /* retained: devices live as long as the mesh */
  /* A kept SingleDeviceSharding's mesh (dlrun_sharding_lend_runtime): it
   * holds no reference to rt itself; each one handed out carries one. */
  bool lends;
  int naxes;
  char *names[DLRUN_MAX_MESH_AXES];
  int64_t sizes[DLRUN_MAX_MESH_AXES];
  size_t ndevices;
  dlrun_device **devices;     /* flat row-major */
  dlrun_device **by_address;  /* sorted by pointer, for position lookups */
  size_t *position_of_sorted; /* by_address[i] is devices[position_of_sorted[i]] */
  size_t nlocal;              /* devices of this process */
};

/* A NamedSharding's spec, resolved against its mesh (several KiB). */
typedef struct dlrun_sharding_tables {
  dlrun_partition_spec spec; /* axis names point into mesh->names */
  int axes[DLRUN_MAX_NDIM][DLRUN_MAX_MESH_AXES]; /* mesh axis indices per entry */
} dlrun_sharding_tables;

struct dlrun_sharding {
  dlrun_ref ref; /* first: the object base */
  bool named;
  bool lends; /* kept by its device: see dlrun_sharding_lend_runtime */
  dlrun_mesh *mesh;
  dlrun_memory_kind kind;
  int nentries; /* 0 for a SingleDeviceSharding */
  int64_t partitions[DLRUN_MAX_NDIM];
  /* Named shardings only, allocated with it: a SingleDeviceSharding (one
   * per device and memory kind, and one per user call) is small and quick
   * to make. Read below nentries alone. */
  dlrun_sharding_tables t[];
};

/* Makes a fresh SingleDeviceSharding (and its mesh, both held only by the
 * caller) one that its device may keep for as long as the runtime lives
 * (array/device_sharding.c): the creator's reference stops holding the
 * runtime, so that keeping it makes no cycle, and every later reference,
 * of the sharding or of its mesh, holds the runtime for as long as it
 * lives. The creator's reference is dropped with dlrun_ref_release. */
void dlrun_sharding_lend_runtime(dlrun_sharding *s);

/* Mesh coordinates of the i-th device. */
void dlrun_mesh_coords(const dlrun_mesh *m, size_t i, int64_t *coords);
/* Position of dev in the mesh's flat order, or -1; O(log n). */
ptrdiff_t dlrun_mesh_position(const dlrun_mesh *m, const dlrun_device *dev);


#endif
