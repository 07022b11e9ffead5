/* C tests of copies taken together (the platform slot copy_boxes). Host
 * execution copies every op's pieces right, whatever their ranks, boxes,
 * element sizes, strides (negative, transposed) and sources, cut into
 * bands or not (against an element-by-element copy, with the bytes no
 * piece covers untouched); it completes each op once, and an injected
 * failure fails them all and writes nothing. The library hands a put's
 * copies to a platform that has the slot together (at most 64 at once), to
 * one without it each on its own, with the same values and transfer counts
 * both ways; when the slot fails, the put fails and leaves every pool as it
 * was. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "device/device_impl.h"
#include "device/host_loops.h"
#include "dlrun/dlrun.h"
#include "line_mesh.h"

static uint32_t seed = 20261205;
static uint32_t rnd(uint32_t n) {
  seed = seed * 1664525u + 1013904223u;
  return (seed >> 8) % n;
}

/* ------------------------------------------------------------ the slot itself */

#define MAXD 4
#define MAXOPS 6
#define MAXSRC 3
#define MAXSLABS 3

/* A block of esize-byte elements over the box [origin, origin + shape). */
typedef struct block {
  int64_t origin[MAXD], shape[MAXD], strides[MAXD];
  unsigned char *base, *data; /* data: element [origin] (strides may be negative) */
} block;

static void block_make(block *b, int nd, const int64_t *origin, const int64_t *shape,
                       size_t esize, bool scramble) {
  int64_t n = 1, order[MAXD];
  for (int d = 0; d < nd; d++) order[d] = d;
  if (scramble) /* a random order of the dimensions in memory */
    for (int d = nd - 1; d > 0; d--) {
      int k = (int)rnd((uint32_t)d + 1);
      int64_t t = order[d];
      order[d] = order[k];
      order[k] = t;
    }
  for (int i = nd - 1; i >= 0; i--) {
    int d = (int)order[i];
    b->strides[d] = n;
    n *= shape[d];
  }
  int64_t start = 0;
  for (int d = 0; d < nd; d++) {
    b->origin[d] = origin[d];
    b->shape[d] = shape[d];
    if (scramble && rnd(3) == 0) { /* runs backwards along d */
      start += (shape[d] - 1) * b->strides[d];
      b->strides[d] = -b->strides[d];
    }
  }
  b->base = malloc((size_t)n * esize + 1);
  b->data = b->base + start * (int64_t)esize;
}

static unsigned char *at(const block *b, int nd, const int64_t *x, size_t esize) {
  int64_t off = 0;
  for (int d = 0; d < nd; d++) off += (x[d] - b->origin[d]) * b->strides[d];
  return b->data + off * (int64_t)esize;
}

/* Byte k of source s's element at global x. */
static unsigned char value(int s, int nd, const int64_t *x, size_t k) {
  uint32_t h = 2166136261u ^ (uint32_t)s;
  for (int d = 0; d < nd; d++) h = (h ^ (uint32_t)x[d]) * 16777619u;
  return (unsigned char)((h ^ (uint32_t)k) * 2654435761u >> 24);
}

/* Next index of the box [lo, hi) in row-major order; false after the last. */
static bool next_index(int nd, const int64_t *lo, const int64_t *hi, int64_t *x) {
  for (int d = nd - 1; d >= 0; d--) {
    if (++x[d] < hi[d]) return true;
    x[d] = lo[d];
  }
  return false;
}

typedef struct fan_case {
  int nd, nops, nsrc;
  size_t esize;
  int64_t shape[MAXD];
  block src[MAXSRC], dst[MAXOPS];
  dlrun_copy_op ops[MAXOPS];
  dlrun_copy_op *opp[MAXOPS];
  dlrun_copy_piece pieces[MAXOPS][MAXSLABS];
  int64_t lo[MAXOPS][MAXSLABS][MAXD], hi[MAXOPS][MAXSLABS][MAXD];
  int from[MAXOPS][MAXSLABS];   /* each piece's source */
  int64_t box_lo[MAXOPS][MAXD], box_hi[MAXOPS][MAXD];
  atomic_int completed[MAXOPS];
} fan_case;

static void completed(void *ctx) { atomic_fetch_add((atomic_int *)ctx, 1); }

/* A random case over a global array of `shape`: each op's destination is a
 * random box, cut along one dimension into slabs read from random sources;
 * one slab may be left out (its bytes must stay untouched). */
