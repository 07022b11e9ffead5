/* The platform conformance suite, in the spirit of IREE's hal/cts: the
 * same cases run against every platform present, through the device
 * layer's slots and the public API, asserting values:
 *   cpu, sim (private device memory, then again with DLRUN_SIM_MEMORY=shared
 *   in the same process: sim reads the variable when a device is made),
 *   testnative (spec/c/modules/native_platform.c: a queue and events of its
 *   own, loaded from beside this test and registered here), and opencl and
 *   cuda when their modules load and probe available (cuda on the driver
 *   double of the tests where it is built; skipped with the reason otherwise).
 * A module platform with one device (a machine with one GPU) runs every
 * case on that device; the parts that need a second device of it are
 * named, each on a line of its own, as skipped with the reason.
 * Cases: allocate and free; fills of every element size and sequences of
 * several dtypes; N-d box copies between every pair of (platform, memory
 * kind) and host memory; event order, with a gate (a held testnative
 * queue) proving that waiting work has not run; cross-platform waits that
 * block no worker thread; injected failures surfacing from
 * block_until_ready, read and export; DLPack device codes both ways;
 * commit/decommit. One line per case and platform. */
#include <signal.h>
#include <stdio.h>

#include "conformance.h"
#include "device/dlpack_codes.h"
#include "device/memory_place.h"

#define MAX_PLATFORMS 5

/* A runtime with devices of several platforms, two of each (one of a
 * module platform that has only one). */
typedef struct suite {
  dlrun_runtime *rt;
  bool sim_shared;
  size_t n;
  const char *names[MAX_PLATFORMS];
  size_t ndev[MAX_PLATFORMS];
} suite;

static const char *label(const suite *s, const char *pl) {
  return s->sim_shared && strcmp(pl, "sim") == 0 ? "sim, shared memory" : pl;
}

static dlrun_device *dev_of(const suite *s, const char *pl, size_t i) {
  return dlrun_local_device_get(s->rt, pl, i);
}

static size_t ndev_of(const suite *s, const char *pl) {
  for (size_t p = 0; p < s->n; p++)
    if (strcmp(s->names[p], pl) == 0) return s->ndev[p];
  return 0;
}

/* pl's last device: its second, or its only one. */
static dlrun_device *last_dev(const suite *s, const char *pl) {
  return dev_of(s, pl, ndev_of(s, pl) - 1);
}

/* The part `what` of the case just run needs two devices of pl: with one,
 * it was skipped, which a line of its own says; with two it ran within that
 * case, which a TAP comment says (scripts/gpu-check.sh lists both). True
 * when skipped. */
static bool skip_one_device(const suite *s, const char *pl, const char *what) {
  if (ndev_of(s, pl) >= 2) {
    printf("# ran on 2 devices: %s [%s], in the case above\n", what, label(s, pl));
    return false;
  }
  TEST(cts_name("%s [%s] # SKIP 1 device, 2 needed", what, label(s, pl))) {}
  return true;
}

static const dlrun_platform *platform_of(const char *pl) {
  return dlrun_platform_find(pl, strlen(pl));
}

/* A failure message names the device and the operation. */
#define CHECK_FAILED(st, dev, what)                                                          \
  do {                                                                                     \
    dlrun_status st_ = (st);                                                               \
    CHECK(st_ == DLRUN_ERR_RUNTIME, "status %d (%s), expected a RuntimeError", (int)st_,   \
          st_ ? dlrun_last_error() : "ok");                                                \
    if (st_) {                                                                             \
      CHECK_STR_CONTAINS(dlrun_last_error(), dlrun_device_name(dev));                      \
      CHECK_STR_CONTAINS(dlrun_last_error(), what " failed");                              \
    }                                                                                      \
  } while (0)

/* ---- allocate and free ---- */

static void case_alloc(const suite *s, const char *pl) {
  TEST(cts_name("allocate and free, both memory kinds [%s]", label(s, pl))) {
    static const uint64_t sizes[] = {0, 1, 255, 256, 4097, 1 << 20};
    enum { NS = sizeof sizes / sizeof *sizes };
    for (size_t i = 0; i < ndev_of(s, pl); i++)
      for (int k = 0; k < DLRUN_MEM_KIND_COUNT; k++) {
        dlrun_device *d = dev_of(s, pl, i);
        dlrun_memory_kind kind = (dlrun_memory_kind)k;
        cts_mem m[NS];
        uint64_t total = 0;
        for (size_t j = 0; j < NS; j++) {
          dlrun_status st = cts_mem_alloc(&m[j], d, kind, sizes[j]);
          CHECK(st == DLRUN_OK, "%s: %llu bytes: %s", cts_mem_name(&m[j]),
                (unsigned long long)sizes[j], dlrun_last_error());
          if (st) continue;
          total += sizes[j];
          CHECK((m[j].data != NULL) == (sizes[j] != 0), "%s: %llu bytes at %p",
                cts_mem_name(&m[j]), (unsigned long long)sizes[j], (void *)m[j].data);
          CHECK(!sizes[j] || dlrun_memory_owns(d, kind, m[j].data, sizes[j]),
                "%s does not own its own %llu bytes", cts_mem_name(&m[j]),
                (unsigned long long)sizes[j]);
          for (size_t o = 0; o < j && sizes[j]; o++) /* no two blocks overlap */
            CHECK(!sizes[o] || m[o].data + sizes[o] <= m[j].data ||
                      m[j].data + sizes[j] <= m[o].data,
                  "blocks %zu and %zu overlap", o, j);
        }
        dlrun_memory_stats stats;
        CHECK(dlrun_device_memory_stats(d, kind, &stats) == DLRUN_OK, "%s", dlrun_last_error());
        CHECK(stats.bytes_in_use >= total, "%s: %llu bytes in use, %llu allocated",
              cts_mem_name(&m[0]), (unsigned long long)stats.bytes_in_use,
              (unsigned long long)total);
        for (size_t j = 0; j < NS; j++) cts_mem_free(&m[j]);
        dlrun_device_memory_stats(d, kind, &stats);
        CHECK(stats.bytes_in_use == 0, "%s %s: %llu bytes in use after freeing all",
              dlrun_device_name(d), dlrun_memory_kind_name(kind),
              (unsigned long long)stats.bytes_in_use);
      }
  }
}

/* ---- fills ---- */

#define FILL_BYTES 1024

/* Run fill f over [off, off + len) of m through the slot; read all of m. */
static dlrun_status fill_and_read(const cts_mem *m, uint64_t off, uint64_t len,
                                  const dlrun_fill *f, unsigned char *got) {
  dlrun_event done;
  dlrun_status st = m->dev->platform->fill(m->dev, m->kind, m->data + off, len, f, NULL, 0,
                                           &done);
  if (!st) st = dlrun_event_wait(done);
  return st ? st : cts_mem_read(m, got);
}

