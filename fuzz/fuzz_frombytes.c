/* libFuzzer target: dlrun_array_from_host (what frombytes calls) with any
 * dtype number, rank, dimensions and data length, then reading back.
 *
 * Layouts: SingleDeviceSharding on sim 0, sim 1 or the cpu device (device
 * or pinned_host memory), and, for the copy into several shards, a
 * NamedSharding over sim 0 and 1 that splits dimension 0 or replicates.
 * The element bytes are the rest of the input; the host data buffer holds
 * exactly the bytes the call is told, so over-reads are ASan reports.
 * Valid arrays are capped at MAX_BYTES.
 *
 * Oracle:
 *   - the call succeeds exactly when the dtype is one of dlrun's, the rank
 *     is 0..DLRUN_MAX_NDIM, no dimension is negative, the element and byte
 *     counts fit int64, the length given equals the byte size, data is not
 *     NULL when there are bytes, and the sharding takes the shape (for a
 *     packed sub-byte dtype, ceil(count * bits / 8) bytes, and shards that
 *     start and end on a byte);
 *     failures leave *out NULL and a message;
 *   - metadata is as given; reading the whole array returns the data;
 *     reads of sub-ranges succeed exactly when inside the array and on
 *     element boundaries, and return that slice; each shard (shard_data)
 *     holds the block of the data its index names;
 *   - after release, every pool is back to the bytes in use before;
 *   - with an allocation failure injected (dlrun_debug_fail_alloc), a
 *     valid call fails with DLRUN_ERR_RESOURCE_EXHAUSTED and leaves the
 *     pools as they were. */
#include "fuzz_common.h"

#define MAX_BYTES (1u << 18)

enum { L_SIM0, L_SIM1, L_CPU, L_SIM0_PIN, L_CPU_PIN, L_SPLIT, L_REPLICATED, L_COUNT };

static dlrun_runtime *rt;
static dlrun_sharding *layouts[L_COUNT];
static dlrun_device *all_devs[3];

static void init_once(void) {
  if (rt) return;
  rt = fuzz_runtime("sim:2,cpu:1");
  all_devs[0] = dlrun_device_get(rt, "sim", 0);
  all_devs[1] = dlrun_device_get(rt, "sim", 1);
  all_devs[2] = dlrun_host_device(rt);
  const struct { dlrun_device *dev; dlrun_memory_kind kind; } single[] = {
      {all_devs[0], DLRUN_MEM_DEVICE}, {all_devs[1], DLRUN_MEM_DEVICE},
      {all_devs[2], DLRUN_MEM_DEVICE}, {all_devs[0], DLRUN_MEM_PINNED_HOST},
      {all_devs[2], DLRUN_MEM_PINNED_HOST}};
  for (int i = 0; i < 5; i++)
    if (dlrun_single_device_sharding_create(single[i].dev, single[i].kind, &layouts[i])) abort();
  const char *names[1] = {"x"};
  int64_t sizes[1] = {2};
  dlrun_mesh *m;
  if (dlrun_mesh_create(all_devs, 2, 1, names, sizes, &m)) abort();
  dlrun_partition_spec split = {.nentries = 1, .entries = {{.naxes = 1, .axes = {"x"}}}};
  dlrun_partition_spec none = {.nentries = 0};
  if (dlrun_named_sharding_create(m, &split, DLRUN_MEM_DEVICE, &layouts[L_SPLIT]) ||
      dlrun_named_sharding_create(m, &none, DLRUN_MEM_DEVICE, &layouts[L_REPLICATED]))
    abort();
  dlrun_mesh_release(m);
}

static uint64_t in_use(int dev, dlrun_memory_kind kind) {
  dlrun_memory_stats ms;
  if (dlrun_device_memory_stats(all_devs[dev], kind, &ms)) abort();
  return ms.bytes_in_use;
}