static void case_make(fan_case *c, int nd, const int64_t *shape, size_t esize) {
  memset(c, 0, sizeof *c);
  c->nd = nd;
  c->esize = esize;
  c->nops = 1 + (int)rnd(MAXOPS);
  c->nsrc = 1 + (int)rnd(MAXSRC);
  int64_t zero[MAXD] = {0};
  memcpy(c->shape, shape, (size_t)nd * sizeof *shape);
  for (int s = 0; s < c->nsrc; s++) {
    block_make(&c->src[s], nd, zero, shape, esize, rnd(2));
    int64_t x[MAXD] = {0};
    do {
      for (size_t k = 0; k < esize; k++) at(&c->src[s], nd, x, esize)[k] = value(s, nd, x, k);
    } while (next_index(nd, zero, shape, x));
  }
  for (int o = 0; o < c->nops; o++) {
    int64_t *lo = c->box_lo[o], *hi = c->box_hi[o], ext[MAXD];
    for (int d = 0; d < nd; d++) {
      lo[d] = rnd((uint32_t)shape[d]);
      hi[d] = lo[d] + 1 + rnd((uint32_t)(shape[d] - lo[d]));
      ext[d] = hi[d] - lo[d];
    }
    block_make(&c->dst[o], nd, lo, ext, esize, rnd(2));
    int64_t n = 1;
    for (int d = 0; d < nd; d++) n *= ext[d];
    memset(c->dst[o].base, 0xEE, (size_t)n * esize);
    int cut = nd ? (int)rnd((uint32_t)nd) : 0, nslabs = nd ? 1 + (int)rnd(MAXSLABS) : 1;
    int skip = nslabs > 1 && rnd(2) ? (int)rnd((uint32_t)nslabs) : -1, np = 0;
    int64_t at_lo = nd ? lo[cut] : 0;
    for (int k = 0; k < nslabs; k++) {
      int64_t at_hi = 0;
      if (nd) at_hi = k == nslabs - 1 ? hi[cut] : at_lo + rnd((uint32_t)(hi[cut] - at_lo + 1));
      if (k != skip && (nd == 0 || at_hi > at_lo)) {
        memcpy(c->lo[o][np], lo, (size_t)nd * sizeof *lo);
        memcpy(c->hi[o][np], hi, (size_t)nd * sizeof *hi);
        if (nd) {
          c->lo[o][np][cut] = at_lo;
          c->hi[o][np][cut] = at_hi;
        }
        int s = c->from[o][np] = (int)rnd((uint32_t)c->nsrc);
        c->pieces[o][np] = (dlrun_copy_piece){
            .src = {.data = c->src[s].data, .origin = c->src[s].origin,
                    .strides = c->src[s].strides},
            .lo = c->lo[o][np], .hi = c->hi[o][np]};
        np++;
      }
      at_lo = at_hi;
    }
    c->ops[o] = (dlrun_copy_op){
        .esize = esize, .ndim = nd, .npieces = (size_t)np, .pieces = c->pieces[o],
        .dst = {.data = c->dst[o].data, .origin = c->dst[o].origin, .strides = c->dst[o].strides},
        .stream = rnd(2), .complete = completed, .complete_ctx = &c->completed[o]};
    c->opp[o] = &c->ops[o];
  }
}

/* Whether every op's destination holds its pieces' bytes, and 0xEE where
 * no piece writes (`written`: false when nothing may have been written). */
static bool case_right(const fan_case *c, bool written) {
  for (int o = 0; o < c->nops; o++) {
    int64_t x[MAXD];
    memcpy(x, c->box_lo[o], sizeof x);
    do {
      int src = -1;
      for (size_t p = 0; p < c->ops[o].npieces; p++) {
        bool in = true;
        for (int d = 0; d < c->nd; d++) in &= x[d] >= c->lo[o][p][d] && x[d] < c->hi[o][p][d];
        if (in) src = c->from[o][p];
      }
      const unsigned char *got = at(&c->dst[o], c->nd, x, c->esize);
      for (size_t k = 0; k < c->esize; k++)
        if (got[k] != (src >= 0 && written ? value(src, c->nd, x, k) : 0xEE)) return false;
    } while (next_index(c->nd, c->box_lo[o], c->box_hi[o], x));
  }
  return true;
}

static void case_free(fan_case *c) {
  for (int s = 0; s < c->nsrc; s++) free(c->src[s].base);
  for (int o = 0; o < c->nops; o++) free(c->dst[o].base);
}

static bool all_completed_once(fan_case *c) {
  for (int o = 0; o < c->nops; o++)
    if (atomic_load(&c->completed[o]) != 1) return false;
  return true;
}