static void fill_element_sizes(const cts_mem *m) {
  static const size_t esizes[] = {1, 2, 4, 8, 16};
  unsigned char bg[FILL_BYTES], want[FILL_BYTES], got[FILL_BYTES];
  memset(bg, 0xEE, sizeof bg);
  for (size_t e = 0; e < sizeof esizes / sizeof *esizes; e++) {
    size_t es = esizes[e];
    dlrun_fill f = {.esize = es};
    for (size_t b = 0; b < es; b++) f.pattern[b] = (unsigned char)(0x11 * (b + 1) + es);
    uint64_t off = 64, len = 37 * es;
    memcpy(want, bg, sizeof want);
    for (uint64_t i = 0; i < len; i++) want[off + i] = f.pattern[i % es];
    dlrun_status st = cts_mem_write(m, bg);
    if (!st) st = fill_and_read(m, off, len, &f, got);
    CHECK(st == DLRUN_OK, "%s: %zu-byte fill: %s", cts_mem_name(m), es, dlrun_last_error());
    long at = st ? -1 : cts_diff(want, got, sizeof got);
    CHECK(at < 0, "%s: %zu-byte fill: byte %ld is %02x, expected %02x", cts_mem_name(m), es, at,
          got[at < 0 ? 0 : at], want[at < 0 ? 0 : at]);
  }
}

typedef struct sequence {
  dlrun_dtype dtype;
  bool integral;
  int64_t start_i, step_i;
  double start_f, step_f;
} sequence;

static void fill_sequences(const cts_mem *m) {
  static const sequence seqs[] = {
      {DLRUN_INT8, true, -50, 3, 0, 0},
      {DLRUN_UINT8, true, 7, 5, 0, 0},
      {DLRUN_INT16, true, -1000, 37, 0, 0},
      {DLRUN_INT32, true, -100000, 12345, 0, 0},
      {DLRUN_INT64, true, -((int64_t)1 << 40), (int64_t)1 << 33, 0, 0},
      {DLRUN_FLOAT16, false, 0, 0, -8.5, 0.25},
      {DLRUN_BFLOAT16, false, 0, 0, -8.5, 0.25},
      {DLRUN_FLOAT32, false, 0, 0, 1.5, -0.125},
      {DLRUN_FLOAT64, false, 0, 0, 0.1, 0.3},
  };
  enum { N = 33, FIRST = 4, OFF = 32 };
  unsigned char bg[FILL_BYTES], want[FILL_BYTES], got[FILL_BYTES];
  memset(bg, 0xEE, sizeof bg);
  for (size_t q = 0; q < sizeof seqs / sizeof *seqs; q++) {
    const sequence *sq = &seqs[q];
    size_t es = dlrun_dtype_get(sq->dtype)->size;
    dlrun_fill f = {.sequence = true, .esize = es, .dtype = sq->dtype, .integral = sq->integral,
                    .first = FIRST};
    if (sq->integral) {
      f.start = (dlrun_scalar){.kind = DLRUN_SCALAR_INT, .i = sq->start_i};
      f.step = (dlrun_scalar){.kind = DLRUN_SCALAR_INT, .i = sq->step_i};
    } else {
      f.start = (dlrun_scalar){.kind = DLRUN_SCALAR_FLOAT, .re = sq->start_f};
      f.step = (dlrun_scalar){.kind = DLRUN_SCALAR_FLOAT, .re = sq->step_f};
    }
    memcpy(want, bg, sizeof want);
    for (int64_t i = 0; i < N; i++) {
      dlrun_scalar v = sq->integral
          ? (dlrun_scalar){.kind = DLRUN_SCALAR_INT, .i = sq->start_i + (FIRST + i) * sq->step_i}
          : (dlrun_scalar){.kind = DLRUN_SCALAR_FLOAT,
                           .re = sq->start_f + (double)(FIRST + i) * sq->step_f};
      CHECK(dlrun_dtype_store(sq->dtype, want + OFF + i * (int64_t)es, &v) == DLRUN_OK, "%s",
            dlrun_last_error());
    }
    dlrun_status st = cts_mem_write(m, bg);
    if (!st) st = fill_and_read(m, OFF, N * es, &f, got);
    const char *name = dlrun_dtype_get(sq->dtype)->name;
    CHECK(st == DLRUN_OK, "%s: %s sequence: %s", cts_mem_name(m), name, dlrun_last_error());
    long at = st ? -1 : cts_diff(want, got, sizeof got);
    CHECK(at < 0, "%s: %s sequence: byte %ld is %02x, expected %02x", cts_mem_name(m), name, at,
          got[at < 0 ? 0 : at], want[at < 0 ? 0 : at]);
  }
}

/* The same through the array API (planned fills, read back). */
static void fill_arrays(dlrun_device *d, dlrun_memory_kind kind) {
  dlrun_sharding *sh = NULL;
  dlrun_array *a = NULL, *b = NULL;
  dlrun_scalar start = {.kind = DLRUN_SCALAR_FLOAT, .re = 0.5},
               step = {.kind = DLRUN_SCALAR_FLOAT, .re = 2};
  dlrun_status st = dlrun_single_device_sharding_create(d, kind, &sh);
  if (!st) st = dlrun_array_arange(sh, DLRUN_FLOAT32, &start, &step, 1001, &a);
  float got[1001];
  if (!st) st = dlrun_array_read(a, 0, sizeof got, got);
  CHECK(st == DLRUN_OK, "%s: arange: %s", dlrun_device_name(d), dlrun_last_error());
  for (int i = 0; !st && i < 1001; i++)
    if (got[i] != 0.5f + 2.0f * (float)i) {
      CHECK(0, "%s: arange element %d is %g", dlrun_device_name(d), i, got[i]);
      break;
    }
  CHECK(cts_full(d, kind, 999, -7, &b) == DLRUN_OK && cts_holds(b, 999, -7),
        "%s: full(-7): %s", dlrun_device_name(d), dlrun_last_error());
  dlrun_array_release(b);
  dlrun_array_release(a);
  dlrun_sharding_release(sh);
}

static void case_fills(const suite *s, const char *pl) {
  TEST(cts_name("fills of 1, 2, 4, 8 and 16-byte elements and sequences [%s]", label(s, pl))) {
    for (size_t i = 0; i < ndev_of(s, pl); i++)
      for (int k = 0; k < DLRUN_MEM_KIND_COUNT; k++) {
        cts_mem m;
        if (cts_mem_alloc(&m, dev_of(s, pl, i), (dlrun_memory_kind)k, FILL_BYTES)) {
          CHECK(0, "alloc: %s", dlrun_last_error());
          continue;
        }
        fill_element_sizes(&m);
        fill_sequences(&m);
        cts_mem_free(&m);
        fill_arrays(dev_of(s, pl, i), (dlrun_memory_kind)k);
      }
  }
}

