/* libFuzzer target: meshes, PartitionSpecs, NamedShardings and their index
 * maps, over a runtime of 16 simulated devices made once.
 *
 * The input chooses a mesh (axis count, possibly negative or above the
 * limit; sizes, possibly 0, negative or huge; names from a small pool so
 * that they collide, empty, NULL or raw bytes; the devices in any order,
 * possibly with a duplicate, a NULL or a device of another runtime), a
 * PartitionSpec (entries naming known, unknown, NULL or repeated axes,
 * counts out of range), a memory kind, then shapes of any rank.
 *
 * Oracle, from include/dlrun/sharding.h:
 *   - dlrun_mesh_create and dlrun_named_sharding_create succeed exactly when
 *     the arguments are valid, failing with the documented status (the
 *     checks simulated here in dlrun's order); failures leave *out NULL and a
 *     message; getters return what was given; describe output fits its
 *     buffer;
 *   - dlrun_sharding_check_shape accepts a shape exactly when its rank is
 *     0..DLRUN_MAX_NDIM, the spec is no longer than the rank and every split
 *     dimension divides (ranks up to 40 are tried);
 *   - for accepted shapes (rank <= DLRUN_MAX_NDIM, no negative dimension):
 *     every index lies in the shape with the shard shape's extent; along
 *     each dimension the distinct intervals tile [0, dim) in `partitions`
 *     pieces (one when dim is 0); the distinct blocks are exactly the
 *     product of those intervals (so they cover the array once); each block
 *     is held by ndevices / nblocks devices; a replica id is the number of
 *     earlier devices holding the same index;
 *   - a sharding equals one made again from equal arguments, and is
 *     equivalent to it; is_equivalent with a second sharding (the same
 *     devices in another mesh shape, another spec) agrees with comparing
 *     both index maps, device by device, on a shape every split divides;
 *   - with an allocation failure injected (dlrun_debug_fail_alloc) into the
 *     first mesh and sharding, valid ones fail with
 *     DLRUN_ERR_RESOURCE_EXHAUSTED, and nothing leaks. */
#include "fuzz_common.h"

#define NDEV 16
#define MAX_ALLOC_AXES 64

static dlrun_runtime *rt, *other_rt;
static dlrun_device *devs[NDEV];

static void init_once(void) {
  if (rt) return;
  rt = fuzz_runtime("sim:16");
  other_rt = fuzz_runtime("sim:1");
  for (int i = 0; i < NDEV; i++) devs[i] = dlrun_device_get(rt, "sim", (size_t)i);
}

static const char *const name_pool[] = {"x", "y", "z", "data", "model", "x ", "X", ""};
#define NPOOL (sizeof name_pool / sizeof name_pool[0])

/* Names made for one input, freed after it. */
typedef struct strings {
  char *list[512];
  int used;
} strings;

static char *new_string(strings *s, size_t n) {
  if (s->used == 512) return NULL;
  return s->list[s->used++] = calloc(1, n + 1);
}

static void free_strings(strings *s) {
  for (int i = 0; i < s->used; i++) free(s->list[i]);
  s->used = 0;
}

/* Raw bytes (up to 8), or a long run of one byte (up to 1023: error
 * messages and descriptions must cope with long names). */
static const char *raw_name(fuzz_reader *r, strings *s) {
  uint8_t v = fz_u8(r);
  size_t n = v % 9;
  if (v >= 0xF0) n = fz_u16(r) % 1024;
  char *p = new_string(s, n);
  if (!p) return "x";
  if (v >= 0xF0) memset(p, 'a' + v % 16, n);
  else
    for (size_t i = 0; i < n; i++) p[i] = (char)fz_u8(r);
  return p;
}

/* A copy of `name` at another address: dlrun must compare by content. */
static const char *copy_name(const char *name, strings *s) {
  char *p = new_string(s, strlen(name));
  if (!p) return name;
  strcpy(p, name);
  return p;
}

static const char *read_name(fuzz_reader *r, strings *s) {
  uint8_t v = fz_u8(r);
  if (v < 0xE0) return name_pool[v % NPOOL];
  if (v < 0xF0) return NULL;
  return raw_name(r, s);
}

/* ---- the mesh ---- */

typedef struct mesh_args {
  int naxes;
  const char *names[MAX_ALLOC_AXES];
  int64_t sizes[MAX_ALLOC_AXES];
  size_t ndevices;
  dlrun_device *devices[NDEV];
} mesh_args;