static void random_shape(int nd, bool large, int64_t *shape) {
  int64_t big[MAXD][MAXD] = {{0}, {70000}, {900, 300}, {60, 70, 50}};
  for (int d = 0; d < nd; d++)
    shape[d] = large ? big[nd][d] + rnd(40) : 1 + rnd(nd <= 2 ? 40 : 9);
}

static void test_slot(const char *platform) {
  static const size_t esizes[] = {1, 2, 4, 8, 16, 3};
  dlrun_config cfg = {.devices = platform, .device_memory = 1 << 20};
  dlrun_runtime *rt;
  if (dlrun_runtime_create(&cfg, &rt)) {
    CHECK(0, "runtime %s: %s", platform, dlrun_last_error());
    return;
  }
  dlrun_device *dev = dlrun_device_get(rt, platform[0] == 's' ? "sim" : "cpu", 0);
  const dlrun_platform *pl = dev->platform;
  static fan_case c;
  char name[160];
  snprintf(name, sizeof name, "%s: random ops of ranks 0-4 and shared sources copy right, "
                              "small and cut into bands; each op completes once", platform);
  TEST(name) {
    int bad = 0, n = 0;
    for (int it = 0; it < 400 && !bad; it++, n++) {
      bool large = it % 20 == 0 && it > 0;
      int nd = large ? 1 + (int)rnd(3) : (int)rnd(MAXD + 1);
      int64_t shape[MAXD];
      random_shape(nd, large, shape);
      case_make(&c, nd, shape, large ? 4 : esizes[rnd(6)]);
      dlrun_event done;
      dlrun_status st = pl->copy_boxes(dev, c.opp, (size_t)c.nops, NULL, 0, &done);
      if (!st) st = dlrun_event_wait(done);
      if (st || !case_right(&c, true) || !all_completed_once(&c)) {
        bad = 1;
        CHECK(0, "case %d (rank %d, %d ops, %d sources, esize %zu): %s", it, nd, c.nops, c.nsrc,
              c.esize, st ? dlrun_last_error() : "wrong bytes or completions");
      }
      case_free(&c);
    }
    CHECK(n == 400, "%d cases", n);
  }
  snprintf(name, sizeof name, "%s: a reshard's ops cut into bands copy each byte once "
                              "(streamed bytes = the pieces' bytes)", platform);
  TEST(name) {
    /* int32 [2048, 512] in 2 row blocks; 4 ops, a column block of 128 each
     * (rows of 512 bytes: all streamed), reading both sources: 4 MiB. */
    memset(&c, 0, sizeof c);
    c.nd = 2;
    c.esize = 4;
    c.nops = 4;
    c.nsrc = 2;
    int64_t half[2] = {1024, 512}, second[2] = {1024, 0}, zero[2] = {0, 0};
    for (int s = 0; s < 2; s++) {
      block_make(&c.src[s], 2, s ? second : zero, half, 4, false);
      memset(c.src[s].base, s + 1, 1024 * 512 * 4);
    }
    int64_t ext[2] = {2048, 128};
    for (int o = 0; o < 4; o++) {
      int64_t lo[2] = {0, 128 * o};
      block_make(&c.dst[o], 2, lo, ext, 4, false);
      for (int s = 0; s < 2; s++) {
        c.lo[o][s][0] = 1024 * s;
        c.hi[o][s][0] = 1024 * (s + 1);
        c.lo[o][s][1] = 128 * o;
        c.hi[o][s][1] = 128 * (o + 1);
        c.pieces[o][s] = (dlrun_copy_piece){
            .src = {.data = c.src[s].data, .origin = c.src[s].origin,
                    .strides = c.src[s].strides},
            .lo = c.lo[o][s], .hi = c.hi[o][s]};
      }
      c.ops[o] = (dlrun_copy_op){
          .esize = 4, .ndim = 2, .npieces = 2, .pieces = c.pieces[o], .stream = true,
          .dst = {.data = c.dst[o].data, .origin = c.dst[o].origin, .strides = c.dst[o].strides}};
      c.opp[o] = &c.ops[o];
    }
    uint64_t before = dlrun_host_streamed_bytes();
    dlrun_event done;
    CHECK(pl->copy_boxes(dev, c.opp, 4, NULL, 0, &done) == DLRUN_OK &&
              dlrun_event_wait(done) == DLRUN_OK,
          "%s", dlrun_last_error());
    uint64_t streamed = dlrun_host_streamed_bytes() - before;
#if defined(__SSE2__)
    CHECK(streamed == 4u << 20, "%llu bytes streamed, want %u", (unsigned long long)streamed,
          4u << 20);
#else
    CHECK(streamed == 0, "%llu bytes streamed without SSE2", (unsigned long long)streamed);
#endif
    bool right = true;
    for (int o = 0; o < 4 && right; o++)
      for (size_t i = 0; i < 2048 * 128 * 4 && right; i++)
        right = c.dst[o].base[i] == (i < 1024 * 128 * 4 ? 1 : 2);
    CHECK(right, "values");
    case_free(&c);
  }
  snprintf(name, sizeof name, "%s: an injected failure fails every op, writes nothing and "
                              "completes each once; the next call copies", platform);
  TEST(name) {
    int64_t shape[2] = {300, 200};
    case_make(&c, 2, shape, 4);
    CHECK(pl->inject_failure(dev, DLRUN_WORK_COPY, 1) == DLRUN_OK, "inject");
    dlrun_event done;
    CHECK(pl->copy_boxes(dev, c.opp, (size_t)c.nops, NULL, 0, &done) == DLRUN_OK, "%s",
          dlrun_last_error());
    CHECK(dlrun_event_wait(done) == DLRUN_ERR_RUNTIME, "the failure did not reach the event");
    CHECK_STR_CONTAINS(dlrun_last_error(), "copy failed: injected device failure");
    CHECK(case_right(&c, false), "bytes written by failed copies");
    CHECK(all_completed_once(&c), "completions");
    for (int o = 0; o < c.nops; o++) atomic_store(&c.completed[o], 0);
    CHECK(pl->copy_boxes(dev, c.opp, (size_t)c.nops, NULL, 0, &done) == DLRUN_OK &&
              dlrun_event_wait(done) == DLRUN_OK,
          "%s", dlrun_last_error());
    CHECK(case_right(&c, true) && all_completed_once(&c), "the next call");
    case_free(&c);
  }
  snprintf(name, sizeof name, "%s: no ops is a point after the waits; ops of two ranks are "
                              "refused", platform);
  TEST(name) {
    dlrun_event done;
    CHECK(pl->copy_boxes(dev, NULL, 0, NULL, 0, &done) == DLRUN_OK, "%s", dlrun_last_error());
    CHECK(dlrun_event_wait(done) == DLRUN_OK, "%s", dlrun_last_error());
    dlrun_copy_op a = {.esize = 4, .ndim = 1}, b = {.esize = 4, .ndim = 2};
    dlrun_copy_op *two[2] = {&a, &b};
    CHECK(pl->copy_boxes(dev, two, 2, NULL, 0, &done) == DLRUN_ERR_VALUE, "mixed ranks taken");
    CHECK_STR_CONTAINS(dlrun_last_error(), "copy_boxes needs ops of one rank and element size");
  }
  dlrun_runtime_release(rt);
}