/* ---- N-d box copies ---- */

/* Rank r's box, source block and destination block (global coordinates). */
static const struct shape {
  int ndim;
  int64_t lo[4], hi[4], src_origin[4], src_dims[4], dst_origin[4], dst_dims[4];
} shapes[4] = {
    {1, {3}, {26}, {1}, {29}, {0}, {31}},
    {2, {2, 1}, {7, 8}, {1, 0}, {7, 9}, {1, 0}, {8, 9}},
    {3, {0, 2, 1}, {3, 5, 6}, {0, 1, 0}, {3, 5, 7}, {0, 2, 0}, {3, 4, 7}},
    {4, {0, 1, 1, 0}, {2, 3, 4, 3}, {0, 0, 0, 0}, {2, 3, 5, 3}, {0, 1, 0, 0}, {3, 2, 4, 5}},
};
/* Element sizes of each rank's two variants. */
static const size_t variant_esize[4][2] = {{1, 16}, {2, 4}, {8, 1}, {4, 16}};
#define COPY_BYTES 8192

/* Variant 0: a row-padded source into a row-major destination; variant 1:
 * a source with negative strides (the first axis; the last too from rank
 * 3) into a column-major destination. */
static void geometry(int r, int v, cts_block *src, cts_block *dst) {
  const struct shape *sh = &shapes[r];
  *src = (cts_block){.ndim = sh->ndim};
  *dst = (cts_block){.ndim = sh->ndim};
  memcpy(src->origin, sh->src_origin, sizeof src->origin);
  memcpy(src->dims, sh->src_dims, sizeof src->dims);
  memcpy(dst->origin, sh->dst_origin, sizeof dst->origin);
  memcpy(dst->dims, sh->dst_dims, sizeof dst->dims);
  if (v == 0) {
    cts_row_major(src, 1, 0);
    cts_row_major(dst, 0, 0);
  } else {
    cts_row_major(src, 0, 1u | (sh->ndim >= 3 ? 1u << (sh->ndim - 1) : 0));
    cts_column_major(dst);
  }
}

/* The memories of a platform (its devices, both kinds) or of the host:
 * one to read from and one to write to each. */
typedef struct end_set {
  size_t n;
  cts_mem src[4], dst[4];
} end_set;

static bool ends_alloc(const suite *s, const char *pl, end_set *e) {
  *e = (end_set){0};
  for (size_t i = 0; i < (pl ? ndev_of(s, pl) : 1u); i++)
    for (int k = 0; k < (pl ? DLRUN_MEM_KIND_COUNT : 1); k++, e->n++) {
      dlrun_device *d = pl ? dev_of(s, pl, i) : NULL;
      if (cts_mem_alloc(&e->src[e->n], d, (dlrun_memory_kind)k, COPY_BYTES) ||
          cts_mem_alloc(&e->dst[e->n], d, (dlrun_memory_kind)k, COPY_BYTES))
        return false;
    }
  return true;
}

static void ends_free(end_set *e) {
  for (size_t i = 0; i < 4; i++) {
    cts_mem_free(&e->src[i]);
    cts_mem_free(&e->dst[i]);
  }
}

/* Copy every rank and variant from src to dst; false on the first mismatch. */
static bool copy_all_boxes(const cts_mem *src, const cts_mem *dst, const unsigned char *src_bytes) {
  unsigned char bg[COPY_BYTES], want[COPY_BYTES], got[COPY_BYTES];
  memset(bg, 0xEE, sizeof bg);
  for (int r = 0; r < 4; r++)
    for (int v = 0; v < 2; v++) {
      cts_block sb, db;
      geometry(r, v, &sb, &db);
      size_t es = variant_esize[r][v];
      const struct shape *sh = &shapes[r];
      memcpy(want, bg, sizeof want);
      cts_reference_copy(es, sh->ndim, sh->lo, sh->hi, want, &db, src_bytes, &sb);
      dlrun_box_end de = cts_end(dst, es, db.first, db.origin, db.strides);
      dlrun_box_end se = cts_end(src, es, sb.first, sb.origin, sb.strides);
      dlrun_status st = cts_mem_write(dst, bg);
      if (!st) st = dlrun_copy_sync(es, sh->ndim, sh->lo, sh->hi, &de, &se);
      if (!st) st = cts_mem_read(dst, got);
      CHECK(st == DLRUN_OK, "%s -> %s, rank %d variant %d: %s", cts_mem_name(src),
            cts_mem_name(dst), sh->ndim, v, dlrun_last_error());
      long at = st ? -1 : cts_diff(want, got, sizeof got);
      CHECK(at < 0, "%s -> %s, rank %d variant %d (%zu-byte elements): byte %ld is %02x, "
            "expected %02x", cts_mem_name(src), cts_mem_name(dst), sh->ndim, v, es, at,
            got[at < 0 ? 0 : at], want[at < 0 ? 0 : at]);
      if (st || at >= 0) return false;
    }
  return true;
}

/* Every memory of `from` (NULL: the host) into every memory of `to`. */
static void case_box_copies(const suite *s, const char *from, const char *to) {
  TEST(cts_name("N-d box copies, ranks 1-4, padded, negative and column-major strides "
                "[%s -> %s]", from ? label(s, from) : "host", to ? label(s, to) : "host")) {
    end_set a, b;
    bool ok = ends_alloc(s, from, &a) && ends_alloc(s, to, &b);
    CHECK(ok, "alloc: %s", dlrun_last_error());
    static unsigned char src_bytes[COPY_BYTES];
    for (size_t i = 0; ok && i < a.n; i++) {
      for (size_t j = 0; j < COPY_BYTES; j++) src_bytes[j] = (unsigned char)(j * 131 + 7 + i * 17);
      CHECK(cts_mem_write(&a.src[i], src_bytes) == DLRUN_OK, "%s", dlrun_last_error());
      for (size_t j = 0; ok && j < b.n; j++) ok = copy_all_boxes(&a.src[i], &b.dst[j], src_bytes);
    }
    ends_free(&a);
    ends_free(&b);
  }
  if (from && to && strcmp(from, to) == 0)
    skip_one_device(s, from, "N-d box copies between two devices of the platform");
}

/* ---- event order ---- */

