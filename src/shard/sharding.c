/* Shardings: which block of the global shape each device holds (JAX's rules;
 * see include/dlrun/sharding.h). Everything per device is O(mesh axes), so
 * index maps stay fast for thousands of devices. */
#include <stdio.h>
#include <string.h>

#include "core/alloc.h"
#include "core/status_impl.h"
#include "core/text.h"
#include "dlrun/distributed.h"
#include "shard_impl.h"


const char *dlrun_partition_spec_describe(const dlrun_partition_spec *spec, char *buf, size_t n) {
  if (!buf || !n) return buf;
  if (!spec || spec->nentries < 0 || spec->nentries > DLRUN_MAX_NDIM) {
    snprintf(buf, n, "PartitionSpec(<invalid>)");
    return buf;
  }
  dlrun_text t = dlrun_text_start(buf, n);
  dlrun_text_append(&t, "PartitionSpec(");
  for (int i = 0; i < spec->nentries; i++) {
    const dlrun_spec_entry *e = &spec->entries[i];
    int naxes = e->naxes < 0 ? 0 : e->naxes > DLRUN_MAX_MESH_AXES ? DLRUN_MAX_MESH_AXES : e->naxes;
    dlrun_text_append(&t, "%s", i ? ", " : "");
    if (naxes == 0) dlrun_text_append(&t, "None");
    for (int a = 0; a < naxes; a++)
      dlrun_text_append(&t, "%s'%s'", a ? ", " : naxes > 1 ? "(" : "",
                        e->axes[a] ? e->axes[a] : "<NULL>");
    if (naxes > 1) dlrun_text_append(&t, ")");
  }
  dlrun_text_append(&t, spec->nentries == 1 ? ",)" : ")");
  return buf;
}

static const char *names_tuple(const dlrun_mesh *m, char *buf, size_t n) {
  size_t used = (size_t)snprintf(buf, n, "(");
  for (int a = 0; a < m->naxes && used < n; a++)
    used += (size_t)snprintf(buf + used, n - used, "%s'%s'", a ? ", " : "", m->names[a]);
  if (used < n) snprintf(buf + used, n - used, m->naxes == 1 ? ",)" : ")");
  return buf;
}

static int find_axis(const dlrun_mesh *m, const char *name) {
  for (int a = 0; a < m->naxes; a++)
    if (strcmp(m->names[a], name) == 0) return a;
  return -1;
}

/* Resolve axis names to mesh axes; names in the stored spec point into the
 * mesh so the sharding owns no strings. */
static dlrun_status resolve_spec(dlrun_sharding *s, const dlrun_partition_spec *spec) {
  const dlrun_mesh *m = s->mesh;
  dlrun_sharding_tables *t = s->t;
  bool axis_used[DLRUN_MAX_MESH_AXES] = {false};
  char text[512], names[512];
  if (spec->nentries < 0 || spec->nentries > DLRUN_MAX_NDIM)
    return dlrun_fail(DLRUN_ERR_VALUE, "a PartitionSpec has 0 to %d entries, got %d",
                      DLRUN_MAX_NDIM, spec->nentries);
  /* The whole spec is checked first, so that messages may describe it. */
  for (int i = 0; i < spec->nentries; i++) {
    const dlrun_spec_entry *e = &spec->entries[i];
    if (e->naxes < 0 || e->naxes > DLRUN_MAX_MESH_AXES)
      return dlrun_fail(DLRUN_ERR_VALUE, "PartitionSpec entry %d names %d axes (at most %d)",
                        i + 1, e->naxes, DLRUN_MAX_MESH_AXES);
    for (int k = 0; k < e->naxes; k++)
      if (!e->axes[k])
        return dlrun_fail(DLRUN_ERR_VALUE, "PartitionSpec entry %d: axis name %d is NULL", i + 1,
                          k + 1);
  }
  s->nentries = spec->nentries;
  t->spec.nentries = spec->nentries;
  for (int i = 0; i < spec->nentries; i++) {
    const dlrun_spec_entry *e = &spec->entries[i];
    t->spec.entries[i].naxes = e->naxes;
    s->partitions[i] = 1;
    for (int k = 0; k < e->naxes; k++) {
      int a = find_axis(m, e->axes[k]);
      if (a < 0)
        return dlrun_fail(DLRUN_ERR_VALUE, "Resource axis: %s of %s is not found in mesh: %s.",
                          e->axes[k] ? e->axes[k] : "(null)",
                          dlrun_partition_spec_describe(spec, text, sizeof text),
                          names_tuple(m, names, sizeof names));
      if (axis_used[a])
        return dlrun_fail(DLRUN_ERR_DUPLICATE_SPEC,
                          "A single NamedSharding spec specification can map every mesh axis to "
                          "at most one positional dimension, but %s has duplicate entries for `%s`",
                          dlrun_partition_spec_describe(spec, text, sizeof text), m->names[a]);
      axis_used[a] = true;
      t->axes[i][k] = a;
      t->spec.entries[i].axes[k] = m->names[a];
      s->partitions[i] *= m->sizes[a];
    }
  }
  return DLRUN_OK;
}