/* Sizes that multiply to n, as many axes as the input asks. */
static void factor_sizes(fuzz_reader *r, mesh_args *m, int64_t n) {
  for (int a = 0; a < m->naxes; a++) {
    int64_t f = 1;
    if (a == m->naxes - 1) f = n;
    else
      for (int64_t c = 2 + fz_u8(r) % 3; c > 1; c--)
        if (n % c == 0) {
          f = c;
          break;
        }
    m->sizes[a] = f;
    n /= f;
  }
}

static void read_mesh(fuzz_reader *r, strings *s, mesh_args *m) {
  memset(m, 0, sizeof *m);
  uint8_t v = fz_u8(r);
  m->naxes = v < 0xF0 ? v % 5 : (int)(int8_t)fz_u8(r);
  int n = m->naxes < 0 ? 0 : m->naxes > MAX_ALLOC_AXES ? MAX_ALLOC_AXES : m->naxes;
  uint8_t how = fz_u8(r);
  if (how < 0xC0 && m->naxes >= 1 && m->naxes <= 4) {
    /* A valid factorisation of 1, 2, 4, 8 or 16 devices (or 6, 12). */
    static const int64_t totals[] = {1, 2, 4, 8, 16, 6, 12, 16};
    factor_sizes(r, m, totals[how % 8]);
  } else {
    for (int a = 0; a < n; a++) {
      v = fz_u8(r);
      m->sizes[a] = v < 0xF0 ? v % 17 : (int64_t)fz_u64(r);
    }
  }
  for (int a = 0; a < n; a++) {
    /* Mostly distinct names: axis a takes pool name a, unless told. */
    v = fz_u8(r);
    m->names[a] = v < 0xA0 ? name_pool[a % 5] : read_name(r, s);
  }
  /* Devices: as many as the sizes multiply to (when that is small), or a
   * count from the input. */
  int64_t product = 1;
  bool small = true;
  for (int a = 0; a < n && small; a++)
    if (m->sizes[a] < 1 || __builtin_mul_overflow(product, m->sizes[a], &product) ||
        product > NDEV)
      small = false;
  v = fz_u8(r);
  m->ndevices = (small && v < 0xE0) ? (size_t)product : v % (NDEV + 1);
  int order[NDEV];
  for (int i = 0; i < NDEV; i++) order[i] = i;
  if (fz_bool(r))
    for (int i = NDEV - 1; i > 0; i--) {
      int j = (int)(fz_u8(r) % (unsigned)(i + 1)), t = order[i];
      order[i] = order[j];
      order[j] = t;
    }
  for (size_t i = 0; i < m->ndevices; i++) m->devices[i] = devs[order[i]];
  v = fz_u8(r);
  if (m->ndevices > 0 && v >= 0xF0) {
    size_t i = fz_u8(r) % m->ndevices;
    switch (v & 3) {
    case 0: m->devices[i] = NULL; break;
    case 1: m->devices[i] = dlrun_device_get(other_rt, "sim", 0); break;
    default: m->devices[i] = m->devices[fz_u8(r) % m->ndevices]; break;
    }
  }
}

static bool mesh_valid(const mesh_args *m) {
  if (m->naxes < 0 || m->naxes > DLRUN_MAX_MESH_AXES || m->ndevices == 0) return false;
  int64_t product = 1;
  for (int a = 0; a < m->naxes; a++) {
    if (!m->names[a] || !*m->names[a] || m->sizes[a] < 1) return false;
    for (int b = 0; b < a; b++)
      if (strcmp(m->names[a], m->names[b]) == 0) return false;
    if (__builtin_mul_overflow(product, m->sizes[a], &product)) return false;
  }
  if ((uint64_t)product != m->ndevices) return false;
  for (size_t i = 0; i < m->ndevices; i++) {
    if (!m->devices[i] || !m->devices[0] ||
        dlrun_device_runtime(m->devices[i]) != dlrun_device_runtime(m->devices[0]))
      return false;
    for (size_t j = 0; j < i; j++)
      if (m->devices[i] == m->devices[j]) return false;
  }
  return true;
}

/* The allocation failure injected into the first mesh and sharding. */
static fuzz_fault fault;