/* Fill A (1), copy A to B after it, fill A (2), copy A to C: in one queue,
 * in order, so B holds the first fill and C the second; points complete in
 * order. With `gate` (testnative), the queue is held while the work is
 * queued: nothing runs until it is let go. */
static void in_order(dlrun_device *d, bool gate) {
  enum { N = 256 };
  cts_mem a, b, c;
  dlrun_status st = cts_mem_alloc(&a, d, DLRUN_MEM_DEVICE, N);
  if (!st) st = cts_mem_alloc(&b, d, DLRUN_MEM_DEVICE, N);
  if (!st) st = cts_mem_alloc(&c, d, DLRUN_MEM_DEVICE, N);
  CHECK(st == DLRUN_OK, "alloc: %s", dlrun_last_error());
  if (st) return;
  const dlrun_platform *pl = d->platform;
  dlrun_fill f1 = {.esize = 1, .pattern = {0x11}}, f2 = {.esize = 1, .pattern = {0x22}};
  int64_t hi[1] = {N};
  dlrun_copy_piece p1 = {.src = cts_end(&a, 1, 0, cts_zero, cts_one), .lo = cts_zero, .hi = hi};
  dlrun_copy_piece p2 = p1;
  dlrun_copy_op op1 = {.esize = 1, .ndim = 1, .dst = cts_end(&b, 1, 0, cts_zero, cts_one),
                       .npieces = 1, .pieces = &p1};
  dlrun_copy_op op2 = {.esize = 1, .ndim = 1, .dst = cts_end(&c, 1, 0, cts_zero, cts_one),
                       .npieces = 1, .pieces = &p2};
  dlrun_event ev[5];
  unsigned ran = gate ? cts_ran(d) : 0;
  if (gate) cts_hold(d, 1);
  st = pl->fill(d, DLRUN_MEM_DEVICE, a.data, N, &f1, NULL, 0, &ev[0]);
  if (!st) st = pl->copy_box(d, &op1, &ev[0], 1, &ev[1]);
  if (!st) st = pl->fill(d, DLRUN_MEM_DEVICE, a.data, N, &f2, NULL, 0, &ev[2]);
  if (!st) st = pl->copy_box(d, &op2, NULL, 0, &ev[3]);
  if (!st) st = pl->record(d, NULL, 0, &ev[4]);
  CHECK(st == DLRUN_OK, "%s: enqueue: %s", dlrun_device_name(d), dlrun_last_error());
  if (gate) {
    usleep(20 * 1000);
    bool none = true;
    for (int i = 0; i < 5 && !st; i++) none &= !dlrun_event_done(ev[i]);
    CHECK(!st && none && cts_ran(d) == ran, "work ran on a held queue (%u commands)",
          cts_ran(d) - ran);
    cts_hold(d, 0);
  }
  /* Points complete in order: whenever one is done, all before it are. */
  double until = cts_now() + 10;
  bool ordered = true;
  while (!st && !dlrun_event_done(ev[4]) && cts_now() < until) {
    bool later_done = false;
    for (int i = 4; i >= 0; i--) {
      bool done = dlrun_event_done(ev[i]);
      ordered &= done || !later_done;
      later_done |= done;
    }
  }
  CHECK(ordered, "%s: a point completed before an earlier one", dlrun_device_name(d));
  CHECK(st || dlrun_events_wait(ev, 5) == DLRUN_OK, "%s: %s", dlrun_device_name(d),
        dlrun_last_error());
  unsigned char gb[N], gc[N];
  CHECK(!st && cts_mem_read(&b, gb) == DLRUN_OK && cts_mem_read(&c, gc) == DLRUN_OK &&
            gb[0] == 0x11 && gb[N - 1] == 0x11 && gc[0] == 0x22 && gc[N - 1] == 0x22,
        "%s: B holds %02x, C %02x (0x11, 0x22 expected)", dlrun_device_name(d), gb[0], gc[0]);
  cts_mem_free(&a);
  cts_mem_free(&b);
  cts_mem_free(&c);
}

static void case_event_order(const suite *s, const char *pl) {
  bool gate = strcmp(pl, "testnative") == 0;
  TEST(cts_name("event order: work queued in order completes in order%s [%s]",
                gate ? ", held then let go" : "", label(s, pl))) {
    in_order(dev_of(s, pl, 0), gate);
    if (ndev_of(s, pl) > 1) in_order(dev_of(s, pl, 1), false);
  }
}

/* Through the slots: one copy of three pieces from three memories of the
 * platform (device memory of both devices, pinned_host memory) into one
 * block, then a marker (a copy of no pieces) after it, and a record that
 * waits for a held testnative event, then let go. */
static void case_ops(const suite *s, const char *pl) {
  TEST(cts_name("a copy of several pieces, a marker, a record waiting on testnative [%s]",
                label(s, pl))) {
    enum { P = 64, N = 3 * P };
    dlrun_device *d0 = dev_of(s, pl, 0), *d1 = last_dev(s, pl);
    bool native = strcmp(pl, "testnative") == 0;
    dlrun_device *tn = dev_of(s, "testnative", native ? 1 : 0);
    cts_mem src[3] = {0}, dst = {0}, g = {0};
    dlrun_status st = cts_mem_alloc(&src[0], d0, DLRUN_MEM_DEVICE, P);
    if (!st) st = cts_mem_alloc(&src[1], d1, DLRUN_MEM_DEVICE, P);
    if (!st) st = cts_mem_alloc(&src[2], d0, DLRUN_MEM_PINNED_HOST, P);
    if (!st) st = cts_mem_alloc(&dst, d0, DLRUN_MEM_DEVICE, N);
    unsigned char want[N], got[N];
    for (int i = 0; i < N; i++) want[i] = (unsigned char)(i * 7 + 1);
    for (int i = 0; i < 3 && !st; i++) st = cts_mem_write(&src[i], want + i * P);
    memset(got, 0xEE, sizeof got);
    if (!st) st = cts_mem_write(&dst, got);
    CHECK(st == DLRUN_OK, "%s", dlrun_last_error());
    if (!st) {
      int64_t origin[3], lo[3], hi[3];
      dlrun_copy_piece pieces[3];
      for (int i = 0; i < 3; i++) {
        origin[i] = lo[i] = i * P;
        hi[i] = (i + 1) * P;
        pieces[i] = (dlrun_copy_piece){.src = cts_end(&src[i], 1, 0, &origin[i], cts_one),
                                       .lo = &lo[i], .hi = &hi[i]};
      }
      dlrun_copy_op op = {.esize = 1, .ndim = 1, .dst = cts_end(&dst, 1, 0, cts_zero, cts_one),
                          .npieces = 3, .pieces = pieces};
      dlrun_copy_op mark = {.esize = 1, .ndim = 1};
      dlrun_event ev[4], gate;
      const dlrun_platform *p = d0->platform;
      dlrun_fill f = {.esize = 1};
      cts_hold(tn, 1);
      st = cts_mem_alloc(&g, tn, DLRUN_MEM_DEVICE, 8);
      if (!st) st = tn->platform->fill(tn, DLRUN_MEM_DEVICE, g.data, 8, &f, NULL, 0, &gate);
      if (!st) st = p->copy_box(d0, &op, NULL, 0, &ev[0]);
      if (!st) st = p->copy_box(d0, &mark, &ev[0], 1, &ev[1]);
      if (!st) st = p->record(d0, &gate, 1, &ev[2]);
      if (!st) st = p->record(d0, NULL, 0, &ev[3]);
      CHECK(st == DLRUN_OK, "%s", dlrun_last_error());
      if (!st) {
        CHECK(cts_wait_done(ev[1], 10000), "the marker did not complete");
        usleep(10 * 1000);
        CHECK(!dlrun_event_done(ev[2]), "a record ran before the held event it waits on");
      }
      cts_hold(tn, 0);
      CHECK(st || dlrun_events_wait(ev, 4) == DLRUN_OK, "%s", dlrun_last_error());
      CHECK(!st && cts_mem_read(&dst, got) == DLRUN_OK && cts_diff(want, got, N) < 0,
            "the pieces copied wrong: %s", dlrun_last_error());
    }
    for (int i = 0; i < 3; i++) cts_mem_free(&src[i]);
    cts_mem_free(&dst);
    cts_mem_free(&g);
  }
  skip_one_device(s, pl, "a copy of several pieces, one from another device of the platform");
}