static void destroy_sharding(dlrun_ref *ref);

static dlrun_status new_sharding(dlrun_mesh *mesh, dlrun_memory_kind kind, bool named,
                                 dlrun_sharding **out) {
  if ((int)kind < 0 || kind >= DLRUN_MEM_KIND_COUNT)
    return dlrun_fail(DLRUN_ERR_VALUE, "invalid memory kind %d", (int)kind);
  size_t size = sizeof(dlrun_sharding) + (named ? sizeof(dlrun_sharding_tables) : 0);
  dlrun_sharding *s = dlrun_malloc(size);
  if (!s) return dlrun_fail_oom_host(size);
  /* The tables are left unset: only the entries below nentries, which
   * resolve_spec writes, are ever read. */
  memset(s, 0, sizeof *s);
  if (named) s->t[0].spec.nentries = 0;
  dlrun_ref_init(&s->ref, destroy_sharding);
  s->named = named;
  s->kind = kind;
  s->mesh = mesh;
  dlrun_mesh_retain(mesh);
  *out = s;
  return DLRUN_OK;
}

dlrun_status dlrun_named_sharding_create(dlrun_mesh *mesh, const dlrun_partition_spec *spec,
                                         dlrun_memory_kind kind, dlrun_sharding **out) {
  DLRUN_NONNULL(out, "dlrun_named_sharding_create", "out");
  *out = NULL;
  DLRUN_NONNULL(mesh, "dlrun_named_sharding_create", "mesh");
  DLRUN_NONNULL(spec, "dlrun_named_sharding_create", "spec");
  dlrun_sharding *s = NULL;
  dlrun_status st = new_sharding(mesh, kind, true, &s);
  if (st) return st;
  if ((st = resolve_spec(s, spec))) {
    dlrun_sharding_release(s);
    return st;
  }
  *out = s;
  return DLRUN_OK;
}

dlrun_status dlrun_single_device_sharding_create(dlrun_device *dev, dlrun_memory_kind kind,
                                                 dlrun_sharding **out) {
  DLRUN_NONNULL(out, "dlrun_single_device_sharding_create", "out");
  *out = NULL;
  DLRUN_NONNULL(dev, "dlrun_single_device_sharding_create", "device");
  dlrun_mesh *mesh;
  dlrun_status st = dlrun_mesh_create(&dev, 1, 0, NULL, NULL, &mesh);
  if (st) return st;
  st = new_sharding(mesh, kind, false, out);
  dlrun_mesh_release(mesh);
  return st;
}

void dlrun_sharding_lend_runtime(dlrun_sharding *s) {
  s->lends = s->mesh->lends = true;
  dlrun_runtime_release(s->mesh->rt); /* not the last: the caller holds the runtime too */
}

void dlrun_sharding_retain(dlrun_sharding *s) {
  if (!s) return;
  dlrun_ref_retain(&s->ref);
  if (s->lends) dlrun_runtime_retain(s->mesh->rt);
}