/* Bytes of the block [lo, hi) of a row-major array, in row-major order. */
static FUZZ_NO_COVERAGE void gather_box(const unsigned char *src, int ndim, const int64_t *dims, size_t esize,
                       const int64_t *lo, const int64_t *hi, unsigned char *dst) {
  int64_t idx[DLRUN_MAX_NDIM];
  for (int d = 0; d < ndim; d++) {
    if (hi[d] <= lo[d]) return;
    idx[d] = lo[d];
  }
  for (;;) {
    int64_t off = 0;
    for (int d = 0; d < ndim; d++) off = off * dims[d] + idx[d];
    memcpy(dst, src + off * (int64_t)esize, esize);
    dst += esize;
    int d = ndim - 1;
    for (; d >= 0; d--) {
      if (++idx[d] < hi[d]) break;
      idx[d] = lo[d];
    }
    if (d < 0) return;
  }
}

/* Packed sub-byte dtypes (fewer than 8 bits) store ceil(count * bits / 8)
 * bytes, element i at bits i*b .. i*b+b-1 (DLPack 1.1). */
static unsigned __int128 packed_bytes(unsigned __int128 count, unsigned bits) {
  return (count * bits + 7) / 8;
}

/* The bits one index of dim 0 holds, and whether a shard may split dim 0
 * at index h (the rule of src/core/storage.c: shards start and end on a
 * byte; with some trailing run of dims filling whole bytes, dim 0 splits
 * anywhere). The array is not empty. */