/* Copies to pl's devices wait for a testnative fill held at its queue
 * (another device of testnative, or another platform); copies from those
 * to pl's other device and back to testnative wait on pl's events in
 * turn. None has run while held; all read the fill's values once let go. */
static void case_gated_waits(const suite *s, const char *pl) {
  bool native = strcmp(pl, "testnative") == 0;
  TEST(cts_name("event order: copies wait for a held testnative event, then %s's [%s]",
                label(s, pl), label(s, pl))) {
    enum { N = 1000, K = DLRUN_MEM_KIND_COUNT };
    dlrun_device *tn = dev_of(s, "testnative", 0);
    dlrun_device *d = dev_of(s, pl, native ? 1 : 0),
                 *other = ndev_of(s, pl) > 1 ? dev_of(s, pl, native ? 0 : 1) : NULL;
    cts_hold(tn, 1);
    unsigned ran = cts_ran(tn);
    /* b: on d, both kinds, after tn; c: on pl's other device after d;
     * e: back on testnative after d (none for testnative itself) */
    dlrun_array *a = NULL, *w[K + 2] = {0};
    dlrun_status st = cts_full(tn, DLRUN_MEM_DEVICE, N, 42, &a);
    for (int k = 0; k < K && !st; k++) st = cts_put(a, d, (dlrun_memory_kind)k, &w[k]);
    if (!st && !native && other) st = cts_put(w[0], other, DLRUN_MEM_DEVICE, &w[K]);
    if (!st && !native) st = cts_put(w[0], dev_of(s, "testnative", 1), DLRUN_MEM_DEVICE, &w[K + 1]);
    CHECK(st == DLRUN_OK, "%s", dlrun_last_error());
    usleep(20 * 1000);
    for (int k = 0; k < K + 2 && !st; k++)
      CHECK(!w[k] || !dlrun_event_done(cts_ready(w[k])), "copy %d ran before its event", k);
    CHECK(cts_ran(tn) == ran, "the held queue ran");
    cts_hold(tn, 0);
    for (int k = 0; k < K + 2 && !st; k++) {
      if (!w[k]) continue;
      CHECK(cts_wait_done(cts_ready(w[k]), 10000), "copy %d did not end once let go", k);
      dlrun_device *at = dlrun_array_device(w[k]);
      CHECK(cts_holds(w[k], N, 42), "copy %d to %s: wrong values: %s", k, dlrun_device_name(at),
            dlrun_last_error());
    }
    for (int k = 0; k < K + 2; k++) dlrun_array_release(w[k]);
    dlrun_array_release(a);
  }
  skip_one_device(s, pl, "event order: a copy to the platform's other device waits for the first's");
}

/* ---- cross-platform waits, no worker blocked ---- */

static int worker_count(void) {
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n < 2 ? 2 : n > 64 ? 64 : (int)n;
}

/* More sim work queues than worker threads wait on a held testnative event;
 * testnative waits on one of them; meanwhile cpu work (the same workers)
 * runs. */
static void cross_waits(dlrun_runtime *rt, int nsim) {
  enum { N = 4096 };
  dlrun_device *tn0 = dlrun_local_device_get(rt, "testnative", 0),
               *tn1 = dlrun_local_device_get(rt, "testnative", 1),
               *cpu = dlrun_local_device_get(rt, "cpu", 0);
  dlrun_array *a = NULL, *c = NULL, *h = NULL, *b[66] = {0};
  cts_hold(tn0, 1);
  dlrun_status st = cts_full(tn0, DLRUN_MEM_DEVICE, N, 5, &a);
  for (int i = 0; i < nsim && !st; i++)
    st = cts_put(a, dlrun_local_device_get(rt, "sim", (size_t)i), DLRUN_MEM_DEVICE, &b[i]);
  if (!st) st = cts_put(b[0], tn1, DLRUN_MEM_DEVICE, &c);
  if (!st) st = cts_full(cpu, DLRUN_MEM_DEVICE, N, 9, &h);
  CHECK(st == DLRUN_OK, "%s", dlrun_last_error());
  if (!st) {
    CHECK(cts_wait_done(cts_ready(h), 10000), "cpu work did not run while %d sim queues "
          "wait: a worker thread is blocked", nsim);
    CHECK(cts_holds(h, N, 9), "cpu values");
    bool none = !dlrun_event_done(cts_ready(c));
    for (int i = 0; i < nsim; i++) none &= !dlrun_event_done(cts_ready(b[i]));
    CHECK(none, "a copy ran before the testnative event it waits on");
  }
  cts_hold(tn0, 0);
  for (int i = 0; i < nsim && !st; i++)
    CHECK(cts_wait_done(cts_ready(b[i]), 10000) && cts_holds(b[i], N, 5), "sim %d values", i);
  CHECK(st || (cts_wait_done(cts_ready(c), 10000) && cts_holds(c, N, 5)),
        "testnative after sim: wrong values: %s", dlrun_last_error());
  for (int i = 0; i < nsim; i++) dlrun_array_release(b[i]);
  dlrun_array_release(c);
  dlrun_array_release(h);
  dlrun_array_release(a);
}

