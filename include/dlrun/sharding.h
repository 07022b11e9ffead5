/* Meshes and shardings: how an array's global shape maps onto devices.
 *
 * Semantics are JAX's: a mesh is an N-d arrangement of devices with one name
 * per axis (its flat row-major order is the device assignment); a partition
 * spec has one entry per leading array dimension, each naming no axis, one
 * axis, or several (the dimension is split over their product, first name
 * most significant); mesh axes the spec does not use replicate the data.
 *
 * Meshes and shardings are immutable and reference counted: creators give
 * the caller one reference (*out), released with the matching _release. */
#ifndef DLRUN_SHARDING_H
#define DLRUN_SHARDING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "device.h"
#include "export.h"
#include "shape.h"
#include "status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define DLRUN_MAX_MESH_AXES 16

typedef struct dlrun_mesh dlrun_mesh;
typedef struct dlrun_sharding dlrun_sharding;

/* A mesh of `naxes` axes (0 to DLRUN_MAX_MESH_AXES) over `ndevices` devices
 * given in flat row-major order. The product of axis_sizes must equal
 * ndevices; names must be distinct and non-empty; devices distinct and of one
 * runtime. Names and the device list are copied; devices are borrowed from
 * their runtime, which the mesh keeps alive. */
DLRUN_API dlrun_status dlrun_mesh_create(dlrun_device *const *devices, size_t ndevices,
                                         int naxes, const char *const *axis_names,
                                         const int64_t *axis_sizes, dlrun_mesh **out);
DLRUN_API void dlrun_mesh_retain(dlrun_mesh *m);
DLRUN_API void dlrun_mesh_release(dlrun_mesh *m);
DLRUN_API int dlrun_mesh_naxes(const dlrun_mesh *m);
DLRUN_API const char *dlrun_mesh_axis_name(const dlrun_mesh *m, int axis);
DLRUN_API int64_t dlrun_mesh_axis_size(const dlrun_mesh *m, int axis);
DLRUN_API size_t dlrun_mesh_device_count(const dlrun_mesh *m);
DLRUN_API dlrun_device *dlrun_mesh_device(const dlrun_mesh *m, size_t i);
/* "Mesh('x': 4, 'y': 2)" into buf. Returns buf. */
DLRUN_API const char *dlrun_mesh_describe(const dlrun_mesh *m, char *buf, size_t n);

/* A partition spec as the caller describes it: entry i lists the mesh axis
 * names dimension i is split over (naxes 0: not split). */
typedef struct dlrun_spec_entry {
  int naxes;
  const char *axes[DLRUN_MAX_MESH_AXES];
} dlrun_spec_entry;

typedef struct dlrun_partition_spec {
  int nentries; /* 0 to DLRUN_MAX_NDIM */
  dlrun_spec_entry entries[DLRUN_MAX_NDIM];
} dlrun_partition_spec;

/* NamedSharding(mesh, spec, memory_kind). Errors, with JAX's messages: an
 * axis not in the mesh (DLRUN_ERR_VALUE), an axis used twice
 * (DLRUN_ERR_DUPLICATE_SPEC). */
DLRUN_API dlrun_status dlrun_named_sharding_create(dlrun_mesh *mesh, const dlrun_partition_spec *spec,
                                                   dlrun_memory_kind kind, dlrun_sharding **out);
/* SingleDeviceSharding(device, memory_kind). */
DLRUN_API dlrun_status dlrun_single_device_sharding_create(dlrun_device *dev, dlrun_memory_kind kind,
                                                           dlrun_sharding **out);
DLRUN_API void dlrun_sharding_retain(dlrun_sharding *s);
DLRUN_API void dlrun_sharding_release(dlrun_sharding *s);