/* ------------------------------------------------------------ the library's use of it */

static dlrun_platform counting, without;
static atomic_int calls, ops_taken, largest, fail_next;

static dlrun_status count_boxes(dlrun_device *dev, dlrun_copy_op *const *ops, size_t nops,
                                const dlrun_event *waits, size_t nwaits, dlrun_event *done) {
  atomic_fetch_add(&calls, 1);
  if (atomic_exchange(&fail_next, 0)) return DLRUN_ERR_RESOURCE_EXHAUSTED;
  atomic_fetch_add(&ops_taken, (int)nops);
  if ((int)nops > atomic_load(&largest)) atomic_store(&largest, (int)nops);
  return dlrun_platform_find("sim", 3)->copy_boxes(dev, ops, nops, waits, nwaits, done);
}

/* A reshard rows -> columns of an int32 [ndev * 8, ndev * 64] array over the
 * runtime's ndev devices of `platform`: whether its values and transfer
 * counts are right; with `fails`, whether the put failed, leaving the pools
 * as they were, and a second put then succeeded. */
static bool reshard_right(const char *platform, size_t ndev, bool fails) {
  char spec[64];
  snprintf(spec, sizeof spec, "%s:%zu", platform, ndev);
  dlrun_config cfg = {.devices = spec, .device_memory = 1 << 20};
  dlrun_runtime *rt;
  if (dlrun_runtime_create(&cfg, &rt)) return false;
  dlrun_device *devs[128];
  for (size_t i = 0; i < ndev; i++) devs[i] = dlrun_device_get(rt, platform, i);
  int64_t dims[2] = {(int64_t)ndev * 8, (int64_t)ndev * 64};
  size_t n = ndev * 8 * ndev * 64;
  dlrun_put_options copy = {.may_alias = DLRUN_ALIAS_NEVER}; /* one device copies too */
  line_mesh l;
  bool right = line_mesh_make(rt, platform, ndev, &l);
  dlrun_sharding *by_rows = l.rows, *by_cols = l.cols;
  int32_t *host = malloc(n * sizeof *host);
  for (size_t i = 0; i < n; i++) host[i] = (int32_t)(i * 7 + 1);
  dlrun_array *x = NULL, *y = NULL;
  right = right &&
          dlrun_array_from_host(by_rows, DLRUN_INT32, 2, dims, host, n * 4, &x) == DLRUN_OK;
  dlrun_transfer_stats ts;
  if (fails && right) {
    uint64_t before = 0, after = 0;
    dlrun_memory_stats ms;
    for (size_t i = 0; i < ndev; i++) {
      dlrun_device_memory_stats(devs[i], DLRUN_MEM_DEVICE, &ms);
      before += ms.bytes_in_use;
    }
    right = dlrun_device_put(x, by_cols, &copy, &y) == DLRUN_ERR_RESOURCE_EXHAUSTED && !y;
    for (size_t i = 0; i < ndev; i++) {
      dlrun_device_memory_stats(devs[i], DLRUN_MEM_DEVICE, &ms);
      after += ms.bytes_in_use;
    }
    right = right && before == after;
  }
  dlrun_transfer_stats_reset(rt);
  right = right && dlrun_device_put(x, by_cols, &copy, &y) == DLRUN_OK;
  dlrun_transfer_stats_get(rt, &ts);
  right = right && ts.bytes_moved == n * 4 / ndev * (ndev - 1) && ts.local_bytes == n * 4 / ndev &&
          ts.copies == ndev * ndev;
  memset(host, 0, n * sizeof *host);
  right = right && dlrun_array_read(y, 0, n * 4, host) == DLRUN_OK;
  for (size_t i = 0; i < n && right; i++) right = host[i] == (int32_t)(i * 7 + 1);
  free(host);
  dlrun_array_release(x);
  dlrun_array_release(y);
  line_mesh_free(&l);
  dlrun_runtime_release(rt);
  return right;
}