static void case_cross_waits(void) {
  int nsim = worker_count() + 2;
  char spec[64];
  snprintf(spec, sizeof spec, "testnative:2,sim:%d,cpu:1", nsim);
  dlrun_config cfg = {.devices = spec, .device_memory = 1 << 20, .pinned_host_memory = 1 << 20};
  TEST(cts_name("cross-platform waits: %d sim queues wait on testnative, testnative on sim, "
                "cpu work runs meanwhile [testnative, sim]", nsim)) {
    dlrun_runtime *rt = cts_runtime(&cfg);
    CHECK(rt != NULL, "no runtime");
    if (rt) cross_waits(rt, nsim);
    cts_runtime_release(rt);
  }
}

/* ---- failures ---- */

static void expect_array_failed(dlrun_array *a, dlrun_device *dev, const char *what) {
  int32_t buf[64];
  dlrun_exported e = {0};
  bool copy = strcmp(what, "copy") == 0;
  if (copy) {
    CHECK_FAILED(dlrun_array_block_until_ready(a), dev, "copy");
    CHECK_FAILED(dlrun_array_read(a, 0, sizeof buf, buf), dev, "copy");
    CHECK_FAILED(dlrun_export(a, NULL, &e), dev, "copy");
  } else {
    CHECK_FAILED(dlrun_array_block_until_ready(a), dev, "fill");
    CHECK_FAILED(dlrun_array_read(a, 0, sizeof buf, buf), dev, "fill");
    CHECK_FAILED(dlrun_export(a, NULL, &e), dev, "fill");
  }
  CHECK(!e.legacy && !e.versioned, "an export of a failed array");
}

static void case_failures(const suite *s, const char *pl) {
  dlrun_device *d0 = dev_of(s, pl, 0), *d1 = last_dev(s, pl);
  TEST(cts_name("a failure injected into a fill surfaces from block_until_ready, read, export "
                "and the copies reading it, on every platform [%s]", label(s, pl))) {
    dlrun_array *a = NULL, *next = NULL;
    CHECK(dlrun_debug_inject_failure(d0, "fill", 1) == DLRUN_OK, "%s", dlrun_last_error());
    CHECK(cts_full(d0, DLRUN_MEM_DEVICE, 64, 3, &a) == DLRUN_OK, "%s", dlrun_last_error());
    if (a) {
      expect_array_failed(a, d0, "fill");
      for (size_t p = 0; p < s->n; p++) { /* a copy that reads it fails too */
        dlrun_array *b = NULL;
        dlrun_device *to = last_dev(s, s->names[p]);
        dlrun_status st = cts_put(a, to, DLRUN_MEM_DEVICE, &b);
        if (!st) st = dlrun_array_block_until_ready(b);
        if (!st) printf("  the copy into %s did not fail\n", dlrun_device_name(to));
        CHECK_FAILED(st, d0, "fill");
        dlrun_array_release(b);
      }
    }
    CHECK(cts_full(d0, DLRUN_MEM_DEVICE, 64, 4, &next) == DLRUN_OK && cts_holds(next, 64, 4),
          "the next fill: %s", dlrun_last_error());
    dlrun_array_release(next);
    dlrun_array_release(a);
  }
  TEST(cts_name("a failure injected into a copy surfaces from device_put, block_until_ready, "
                "read and export [%s]", label(s, pl))) {
    int32_t host[64] = {0};
    int64_t n = 64;
    dlrun_sharding *sh = NULL;
    dlrun_array *x = NULL, *y = NULL, *z = NULL, *next = NULL;
    CHECK(dlrun_single_device_sharding_create(d1, DLRUN_MEM_DEVICE, &sh) == DLRUN_OK, "%s",
          dlrun_last_error());
    /* A copy from the host (synchronous) */
    CHECK(dlrun_debug_inject_failure(d1, "copy", 1) == DLRUN_OK, "%s", dlrun_last_error());
    CHECK_FAILED(dlrun_array_from_host(sh, DLRUN_INT32, 1, &n, host, sizeof host, &y), d1, "copy");
    CHECK(y == NULL, "an array from a failed copy");
    /* and one between devices (queued), where one is made: from the
     * pinned_host memory of a platform's only device */
    dlrun_memory_kind from = d0 == d1 ? DLRUN_MEM_PINNED_HOST : DLRUN_MEM_DEVICE;
    CHECK(cts_full(d0, from, 64, 6, &x) == DLRUN_OK, "%s", dlrun_last_error());
    if (x && !dlrun_memory_same_place(d0, from, d1, DLRUN_MEM_DEVICE)) {
      CHECK(dlrun_debug_inject_failure(d1, "copy", 1) == DLRUN_OK, "%s", dlrun_last_error());
      dlrun_status st = cts_put(x, d1, DLRUN_MEM_DEVICE, &y);
      CHECK(st == DLRUN_OK, "device_put: %s", dlrun_last_error());
      if (y) {
        expect_array_failed(y, d1, "copy");
        st = cts_put(y, d0, DLRUN_MEM_DEVICE, &z);
        if (!st) st = dlrun_array_block_until_ready(z);
        CHECK_FAILED(st, d1, "copy");
      }
    }
    CHECK(x && cts_put(x, d1, DLRUN_MEM_DEVICE, &next) == DLRUN_OK && cts_holds(next, 64, 6),
          "the next copy: %s", dlrun_last_error());
    dlrun_array_release(next);
    dlrun_array_release(z);
    dlrun_array_release(y);
    dlrun_array_release(x);
    dlrun_sharding_release(sh);
  }
}

/* ---- DLPack device codes ---- */

/* Every memory of pl's devices exports as a code that names it back: its
 * own device and kind, or, for host memory, a place that is host memory. */