static void destroy_sharding(dlrun_ref *ref) {
  dlrun_sharding *s = (dlrun_sharding *)ref;
  if (s->lends) dlrun_ref_release(&s->mesh->ref); /* the sharding's own: no runtime */
  else dlrun_mesh_release(s->mesh);
  dlrun_free(s);
}

void dlrun_sharding_release(dlrun_sharding *s) {
  if (!s) return;
  dlrun_runtime *lent = s->lends ? s->mesh->rt : NULL;
  dlrun_ref_release(&s->ref);
  dlrun_runtime_release(lent); /* after: it may be the runtime's last */
}

/* Getters given NULL answer false, NULL, 0 or -1. */
bool dlrun_sharding_is_named(const dlrun_sharding *s) { return s && s->named; }
dlrun_mesh *dlrun_sharding_mesh(const dlrun_sharding *s) { return s ? s->mesh : NULL; }
const dlrun_partition_spec *dlrun_sharding_spec(const dlrun_sharding *s) {
  static const dlrun_partition_spec none = {0}; /* a SingleDeviceSharding's */
  return s ? s->named ? &s->t->spec : &none : NULL;
}
dlrun_memory_kind dlrun_sharding_memory_kind(const dlrun_sharding *s) {
  return s ? s->kind : DLRUN_MEM_DEVICE;
}
size_t dlrun_sharding_device_count(const dlrun_sharding *s) { return s ? s->mesh->ndevices : 0; }
dlrun_device *dlrun_sharding_device(const dlrun_sharding *s, size_t i) {
  return s ? dlrun_mesh_device(s->mesh, i) : NULL;
}
ptrdiff_t dlrun_sharding_device_position(const dlrun_sharding *s, const dlrun_device *dev) {
  return s ? dlrun_mesh_position(s->mesh, dev) : -1;
}

bool dlrun_sharding_is_fully_replicated(const dlrun_sharding *s) {
  if (!s) return false;
  for (int i = 0; i < s->nentries; i++)
    if (s->partitions[i] != 1) return false;
  return true;
}

bool dlrun_sharding_is_fully_addressable(const dlrun_sharding *s) {
  return s && s->mesh->nlocal == s->mesh->ndevices;
}

bool dlrun_sharding_is_addressable(const dlrun_sharding *s, size_t i) {
  return s && i < s->mesh->ndevices &&
         dlrun_device_process_index(s->mesh->devices[i]) == dlrun_process_index();
}

int64_t dlrun_sharding_partitions(const dlrun_sharding *s, int dim) {
  return s && dim >= 0 && dim < s->nentries ? s->partitions[dim] : 1;
}

dlrun_status dlrun_sharding_check_shape(const dlrun_sharding *s, int ndim, const int64_t *dims) {
  DLRUN_NONNULL(s, "dlrun_sharding_check_shape", "sharding");
  if (ndim < 0 || ndim > DLRUN_MAX_NDIM)
    return dlrun_fail(DLRUN_ERR_VALUE, "ndim %d is out of range (0 to %d)", ndim, DLRUN_MAX_NDIM);
  if (ndim > 0) DLRUN_NONNULL(dims, "dlrun_sharding_check_shape", "dims");
  char text[768];
  if (s->nentries > ndim)
    return dlrun_fail(DLRUN_ERR_VALUE,
                      "Sharding %s is only valid for values of rank at least %d, but was applied "
                      "to a value of rank %d.%s",
                      dlrun_sharding_describe(s, text, sizeof text), s->nentries, ndim,
                      ndim == 0 ? " For scalars the PartitionSpec should be P()" : "");
  for (int i = 0; i < s->nentries; i++) {
    if (dims[i] % s->partitions[i] == 0) continue;
    int64_t factors[DLRUN_MAX_NDIM];
    for (int d = 0; d < ndim; d++) factors[d] = dlrun_sharding_partitions(s, d);
    char shape[256], list[256];
    return dlrun_fail(DLRUN_ERR_INDIVISIBLE,
                      "%s implies that array axis %d is partitioned %lld times, but the dimension "
                      "size is %lld (full shape: %s, per-dimension tiling factors: %s should "
                      "evenly divide the shape)",
                      dlrun_sharding_describe(s, text, sizeof text), i, (long long)s->partitions[i],
                      (long long)dims[i], dlrun_tuple_string(dims, ndim, shape, sizeof shape),
                      dlrun_tuple_string(factors, ndim, list, sizeof list));
  }
  return DLRUN_OK;
}

