/* Meshes: an N-d arrangement of devices with named axes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/status_impl.h"
#include "dlrun/distributed.h"
#include "shard_impl.h"

static int compare_ptr(const void *a, const void *b) {
  uintptr_t x = (uintptr_t) * (dlrun_device *const *)a, y = (uintptr_t) * (dlrun_device *const *)b;
  return x < y ? -1 : x > y;
}

static dlrun_status check_mesh_args(dlrun_device *const *devices, size_t ndevices, int naxes,
                                    const char *const *names, const int64_t *sizes) {
  if (naxes < 0 || naxes > DLRUN_MAX_MESH_AXES)
    return dlrun_fail(DLRUN_ERR_VALUE, "a mesh has 0 to %d axes, got %d", DLRUN_MAX_MESH_AXES,
                      naxes);
  if (ndevices == 0) return dlrun_fail(DLRUN_ERR_VALUE, "a mesh needs at least one device");
  int64_t product = 1;
  for (int a = 0; a < naxes; a++) {
    if (!names[a] || !*names[a])
      return dlrun_fail(DLRUN_ERR_VALUE, "mesh axis %d has an empty name", a + 1);
    if (sizes[a] < 1)
      return dlrun_fail(DLRUN_ERR_VALUE, "mesh axis '%s' has size %lld (must be at least 1)",
                        names[a], (long long)sizes[a]);
    for (int b = 0; b < a; b++)
      if (strcmp(names[a], names[b]) == 0)
        return dlrun_fail(DLRUN_ERR_VALUE, "mesh axis names must be unique, got '%s' twice",
                          names[a]);
    if (__builtin_mul_overflow(product, sizes[a], &product))
      return dlrun_fail(DLRUN_ERR_VALUE, "mesh is too large");
  }
  if ((uint64_t)product != ndevices)
    return dlrun_fail(DLRUN_ERR_VALUE, "mesh axis sizes multiply to %lld but %zu devices were given",
                      (long long)product, ndevices);
  for (size_t i = 0; i < ndevices; i++) {
    if (!devices[i]) return dlrun_fail(DLRUN_ERR_VALUE, "mesh device %zu is NULL", i + 1);
    if (dlrun_device_runtime(devices[i]) != dlrun_device_runtime(devices[0]))
      return dlrun_fail(DLRUN_ERR_VALUE, "mesh devices belong to different runtimes");
  }
  return DLRUN_OK;
}

static void mesh_free(dlrun_mesh *m) {
  for (int a = 0; a < m->naxes; a++) dlrun_free(m->names[a]);
  if (m->rt && !m->lends) dlrun_runtime_release(m->rt);
  dlrun_free(m); /* the device tables with it */
}

static void destroy_mesh(dlrun_ref *ref) { mesh_free((dlrun_mesh *)ref); }

/* Sort device pointers (with their positions) for O(log n) position lookups
 * and to find duplicates. */
static dlrun_status index_devices(dlrun_mesh *m) {
  size_t n = m->ndevices;
  memcpy(m->by_address, m->devices, n * sizeof *m->by_address);
  if (n == 1) { /* a single device's mesh: nothing to sort */
    m->position_of_sorted[0] = 0;
    return DLRUN_OK;
  }
  qsort(m->by_address, n, sizeof *m->by_address, compare_ptr);
  for (size_t i = 1; i < n; i++)
    if (m->by_address[i] == m->by_address[i - 1])
      return dlrun_fail(DLRUN_ERR_VALUE, "Mesh contains duplicate devices: %s appears twice",
                        dlrun_device_name(m->by_address[i]));
  /* Positions: binary search each device of the flat order in the sorted list. */
  for (size_t i = 0; i < n; i++) {
    dlrun_device **hit = bsearch(&m->devices[i], m->by_address, n, sizeof *m->by_address, compare_ptr);
    m->position_of_sorted[hit - m->by_address] = i;
  }
  return DLRUN_OK;
}