static dlrun_mesh *make_mesh(const mesh_args *m) {
  dlrun_mesh *mesh = (dlrun_mesh *)(uintptr_t)1;
  dlrun_status st = dlrun_mesh_create(m->devices, m->ndevices, m->naxes, m->names, m->sizes, &mesh);
  bool valid = mesh_valid(m);
  if (fuzz_fault_hit(&fault) && valid) {
    FUZZ_CHECK(st == DLRUN_ERR_RESOURCE_EXHAUSTED,
               "mesh_create with a failed allocation returned %d", (int)st);
    valid = false;
  }
  FUZZ_CHECK((st == DLRUN_OK) == valid, "mesh_create returned %d for a %s mesh", (int)st,
             valid ? "valid" : "invalid");
  if (st) {
    FUZZ_CHECK(st == DLRUN_ERR_VALUE || st == DLRUN_ERR_RESOURCE_EXHAUSTED,
               "mesh_create failed with %d, not ValueError", (int)st);
    FUZZ_CHECK_FAILED_WITH_MESSAGE(st);
    FUZZ_CHECK(mesh == NULL, "failed mesh_create left *out set");
    return NULL;
  }
  FUZZ_CHECK(dlrun_mesh_naxes(mesh) == m->naxes, "naxes");
  FUZZ_CHECK(dlrun_mesh_device_count(mesh) == m->ndevices, "device count");
  for (int a = 0; a < m->naxes; a++) {
    FUZZ_CHECK(strcmp(dlrun_mesh_axis_name(mesh, a), m->names[a]) == 0, "axis name %d", a);
    FUZZ_CHECK(dlrun_mesh_axis_size(mesh, a) == m->sizes[a], "axis size %d", a);
  }
  for (size_t i = 0; i < m->ndevices; i++)
    FUZZ_CHECK(dlrun_mesh_device(mesh, i) == m->devices[i], "mesh device %zu", i);
  FUZZ_CHECK(dlrun_mesh_device(mesh, m->ndevices) == NULL, "device past the end");
  return mesh;
}

/* ---- the spec ---- */

static void read_spec(fuzz_reader *r, strings *s, const mesh_args *m, dlrun_partition_spec *spec) {
  memset(spec, 0, sizeof *spec);
  uint8_t v = fz_u8(r);
  spec->nentries = v < 0xF0 ? v % 5 : (int)(int8_t)fz_u8(r);
  int n = spec->nentries < 0 ? 0 : spec->nentries > DLRUN_MAX_NDIM ? DLRUN_MAX_NDIM : spec->nentries;
  int mesh_axes = m->naxes < 0 ? 0 : m->naxes > MAX_ALLOC_AXES ? MAX_ALLOC_AXES : m->naxes;
  for (int i = 0; i < n; i++) {
    dlrun_spec_entry *e = &spec->entries[i];
    v = fz_u8(r);
    e->naxes = v < 0xF0 ? v % 3 : (int)(int8_t)fz_u8(r);
    int k_max = e->naxes < 0 ? 0 : e->naxes > DLRUN_MAX_MESH_AXES ? DLRUN_MAX_MESH_AXES : e->naxes;
    for (int k = 0; k < k_max; k++) {
      v = fz_u8(r);
      if (v < 0xC0 && mesh_axes > 0 && m->names[v % mesh_axes])
        e->axes[k] = copy_name(m->names[v % mesh_axes], s);
      else
        e->axes[k] = read_name(r, s);
    }
  }
}

static int find_axis(const mesh_args *m, const char *name) {
  for (int a = 0; a < m->naxes; a++)
    if (strcmp(m->names[a], name) == 0) return a;
  return -1;
}

/* The status dlrun must return: the spec's form first (axis counts, NULL
 * names, in every entry), then its axes, entry by entry. */
static dlrun_status spec_status(const mesh_args *m, const dlrun_partition_spec *spec, int kind) {
  if (kind < 0 || kind >= DLRUN_MEM_KIND_COUNT) return DLRUN_ERR_VALUE;
  if (spec->nentries < 0 || spec->nentries > DLRUN_MAX_NDIM) return DLRUN_ERR_VALUE;
  for (int i = 0; i < spec->nentries; i++) {
    const dlrun_spec_entry *e = &spec->entries[i];
    if (e->naxes < 0 || e->naxes > DLRUN_MAX_MESH_AXES) return DLRUN_ERR_VALUE;
    for (int k = 0; k < e->naxes; k++)
      if (!e->axes[k]) return DLRUN_ERR_VALUE;
  }
  bool used[DLRUN_MAX_MESH_AXES] = {false};
  for (int i = 0; i < spec->nentries; i++) {
    const dlrun_spec_entry *e = &spec->entries[i];
    for (int k = 0; k < e->naxes; k++) {
      int a = find_axis(m, e->axes[k]);
      if (a < 0) return DLRUN_ERR_VALUE;
      if (used[a]) return DLRUN_ERR_DUPLICATE_SPEC;
      used[a] = true;
    }
  }
  return DLRUN_OK;
}