void dlrun_sharding_shard_shape(const dlrun_sharding *s, int ndim, const int64_t *dims,
                                int64_t *out) {
  if (!s || !dims || !out || ndim < 0 || ndim > DLRUN_MAX_NDIM) return;
  for (int d = 0; d < ndim; d++) out[d] = dims[d] / dlrun_sharding_partitions(s, d);
}

void dlrun_sharding_shard_index(const dlrun_sharding *s, size_t i, int ndim, const int64_t *dims,
                                int64_t *lo, int64_t *hi) {
  if (!s || !dims || !lo || !hi || ndim < 0 || ndim > DLRUN_MAX_NDIM || i >= s->mesh->ndevices)
    return;
  int64_t coords[DLRUN_MAX_MESH_AXES];
  dlrun_mesh_coords(s->mesh, i, coords);
  for (int d = 0; d < ndim; d++) {
    if (d >= s->nentries || s->partitions[d] == 1) {
      lo[d] = 0;
      hi[d] = dims[d];
      continue;
    }
    int64_t block = 0;
    for (int k = 0; k < s->t->spec.entries[d].naxes; k++) {
      int a = s->t->axes[d][k];
      block = block * s->mesh->sizes[a] + coords[a];
    }
    int64_t size = dims[d] / s->partitions[d];
    lo[d] = block * size;
    hi[d] = lo[d] + size;
  }
}

/* Devices differing only in the coordinates of axes that split no data hold
 * the same index; the replica id is the row-major rank over those axes. An
 * axis splitting a zero-size dimension splits no data either. */
int64_t dlrun_sharding_replica_id(const dlrun_sharding *s, size_t i, int ndim,
                                  const int64_t *dims) {
  if (!s || i >= s->mesh->ndevices || (ndim > 0 && !dims)) return -1;
  bool splits[DLRUN_MAX_MESH_AXES] = {false};
  for (int d = 0; d < s->nentries && d < ndim; d++)
    if (dims[d] > 0)
      for (int k = 0; k < s->t->spec.entries[d].naxes; k++) splits[s->t->axes[d][k]] = true;
  int64_t coords[DLRUN_MAX_MESH_AXES], id = 0;
  dlrun_mesh_coords(s->mesh, i, coords);
  for (int a = 0; a < s->mesh->naxes; a++)
    if (!splits[a]) id = id * s->mesh->sizes[a] + coords[a];
  return id;
}

/* Block number of device i along dimension d (0 when not split). */
static int64_t block_of(const dlrun_sharding *s, const int64_t *coords, int d) {
  int64_t block = 0;
  if (d >= s->nentries) return 0;
  for (int k = 0; k < s->t->spec.entries[d].naxes; k++) {
    int a = s->t->axes[d][k];
    block = block * s->mesh->sizes[a] + coords[a];
  }
  return block;
}

bool dlrun_sharding_is_equivalent(const dlrun_sharding *a, const dlrun_sharding *b, int ndim) {
  if (!a || !b) return false;
  if (a == b) return true;
  if (a->kind != b->kind || a->mesh->ndevices != b->mesh->ndevices) return false;
  for (int d = 0; d < ndim; d++)
    if (dlrun_sharding_partitions(a, d) != dlrun_sharding_partitions(b, d)) return false;
  int64_t ca[DLRUN_MAX_MESH_AXES], cb[DLRUN_MAX_MESH_AXES];
  for (size_t i = 0; i < a->mesh->ndevices; i++) {
    ptrdiff_t j = dlrun_mesh_position(b->mesh, a->mesh->devices[i]);
    if (j < 0) return false;
    dlrun_mesh_coords(a->mesh, i, ca);
    dlrun_mesh_coords(b->mesh, (size_t)j, cb);
    for (int d = 0; d < ndim; d++)
      if (block_of(a, ca, d) != block_of(b, cb, d)) return false;
  }
  return true;
}

