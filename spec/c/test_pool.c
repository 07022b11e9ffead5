/* Tests of the device memory pool (src/mem/pool.c): exact behaviour on small
 * layouts, a concurrent stress test, and long random traces checked against a
 * reference model that predicts every placement.
 *
 * DLRUN_POOL_TRACE_OPS sets the total number of random trace operations
 * (default 200000); use a small value under valgrind. */
#include <inttypes.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "core/status_impl.h"
#include "dlrun/status.h"
#include "mem/pool.h"

#define KIB 1024ull
#define MIB (1024ull * KIB)
#define GIB (1024ull * MIB)
#define NO_FIT UINT64_MAX

/* ---- Helpers ---- */

static uint64_t rng_next(uint64_t *s) { /* splitmix64 */
  uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

static uint64_t rng_below(uint64_t *s, uint64_t n) { return rng_next(s) % n; }

/* Log-uniform-ish in [1, 2^(max_bits+1)): a uniform bit length, then uniform. */
static uint64_t rng_size(uint64_t *s, unsigned max_bits) {
  uint64_t lo = 1ull << rng_below(s, max_bits + 1);
  return lo + rng_below(s, lo);
}

static uint64_t round256(uint64_t n) { return (n + 255) & ~255ull; }

static double now_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static dlrun_pool *make_pool(const char *label, uint64_t capacity) {
  dlrun_pool *pool = NULL;
  dlrun_status st = dlrun_pool_create(label, capacity, &pool);
  CHECK(st == DLRUN_OK && pool, "create: %s", dlrun_last_error());
  return pool;
}

static dlrun_block *must_alloc(dlrun_pool *pool, uint64_t size) {
  dlrun_block *b = NULL;
  dlrun_status st = dlrun_pool_alloc(pool, size, &b);
  CHECK(st == DLRUN_OK && b, "alloc %" PRIu64 ": %s", size, dlrun_last_error());
  return b;
}

static dlrun_pool_stats stats_of(dlrun_pool *pool) {
  dlrun_pool_stats s;
  dlrun_pool_get_stats(pool, &s);
  return s;
}

static void expect_consistent(dlrun_pool *pool) {
  dlrun_status st = dlrun_pool_check(pool);
  CHECK(st == DLRUN_OK, "pool check: %s", dlrun_last_error());
}

static int stats_equal(const dlrun_pool_stats *a, const dlrun_pool_stats *b) {
  return a->bytes_in_use == b->bytes_in_use && a->peak_bytes_in_use == b->peak_bytes_in_use &&
         a->bytes_limit == b->bytes_limit && a->bytes_reserved == b->bytes_reserved &&
         a->num_allocs == b->num_allocs && a->num_live_allocs == b->num_live_allocs &&
         a->largest_alloc_size == b->largest_alloc_size &&
         a->largest_free_block_bytes == b->largest_free_block_bytes &&
         a->free_bytes == b->free_bytes && a->requested_bytes_in_use == b->requested_bytes_in_use &&
         a->fragmentation == b->fragmentation;
}

static uint64_t off(const dlrun_block *b, const void *base) {
  return (uint64_t)((const unsigned char *)dlrun_block_ptr(b) - (const unsigned char *)base);
}

/* Stamps: a tag-derived word at the start of up to 32 granules spread over
 * the block, and its last granule. The model proves blocks disjoint; stamps
 * show the memory behind each block is its own and stays intact. */
static uint64_t stamp_step(uint64_t size) {
  uint64_t granules = size / 256;
  return granules <= 32 ? 256 : granules / 32 * 256;
}

static uint64_t stamp_word(uint64_t tag, uint64_t at) { return tag * 0x9E3779B97F4A7C15ull + at; }

static void stamp(dlrun_block *b, uint64_t tag) {
  unsigned char *p = dlrun_block_ptr(b);
  uint64_t size = dlrun_block_size(b), step = stamp_step(size);
  for (uint64_t at = 0; at < size; at += step) {
    uint64_t v = stamp_word(tag, at);
    memcpy(p + at, &v, sizeof v);
  }
  uint64_t v = stamp_word(tag, size - 256);
  memcpy(p + size - 256, &v, sizeof v);
}

static int stamp_intact(const dlrun_block *b, uint64_t tag) {
  const unsigned char *p = dlrun_block_ptr(b);
  uint64_t size = dlrun_block_size(b), step = stamp_step(size), v;
  for (uint64_t at = 0; at < size; at += step) {
    memcpy(&v, p + at, sizeof v);
    if (v != stamp_word(tag, at)) return 0;
  }
  memcpy(&v, p + size - 256, sizeof v);
  return v == stamp_word(tag, size - 256);
}

/* Virtual size of this process in bytes, or 0 where /proc is missing. */
static uint64_t vm_size(void) {
  FILE *f = fopen("/proc/self/statm", "r");
  if (!f) return 0;
  unsigned long long pages = 0;
  int ok = fscanf(f, "%llu", &pages) == 1;
  fclose(f);
  return ok ? pages * (uint64_t)sysconf(_SC_PAGESIZE) : 0;
}

/* ---- Exact behaviour ---- */

static void test_create(void) {
  dlrun_pool *pool = (dlrun_pool *)1;
  CHECK(dlrun_pool_create("P", 255, &pool) == DLRUN_ERR_VALUE, "255 accepted");
  CHECK(pool == NULL, "out not cleared");
  CHECK_STR_CONTAINS(dlrun_last_error(), "at least 256 bytes, got 255");
  CHECK(dlrun_pool_create("P", 0, &pool) == DLRUN_ERR_VALUE, "0 accepted");
  CHECK(dlrun_pool_create(NULL, 1024, &pool) == DLRUN_ERR_VALUE, "NULL label accepted");

  pool = make_pool("P", 1000);
  if (!pool) return;
  dlrun_pool_stats s = stats_of(pool);
  CHECK(s.bytes_limit == 768, "limit %" PRIu64, s.bytes_limit);
  CHECK(s.free_bytes == 768 && s.largest_free_block_bytes == 768, "free %" PRIu64, s.free_bytes);
  CHECK(s.bytes_in_use == 0 && s.bytes_reserved == 0 && s.num_allocs == 0, "fresh stats");
  CHECK(s.fragmentation == 0.0, "fragmentation %g", s.fragmentation);
  CHECK(dlrun_pool_free_chunk_count(pool) == 1, "free chunks");
  expect_consistent(pool);
  dlrun_pool_free(pool, NULL); /* no-op */
  dlrun_pool_destroy(pool);
  dlrun_pool_destroy(NULL); /* no-op */
}

static void test_alignment(void) {
  static const uint64_t req[] = {1, 255, 256, 257, 1000, 4097, 65536, 100000, 511, 512};
  enum { N = sizeof req / sizeof req[0] };
  dlrun_pool *pool = make_pool("P", 1 * MIB);
  if (!pool) return;
  dlrun_block *b[N];
  uint64_t in_use = 0, requested = 0;
  for (int i = 0; i < N; i++) {
    b[i] = must_alloc(pool, req[i]);
    if (!b[i]) return;
    in_use += round256(req[i]);
    requested += req[i];
    CHECK(dlrun_block_size(b[i]) == round256(req[i]), "size of %" PRIu64 " is %" PRIu64, req[i],
          dlrun_block_size(b[i]));
    CHECK((uintptr_t)dlrun_block_ptr(b[i]) % 256 == 0, "ptr %p", dlrun_block_ptr(b[i]));
    CHECK(off(b[i], dlrun_block_ptr(b[0])) % 256 == 0, "offset not aligned");
  }
  dlrun_pool_stats s = stats_of(pool);
  CHECK(s.bytes_in_use == in_use, "in use %" PRIu64 " != %" PRIu64, s.bytes_in_use, in_use);
  CHECK(s.requested_bytes_in_use == requested, "requested %" PRIu64, s.requested_bytes_in_use);
  expect_consistent(pool);
  dlrun_pool_destroy(pool); /* with live blocks: must not leak */
}

static void test_stats(void) {
  dlrun_pool *pool = make_pool("P", 1 * MIB);
  if (!pool) return;
  dlrun_block *a = must_alloc(pool, 1000), *b = must_alloc(pool, 3000), *c = must_alloc(pool, 100);
  if (!a || !b || !c) return;
  dlrun_pool_stats s = stats_of(pool);
  CHECK(s.bytes_in_use == 4352 && s.peak_bytes_in_use == 4352, "in use %" PRIu64, s.bytes_in_use);
  CHECK(s.bytes_limit == 1 * MIB && s.bytes_reserved == 4352, "reserved %" PRIu64,
        s.bytes_reserved);
  CHECK(s.num_allocs == 3 && s.num_live_allocs == 3, "allocs %" PRIu64, s.num_allocs);
  CHECK(s.largest_alloc_size == 3072, "largest alloc %" PRIu64, s.largest_alloc_size);
  CHECK(s.largest_free_block_bytes == MIB - 4352 && s.free_bytes == MIB - 4352, "free");
  CHECK(s.requested_bytes_in_use == 4100 && s.fragmentation == 0.0, "requested/fragmentation");

  dlrun_pool_free(pool, b);
  s = stats_of(pool);
  CHECK(s.bytes_in_use == 1280 && s.peak_bytes_in_use == 4352, "in use %" PRIu64, s.bytes_in_use);
  CHECK(s.num_allocs == 3 && s.num_live_allocs == 2 && s.bytes_reserved == 4352, "counts");
  CHECK(s.free_bytes == MIB - 1280 && s.largest_free_block_bytes == MIB - 4352, "free");
  CHECK(s.requested_bytes_in_use == 1100, "requested %" PRIu64, s.requested_bytes_in_use);
  double frag = 1.0 - (double)(MIB - 4352) / (double)(MIB - 1280);
  CHECK(s.fragmentation == frag, "fragmentation %g != %g", s.fragmentation, frag);
  CHECK(dlrun_pool_free_chunk_count(pool) == 2, "free chunks");
  expect_consistent(pool);

  /* The hole is reused; the high-water mark of the range does not move. */
  dlrun_block *d = must_alloc(pool, 2048);
  if (!d) return;
  CHECK(off(d, dlrun_block_ptr(a)) == 1024, "reuse offset %" PRIu64, off(d, dlrun_block_ptr(a)));
  CHECK(stats_of(pool).bytes_reserved == 4352, "reserved moved");
  dlrun_pool_free(pool, a);
  dlrun_pool_free(pool, c);
  dlrun_pool_free(pool, d);
  s = stats_of(pool);
  CHECK(s.bytes_in_use == 0 && s.num_live_allocs == 0 && s.num_allocs == 4, "empty");
  CHECK(s.peak_bytes_in_use == 4352 && s.bytes_reserved == 4352, "high-water marks");
  CHECK(s.largest_free_block_bytes == MIB && s.requested_bytes_in_use == 0, "all free");
  CHECK(dlrun_pool_free_chunk_count(pool) == 1, "free chunks");
  expect_consistent(pool);
  dlrun_pool_destroy(pool);
}

static void test_zero(void) {
  dlrun_pool *pool = make_pool("SimDevice(id=3)", 1 * MIB);
  if (!pool) return;
  dlrun_block *b = (dlrun_block *)1;
  CHECK(dlrun_pool_alloc(pool, 0, &b) == DLRUN_ERR_VALUE, "status");
  CHECK(b == NULL, "out_block not cleared");
  CHECK(strcmp(dlrun_last_error(), "cannot allocate 0 bytes on SimDevice(id=3)") == 0,
        "message: %s", dlrun_last_error());
  CHECK(stats_of(pool).num_allocs == 0 && stats_of(pool).bytes_reserved == 0, "stats moved");
  dlrun_pool_destroy(pool);
}

static void test_oom_message(void) {
  dlrun_pool *pool = make_pool("SimDevice(id=3)", 1 * MIB);
  if (!pool) return;
  dlrun_block *a = must_alloc(pool, 512 * KIB), *b = must_alloc(pool, 256 * KIB);
  if (!a || !b) return;
  void *base = dlrun_block_ptr(a);
  dlrun_pool_free(pool, a); /* free: 512 KiB at 0 and 256 KiB at the end */
  dlrun_pool_stats before = stats_of(pool);
  dlrun_block *c = (dlrun_block *)1;
  CHECK(dlrun_pool_alloc(pool, 600000, &c) == DLRUN_ERR_RESOURCE_EXHAUSTED, "status");
  CHECK(c == NULL, "out_block not cleared");
  const char *msg = dlrun_last_error();
  CHECK_STR_CONTAINS(msg, "SimDevice(id=3)");
  CHECK_STR_CONTAINS(msg, "600000 bytes");
  CHECK_STR_CONTAINS(msg, "262144 bytes in use");
  CHECK_STR_CONTAINS(msg, "1048576 byte limit");
  CHECK_STR_CONTAINS(msg, "largest free block is 524288 bytes");
  CHECK(strcmp(msg,
               "Out of memory on SimDevice(id=3) while allocating 600000 bytes (585.94KiB): "
               "262144 bytes in use of a 1048576 byte limit (256.00KiB of 1.00MiB); the "
               "largest free block is 524288 bytes (512.00KiB) and 524288 bytes (512.00KiB) are "
               "reserved but unallocated.") == 0,
        "message: %s", msg);
  CHECK(strchr(msg, '\n') == NULL, "message is not one line");
  dlrun_pool_stats after = stats_of(pool);
  CHECK(stats_equal(&before, &after), "a failed alloc changed the stats");
  CHECK(dlrun_pool_free_chunk_count(pool) == 2, "free chunks");
  expect_consistent(pool);
  /* What does fit still fits. */
  dlrun_block *d = must_alloc(pool, 512 * KIB);
  CHECK(d && off(d, base) == 0, "placement");
  dlrun_pool_destroy(pool);
}

static void test_too_large(void) {
  dlrun_pool *pool = make_pool("P", 1 * MIB);
  if (!pool) return;
  dlrun_block *b = NULL;
  CHECK(dlrun_pool_alloc(pool, MIB + 1, &b) == DLRUN_ERR_RESOURCE_EXHAUSTED, "status");
  CHECK_STR_CONTAINS(dlrun_last_error(),
                     "while allocating 1048577 bytes (1.00MiB): 0 bytes in use");
  CHECK_STR_CONTAINS(dlrun_last_error(), "the largest free block is 1048576 bytes (1.00MiB) and "
                                         "0 bytes (0B) are reserved but unallocated.");
  CHECK(stats_of(pool).bytes_reserved == 0, "reserved");
  b = must_alloc(pool, MIB); /* exactly the capacity fits */
  CHECK(dlrun_pool_free_chunk_count(pool) == 0, "free chunks of a full pool");
  dlrun_block *c = NULL;
  CHECK(dlrun_pool_alloc(pool, 1, &c) == DLRUN_ERR_RESOURCE_EXHAUSTED, "status when full");
  CHECK_STR_CONTAINS(dlrun_last_error(), "1048576 bytes in use of a 1048576 byte limit");
  CHECK_STR_CONTAINS(dlrun_last_error(), "the largest free block is 0 bytes (0B) and 0 bytes "
                                         "(0B) are reserved but unallocated.");
  expect_consistent(pool);
  dlrun_pool_free(pool, b);
  CHECK(dlrun_pool_free_chunk_count(pool) == 1, "free chunks");
  dlrun_pool_destroy(pool);
}

static void test_huge(void) {
  static const uint64_t huge[] = {UINT64_MAX,       UINT64_MAX - 1, UINT64_MAX - 255,
                                  UINT64_MAX - 256, 1ull << 63,     (1ull << 63) + 1};
  dlrun_pool *pool = make_pool("P", 1 * MIB);
  if (!pool) return;
  dlrun_block *keep = must_alloc(pool, 1000);
  dlrun_pool_stats before = stats_of(pool);
  for (size_t i = 0; i < sizeof huge / sizeof huge[0]; i++) {
    dlrun_block *b = NULL;
    char want[64];
    snprintf(want, sizeof want, "while allocating %" PRIu64 " bytes", huge[i]);
    CHECK(dlrun_pool_alloc(pool, huge[i], &b) == DLRUN_ERR_RESOURCE_EXHAUSTED && !b,
          "%" PRIu64 " accepted", huge[i]);
    CHECK_STR_CONTAINS(dlrun_last_error(), want);
    CHECK_STR_CONTAINS(dlrun_last_error(), "1024 bytes in use of a 1048576 byte limit");
  }
  dlrun_pool_stats after = stats_of(pool);
  CHECK(stats_equal(&before, &after), "stats changed");
  expect_consistent(pool);
  dlrun_pool_free(pool, keep);
  dlrun_pool_destroy(pool);

  /* A pool as large as the type allows: rounding a request up to it must not
   * wrap, and reserving it fails cleanly. */
  pool = make_pool("Huge", UINT64_MAX);
  if (!pool) return;
  CHECK(stats_of(pool).bytes_limit == (UINT64_MAX & ~255ull), "limit");
  dlrun_block *b = NULL;
  CHECK(dlrun_pool_alloc(pool, UINT64_MAX, &b) == DLRUN_ERR_RESOURCE_EXHAUSTED && !b, "max");
  CHECK_STR_CONTAINS(dlrun_last_error(),
                     "Out of memory on Huge while allocating 18446744073709551615 bytes");
  CHECK(dlrun_pool_alloc(pool, UINT64_MAX - 300, &b) == DLRUN_ERR_RESOURCE_EXHAUSTED && !b,
        "max-300");
  CHECK_STR_CONTAINS(dlrun_last_error(), "cannot reserve");
  CHECK_STR_CONTAINS(dlrun_last_error(), "Huge");
  CHECK(stats_of(pool).bytes_reserved == 0 && stats_of(pool).num_allocs == 0, "stats moved");
  expect_consistent(pool);
  dlrun_pool_destroy(pool);
}

static void test_coalescing(void) {
  static const int orders[6][3] = {{0, 1, 2}, {0, 2, 1}, {1, 0, 2},
                                   {1, 2, 0}, {2, 0, 1}, {2, 1, 0}};
  dlrun_pool *pool = make_pool("P", 4 * KIB);
  if (!pool) return;
  for (int o = 0; o < 6; o++) {
    dlrun_block *b[4];
    for (int i = 0; i < 4; i++) b[i] = must_alloc(pool, 1 * KIB); /* fills the pool */
    if (!b[0] || !b[1] || !b[2] || !b[3]) return;
    for (int i = 0; i < 4; i++)
      CHECK(off(b[i], dlrun_block_ptr(b[0])) == (uint64_t)i * KIB, "order %d block %d", o, i);
    for (int k = 0; k < 3; k++) {
      dlrun_pool_free(pool, b[orders[o][k]]);
      expect_consistent(pool);
    }
    CHECK(dlrun_pool_free_chunk_count(pool) == 1, "order %d: %zu free chunks", o,
          dlrun_pool_free_chunk_count(pool));
    CHECK(stats_of(pool).largest_free_block_bytes == 3 * KIB, "order %d: merged size", o);
    dlrun_pool_free(pool, b[3]);
    CHECK(dlrun_pool_free_chunk_count(pool) == 1, "all free");
    CHECK(stats_of(pool).largest_free_block_bytes == 4 * KIB, "whole range");
    expect_consistent(pool);
  }
  dlrun_pool_destroy(pool);
}

static void test_best_fit(void) {
  dlrun_pool *pool = make_pool("P", 1 * MIB);
  if (!pool) return;
  /* h1 1K | g | h4 4K | g | h2 2K | g | h2b 2K | g | tail */
  dlrun_block *h1 = must_alloc(pool, 1 * KIB), *g1 = must_alloc(pool, 256);
  dlrun_block *h4 = must_alloc(pool, 4 * KIB), *g2 = must_alloc(pool, 256);
  dlrun_block *h2 = must_alloc(pool, 2 * KIB), *g3 = must_alloc(pool, 256);
  dlrun_block *h2b = must_alloc(pool, 2 * KIB), *g4 = must_alloc(pool, 256);
  if (!h1 || !h4 || !h2 || !h2b || !g4) return;
  void *base = dlrun_block_ptr(h1);
  uint64_t o1 = off(h1, base), o4 = off(h4, base), o2 = off(h2, base), o2b = off(h2b, base);
  dlrun_pool_free(pool, h1);
  dlrun_pool_free(pool, h4);
  dlrun_pool_free(pool, h2);
  CHECK(dlrun_pool_free_chunk_count(pool) == 4, "holes");

  dlrun_block *x = must_alloc(pool, 2 * KIB);
  CHECK(x && off(x, base) == o2, "2K request at %" PRIu64 ", want %" PRIu64, off(x, base), o2);
  dlrun_pool_free(pool, x);

  dlrun_pool_free(pool, h2b); /* two 2K holes now: the lower one wins */
  x = must_alloc(pool, 2 * KIB - 100);
  CHECK(x && off(x, base) == o2, "tie at %" PRIu64 ", want %" PRIu64, off(x, base), o2);
  dlrun_block *y = must_alloc(pool, 1500);
  CHECK(y && off(y, base) == o2b, "1500 at %" PRIu64 ", want %" PRIu64, off(y, base), o2b);
  dlrun_block *z = must_alloc(pool, 800);
  CHECK(z && off(z, base) == o1, "800 at %" PRIu64 ", want %" PRIu64, off(z, base), o1);
  dlrun_block *w = must_alloc(pool, 3 * KIB); /* splits the 4K hole, front first */
  CHECK(w && off(w, base) == o4, "3K at %" PRIu64 ", want %" PRIu64, off(w, base), o4);
  dlrun_block *v = must_alloc(pool, 1 * KIB);
  CHECK(v && off(v, base) == o4 + 3 * KIB, "1K at %" PRIu64, off(v, base));
  expect_consistent(pool);
  (void)g1, (void)g2, (void)g3;
  dlrun_pool_destroy(pool);
}

static void test_lazy(void) {
  enum { N = 1000 };
  static dlrun_pool *pools[N];
  uint64_t vm0 = vm_size();
  double t0 = now_seconds();
  int made = 0;
  for (; made < N; made++) {
    if (dlrun_pool_create("Lazy", 1 * GIB, &pools[made]) != DLRUN_OK) break;
  }
  double elapsed = now_seconds() - t0;
  uint64_t vm1 = vm_size();
  CHECK(made == N, "created %d: %s", made, dlrun_last_error());
  CHECK(elapsed < 2.0, "creating %d pools took %.3fs", N, elapsed);
  if (vm0 && vm1) CHECK(vm1 - vm0 < 256 * MIB, "virtual size grew by %" PRIu64 " bytes", vm1 - vm0);
  for (int i = 0; i < made; i += 97) {
    dlrun_pool_stats s = stats_of(pools[i]);
    CHECK(s.bytes_reserved == 0 && s.largest_free_block_bytes == 1 * GIB, "pool %d", i);
    CHECK(dlrun_pool_free_chunk_count(pools[i]) == 1, "pool %d free chunks", i);
    expect_consistent(pools[i]);
  }
  if (made > 0) {
    dlrun_block *b = must_alloc(pools[0], 1);
    uint64_t vm2 = vm_size();
    if (vm1 && vm2) CHECK(vm2 - vm1 >= 1 * GIB, "first alloc mapped only %" PRIu64, vm2 - vm1);
    CHECK(stats_of(pools[0]).bytes_reserved == 256, "reserved %" PRIu64,
          stats_of(pools[0]).bytes_reserved);
    dlrun_pool_free(pools[0], b);
  }
  for (int i = 0; i < made; i++) dlrun_pool_destroy(pools[i]);
  uint64_t vm3 = vm_size();
  if (vm0 && vm3) CHECK(vm3 < vm0 + 256 * MIB, "range not unmapped on destroy");
}

static void test_fragmentation(void) {
  dlrun_pool *pool = make_pool("P", 8 * KIB);
  if (!pool) return;
  dlrun_block *a = must_alloc(pool, 1 * KIB), *b = must_alloc(pool, 1 * KIB);
  dlrun_block *c = must_alloc(pool, 2 * KIB), *d = must_alloc(pool, 4 * KIB);
  if (!a || !b || !c || !d) return;
  dlrun_pool_stats s = stats_of(pool);
  CHECK(s.free_bytes == 0 && s.largest_free_block_bytes == 0 && s.fragmentation == 0.0, "full");
  dlrun_pool_free(pool, a);
  dlrun_pool_free(pool, c); /* free: 1K and 2K apart */
  s = stats_of(pool);
  CHECK(s.free_bytes == 3 * KIB && s.largest_free_block_bytes == 2 * KIB, "free");
  double want = 1.0 - 2.0 / 3.0;
  CHECK(s.fragmentation > want - 1e-12 && s.fragmentation < want + 1e-12, "fragmentation %.17g",
        s.fragmentation);
  dlrun_pool_free(pool, b); /* 4K contiguous: no fragmentation */
  s = stats_of(pool);
  CHECK(s.largest_free_block_bytes == 4 * KIB && s.fragmentation == 0.0, "merged");
  dlrun_pool_free(pool, d);
  CHECK(stats_of(pool).fragmentation == 0.0, "empty");
  dlrun_pool_destroy(pool);
}

/* ---- Threads ---- */

enum { THREADS = 64, THREAD_OPS = 1500, THREAD_LIVE = 24 };

typedef struct worker {
  dlrun_pool *pool;
  int id;
  uint64_t allocs, ooms, errors, corrupt, bad_message, check_failures;
} worker;

static void *worker_main(void *arg) {
  worker *w = arg;
  uint64_t rng = 0xC0FFEEull + (uint64_t)w->id;
  dlrun_block *live[THREAD_LIVE];
  uint64_t tags[THREAD_LIVE];
  int n = 0;
  for (int op = 0; op < THREAD_OPS; op++) {
    if (n < THREAD_LIVE && (n == 0 || rng_below(&rng, 100) < 55)) {
      uint64_t size = rng_size(&rng, 16), tag = ((uint64_t)w->id << 32) | (uint64_t)op;
      dlrun_block *b = NULL;
      dlrun_status st = dlrun_pool_alloc(w->pool, size, &b);
      if (st == DLRUN_OK) {
        stamp(b, tag);
        live[n] = b;
        tags[n++] = tag;
        w->allocs++;
      } else if (st == DLRUN_ERR_RESOURCE_EXHAUSTED) {
        /* The message is per thread: it must be this thread's request. */
        char want[96];
        snprintf(want, sizeof want,
                 "Out of memory on ThreadPool while allocating %" PRIu64 " bytes", size);
        if (strncmp(dlrun_last_error(), want, strlen(want)) != 0) w->bad_message++;
        w->ooms++;
      } else {
        w->errors++;
      }
    } else if (n > 0) {
      int i = (int)rng_below(&rng, (uint64_t)n);
      if (!stamp_intact(live[i], tags[i])) w->corrupt++;
      dlrun_pool_free(w->pool, live[i]);
      live[i] = live[--n];
      tags[i] = tags[n];
    }
    if (op % 250 == 0 && dlrun_pool_check(w->pool) != DLRUN_OK) w->check_failures++;
  }
  while (n > 0) {
    n--;
    if (!stamp_intact(live[n], tags[n])) w->corrupt++;
    dlrun_pool_free(w->pool, live[n]);
  }
  return NULL;
}

static void test_threads(void) {
  dlrun_pool *pool = make_pool("ThreadPool", 4 * MIB);
  if (!pool) return;
  static worker w[THREADS];
  pthread_t tid[THREADS];
  int started = 0;
  for (; started < THREADS; started++) {
    w[started] = (worker){.pool = pool, .id = started};
    if (pthread_create(&tid[started], NULL, worker_main, &w[started]) != 0) break;
  }
  CHECK(started == THREADS, "started %d threads", started);
  uint64_t allocs = 0, ooms = 0;
  for (int i = 0; i < started; i++) {
    pthread_join(tid[i], NULL);
    allocs += w[i].allocs;
    ooms += w[i].ooms;
    CHECK(w[i].errors == 0 && w[i].corrupt == 0 && w[i].check_failures == 0,
          "thread %d: %" PRIu64 " errors, %" PRIu64 " corrupt, %" PRIu64 " failed checks", i,
          w[i].errors, w[i].corrupt, w[i].check_failures);
    CHECK(w[i].bad_message == 0, "thread %d saw another thread's message", i);
  }
  dlrun_pool_stats s = stats_of(pool);
  CHECK(s.num_allocs == allocs, "num_allocs %" PRIu64 " != %" PRIu64, s.num_allocs, allocs);
  CHECK(s.bytes_in_use == 0 && s.num_live_allocs == 0 && s.requested_bytes_in_use == 0,
        "leftovers");
  CHECK(s.peak_bytes_in_use <= s.bytes_limit && s.bytes_reserved <= s.bytes_limit, "high-water");
  CHECK(s.largest_free_block_bytes == 4 * MIB, "largest free %" PRIu64, s.largest_free_block_bytes);
  CHECK(dlrun_pool_free_chunk_count(pool) == 1, "free chunks");
  expect_consistent(pool);
  printf("  threads: %d x %d ops, %" PRIu64 " allocs, %" PRIu64 " out of memory\n", started,
         THREAD_OPS, allocs, ooms);
  dlrun_pool_destroy(pool);
}

/* ---- Random traces against a reference model ---- */

typedef struct live_block {
  uint64_t offset, size, tag;
  dlrun_block *block;
} live_block;

/* The model: live blocks sorted by offset, and the statistics they imply. */
typedef struct model {
  uint64_t capacity;
  live_block *v;
  size_t n;
  uint64_t in_use, requested, num_allocs, peak, reserved, largest_alloc;
} model;

/* Where best fit must put `size` bytes: the start of the smallest gap between
 * live blocks that fits, lowest address on ties; NO_FIT if none. Also reports
 * the largest gap and the number of gaps. */
static uint64_t model_fit(const model *m, uint64_t size, uint64_t *largest, size_t *gaps) {
  uint64_t best = NO_FIT, best_size = UINT64_MAX, end = 0;
  *largest = 0;
  *gaps = 0;
  for (size_t i = 0; i <= m->n; i++) {
    uint64_t start = i < m->n ? m->v[i].offset : m->capacity, gap = start - end;
    if (gap > 0) {
      (*gaps)++;
      if (gap > *largest) *largest = gap;
      if (gap >= size && gap < best_size) best = end, best_size = gap;
    }
    if (i < m->n) end = m->v[i].offset + m->v[i].size;
  }
  return best;
}

static size_t model_position(const model *m, uint64_t offset) {
  size_t lo = 0, hi = m->n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (m->v[mid].offset < offset)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

/* Insert a block; returns 0 if it overlaps a neighbour. */
static int model_insert(model *m, live_block lb, uint64_t requested) {
  size_t i = model_position(m, lb.offset);
  if (i > 0 && m->v[i - 1].offset + m->v[i - 1].size > lb.offset) return 0;
  if (i < m->n && lb.offset + lb.size > m->v[i].offset) return 0;
  memmove(&m->v[i + 1], &m->v[i], (m->n - i) * sizeof *m->v);
  m->v[i] = lb;
  m->n++;
  m->in_use += lb.size;
  m->requested += requested;
  m->num_allocs++;
  if (m->in_use > m->peak) m->peak = m->in_use;
  if (lb.offset + lb.size > m->reserved) m->reserved = lb.offset + lb.size;
  if (lb.size > m->largest_alloc) m->largest_alloc = lb.size;
  return 1;
}

static void model_remove(model *m, size_t i, uint64_t requested) {
  m->in_use -= m->v[i].size;
  m->requested -= requested;
  memmove(&m->v[i], &m->v[i + 1], (m->n - i - 1) * sizeof *m->v);
  m->n--;
}

static int stats_match_model(dlrun_pool *pool, const model *m) {
  dlrun_pool_stats s = stats_of(pool);
  int ok = s.bytes_in_use == m->in_use && s.num_live_allocs == m->n &&
           s.num_allocs == m->num_allocs && s.peak_bytes_in_use == m->peak &&
           s.requested_bytes_in_use == m->requested && s.bytes_reserved == m->reserved &&
           s.largest_alloc_size == m->largest_alloc && s.free_bytes == m->capacity - m->in_use;
  CHECK(ok,
        "stats differ from the model: in use %" PRIu64 "/%" PRIu64 ", live %" PRIu64
        "/%zu, "
        "allocs %" PRIu64 "/%" PRIu64 ", peak %" PRIu64 "/%" PRIu64,
        s.bytes_in_use, m->in_use, s.num_live_allocs, m->n, s.num_allocs, m->num_allocs,
        s.peak_bytes_in_use, m->peak);
  return ok;
}

/* Full comparison: invariants, largest free block and free chunk count. */
static int deep_check(dlrun_pool *pool, const model *m) {
  uint64_t largest;
  size_t gaps;
  model_fit(m, 1, &largest, &gaps);
  dlrun_status st = dlrun_pool_check(pool);
  CHECK(st == DLRUN_OK, "pool check: %s", dlrun_last_error());
  uint64_t got = stats_of(pool).largest_free_block_bytes;
  CHECK(got == largest, "largest free %" PRIu64 ", model %" PRIu64, got, largest);
  CHECK(dlrun_pool_free_chunk_count(pool) == gaps, "free chunks %zu, model %zu",
        dlrun_pool_free_chunk_count(pool), gaps);
  return st == DLRUN_OK && got == largest && dlrun_pool_free_chunk_count(pool) == gaps;
}

typedef struct trace_counts {
  uint64_t allocs, frees, ooms, max_live;
} trace_counts;

/* One allocation step; returns 0 on the first disagreement with the model. */
static int trace_alloc(dlrun_pool *pool, model *m, uint64_t *req_of, unsigned char **base,
                       uint64_t *rng, trace_counts *tc) {
  uint64_t size = rng_below(rng, 64) ? rng_size(rng, 21) : 1 + rng_below(rng, m->capacity / 8);
  uint64_t rounded = round256(size), largest;
  size_t gaps;
  uint64_t want = model_fit(m, rounded, &largest, &gaps);
  dlrun_block *b = NULL;
  dlrun_status st = dlrun_pool_alloc(pool, size, &b);
  if (want == NO_FIT) {
    CHECK(st == DLRUN_ERR_RESOURCE_EXHAUSTED, "%" PRIu64 " bytes fit nowhere yet alloc gave %d",
          size, (int)st);
    CHECK(stats_of(pool).largest_free_block_bytes < rounded, "out of memory with a fitting block");
    CHECK_STR_CONTAINS(dlrun_last_error(), "Out of memory on Trace while allocating");
    tc->ooms++;
    return st == DLRUN_ERR_RESOURCE_EXHAUSTED;
  }
  CHECK(st == DLRUN_OK, "alloc %" PRIu64 " (model: fits at %" PRIu64 "): %s", size, want,
        dlrun_last_error());
  if (st != DLRUN_OK) return 0;
  unsigned char *p = dlrun_block_ptr(b);
  if (!*base) *base = p - want;
  uint64_t got = (uint64_t)(p - *base);
  CHECK((uintptr_t)p % 256 == 0 && got % 256 == 0, "misaligned block at %" PRIu64, got);
  CHECK(got == want, "placed at %" PRIu64 ", best fit is %" PRIu64, got, want);
  CHECK(dlrun_block_size(b) == rounded, "size %" PRIu64 " for %" PRIu64, dlrun_block_size(b), size);
  live_block lb = {got, dlrun_block_size(b), tc->allocs, b};
  if (!model_insert(m, lb, size)) {
    CHECK(0, "block at %" PRIu64 " overlaps a live block", got);
    dlrun_pool_free(pool, b);
    return 0;
  }
  req_of[lb.tag] = size;
  stamp(b, lb.tag);
  tc->allocs++;
  if (m->n > tc->max_live) tc->max_live = m->n;
  return got == want && dlrun_block_size(b) == rounded;
}

static int trace_free(dlrun_pool *pool, model *m, size_t i, const uint64_t *req_of) {
  live_block lb = m->v[i];
  int intact = stamp_intact(lb.block, lb.tag);
  CHECK(intact, "block at %" PRIu64 " was overwritten", lb.offset);
  dlrun_pool_free(pool, lb.block);
  model_remove(m, i, req_of[lb.tag]);
  return intact;
}

static void run_trace(uint64_t seed, uint64_t ops, uint64_t capacity) {
  dlrun_pool *pool = make_pool("Trace", capacity);
  if (!pool) return;
  model m = {.capacity = capacity};
  uint64_t max_live = capacity / 256 < ops ? capacity / 256 : ops;
  m.v = malloc((size_t)(max_live + 1) * sizeof *m.v);
  uint64_t *req_of = malloc((size_t)(ops + 1) * sizeof *req_of); /* requested size by tag */
  if (!m.v || !req_of) {
    CHECK(0, "test out of host memory");
    free(m.v), free(req_of), dlrun_pool_destroy(pool);
    return;
  }
  uint64_t rng = seed;
  unsigned char *base = NULL;
  trace_counts tc = {0, 0, 0, 0};
  int ok = 1;
  for (uint64_t op = 0; op < ops && ok; op++) {
    /* Alternate filling and draining phases so the pool runs full often. */
    uint64_t alloc_pct = (op / 4000) % 2 ? 35 : 65;
    if (m.n == 0 || rng_below(&rng, 100) < alloc_pct) {
      ok = trace_alloc(pool, &m, req_of, &base, &rng, &tc);
    } else {
      ok = trace_free(pool, &m, (size_t)rng_below(&rng, m.n), req_of);
      tc.frees++;
    }
    ok = ok && stats_match_model(pool, &m);
    if (ok && op % 128 == 0) ok = deep_check(pool, &m);
  }
  if (ok) ok = deep_check(pool, &m);
  while (m.n > 0) trace_free(pool, &m, m.n - 1, req_of);
  dlrun_pool_stats s = stats_of(pool);
  CHECK(dlrun_pool_free_chunk_count(pool) == 1, "free chunks at the end: %zu",
        dlrun_pool_free_chunk_count(pool));
  CHECK(s.largest_free_block_bytes == capacity && s.bytes_in_use == 0 && s.num_live_allocs == 0,
        "not all free at the end");
  expect_consistent(pool);
  printf("  trace seed %" PRIu64 ": %" PRIu64 " ops, %" PRIu64 " allocs, %" PRIu64
         " frees, %" PRIu64 " out of memory, up to %" PRIu64 " live, peak %" PRIu64 " bytes\n",
         seed, ops, tc.allocs, tc.frees, tc.ooms, tc.max_live, s.peak_bytes_in_use);
  free(m.v);
  free(req_of);
  dlrun_pool_destroy(pool);
}

static void test_traces(void) {
  static const uint64_t seeds[] = {1, 42, 20240611, 0xDEADBEEF};
  enum { SEEDS = sizeof seeds / sizeof seeds[0] };
  uint64_t total = 200000;
  const char *env = getenv("DLRUN_POOL_TRACE_OPS");
  if (env && *env) total = strtoull(env, NULL, 10);
  for (int i = 0; i < SEEDS; i++) {
    char name[96];
    snprintf(name, sizeof name, "random trace against the model (seed %" PRIu64 ")", seeds[i]);
    TEST(name) run_trace(seeds[i], total / SEEDS, 256 * MIB);
  }
}

/* ---- Segments: a range made of pieces no block may straddle ---- */

static dlrun_status seg_reserve(void *ctx, uint64_t size, void **base) {
  (void)ctx;
  return dlrun_map_range(size, true, base);
}

static void seg_release(void *ctx, void *base, uint64_t size) {
  (void)ctx;
  dlrun_unmap_range(base, size);
}

static dlrun_pool *make_segmented(const char *label, uint64_t capacity, uint64_t segment) {
  dlrun_range_source src = {seg_reserve, seg_release, NULL, NULL, NULL, segment};
  dlrun_pool *pool = NULL;
  dlrun_status st = dlrun_pool_create_with(label, capacity, &src, &pool);
  CHECK(st == DLRUN_OK && pool, "create: %s", dlrun_last_error());
  return pool;
}

/* The chunks, as "offset+size" (free) or "offset+size*" (allocated). */
static int describe_chunk(void *ctx, uint64_t offset, uint64_t size, uint64_t requested,
                          bool allocated, void *tag) {
  (void)requested;
  (void)tag;
  char *out = ctx;
  size_t len = strlen(out);
  snprintf(out + len, 512 - len, "%s%" PRIu64 "+%" PRIu64 "%s", len ? " " : "", offset, size,
           allocated ? "*" : "");
  return 0;
}

static const char *layout(dlrun_pool *pool, char out[512]) {
  out[0] = '\0';
  dlrun_pool_visit(pool, describe_chunk, out);
  return out;
}

static void test_segment_create(void) {
  dlrun_range_source src = {seg_reserve, seg_release, NULL, NULL, NULL, 1000};
  dlrun_pool *pool = (dlrun_pool *)1;
  CHECK(dlrun_pool_create_with("S", 8 * KIB, &src, &pool) == DLRUN_ERR_VALUE && !pool,
        "segment 1000 accepted");
  CHECK(strcmp(dlrun_last_error(),
               "the segment of pool S must be a multiple of 256 bytes, got 1000") == 0,
        "message: %s", dlrun_last_error());
  /* A segment of at least the capacity is none: one chunk, any size fits. */
  pool = make_segmented("S", 8 * KIB, 8 * KIB);
  if (!pool) return;
  CHECK(dlrun_pool_free_chunk_count(pool) == 1, "chunks");
  dlrun_block *b = must_alloc(pool, 8 * KIB);
  CHECK(b && dlrun_block_size(b) == 8 * KIB, "whole");
  dlrun_pool_destroy(pool);
}

static void test_segment_layout(void) {
  char text[512];
  dlrun_pool *pool = make_segmented("S", 10 * KIB, 4 * KIB); /* 4 + 4 + 2 KiB */
  if (!pool) return;
  CHECK(dlrun_pool_free_chunk_count(pool) == 3, "unmapped chunks");
  CHECK(strcmp(layout(pool, text), "0+4096 4096+4096 8192+2048") == 0, "unmapped: %s", text);
  dlrun_pool_stats s = stats_of(pool);
  CHECK(s.largest_free_block_bytes == 4096 && s.fragmentation == 0.0 && s.free_bytes == 10240,
        "unmapped stats: largest %" PRIu64 " frag %g", s.largest_free_block_bytes,
        s.fragmentation);
  dlrun_block *a = must_alloc(pool, 3 * KIB);
  if (!a) return;
  void *base = dlrun_block_ptr(a);
  CHECK(strcmp(layout(pool, text), "0+3072* 3072+1024 4096+4096 8192+2048") == 0, "%s", text);
  /* Best fit is the 2 KiB last segment, not the 1 KiB gap joined to the next one. */
  dlrun_block *b = must_alloc(pool, 2 * KIB), *c = must_alloc(pool, 4 * KIB);
  if (!b || !c) return;
  CHECK(off(b, base) == 8192 && off(c, base) == 4096, "b at %" PRIu64 ", c at %" PRIu64,
        off(b, base), off(c, base));
  expect_consistent(pool);
  /* 2 KiB more would fit in no segment although 1 KiB is free... */
  dlrun_block *d = NULL;
  CHECK(dlrun_pool_alloc(pool, 2 * KIB, &d) == DLRUN_ERR_RESOURCE_EXHAUSTED && !d, "2 KiB fit");
  dlrun_pool_free(pool, c);
  dlrun_pool_free(pool, a);
  /* ...and the 1 KiB gap and the freed segment stay apart. */
  CHECK(strcmp(layout(pool, text), "0+4096 4096+4096 8192+2048*") == 0, "%s", text);
  dlrun_pool_free(pool, b);
  CHECK(dlrun_pool_free_chunk_count(pool) == 3, "chunks after freeing all");
  CHECK(strcmp(layout(pool, text), "0+4096 4096+4096 8192+2048") == 0, "%s", text);
  expect_consistent(pool);
  dlrun_pool_destroy(pool);
}

/* Freeing in any order merges up to a boundary, never across it. */
static void test_segment_coalescing(void) {
  static const int orders[6][3] = {{0, 1, 2}, {0, 2, 1}, {1, 0, 2},
                                   {1, 2, 0}, {2, 0, 1}, {2, 1, 0}};
  char text[512];
  for (int o = 0; o < 6; o++) {
    dlrun_pool *pool = make_segmented("S", 8 * KIB, 4 * KIB);
    if (!pool) return;
    /* Three blocks that fill segment 0 exactly, then one in segment 1. */
    dlrun_block *b[3] = {must_alloc(pool, 1 * KIB), must_alloc(pool, 2 * KIB),
                         must_alloc(pool, 1 * KIB)};
    dlrun_block *next = must_alloc(pool, 1 * KIB);
    if (!b[0] || !b[1] || !b[2] || !next) return;
    void *base = dlrun_block_ptr(b[0]);
    CHECK(off(b[2], base) == 3072 && off(next, base) == 4096, "placement");
    dlrun_pool_free(pool, next);
    for (int i = 0; i < 3; i++) {
      dlrun_pool_free(pool, b[orders[o][i]]);
      expect_consistent(pool);
    }
    CHECK(strcmp(layout(pool, text), "0+4096 4096+4096") == 0, "order %d: %s", o, text);
    dlrun_pool_destroy(pool);
  }
}

static void test_segment_oversize(void) {
  dlrun_pool *pool = make_segmented("OpenclDevice(id=0)", 10 * KIB, 4 * KIB);
  if (!pool) return;
  dlrun_block *b = (dlrun_block *)1;
  CHECK(dlrun_pool_alloc(pool, 4 * KIB + 1, &b) == DLRUN_ERR_RESOURCE_EXHAUSTED && !b, "status");
  CHECK(strcmp(dlrun_last_error(),
               "Out of memory on OpenclDevice(id=0) while allocating 4097 bytes (4.00KiB): the "
               "request exceeds the largest block OpenclDevice(id=0) can hold (4096 bytes, "
               "4.00KiB: the device's maximum allocation).") == 0,
        "message: %s", dlrun_last_error());
  /* Larger than the capacity too: the segment is what no setting can change. */
  CHECK(dlrun_pool_alloc(pool, 1 * MIB, &b) == DLRUN_ERR_RESOURCE_EXHAUSTED, "status");
  CHECK_STR_CONTAINS(dlrun_last_error(), "allocating 1048576 bytes (1.00MiB): the request "
                                         "exceeds the largest block");
  CHECK(stats_of(pool).bytes_reserved == 0 && stats_of(pool).num_allocs == 0, "nothing mapped");
  b = must_alloc(pool, 4 * KIB); /* exactly a segment fits */
  CHECK(b && dlrun_block_size(b) == 4096, "a whole segment");
  dlrun_pool_destroy(pool);
}

/* The advice's capacity: a block that would cross a boundary starts after it. */
static void test_segment_advice(void) {
  dlrun_pool *pool = make_segmented("S", 20 * KIB, 8 * KIB);
  if (!pool || dlrun_pool_set_hint(pool, "device_memory") != DLRUN_OK) return;
  dlrun_block *a = must_alloc(pool, 8 * KIB), *b = must_alloc(pool, 8 * KIB);
  dlrun_block *c = must_alloc(pool, 1 * KIB), *d = NULL;
  if (!a || !b || !c) return;
  CHECK(dlrun_pool_alloc(pool, 8 * KIB, &d) == DLRUN_ERR_RESOURCE_EXHAUSTED, "status");
  CHECK_STR_CONTAINS(dlrun_last_error(), "; raise device_memory to at least 32768 bytes "
                                         "(32.00KiB).");
  dlrun_pool_destroy(pool);
}

static void test_segment_stats(void) {
  dlrun_pool *pool = make_segmented("S", 16 * KIB, 4 * KIB);
  if (!pool) return;
  dlrun_block *a = must_alloc(pool, 3 * KIB), *b = must_alloc(pool, 4 * KIB);
  dlrun_block *c = must_alloc(pool, 4 * KIB), *d = must_alloc(pool, 4 * KIB);
  if (!a || !b || !c || !d) return;
  dlrun_pool_free(pool, b);
  dlrun_pool_free(pool, d);
  /* Free: 1 KiB at 3 KiB, whole segments at 4 and 12 KiB: nothing lost. */
  dlrun_pool_stats s = stats_of(pool);
  CHECK(s.free_bytes == 9 * KIB && s.largest_free_block_bytes == 4 * KIB &&
            s.fragmentation == 0.0,
        "free %" PRIu64 " largest %" PRIu64 " frag %g", s.free_bytes,
        s.largest_free_block_bytes, s.fragmentation);
  dlrun_pool_destroy(pool);
  /* 2 KiB blocks at 0, 2 and 14 KiB, whole segments at 4 and 8 KiB; free
   * those at 2 and 14 KiB: 4 KiB free in all, 2 in one block. */
  pool = make_segmented("S", 16 * KIB, 4 * KIB);
  if (!pool) return;
  dlrun_block *blocks[6];
  const uint64_t sizes[6] = {2 * KIB, 2 * KIB, 4 * KIB, 4 * KIB, 2 * KIB, 2 * KIB};
  for (int i = 0; i < 6; i++)
    if (!(blocks[i] = must_alloc(pool, sizes[i]))) return;
  CHECK(off(blocks[1], dlrun_block_ptr(blocks[0])) == 2 * KIB &&
            off(blocks[5], dlrun_block_ptr(blocks[0])) == 14 * KIB,
        "placement");
  dlrun_pool_free(pool, blocks[1]);
  dlrun_pool_free(pool, blocks[5]);
  s = stats_of(pool);
  CHECK(s.free_bytes == 4 * KIB && s.largest_free_block_bytes == 2 * KIB &&
            s.fragmentation == 0.5,
        "free %" PRIu64 " largest %" PRIu64 " frag %g", s.free_bytes,
        s.largest_free_block_bytes, s.fragmentation);
  CHECK(dlrun_pool_fits(pool, 2 * KIB) && !dlrun_pool_fits(pool, 2 * KIB + 1), "fits");
  expect_consistent(pool);
  dlrun_pool_destroy(pool);
}

typedef struct seg_check {
  uint64_t segment, largest_free;
  int straddles;
} seg_check;

static int check_segment_chunk(void *ctx, uint64_t offset, uint64_t size, uint64_t requested,
                               bool allocated, void *tag) {
  (void)requested;
  (void)tag;
  seg_check *k = ctx;
  if (offset / k->segment != (offset + size - 1) / k->segment) k->straddles++;
  if (!allocated && size > k->largest_free) k->largest_free = size;
  return 0;
}

/* Random allocations and frees: no block ever straddles a boundary, and a
 * request fails only when no free chunk could hold it. */
static void run_segment_trace(uint64_t seed, int ops) {
  const uint64_t segment = 64 * KIB, capacity = 1 * MIB + 40 * KIB;
  dlrun_pool *pool = make_segmented("S", capacity, segment);
  if (!pool) return;
  enum { LIVE = 256 };
  dlrun_block *live[LIVE] = {0};
  uint64_t rng = seed;
  int straddled = 0, wrong_oom = 0, oom = 0, allocs = 0;
  for (int op = 0; op < ops; op++) {
    size_t slot = (size_t)rng_below(&rng, LIVE);
    if (live[slot]) {
      dlrun_pool_free(pool, live[slot]);
      live[slot] = NULL;
      continue;
    }
    uint64_t size = rng_size(&rng, 16); /* up to 128 KiB: some exceed the segment */
    seg_check k = {segment, 0, 0};
    dlrun_pool_visit(pool, check_segment_chunk, &k);
    straddled += k.straddles;
    dlrun_status st = dlrun_pool_alloc(pool, size, &live[slot]);
    if (st == DLRUN_OK) {
      allocs++;
    } else {
      oom++;
      if (size <= segment && round256(size) <= k.largest_free) wrong_oom++;
    }
    if (op % 500 == 0) expect_consistent(pool);
  }
  seg_check k = {segment, 0, 0};
  dlrun_pool_visit(pool, check_segment_chunk, &k);
  straddled += k.straddles;
  CHECK(straddled == 0, "%d chunks straddled a boundary", straddled);
  CHECK(wrong_oom == 0, "%d requests failed with a free chunk large enough", wrong_oom);
  CHECK(allocs > ops / 4 && oom > 0, "allocs %d, failures %d", allocs, oom);
  expect_consistent(pool);
  for (size_t i = 0; i < LIVE; i++) dlrun_pool_free(pool, live[i]);
  CHECK(dlrun_pool_free_chunk_count(pool) == 17, "chunks after freeing all: %zu",
        dlrun_pool_free_chunk_count(pool));
  dlrun_pool_stats s = stats_of(pool);
  CHECK(s.largest_free_block_bytes == segment && s.fragmentation == 0.0, "empty stats");
  dlrun_pool_destroy(pool);
}

/* Each body runs inside TEST and may return early on a failed precondition
 * (a `break` inside TEST would skip its accounting). */
int main(void) {
  double t0 = now_seconds();
  TEST("create validates capacity and rounds it down to 256") test_create();
  TEST("blocks are 256-aligned and sizes round up to 256") test_alignment();
  TEST("stats after alloc and free") test_stats();
  TEST("size 0 is a ValueError naming the pool") test_zero();
  TEST("out-of-memory message names the pool, request and pool state") test_oom_message();
  TEST("a request larger than the capacity is out of memory, without mapping") test_too_large();
  TEST("requests near UINT64_MAX do not wrap") test_huge();
  TEST("freeing three neighbours in any order leaves one free chunk") test_coalescing();
  TEST("best fit takes the smallest hole that fits, lowest address on ties") test_best_fit();
  TEST("pools reserve their range only at the first allocation") test_lazy();
  TEST("fragmentation of a known layout") test_fragmentation();
  TEST("64 threads allocating and freeing on one pool") test_threads();
  TEST("segments: creation checks the segment; one of at least the capacity is none")
    test_segment_create();
  TEST("segments: one free chunk per segment, best fit within segments") test_segment_layout();
  TEST("segments: freeing in any order merges up to a boundary, not across")
    test_segment_coalescing();
  TEST("segments: a request larger than a segment names the maximum allocation")
    test_segment_oversize();
  TEST("segments: out-of-memory advice counts a block that cannot straddle")
    test_segment_advice();
  TEST("segments: largest free block and fragmentation") test_segment_stats();
  for (uint64_t seed = 1; seed <= 4; seed++) {
    char name[96];
    snprintf(name, sizeof name, "segments: random trace never straddles (seed %" PRIu64 ")", seed);
    TEST(name) run_segment_trace(seed, 20000);
  }
  test_traces();
  printf("  pool tests took %.2fs\n", now_seconds() - t0);
  return check_summary("pool");
}