static bool packed_split_ok(int ndim, const int64_t *dims, unsigned bits, int64_t h,
                            uint64_t *row_bits) {
  unsigned __int128 suffix = bits;
  bool free_dim0 = false;
  for (int d = ndim - 1; d >= 1; d--) {
    suffix *= (uint64_t)dims[d];
    if (suffix % 8 == 0) free_dim0 = true;
  }
  *row_bits = (uint64_t)suffix; /* the whole array fits MAX_BYTES here */
  if (free_dim0 || h == 0 || h == dims[0]) return true;
  uint64_t g = *row_bits, e = 8;
  while (e) {
    uint64_t t = g % e;
    g = e;
    e = t;
  }
  return h % (int64_t)(8 / g) == 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  init_once();
  fuzz_reader r = {data, size};
  uint8_t v = fz_u8(&r);
  int dtype = v < 0xF0 ? v % DLRUN_DTYPE_COUNT : (int)(int32_t)fz_u32(&r);
  v = fz_u8(&r);
  int ndim = v < 0xE0 ? v % 6 : v < 0xF0 ? 6 + (v - 0xE0) * 2 : (int)(int8_t)fz_u8(&r);
  int n = ndim < 0 ? 0 : ndim > 64 ? 64 : ndim;
  int64_t *dims = malloc((size_t)n * sizeof *dims + 1); /* exactly ndim entries */
  for (int d = 0; d < n; d++) {
    v = fz_u8(&r);
    dims[d] = v < 0xE0 ? v % 9 : v < 0xF0 ? (int64_t)(v - 0xE0) * 61 + 9 : (int64_t)fz_u64(&r);
  }
  int layout = (int)(fz_u8(&r) % L_COUNT);
  v = fz_u8(&r);
  int len_mode = v < 0xD0 ? 0 : v < 0xF0 ? 1 : 2;
  int8_t delta = (int8_t)fz_u8(&r);
  uint64_t raw_len = len_mode == 2 ? fz_u64(&r) : 0;
  bool null_data = fz_u8(&r) >= 0xF8;
  int nreads = fz_u8(&r) % 4;
  fuzz_fault fault = fuzz_fault_read(&r);

  /* The byte size dlrun must compute, or why there is none. */
  const dlrun_dtype_info *info = dlrun_dtype_get((dlrun_dtype)dtype);
  bool shape_ok = info && ndim >= 0 && ndim <= DLRUN_MAX_NDIM;
  unsigned __int128 want = 0;
  int64_t elements = 0;
  if (shape_ok) {
    bool zero = false, overflow = false;
    unsigned __int128 count = 1;
    for (int d = 0; d < ndim; d++) {
      if (dims[d] < 0) shape_ok = false;
      else if (dims[d] == 0) zero = true;
      else if (!overflow && (count *= (uint64_t)dims[d]) > INT64_MAX) overflow = true;
    }
    if (zero) count = 0;
    else if (overflow) shape_ok = false;
    want = info->dl_bits < 8 ? packed_bytes(count, info->dl_bits) : count * info->size;
    if (want > INT64_MAX) shape_ok = false;
    elements = (int64_t)count;
  }
  uint64_t nbytes = len_mode == 0 ? (uint64_t)want
                    : len_mode == 1 ? (uint64_t)want + (uint64_t)(int64_t)delta
                                    : raw_len;
  /* Data buffers are real: keep valid arrays and lengths small. */
  if ((shape_ok && want > MAX_BYTES) || (nbytes > MAX_BYTES && nbytes == want)) {
    free(dims);
    return 0;
  }
  size_t buf_len = nbytes <= MAX_BYTES ? (size_t)nbytes : 16;
  unsigned char *buf = malloc(buf_len ? buf_len : 1);
  fuzz_fill(buf, buf_len, r.p, r.n);

  dlrun_sharding *s = layouts[layout];
  bool ok = shape_ok && nbytes == (uint64_t)want && !(null_data && nbytes > 0);
  if (ok && layout == L_SPLIT && (ndim < 1 || dims[0] % 2)) ok = false;
  bool packed = info && info->dl_bits < 8;
  uint64_t row_bits = 0;
  if (ok && layout == L_SPLIT && packed && elements > 0 &&
      !packed_split_ok(ndim, dims, info->dl_bits, dims[0] / 2, &row_bits))
    ok = false; /* the shards would split a byte */

  uint64_t before[3][2];
  for (int d = 0; d < 3; d++)
    for (int k = 0; k < 2; k++) before[d][k] = in_use(d, (dlrun_memory_kind)k);

  dlrun_array *a = (dlrun_array *)(uintptr_t)1;
  fuzz_fault_arm(&fault);
  dlrun_status st = dlrun_array_from_host(s, (dlrun_dtype)dtype, ndim, dims,
                                          null_data ? NULL : buf, nbytes, &a);
  bool injected = fuzz_fault_hit(&fault);
  fuzz_fault_disarm(&fault);
  if (injected && ok) {
    FUZZ_CHECK(st == DLRUN_ERR_RESOURCE_EXHAUSTED,
               "from_host with a failed allocation returned %d, not ResourceExhausted", (int)st);
    ok = false;
  }
  FUZZ_CHECK((st == DLRUN_OK) == ok,
             "from_host(dtype %d, ndim %d, %llu bytes, layout %d) returned %d, expected %s", dtype,
             ndim, (unsigned long long)nbytes, layout, (int)st, ok ? "success" : "failure");
  if (st) {
    FUZZ_CHECK_FAILED_WITH_MESSAGE(st);
    FUZZ_CHECK(a == NULL, "failed from_host left *out set");
    for (int d = 0; d < 3; d++)
      for (int k = 0; k < 2; k++)
        FUZZ_CHECK(in_use(d, (dlrun_memory_kind)k) == before[d][k],
                   "failed from_host left %llu bytes in use on device %d memory %d (%llu before)",
                   (unsigned long long)in_use(d, (dlrun_memory_kind)k), d, k,
                   (unsigned long long)before[d][k]);
    free(buf);
    free(dims);
    return 0;
  }

  size_t esize = info->size;
  FUZZ_CHECK(dlrun_array_dtype(a) == (dlrun_dtype)dtype, "dtype");
  FUZZ_CHECK(dlrun_array_ndim(a) == ndim, "ndim");
  for (int d = 0; d < ndim; d++) FUZZ_CHECK(dlrun_array_shape(a)[d] == dims[d], "dim %d", d);
  FUZZ_CHECK(dlrun_array_nbytes(a) == nbytes, "nbytes %llu, expected %llu",
             (unsigned long long)dlrun_array_nbytes(a), (unsigned long long)nbytes);
  FUZZ_CHECK(dlrun_array_size(a) == elements, "size %lld, expected %lld",
             (long long)dlrun_array_size(a), (long long)elements);
  FUZZ_CHECK(dlrun_array_sharding(a) == s, "sharding");

  unsigned char *got = malloc(nbytes + 1);
  st = dlrun_array_read(a, 0, nbytes, got);
  FUZZ_CHECK(st == DLRUN_OK, "reading back failed");
  FUZZ_CHECK(memcmp(got, buf, nbytes) == 0, "read back differs from the data");

  for (int k = 0; k < nreads; k++) {
    uint64_t off = fz_u8(&r) % 2 ? fz_u64(&r) : (nbytes ? fz_u32(&r) % (nbytes + 1) : 0);
    uint64_t len = fz_u8(&r) % 2 ? fz_u64(&r) : (nbytes ? fz_u32(&r) % (nbytes + 1) : 0);
    bool fits = off <= nbytes && len <= nbytes - off && off % esize == 0 && len % esize == 0;
    unsigned char *part = malloc(fits ? len + 1 : 1);
    st = dlrun_array_read(a, off, len, part);
    FUZZ_CHECK((st == DLRUN_OK) == fits, "read of %llu bytes at %llu of %llu: status %d",
               (unsigned long long)len, (unsigned long long)off, (unsigned long long)nbytes,
               (int)st);
    if (fits) FUZZ_CHECK(memcmp(part, buf + off, len) == 0, "read slice differs");
    else FUZZ_CHECK_FAILED_WITH_MESSAGE(st);
    free(part);
  }

  /* Each shard holds its block of the data. */
  size_t nshards = dlrun_array_shard_count(a);
  FUZZ_CHECK(nshards == dlrun_sharding_device_count(s), "shard count");
  for (size_t i = 0; i < nshards; i++) {
    dlrun_device *dev;
    int64_t lo[DLRUN_MAX_NDIM], hi[DLRUN_MAX_NDIM], replica;
    dlrun_array_shard_index(a, i, &dev, lo, hi, &replica);
    FUZZ_CHECK(dev == dlrun_sharding_device(s, i), "shard %zu device", i);
    uint64_t block = esize, count = 1;
    for (int d = 0; d < ndim; d++) {
      FUZZ_CHECK(0 <= lo[d] && lo[d] <= hi[d] && hi[d] <= dims[d], "shard %zu index", i);
      block *= (uint64_t)(hi[d] - lo[d]);
      count *= (uint64_t)(hi[d] - lo[d]);
    }
    /* A packed shard is its own packed array: a run of the data's bytes
     * (only dim 0 is ever split here). */
    uint64_t first_byte = 0;
    if (packed) {
      block = (uint64_t)packed_bytes(count, info->dl_bits);
      if (count && ndim > 0) {
        uint64_t rb;
        packed_split_ok(ndim, dims, info->dl_bits, lo[0], &rb);
        first_byte = (uint64_t)lo[0] * rb / 8;
      }
    }
    dlrun_array *sh = NULL;
    st = dlrun_array_shard_data(a, i, &sh);
    FUZZ_CHECK(st == DLRUN_OK, "shard_data %zu failed", i);
    FUZZ_CHECK(dlrun_array_nbytes(sh) == block, "shard %zu holds %llu bytes, its index %llu", i,
               (unsigned long long)dlrun_array_nbytes(sh), (unsigned long long)block);
    unsigned char *want_block = malloc(block + 1), *got_block = malloc(block + 1);
    if (packed) memcpy(want_block, buf + first_byte, block);
    else gather_box(buf, ndim, dims, esize, lo, hi, want_block);
    FUZZ_CHECK(dlrun_array_read(sh, 0, block, got_block) == DLRUN_OK, "reading shard %zu", i);
    FUZZ_CHECK(memcmp(got_block, want_block, block) == 0, "shard %zu differs from its block", i);
    free(want_block);
    free(got_block);
    dlrun_array_release(sh);
  }

  free(got);
  dlrun_array_release(a);
  for (int d = 0; d < 3; d++) {
    dlrun_device_synchronize(all_devs[d]);
    for (int k = 0; k < 2; k++)
      FUZZ_CHECK(in_use(d, (dlrun_memory_kind)k) == before[d][k],
                 "device %d memory %d: %llu bytes in use after release, %llu before", d, k,
                 (unsigned long long)in_use(d, (dlrun_memory_kind)k),
                 (unsigned long long)before[d][k]);
  }
  free(buf);
  free(dims);
  return 0;
}