bool dlrun_mesh_equal(const dlrun_mesh *a, const dlrun_mesh *b) {
  if (!a || !b) return false;
  if (a == b) return true;
  if (a->naxes != b->naxes || a->ndevices != b->ndevices) return false;
  for (int x = 0; x < a->naxes; x++)
    if (a->sizes[x] != b->sizes[x] || strcmp(a->names[x], b->names[x]) != 0) return false;
  return memcmp(a->devices, b->devices, a->ndevices * sizeof *a->devices) == 0;
}

bool dlrun_sharding_equal(const dlrun_sharding *a, const dlrun_sharding *b) {
  if (!a || !b) return false;
  if (a == b) return true;
  if (a->named != b->named || a->kind != b->kind || !dlrun_mesh_equal(a->mesh, b->mesh) ||
      a->nentries != b->nentries)
    return false;
  for (int d = 0; d < a->nentries; d++) {
    if (a->t->spec.entries[d].naxes != b->t->spec.entries[d].naxes) return false;
    for (int k = 0; k < a->t->spec.entries[d].naxes; k++)
      if (a->t->axes[d][k] != b->t->axes[d][k]) return false;
  }
  return true;
}

/* FNV-1a, 64 bits: hashes that agree with the equalities above. */
#define HASH_START 14695981039346656037ull
static uint64_t hash_bytes(uint64_t h, const void *p, size_t n) {
  const unsigned char *b = p;
  for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ull;
  return h;
}

static uint64_t mesh_hash(uint64_t h, const dlrun_mesh *m) {
  h = hash_bytes(h, &m->naxes, sizeof m->naxes);
  for (int x = 0; x < m->naxes; x++) {
    h = hash_bytes(h, &m->sizes[x], sizeof m->sizes[x]);
    h = hash_bytes(h, m->names[x], strlen(m->names[x]) + 1);
  }
  return hash_bytes(h, m->devices, m->ndevices * sizeof *m->devices);
}

uint64_t dlrun_mesh_hash(const dlrun_mesh *m) { return m ? mesh_hash(HASH_START, m) : 0; }

uint64_t dlrun_sharding_hash(const dlrun_sharding *s) {
  if (!s) return 0;
  uint64_t h = mesh_hash(HASH_START, s->mesh);
  unsigned char head[2] = {s->named, (unsigned char)s->kind};
  h = hash_bytes(h, head, sizeof head);
  h = hash_bytes(h, &s->nentries, sizeof s->nentries);
  for (int d = 0; d < s->nentries; d++) {
    int n = s->t->spec.entries[d].naxes;
    h = hash_bytes(h, &n, sizeof n);
    h = hash_bytes(h, s->t->axes[d], (size_t)n * sizeof s->t->axes[d][0]);
  }
  return h;
}

const char *dlrun_sharding_describe(const dlrun_sharding *s, char *buf, size_t n) {
  if (!buf || !n) return buf;
  if (!s) {
    snprintf(buf, n, "Sharding(NULL)");
    return buf;
  }
  char inner[512], spec[512];
  if (!s->named) {
    snprintf(buf, n, "SingleDeviceSharding(device=%s, memory_kind=%s)", dlrun_device_name(s->mesh->devices[0]),
             dlrun_memory_kind_name(s->kind));
    return buf;
  }
  snprintf(buf, n, "NamedSharding(mesh=%s, spec=%s, memory_kind=%s)",
           dlrun_mesh_describe(s->mesh, inner, sizeof inner),
           dlrun_partition_spec_describe(&s->t->spec, spec, sizeof spec),
           dlrun_memory_kind_name(s->kind));
  return buf;
}