static int64_t expected_partitions(const mesh_args *m, const dlrun_partition_spec *spec, int d) {
  if (d >= spec->nentries) return 1;
  int64_t p = 1;
  for (int k = 0; k < spec->entries[d].naxes; k++) p *= m->sizes[find_axis(m, spec->entries[d].axes[k])];
  return p;
}

static dlrun_sharding *make_sharding(dlrun_mesh *mesh, const mesh_args *m,
                                     const dlrun_partition_spec *spec, int kind) {
  dlrun_sharding *s = (dlrun_sharding *)(uintptr_t)1;
  dlrun_status st = dlrun_named_sharding_create(mesh, spec, (dlrun_memory_kind)kind, &s);
  dlrun_status want = spec_status(m, spec, kind);
  if (fuzz_fault_hit(&fault))
    FUZZ_CHECK(st == DLRUN_ERR_RESOURCE_EXHAUSTED || (st == want && st != DLRUN_OK),
               "named_sharding_create with a failed allocation returned %d", (int)st);
  else
    FUZZ_CHECK(st == want, "named_sharding_create returned %d, expected %d", (int)st, (int)want);
  if (st) {
    FUZZ_CHECK_FAILED_WITH_MESSAGE(st);
    FUZZ_CHECK(s == NULL, "failed named_sharding_create left *out set");
    return NULL;
  }
  FUZZ_CHECK(dlrun_sharding_is_named(s), "not named");
  FUZZ_CHECK(dlrun_sharding_mesh(s) == mesh, "another mesh");
  FUZZ_CHECK(dlrun_sharding_memory_kind(s) == (dlrun_memory_kind)kind, "memory kind");
  FUZZ_CHECK(dlrun_sharding_device_count(s) == m->ndevices, "device count");
  const dlrun_partition_spec *got = dlrun_sharding_spec(s);
  FUZZ_CHECK(got->nentries == spec->nentries, "spec length");
  bool replicated = true;
  for (int d = 0; d < spec->nentries; d++) {
    FUZZ_CHECK(got->entries[d].naxes == spec->entries[d].naxes, "entry %d length", d);
    for (int k = 0; k < spec->entries[d].naxes; k++)
      FUZZ_CHECK(strcmp(got->entries[d].axes[k], spec->entries[d].axes[k]) == 0, "entry %d", d);
    int64_t p = expected_partitions(m, spec, d);
    FUZZ_CHECK(dlrun_sharding_partitions(s, d) == p, "partitions of dim %d: %lld, expected %lld", d,
               (long long)dlrun_sharding_partitions(s, d), (long long)p);
    if (p != 1) replicated = false;
  }
  FUZZ_CHECK(dlrun_sharding_partitions(s, spec->nentries) == 1, "partitions past the spec");
  FUZZ_CHECK(dlrun_sharding_partitions(s, -1) == 1, "partitions of dim -1");
  FUZZ_CHECK(dlrun_sharding_is_fully_replicated(s) == replicated, "is_fully_replicated");
  for (size_t i = 0; i < m->ndevices; i++) {
    FUZZ_CHECK(dlrun_sharding_device(s, i) == m->devices[i], "device %zu", i);
    FUZZ_CHECK(dlrun_sharding_device_position(s, m->devices[i]) == (ptrdiff_t)i, "position %zu", i);
  }
  for (int i = 0; i < NDEV + 1; i++) {
    dlrun_device *dev = i < NDEV ? devs[i] : dlrun_device_get(other_rt, "sim", 0);
    bool in = false;
    for (size_t j = 0; j < m->ndevices; j++) in |= m->devices[j] == dev;
    if (!in) FUZZ_CHECK(dlrun_sharding_device_position(s, dev) == -1, "position of outsider");
  }
  return s;
}