dlrun_status dlrun_mesh_create(dlrun_device *const *devices, size_t ndevices, int naxes,
                               const char *const *axis_names, const int64_t *axis_sizes,
                               dlrun_mesh **out) {
  DLRUN_NONNULL(out, "dlrun_mesh_create", "out");
  *out = NULL;
  DLRUN_NONNULL(devices, "dlrun_mesh_create", "devices");
  if (naxes > 0) {
    DLRUN_NONNULL(axis_names, "dlrun_mesh_create", "axis_names");
    DLRUN_NONNULL(axis_sizes, "dlrun_mesh_create", "axis_sizes");
  }
  dlrun_status st = check_mesh_args(devices, ndevices, naxes, axis_names, axis_sizes);
  if (st) return st;
  /* One allocation: the mesh, then its three device tables (a mesh per
   * single-device sharding stays cheap to make). */
  size_t tables;
  if (__builtin_mul_overflow(ndevices, 2 * sizeof(dlrun_device *) + sizeof(size_t), &tables) ||
      tables > SIZE_MAX - sizeof(dlrun_mesh))
    return dlrun_fail_oom_host(SIZE_MAX);
  dlrun_mesh *m = dlrun_calloc(1, sizeof *m + tables);
  if (!m) return dlrun_fail_oom_host(sizeof *m + tables);
  m->devices = (dlrun_device **)(m + 1);
  m->by_address = m->devices + ndevices;
  m->position_of_sorted = (size_t *)(m->by_address + ndevices);
  dlrun_ref_init(&m->ref, destroy_mesh);
  m->naxes = naxes;
  m->ndevices = ndevices;
  for (int a = 0; a < naxes; a++) {
    m->sizes[a] = axis_sizes[a];
    if (!(m->names[a] = dlrun_strdup(axis_names[a]))) {
      mesh_free(m);
      return dlrun_fail_oom_host(strlen(axis_names[a]) + 1);
    }
  }
  memcpy(m->devices, devices, ndevices * sizeof *m->devices);
  if ((st = index_devices(m))) {
    mesh_free(m);
    return st;
  }
  m->rt = dlrun_device_runtime(devices[0]);
  dlrun_runtime_retain(m->rt);
  for (size_t i = 0; i < ndevices; i++)
    m->nlocal += dlrun_device_process_index(devices[i]) == dlrun_process_index();
  *out = m;
  return DLRUN_OK;
}

void dlrun_mesh_retain(dlrun_mesh *m) {
  if (!m) return;
  dlrun_ref_retain(&m->ref);
  if (m->lends) dlrun_runtime_retain(m->rt);
}

void dlrun_mesh_release(dlrun_mesh *m) {
  if (!m) return;
  dlrun_runtime *lent = m->lends ? m->rt : NULL;
  dlrun_ref_release(&m->ref);
  dlrun_runtime_release(lent); /* after: it may be the runtime's last */
}

/* Getters given NULL or an index out of range answer NULL, 0 or -1. */
int dlrun_mesh_naxes(const dlrun_mesh *m) { return m ? m->naxes : 0; }
const char *dlrun_mesh_axis_name(const dlrun_mesh *m, int axis) {
  return m && axis >= 0 && axis < m->naxes ? m->names[axis] : NULL;
}
int64_t dlrun_mesh_axis_size(const dlrun_mesh *m, int axis) {
  return m && axis >= 0 && axis < m->naxes ? m->sizes[axis] : 0;
}
size_t dlrun_mesh_device_count(const dlrun_mesh *m) { return m ? m->ndevices : 0; }
dlrun_device *dlrun_mesh_device(const dlrun_mesh *m, size_t i) {
  return m && i < m->ndevices ? m->devices[i] : NULL;
}

void dlrun_mesh_coords(const dlrun_mesh *m, size_t i, int64_t *coords) {
  for (int a = m->naxes - 1; a >= 0; a--) {
    coords[a] = (int64_t)(i % (size_t)m->sizes[a]);
    i /= (size_t)m->sizes[a];
  }
}

ptrdiff_t dlrun_mesh_position(const dlrun_mesh *m, const dlrun_device *dev) {
  if (!m || !dev) return -1;
  dlrun_device *const key = (dlrun_device *)dev;
  dlrun_device **hit = bsearch(&key, m->by_address, m->ndevices, sizeof *m->by_address, compare_ptr);
  return hit ? (ptrdiff_t)m->position_of_sorted[hit - m->by_address] : -1;
}

const char *dlrun_mesh_describe(const dlrun_mesh *m, char *buf, size_t n) {
  if (!buf || !n) return buf;
  if (!m) {
    snprintf(buf, n, "Mesh(NULL)");
    return buf;
  }
  size_t used = (size_t)snprintf(buf, n, "Mesh(");
  for (int a = 0; a < m->naxes && used < n; a++)
    used += (size_t)snprintf(buf + used, n - used, "%s'%s': %lld", a ? ", " : "", m->names[a],
                             (long long)m->sizes[a]);
  if (used < n) snprintf(buf + used, n - used, ")");
  return buf;
}