DLRUN_API bool dlrun_sharding_is_named(const dlrun_sharding *s);
/* The mesh (borrowed; for a SingleDeviceSharding a 1-device mesh, no axes). */
DLRUN_API dlrun_mesh *dlrun_sharding_mesh(const dlrun_sharding *s);
/* The spec as given (axis names borrowed from the sharding). */
DLRUN_API const dlrun_partition_spec *dlrun_sharding_spec(const dlrun_sharding *s);
DLRUN_API dlrun_memory_kind dlrun_sharding_memory_kind(const dlrun_sharding *s);
/* Devices in mesh (assignment) order; borrowed. */
DLRUN_API size_t dlrun_sharding_device_count(const dlrun_sharding *s);
DLRUN_API dlrun_device *dlrun_sharding_device(const dlrun_sharding *s, size_t i);
/* Position of dev in the assignment order, or -1. */
DLRUN_API ptrdiff_t dlrun_sharding_device_position(const dlrun_sharding *s, const dlrun_device *dev);
/* True when every device holds the whole array. */
DLRUN_API bool dlrun_sharding_is_fully_replicated(const dlrun_sharding *s);
/* Whether every device of s belongs to this process (always, alone); and
 * whether device i does. In a job, arrays hold only the shards on this
 * process's devices. */
DLRUN_API bool dlrun_sharding_is_fully_addressable(const dlrun_sharding *s);
DLRUN_API bool dlrun_sharding_is_addressable(const dlrun_sharding *s, size_t i);
/* How many ways dimension `dim` is split (1 when the spec does not reach it). */
DLRUN_API int64_t dlrun_sharding_partitions(const dlrun_sharding *s, int dim);

/* Check that a shape can take this sharding: the spec is no longer than the
 * rank, and each split dimension divides evenly (DLRUN_ERR_INDIVISIBLE). */
DLRUN_API dlrun_status dlrun_sharding_check_shape(const dlrun_sharding *s, int ndim,
                                                  const int64_t *dims);
/* Shard shape of a checked shape. */
DLRUN_API void dlrun_sharding_shard_shape(const dlrun_sharding *s, int ndim, const int64_t *dims,
                                          int64_t *out);
/* Index of the i-th device's shard: [lo[d], hi[d]) per dimension (0-based,
 * half-open) for a checked shape. */
DLRUN_API void dlrun_sharding_shard_index(const dlrun_sharding *s, size_t i, int ndim,
                                          const int64_t *dims, int64_t *lo, int64_t *hi);
/* Replica id of the i-th device for a checked shape: how many devices
 * earlier in assignment order hold the same index. */
DLRUN_API int64_t dlrun_sharding_replica_id(const dlrun_sharding *s, size_t i, int ndim,
                                            const int64_t *dims);
/* Same devices holding the same indices for any shape of rank ndim, and the
 * same memory kind. */
DLRUN_API bool dlrun_sharding_is_equivalent(const dlrun_sharding *a, const dlrun_sharding *b,
                                            int ndim);
/* Equal as JAX's == : the same kind, memory kind, device assignment (mesh
 * devices, axis names and sizes) and spec. Equal implies equivalent. */
DLRUN_API bool dlrun_sharding_equal(const dlrun_sharding *a, const dlrun_sharding *b);
/* Equal meshes: the same devices in the same order, axis names and sizes. */
DLRUN_API bool dlrun_mesh_equal(const dlrun_mesh *a, const dlrun_mesh *b);
/* Hashes consistent with the equalities: equal objects hash alike. */
DLRUN_API uint64_t dlrun_mesh_hash(const dlrun_mesh *m);
DLRUN_API uint64_t dlrun_sharding_hash(const dlrun_sharding *s);
/* JAX-style text: "NamedSharding(mesh=Mesh('x': 8), spec=PartitionSpec('x',),
 * memory_kind=device)" or "SingleDeviceSharding(device=SimDevice(id=0),
 * memory_kind=device)". Returns buf. */
DLRUN_API const char *dlrun_sharding_describe(const dlrun_sharding *s, char *buf, size_t n);
/* "PartitionSpec('x', None, ('x', 'y'))". Returns buf. */
DLRUN_API const char *dlrun_partition_spec_describe(const dlrun_partition_spec *spec, char *buf,
                                                    size_t n);


#ifdef __cplusplus
}
#endif
#endif