/* Text output fits any buffer and is NUL-terminated. */
static void check_describe(fuzz_reader *r, dlrun_sharding *s) {
  size_t n = 1 + fz_u8(r) % 200;
  char *buf = malloc(n);
  const char *t = dlrun_sharding_describe(s, buf, n);
  FUZZ_CHECK(t == buf && strlen(buf) < n, "describe overran %zu bytes", n);
  t = dlrun_partition_spec_describe(dlrun_sharding_spec(s), buf, n);
  FUZZ_CHECK(t == buf && strlen(buf) < n, "spec describe overran %zu bytes", n);
  t = dlrun_mesh_describe(dlrun_sharding_mesh(s), buf, n);
  FUZZ_CHECK(t == buf && strlen(buf) < n, "mesh describe overran %zu bytes", n);
  free(buf);
}

/* ---- shapes ---- */

static int64_t read_dim(fuzz_reader *r) {
  uint8_t v = fz_u8(r);
  if (v < 0xE0) return v % 33;
  if (v < 0xF0) return 64 * (int64_t)(v - 0xDF);
  return (int64_t)fz_u64(r);
}

/* Intervals along one dimension: distinct, sorted, tiling [0, dim). Returns
 * their number. */
static int64_t tile_count(int64_t (*lo)[DLRUN_MAX_NDIM], int64_t (*hi)[DLRUN_MAX_NDIM], size_t n,
                          int d, int64_t dim) {
  int64_t starts[NDEV], ends[NDEV];
  int64_t count = 0;
  for (size_t i = 0; i < n; i++) {
    bool seen = false;
    for (int64_t j = 0; j < count; j++)
      if (starts[j] == lo[i][d]) {
        FUZZ_CHECK(ends[j] == hi[i][d], "two intervals start at %lld on dim %d",
                   (long long)lo[i][d], d);
        seen = true;
      }
    if (!seen) {
      starts[count] = lo[i][d];
      ends[count++] = hi[i][d];
    }
  }
  /* Sorted by start, consecutive, from 0 to dim. */
  for (int64_t a = 1; a < count; a++)
    for (int64_t b = a; b > 0 && starts[b] < starts[b - 1]; b--) {
      int64_t t = starts[b];
      starts[b] = starts[b - 1];
      starts[b - 1] = t;
      t = ends[b];
      ends[b] = ends[b - 1];
      ends[b - 1] = t;
    }
  FUZZ_CHECK(starts[0] == 0 && ends[count - 1] == dim, "dim %d not covered from 0 to %lld", d,
             (long long)dim);
  for (int64_t a = 1; a < count; a++)
    FUZZ_CHECK(ends[a - 1] == starts[a], "dim %d: gap or overlap at %lld", d, (long long)starts[a]);
  return count;
}

static void check_index_map(dlrun_sharding *s, size_t ndev, int ndim, const int64_t *dims) {
  int64_t shard[DLRUN_MAX_NDIM];
  static int64_t lo[NDEV][DLRUN_MAX_NDIM], hi[NDEV][DLRUN_MAX_NDIM];
  dlrun_sharding_shard_shape(s, ndim, dims, shard);
  for (int d = 0; d < ndim; d++) {
    int64_t p = dlrun_sharding_partitions(s, d);
    FUZZ_CHECK(shard[d] * p == dims[d], "shard dim %d: %lld * %lld != %lld", d,
               (long long)shard[d], (long long)p, (long long)dims[d]);
  }
  for (size_t i = 0; i < ndev; i++) {
    dlrun_sharding_shard_index(s, i, ndim, dims, lo[i], hi[i]);
    for (int d = 0; d < ndim; d++)
      FUZZ_CHECK(0 <= lo[i][d] && lo[i][d] <= hi[i][d] && hi[i][d] <= dims[d] &&
                     hi[i][d] - lo[i][d] == shard[d],
                 "device %zu dim %d: [%lld, %lld) in %lld, shard %lld", i, d, (long long)lo[i][d],
                 (long long)hi[i][d], (long long)dims[d], (long long)shard[d]);
  }
  /* Blocks: a product of per-dimension tilings. */
  int64_t nblocks = 1;
  for (int d = 0; d < ndim; d++) {
    int64_t c = tile_count(lo, hi, ndev, d, dims[d]);
    int64_t want = dims[d] > 0 ? dlrun_sharding_partitions(s, d) : 1;
    FUZZ_CHECK(c == want, "dim %d cut in %lld pieces, expected %lld", d, (long long)c,
               (long long)want);
    nblocks *= c;
    FUZZ_CHECK(nblocks <= (int64_t)ndev, "more blocks than devices");
  }
  int64_t holders[NDEV] = {0}, distinct = 0;
  for (size_t i = 0; i < ndev; i++) {
    int64_t same_before = 0;
    size_t first = i;
    for (size_t j = 0; j < i; j++)
      if (memcmp(lo[i], lo[j], (size_t)ndim * sizeof(int64_t)) == 0) {
        if (same_before == 0) first = j;
        same_before++;
      }
    if (same_before == 0) distinct++;
    holders[first]++;
    int64_t id = dlrun_sharding_replica_id(s, i, ndim, dims);
    FUZZ_CHECK(id == same_before, "device %zu: replica id %lld, but %lld earlier devices hold its "
               "index", i, (long long)id, (long long)same_before);
  }
  FUZZ_CHECK(distinct == nblocks, "%lld distinct blocks, the tilings make %lld",
             (long long)distinct, (long long)nblocks);
  for (size_t i = 0; i < ndev; i++)
    if (holders[i])
      FUZZ_CHECK(holders[i] * nblocks == (int64_t)ndev, "block of device %zu held %lld times", i,
                 (long long)holders[i]);
}