static void dlpack_codes(dlrun_runtime *rt, const char *pl, bool strict) {
  for (size_t i = 0; i < dlrun_local_device_count(rt, pl); i++)
    for (int k = 0; k < DLRUN_MEM_KIND_COUNT; k++) {
      dlrun_device *d = dlrun_local_device_get(rt, pl, i);
      dlrun_memory_kind kind = (dlrun_memory_kind)k, back_kind;
      dlrun_array *a = NULL;
      int32_t type = -1, id = -1, atype = -2, aid = -2, btype = -3, bid = -3;
      if (cts_full(d, kind, 8, 1, &a) || dlrun_array_block_until_ready(a)) {
        CHECK(0, "%s", dlrun_last_error());
        dlrun_array_release(a);
        continue;
      }
      dlrun_buffer_dlpack_device(a->bufs[0], &type, &id);
      CHECK(dlrun_export_device(a, &atype, &aid) == DLRUN_OK && atype == type && aid == id,
            "%s: export_device (%d, %d), buffer (%d, %d)", dlrun_device_name(d), atype, aid,
            type, id);
      /* DLPack 1.2: every platform's export sets strides, legacy and versioned. */
      for (int v = 0; v < 2; v++) {
        dlrun_export_options o = {.has_max_version = v, .max_major = 1,
                                  .max_minor = DLRUN_DLPACK_MINOR,
                                  .legacy_sharing = DLRUN_LEGACY_SHARE};
        dlrun_exported e = {0};
        dlrun_status st = dlrun_export(a, &o, &e);
        CHECK(st == DLRUN_OK, "%s %s: export: %s", dlrun_device_name(d),
              dlrun_memory_kind_name(kind), dlrun_last_error());
        if (st) continue;
        const DLTensor *t = e.legacy ? &e.legacy->dl_tensor : &e.versioned->dl_tensor;
        CHECK(t->ndim == 1 && t->strides && t->strides[0] == 1 && t->shape && t->shape[0] == 8,
              "%s %s: %s export's strides %p", dlrun_device_name(d),
              dlrun_memory_kind_name(kind), v ? "versioned" : "legacy", (void *)t->strides);
        CHECK(!v || (e.versioned->version.major == 1 &&
                     e.versioned->version.minor == DLRUN_DLPACK_MINOR),
              "%s: version", dlrun_device_name(d));
        if (e.legacy) e.legacy->deleter(e.legacy);
        else e.versioned->deleter(e.versioned);
      }
      dlrun_device *back = dlrun_device_from_dlpack(rt, type, id, &back_kind);
      CHECK(back != NULL, "%s %s: (%d, %d) names no device", dlrun_device_name(d),
            dlrun_memory_kind_name(kind), type, id);
      if (!back) {
        dlrun_array_release(a);
        continue;
      }
      back->platform->dlpack_device(back, back_kind, &btype, &bid);
      CHECK(btype == type && bid == id, "(%d, %d) names %s, which exports as (%d, %d)", type,
            id, dlrun_device_name(back), btype, bid);
      /* Host memory is kDLCPU, or kDLCUDAHost for CUDA's pinned memory. */
      if (dlrun_memory_is_host(d, kind))
        CHECK((type == 1 || (type == 3 && strcmp(pl, "cuda") == 0)) && id == 0 &&
                  dlrun_memory_is_host(back, back_kind),
              "%s %s is host memory, exported as (%d, %d), named back as %s %s",
              dlrun_device_name(d), dlrun_memory_kind_name(kind), type, id,
              dlrun_device_name(back), dlrun_memory_kind_name(back_kind));
      else if (strict)
        CHECK(back == d && back_kind == kind, "%s %s exports as (%d, %d), which names %s %s",
              dlrun_device_name(d), dlrun_memory_kind_name(kind), type, id,
              dlrun_device_name(back), dlrun_memory_kind_name(back_kind));
      else if (back != d)
        printf("# note: %s %s exports as (%d, %d), which names %s in a runtime of several "
               "platforms\n", dlrun_device_name(d), dlrun_memory_kind_name(kind), type, id,
               dlrun_device_name(back));
      dlrun_array_release(a);
    }
}

static void case_dlpack(const char *pl, size_t ndev, const char *what) {
  char spec[64];
  if (strcmp(pl, "cpu") == 0) snprintf(spec, sizeof spec, "cpu:2");
  else snprintf(spec, sizeof spec, "%s:%zu,cpu:1", pl, ndev);
  dlrun_config cfg = {.devices = spec, .device_memory = 1 << 20, .pinned_host_memory = 1 << 20};
  TEST(cts_name("DLPack device codes both ways, every device and memory kind [%s]", what)) {
    dlrun_runtime *rt = cts_runtime(&cfg);
    CHECK(rt != NULL, "no runtime");
    if (rt) dlpack_codes(rt, pl, true);
    cts_runtime_release(rt);
  }
}

static void case_dlpack_mixed(const suite *s) {
  TEST(cts_name("DLPack device codes round-trip in a runtime of several platforms%s",
                s->sim_shared ? " [sim, shared memory]" : "")) {
    for (size_t p = 0; p < s->n; p++) dlpack_codes(s->rt, s->names[p], false);
  }
}

/* ---- commit / decommit ---- */

enum { COMMIT_CAP = 4 << 20, COMMIT_BUF = 1 << 20 };

/* Preallocated memories (accelerators) are reserved in full; a block
 * written then freed goes back to the system, and reads as zero after.
 * cuda's pinned_host memory is one page-locked allocation: it gives nothing
 * back (pinned_back false). */
static void commit_decommit(dlrun_device *d, bool accelerator, bool pinned_back) {
  for (int k = 0; k < DLRUN_MEM_KIND_COUNT; k++) {
    dlrun_memory_stats st;
    dlrun_device_memory_stats(d, (dlrun_memory_kind)k, &st);
    if (accelerator)
      CHECK(st.bytes_limit == COMMIT_CAP && st.bytes_reserved == COMMIT_CAP,
            "%s memory: %llu of %llu bytes reserved, all preallocated expected",
            dlrun_memory_kind_name((dlrun_memory_kind)k),
            (unsigned long long)st.bytes_reserved, (unsigned long long)st.bytes_limit);
    else
      CHECK(st.bytes_reserved == 0, "%llu bytes reserved without preallocation",
            (unsigned long long)st.bytes_reserved);
  }
  /* Write a block, free it: the pages go back, and read as zero after. */
  cts_mem m;
  unsigned char *bytes = malloc(COMMIT_BUF);
  memset(bytes, 0x5A, COMMIT_BUF);
  CHECK(cts_mem_alloc(&m, d, DLRUN_MEM_DEVICE, COMMIT_BUF) == DLRUN_OK &&
            cts_mem_write(&m, bytes) == DLRUN_OK,
        "%s", dlrun_last_error());
  cts_mem_free(&m);
  uint64_t released = 0,
           want = accelerator ? (pinned_back ? 2u : 1u) * COMMIT_CAP : COMMIT_BUF;
  CHECK(dlrun_device_release_unused(d, &released) == DLRUN_OK && released >= want &&
            released <= (accelerator ? want : want + 4096),
        "release_unused gave %llu bytes back, %llu expected", (unsigned long long)released,
        (unsigned long long)want);
  dlrun_memory_stats st;
  dlrun_device_memory_stats(d, DLRUN_MEM_DEVICE, &st);
  CHECK(st.bytes_reserved == 0, "%llu bytes still reserved", (unsigned long long)st.bytes_reserved);
  CHECK(cts_mem_alloc(&m, d, DLRUN_MEM_DEVICE, COMMIT_BUF) == DLRUN_OK &&
            cts_mem_read(&m, bytes) == DLRUN_OK,
        "%s", dlrun_last_error());
  CHECK(bytes[0] == 0 && bytes[COMMIT_BUF - 1] == 0 && cts_diff(bytes, bytes + 1, COMMIT_BUF - 1) < 0,
        "freed pages read %02x, not zero", bytes[0]);
  cts_mem_free(&m);
  free(bytes);
}