/* reshard_right on ndev devices of fan_counting, the counts reset first
 * (`fails`: the first call to the slot fails). */
static bool counted_reshard(size_t ndev, bool fails) {
  atomic_store(&calls, 0);
  atomic_store(&ops_taken, 0);
  atomic_store(&largest, 0);
  atomic_store(&fail_next, fails);
  return reshard_right("fan_counting", ndev, fails);
}

static void test_library(void) {
  counting = *dlrun_platform_find("sim", 3);
  counting.name = "fan_counting";
  counting.copy_boxes = count_boxes;
  without = *dlrun_platform_find("sim", 3);
  without.name = "fan_without";
  without.copy_boxes = NULL;
  CHECK(dlrun_platform_register(&counting) == DLRUN_OK &&
            dlrun_platform_register(&without) == DLRUN_OK,
        "%s", dlrun_last_error());
  /* Each case: devices, whether the slot fails first; then the calls, the
   * ops it took and the most at once. */
  static const struct {
    const char *name;
    size_t ndev;
    bool fails;
    int calls, ops, largest;
  } cases[] = {
      {"a put's copies on 4 devices go to the platform together, once", 4, false, 1, 4, 4},
      {"on 70 devices, 64 together and then the other 6", 70, false, 2, 70, 64},
      {"when the platform cannot take them, the put fails and leaves the pools; the next works",
       4, true, 2, 4, 4},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    TEST(cases[i].name) {
      CHECK(counted_reshard(cases[i].ndev, cases[i].fails), "values, counts or failure: %s",
            dlrun_last_error());
      CHECK(atomic_load(&calls) == cases[i].calls && atomic_load(&ops_taken) == cases[i].ops &&
                atomic_load(&largest) == cases[i].largest,
            "%d calls, %d ops, at most %d at once", atomic_load(&calls),
            atomic_load(&ops_taken), atomic_load(&largest));
    }
  }
  TEST("a platform without the slot gets each copy on its own, with the same values") {
    atomic_store(&calls, 0);
    CHECK(reshard_right("fan_without", 4, false), "values or counts wrong: %s",
          dlrun_last_error());
    CHECK(reshard_right("fan_without", 1, false), "one device: %s", dlrun_last_error());
    CHECK(reshard_right("fan_counting", 1, false), "one device: %s", dlrun_last_error());
    CHECK(atomic_load(&calls) == 0, "%d calls for one task", atomic_load(&calls));
  }
  dlrun_platform_unregister(&counting);
  dlrun_platform_unregister(&without);
}

int main(void) {
  test_slot("sim:2");
  test_slot("cpu:2");
  test_library();
  return check_summary("fancopy");
}