static void check_shapes(fuzz_reader *r, dlrun_sharding *s, const mesh_args *m,
                         const dlrun_partition_spec *spec) {
  int nshapes = 1 + fz_u8(r) % 4;
  for (int k = 0; k < nshapes; k++) {
    uint8_t v = fz_u8(r);
    int ndim = v < 0xF0 ? spec->nentries + (int)(v % 4) - 1 : (int)(int8_t)fz_u8(r);
    if (ndim < 0 && v < 0xF0) ndim = 0;
    if (ndim > 40) ndim = 40;
    size_t n = ndim > 0 ? (size_t)ndim : 0;
    int64_t *dims = malloc(n * sizeof *dims + 1);
    bool negative = false;
    for (size_t d = 0; d < n; d++) {
      dims[d] = read_dim(r);
      /* Often make the split dimensions divide. */
      int64_t p = expected_partitions(m, spec, (int)d);
      if (fz_u8(r) < 0xC0 && dims[d] >= 0 && dims[d] < INT64_MAX / 16) dims[d] *= p;
      negative |= dims[d] < 0;
    }
    dlrun_status want = DLRUN_OK;
    if (ndim < 0 || ndim > DLRUN_MAX_NDIM || spec->nentries > ndim) want = DLRUN_ERR_VALUE;
    else
      for (int d = 0; d < spec->nentries; d++)
        if (dims[d] % expected_partitions(m, spec, d)) {
          want = DLRUN_ERR_INDIVISIBLE;
          break;
        }
    dlrun_status st = dlrun_sharding_check_shape(s, ndim, dims);
    if (st) FUZZ_CHECK_FAILED_WITH_MESSAGE(st);
    if (!negative)
      FUZZ_CHECK(st == want, "check_shape returned %d, expected %d", (int)st, (int)want);
    if (!st && !negative && ndim <= DLRUN_MAX_NDIM) {
      check_index_map(s, m->ndevices, ndim, dims);
      FUZZ_CHECK(dlrun_sharding_is_equivalent(s, s, ndim), "not equivalent to itself");
    }
    free(dims);
  }
}

/* is_equivalent against indices compared device by device on a shape that
 * every split divides (720720 is divisible by 1..16). */