static void case_commit(const char *pl, size_t ndev, const char *what) {
  const dlrun_platform *p = platform_of(pl);
  if (!p->commit || !p->decommit) {
    TEST(cts_name("commit/decommit [%s] # SKIP the platform has no commit/decommit slots", what)) {
      dlrun_config cfg = {.devices = strcmp(pl, "cpu") ? (strcmp(pl, "testnative") == 0
                                                               ? "testnative:1,cpu:1"
                                                               : "opencl:1,cpu:1")
                                                      : "cpu:1"};
      dlrun_runtime *rt = cts_runtime(&cfg);
      uint64_t released = 1;
      CHECK(rt && dlrun_device_release_unused(dlrun_local_device_get(rt, pl, 0), &released) ==
                      DLRUN_OK && released == 0,
            "release_unused gave %llu bytes back: %s", (unsigned long long)released,
            dlrun_last_error());
      cts_runtime_release(rt);
    }
    return;
  }
  char spec[64];
  if (strcmp(pl, "cpu") == 0) snprintf(spec, sizeof spec, "cpu:2");
  else snprintf(spec, sizeof spec, "%s:%zu,cpu:1", pl, ndev);
  dlrun_config cfg = {.devices = spec, .device_memory = COMMIT_CAP, .pinned_host_memory = COMMIT_CAP,
                      .device_preallocate = DLRUN_PREALLOCATE_ON,
                      .pinned_host_preallocate = DLRUN_PREALLOCATE_ON};
  TEST(cts_name("commit/decommit: preallocation%s and release_unused [%s]",
                p->is_accelerator ? "" : " (accelerators only: not here)", what)) {
    dlrun_runtime *rt = cts_runtime(&cfg);
    CHECK(rt != NULL, "no runtime");
    if (rt)
      commit_decommit(dlrun_local_device_get(rt, pl, ndev - 1), p->is_accelerator,
                      strcmp(pl, "cuda") != 0);
    cts_runtime_release(rt);
  }
}

/* ---- the runs ---- */

/* Devices the suite uses of the module platforms (0: absent). */
static size_t opencl_devices, cuda_devices;

static void suite_add(suite *s, const char *name, size_t ndev) {
  s->names[s->n] = name;
  s->ndev[s->n++] = ndev;
}

/* The mixed runtime: two devices of each platform (or the one there is). */
static bool suite_create(suite *s, bool sim_shared) {
  *s = (suite){.sim_shared = sim_shared};
  suite_add(s, "testnative", 2);
  suite_add(s, "sim", 2);
  if (opencl_devices) suite_add(s, "opencl", opencl_devices);
  if (cuda_devices) suite_add(s, "cuda", cuda_devices);
  suite_add(s, "cpu", 2);
  char spec[128] = "";
  for (size_t i = 0; i < s->n; i++)
    snprintf(spec + strlen(spec), sizeof spec - strlen(spec), "%s%s:%zu", i ? "," : "",
             s->names[i], s->ndev[i]);
  if (sim_shared) setenv("DLRUN_SIM_MEMORY", "shared", 1);
  dlrun_config cfg = {.devices = spec, .device_memory = 16 << 20,
                      .pinned_host_memory = 16 << 20};
  s->rt = cts_runtime(&cfg);
  unsetenv("DLRUN_SIM_MEMORY");
  return s->rt != NULL;
}

static void run_suite(bool sim_shared) {
  suite s;
  TEST(cts_name("a runtime of every platform present%s", sim_shared ? ", sim memory shared" : "")) {
    CHECK(suite_create(&s, sim_shared), "no runtime");
  }
  if (!s.rt) return;
  for (size_t p = 0; p < s.n; p++) {
    const char *pl = s.names[p];
    if (sim_shared && strcmp(pl, "sim") != 0) continue; /* run once, with sim private */
    case_alloc(&s, pl);
    case_fills(&s, pl);
    case_event_order(&s, pl);
    case_ops(&s, pl);
    case_gated_waits(&s, pl);
    case_failures(&s, pl);
  }
  for (size_t i = 0; i <= s.n; i++)
    for (size_t j = 0; j <= s.n; j++)
      if (i < s.n || j < s.n) /* host to host is no platform's */
        case_box_copies(&s, i < s.n ? s.names[i] : NULL, j < s.n ? s.names[j] : NULL);
  case_dlpack_mixed(&s);
  cts_runtime_release(s.rt);
}

static void watchdog(int sig) {
  (void)sig;
#define CTS_STR_(x) #x
#define CTS_STR(x) CTS_STR_(x)
  static const char msg[] = "test_conformance: a case did not end within " CTS_STR(
      CTS_CASE_SECONDS) " s (a wait that never ends)\n";
  if (write(1, msg, sizeof msg - 1) < 0) _exit(2);
  _exit(2);
}

int main(void) {
  /* Line by line: a driver's forked child must not print our lines again. */
  setvbuf(stdout, NULL, _IOLBF, 0);
  signal(SIGALRM, watchdog);
  alarm(CTS_CASE_SECONDS);
  char why[300] = "";
  TEST("testnative: the test platform loads and registers") {
    CHECK(cts_load_native(why, sizeof why), "%s", why);
  }
  if (!cts_native_handle) return check_summary("conformance");
  why[0] = 0;
  opencl_devices = cts_module_devices("opencl", why, sizeof why);
  if (!opencl_devices) TEST(cts_name("opencl # SKIP %s", why)) {}
  why[0] = 0;
  cuda_devices = cts_module_devices("cuda", why, sizeof why);
  if (!cuda_devices) TEST(cts_name("cuda # SKIP %s", why)) {}
  run_suite(false);
  run_suite(true);
  case_cross_waits();
  const char *all[] = {"cpu", "sim", "testnative", "opencl", "cuda"};
  const size_t ndev[] = {2, 2, 2, opencl_devices, cuda_devices};
  for (size_t i = 0; i < 5; i++) {
    if (!ndev[i]) continue;
    case_dlpack(all[i], ndev[i], all[i]);
    case_commit(all[i], ndev[i], all[i]);
  }
  cts_unload_native();
  return check_summary("conformance");
}