static bool same_indices(dlrun_sharding *a, dlrun_sharding *b, int ndim) {
  if (dlrun_sharding_memory_kind(a) != dlrun_sharding_memory_kind(b)) return false;
  size_t n = dlrun_sharding_device_count(a);
  if (n != dlrun_sharding_device_count(b)) return false;
  int64_t dims[DLRUN_MAX_NDIM], la[DLRUN_MAX_NDIM], ha[DLRUN_MAX_NDIM], lb[DLRUN_MAX_NDIM],
      hb[DLRUN_MAX_NDIM];
  for (int d = 0; d < ndim; d++) dims[d] = 720720;
  for (size_t i = 0; i < n; i++) {
    ptrdiff_t j = dlrun_sharding_device_position(b, dlrun_sharding_device(a, i));
    if (j < 0) return false;
    dlrun_sharding_shard_index(a, i, ndim, dims, la, ha);
    dlrun_sharding_shard_index(b, (size_t)j, ndim, dims, lb, hb);
    if (memcmp(la, lb, (size_t)ndim * sizeof *la) || memcmp(ha, hb, (size_t)ndim * sizeof *ha))
      return false;
  }
  return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  init_once();
  fuzz_reader r = {data, size};
  static strings names;
  mesh_args m;
  read_mesh(&r, &names, &m);
  fault = fuzz_fault_read(&r);
  fuzz_fault_arm(&fault);
  dlrun_mesh *mesh = make_mesh(&m);
  if (!mesh) {
    fuzz_fault_disarm(&fault);
    free_strings(&names);
    return 0;
  }
  dlrun_partition_spec spec;
  read_spec(&r, &names, &m, &spec);
  uint8_t v = fz_u8(&r);
  int kind = v < 0xF0 ? v % 2 : (int)(int8_t)fz_u8(&r);
  dlrun_sharding *s = make_sharding(mesh, &m, &spec, kind);
  fuzz_fault_disarm(&fault);
  fault.on = false;
  if (!s) {
    dlrun_mesh_release(mesh);
    free_strings(&names);
    return 0;
  }
  check_describe(&r, s);
  check_shapes(&r, s, &m, &spec);

  /* The same arguments again: equal and equivalent. */
  dlrun_mesh *mesh2 = make_mesh(&m);
  dlrun_sharding *s2 = make_sharding(mesh2, &m, &spec, kind);
  FUZZ_CHECK(dlrun_sharding_equal(s, s2) && dlrun_sharding_equal(s2, s), "not equal to its twin");
  for (int nd = spec.nentries; nd <= DLRUN_MAX_NDIM && nd <= spec.nentries + 2; nd++)
    FUZZ_CHECK(dlrun_sharding_is_equivalent(s, s2, nd), "not equivalent to its twin at rank %d", nd);
  dlrun_sharding_release(s2);
  dlrun_mesh_release(mesh2);

  /* Another sharding of the same devices, maybe reshaped; compare. */
  mesh_args m3 = m;
  v = fz_u8(&r);
  if (v & 1) {
    m3.naxes = 1 + (v >> 1) % 4;
    factor_sizes(&r, &m3, (int64_t)m.ndevices);
    for (int a = 0; a < m3.naxes; a++) m3.names[a] = name_pool[a % 5];
  }
  if (v & 0x20)
    for (size_t i = m3.ndevices - 1; i > 0; i--) {
      size_t j = fz_u8(&r) % (i + 1);
      dlrun_device *t = m3.devices[i];
      m3.devices[i] = m3.devices[j];
      m3.devices[j] = t;
    }
  dlrun_mesh *mesh3 = make_mesh(&m3);
  FUZZ_CHECK(mesh3 != NULL, "reshaped mesh refused");
  dlrun_partition_spec spec3;
  read_spec(&r, &names, &m3, &spec3);
  int kind3 = fz_u8(&r) < 0xE0 ? kind : !kind;
  dlrun_sharding *s3 = make_sharding(mesh3, &m3, &spec3, kind3);
  if (s3) {
    int hi = spec.nentries > spec3.nentries ? spec.nentries : spec3.nentries;
    for (int nd = hi; nd <= DLRUN_MAX_NDIM && nd <= hi + 1; nd++) {
      bool eq = dlrun_sharding_is_equivalent(s, s3, nd), want = same_indices(s, s3, nd);
      FUZZ_CHECK(eq == want, "is_equivalent at rank %d is %d, index maps say %d", nd, eq, want);
      FUZZ_CHECK(dlrun_sharding_is_equivalent(s3, s, nd) == eq, "is_equivalent not symmetric");
    }
    if (dlrun_sharding_equal(s, s3))
      FUZZ_CHECK(dlrun_sharding_is_equivalent(s, s3, hi), "equal but not equivalent");
    check_shapes(&r, s3, &m3, &spec3);
    dlrun_sharding_release(s3);
  }
  dlrun_mesh_release(mesh3);
  dlrun_sharding_release(s);
  dlrun_mesh_release(mesh);
  free_strings(&names);
  return 0;
}
