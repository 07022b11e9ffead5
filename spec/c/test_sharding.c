/* C tests of shardings, the box copy and the transfer engine. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "array/array_impl.h"
#include "check.h"
#include "device/boxes.h"
#include "device/host_loops.h"
#include "device/streaming.h"
#include "dlrun/dlrun.h"
#include "line_mesh.h"

static dlrun_runtime *rt;

static dlrun_mesh *mesh_2d(int64_t a, int64_t b, const char *na, const char *nb) {
  dlrun_device *devs[64];
  for (int64_t i = 0; i < a * b; i++) devs[i] = dlrun_device_get(rt, "sim", (size_t)i);
  const char *names[2] = {na, nb};
  int64_t sizes[2] = {a, b};
  dlrun_mesh *m = NULL;
  if (dlrun_mesh_create(devs, (size_t)(a * b), 2, names, sizes, &m))
    printf("  mesh: %s\n", dlrun_last_error());
  return m;
}

static dlrun_sharding *named(dlrun_mesh *m, int n, const char *e0, const char *e1) {
  dlrun_partition_spec spec = {.nentries = n};
  const char *e[2] = {e0, e1};
  for (int i = 0; i < n; i++)
    if (e[i]) spec.entries[i] = (dlrun_spec_entry){.naxes = 1, .axes = {e[i]}};
  dlrun_sharding *s = NULL;
  if (dlrun_named_sharding_create(m, &spec, DLRUN_MEM_DEVICE, &s))
    printf("  sharding: %s\n", dlrun_last_error());
  return s;
}

static void test_worked_example(void) {
  TEST("jax.md worked example: mesh 4x2, array 8x2") {
    dlrun_mesh *m = mesh_2d(4, 2, "x", "y");
    dlrun_sharding *xy = named(m, 2, "x", "y"), *y = named(m, 1, "y", NULL);
    int64_t dims[2] = {8, 2}, lo[2], hi[2], ss[2];
    CHECK(dlrun_sharding_check_shape(xy, 2, dims) == DLRUN_OK, "check");
    dlrun_sharding_shard_index(xy, 0, 2, dims, lo, hi);
    CHECK(lo[0] == 0 && hi[0] == 2 && lo[1] == 0 && hi[1] == 1, "dev0 %lld-%lld", (long long)lo[0], (long long)hi[0]);
    dlrun_sharding_shard_index(xy, 1, 2, dims, lo, hi);
    CHECK(lo[0] == 0 && hi[0] == 2 && lo[1] == 1 && hi[1] == 2, "dev1");
    dlrun_sharding_shard_shape(xy, 2, dims, ss);
    CHECK(ss[0] == 2 && ss[1] == 1, "shard shape");
    for (size_t i = 0; i < 8; i++) CHECK(dlrun_sharding_replica_id(xy, i, 2, dims) == 0, "replica %zu", i);
    dlrun_sharding_shard_index(y, 0, 2, dims, lo, hi);
    CHECK(lo[0] == 0 && hi[0] == 4 && lo[1] == 0 && hi[1] == 2, "P(y) dev0");
    dlrun_sharding_shard_index(y, 1, 2, dims, lo, hi);
    CHECK(lo[0] == 4 && hi[0] == 8, "P(y) dev1");
    const int64_t replicas[8] = {0, 0, 1, 1, 2, 2, 3, 3};
    for (size_t i = 0; i < 8; i++)
      CHECK(dlrun_sharding_replica_id(y, i, 2, dims) == replicas[i], "P(y) replica %zu", i);
    CHECK(!dlrun_sharding_is_fully_replicated(y), "replicated");
    dlrun_sharding_release(xy);
    dlrun_sharding_release(y);
    dlrun_mesh_release(m);
  }
}

static void test_messages(void) {
  dlrun_mesh *m = mesh_2d(4, 2, "x", "y");
  TEST("axis not in mesh, axis twice, rank, divisibility") {
    dlrun_sharding *s;
    dlrun_partition_spec z = {.nentries = 1, .entries = {{.naxes = 1, .axes = {"z"}}}};
    CHECK(dlrun_named_sharding_create(m, &z, DLRUN_MEM_DEVICE, &s) == DLRUN_ERR_VALUE, "z");
    CHECK(strcmp(dlrun_last_error(),
                 "Resource axis: z of PartitionSpec('z',) is not found in mesh: ('x', 'y').") == 0,
          "%s", dlrun_last_error());
    dlrun_partition_spec twice = {.nentries = 2,
                                  .entries = {{.naxes = 1, .axes = {"x"}}, {.naxes = 2, .axes = {"y", "x"}}}};
    CHECK(dlrun_named_sharding_create(m, &twice, DLRUN_MEM_DEVICE, &s) == DLRUN_ERR_DUPLICATE_SPEC, "dup");
    CHECK_STR_CONTAINS(dlrun_last_error(), "but PartitionSpec('x', ('y', 'x')) has duplicate entries for `x`");
    dlrun_sharding *x = named(m, 1, "x", NULL);
    int64_t dims[1] = {6};
    CHECK(dlrun_sharding_check_shape(x, 0, dims) == DLRUN_ERR_VALUE, "rank");
    CHECK_STR_CONTAINS(dlrun_last_error(), "rank at least 1, but was applied to a value of rank 0. For scalars the PartitionSpec should be P()");
    CHECK(dlrun_sharding_check_shape(x, 1, dims) == DLRUN_ERR_INDIVISIBLE, "indivisible");
    CHECK(strcmp(dlrun_last_error(),
                 "NamedSharding(mesh=Mesh('x': 4, 'y': 2), spec=PartitionSpec('x',), memory_kind=device) "
                 "implies that array axis 0 is partitioned 4 times, but the dimension size is 6 (full "
                 "shape: (6,), per-dimension tiling factors: (4,) should evenly divide the shape)") == 0,
          "%s", dlrun_last_error());
    dlrun_sharding_release(x);
  }
  TEST("meshes refuse duplicate devices and bad sizes") {
    dlrun_device *d0 = dlrun_device_get(rt, "sim", 0);
    dlrun_device *devs[2] = {d0, d0};
    const char *names[1] = {"x"};
    int64_t sizes[1] = {2};
    dlrun_mesh *bad;
    CHECK(dlrun_mesh_create(devs, 2, 1, names, sizes, &bad) == DLRUN_ERR_VALUE, "dup");
    CHECK_STR_CONTAINS(dlrun_last_error(), "Mesh contains duplicate devices: SimDevice(id=0) appears twice");
    sizes[0] = 3;
    CHECK(dlrun_mesh_create(devs, 2, 1, names, sizes, &bad) == DLRUN_ERR_VALUE, "sizes");
    CHECK_STR_CONTAINS(dlrun_last_error(), "mesh axis sizes multiply to 3 but 2 devices were given");
  }
  dlrun_mesh_release(m);
}

static void test_equivalence(void) {
  TEST("equivalent layouts from different meshes") {
    dlrun_mesh *flat = mesh_2d(8, 1, "x", "unused"), *grid = mesh_2d(2, 4, "a", "b");
    dlrun_sharding *sx = named(flat, 1, "x", NULL);
    dlrun_partition_spec ab = {.nentries = 1, .entries = {{.naxes = 2, .axes = {"a", "b"}}}};
    dlrun_sharding *sab;
    dlrun_named_sharding_create(grid, &ab, DLRUN_MEM_DEVICE, &sab);
    CHECK(dlrun_sharding_is_equivalent(sx, sab, 2), "not equivalent");
    dlrun_sharding *sb = named(grid, 1, "b", NULL);
    CHECK(!dlrun_sharding_is_equivalent(sx, sb, 1), "equivalent to a different layout");
    dlrun_sharding *pinned;
    dlrun_named_sharding_create(flat, dlrun_sharding_spec(sx), DLRUN_MEM_PINNED_HOST, &pinned);
    CHECK(!dlrun_sharding_is_equivalent(sx, pinned, 1), "memory kinds ignored");
    dlrun_sharding *single, *one;
    dlrun_single_device_sharding_create(dlrun_device_get(rt, "sim", 0), DLRUN_MEM_DEVICE, &single);
    dlrun_device *d0 = dlrun_device_get(rt, "sim", 0);
    dlrun_mesh *m1;
    const char *n1[1] = {"x"};
    int64_t s1[1] = {1};
    dlrun_mesh_create(&d0, 1, 1, n1, s1, &m1);
    one = named(m1, 1, "x", NULL);
    CHECK(dlrun_sharding_is_equivalent(single, one, 3), "single vs 1-device mesh");
    dlrun_sharding *list[] = {sx, sab, sb, pinned, single, one};
    for (size_t i = 0; i < 6; i++) dlrun_sharding_release(list[i]);
    dlrun_mesh_release(flat);
    dlrun_mesh_release(grid);
    dlrun_mesh_release(m1);
  }
}

/* Naive reference for the box copy: element by element. */
static void naive_box(size_t esize, int ndim, const int64_t *lo, const int64_t *hi, char *dst,
                      const int64_t *dlo, const int64_t *dshape, const char *src, const int64_t *slo,
                      const int64_t *sshape) {
  int64_t idx[4];
  for (int d = 0; d < ndim; d++) idx[d] = lo[d];
  for (;;) {
    int64_t doff = 0, soff = 0;
    for (int d = 0; d < ndim; d++) {
      doff = doff * dshape[d] + (idx[d] - dlo[d]);
      soff = soff * sshape[d] + (idx[d] - slo[d]);
    }
    memcpy(dst + doff * (int64_t)esize, src + soff * (int64_t)esize, esize);
    int d = ndim - 1;
    while (d >= 0 && ++idx[d] == hi[d]) {
      idx[d] = lo[d];
      d--;
    }
    if (d < 0) return;
  }
}

static void test_box_copy(void) {
  TEST("box copy equals an element-by-element copy (random boxes)") {
    srand(11);
    int ok = 1;
    static char src[4096], a[4096], b[4096];
    for (size_t i = 0; i < sizeof src; i++) src[i] = (char)rand();
    for (int trial = 0; trial < 3000 && ok; trial++) {
      int ndim = 1 + rand() % 4;
      size_t esize = (size_t)1 << (rand() % 3);
      int64_t sshape[4], dshape[4], slo[4], dlo[4], lo[4], hi[4];
      int64_t svol = (int64_t)esize, dvol = (int64_t)esize;
      for (int d = 0; d < ndim; d++) {
        sshape[d] = 1 + rand() % 5;
        dshape[d] = 1 + rand() % 5;
        slo[d] = rand() % 3;
        /* the box must lie in both blocks */
        int64_t l = slo[d] + rand() % sshape[d];
        int64_t h = l + 1 + rand() % (slo[d] + sshape[d] - l);
        lo[d] = l;
        hi[d] = h;
        dlo[d] = l - rand() % (dshape[d] > h - l ? dshape[d] - (h - l) + 1 : 1);
        if (dshape[d] < h - dlo[d]) dshape[d] = h - dlo[d];
        svol *= sshape[d];
        dvol *= dshape[d];
      }
      if (svol > 4096 || dvol > 4096) continue;
      memset(a, 0, sizeof a);
      memset(b, 0, sizeof b);
      int64_t dstr[4], sstr[4];
      dlrun_row_major_strides(ndim, dshape, dstr);
      dlrun_row_major_strides(ndim, sshape, sstr);
      dlrun_host_copy_box(esize, ndim, lo, hi, a, dlo, dstr, src, slo, sstr, trial & 1);
      naive_box(esize, ndim, lo, hi, b, dlo, dshape, src, slo, sshape);
      ok = memcmp(a, b, (size_t)dvol) == 0;
      if (!ok) printf("  trial %d ndim %d differs\n", trial, ndim);
    }
    CHECK(ok, "box copy differs from the reference");
  }
  TEST("large boxes equal an element-by-element copy, at any alignment, streamed or not") {
    /* Runs about the shortest that streams (256 B) and of 4 KiB and more,
     * in boxes of 3 MiB, destinations at odd offsets. */
    const int64_t runs[] = {255, 256, 257, 4096, 4099, 8192 + 37, 65536 + 5};
    const size_t nruns = sizeof runs / sizeof *runs;
    int ok = 1, counted = 1;
    for (size_t t = 0; t < 2 * nruns && ok; t++) {
      bool stream = t >= nruns;
      int64_t run = runs[t % nruns], rows = ((int64_t)3 << 20) / run + 1;
      int64_t sshape[2] = {rows + 3, run * 2 + 7}, dshape[2], dlo[2], slo[2] = {0, 0};
      int64_t lo[2] = {2, run / 3}, hi[2] = {rows + 2, run / 3 + run};
      dlo[1] = lo[1] - 5 - (int64_t)t; /* the destination's columns start 5+t before the box's */
      dshape[1] = hi[1] - dlo[1] + 2;
      dlo[0] = lo[0] - 1;
      dshape[0] = hi[0] - dlo[0];
      size_t sbytes = (size_t)(sshape[0] * sshape[1]), dbytes = (size_t)(dshape[0] * dshape[1]);
      char *src = malloc(sbytes), *a = calloc(dbytes + 1, 1), *b = calloc(dbytes + 1, 1);
      for (size_t i = 0; i < sbytes; i++) src[i] = (char)(i * 7 + i / 4093);
      int64_t dstr[2], sstr[2];
      dlrun_row_major_strides(2, dshape, dstr);
      dlrun_row_major_strides(2, sshape, sstr);
      uint64_t before = dlrun_host_streamed_bytes();
      dlrun_host_copy_box(1, 2, lo, hi, a + 1, dlo, dstr, src, slo, sstr, stream);
      uint64_t streamed = dlrun_host_streamed_bytes() - before;
      naive_box(1, 2, lo, hi, b + 1, dlo, dshape, src, slo, sshape);
      ok = memcmp(a, b, dbytes + 1) == 0;
      if (!ok) printf("  run %lld (streamed: %d) differs\n", (long long)run, (int)stream);
#if defined(__SSE2__) /* the machines that have streaming stores */
      uint64_t want = stream && run >= 256 ? (uint64_t)(run * rows) : 0;
#else
      uint64_t want = 0;
#endif
      if (streamed != want) {
        counted = 0;
        printf("  run %lld (streamed: %d): %llu bytes with streaming stores, want %llu\n",
               (long long)run, (int)stream, (unsigned long long)streamed,
               (unsigned long long)want);
      }
      free(src);
      free(a);
      free(b);
    }
    CHECK(ok, "a large box copy differs from the reference");
    CHECK(counted, "rows of 256 bytes and more stream exactly when the copy does");
  }
}

static void test_index_speed(void) {
  TEST("index maps for 4096 devices are fast") {
    dlrun_runtime *big;
    dlrun_config cfg = {.devices = "sim:4096", .device_memory = 1 << 20};
    if (dlrun_runtime_create(&cfg, &big)) {
      CHECK(0, "runtime: %s", dlrun_last_error());
      return;
    }
    dlrun_device **devs = malloc(4096 * sizeof *devs);
    for (size_t i = 0; i < 4096; i++) devs[i] = dlrun_device_get(big, "sim", i);
    const char *names[2] = {"x", "y"};
    int64_t sizes[2] = {64, 64};
    dlrun_mesh *m;
    dlrun_mesh_create(devs, 4096, 2, names, sizes, &m);
    dlrun_partition_spec spec = {.nentries = 2, .entries = {{.naxes = 1, .axes = {"x"}}, {.naxes = 1, .axes = {"y"}}}};
    dlrun_sharding *s;
    dlrun_named_sharding_create(m, &spec, DLRUN_MEM_DEVICE, &s);
    int64_t dims[2] = {4096, 4096}, lo[2], hi[2];
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int64_t sum = 0;
    for (int rep = 0; rep < 10; rep++)
      for (size_t i = 0; i < 4096; i++) {
        dlrun_sharding_shard_index(s, i, 2, dims, lo, hi);
        sum += lo[0] + lo[1] + dlrun_sharding_replica_id(s, i, 2, dims);
        sum += dlrun_sharding_device_position(s, devs[i]);
      }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    dlrun_sharding_shard_index(s, 4095, 2, dims, lo, hi);
    CHECK(lo[0] == 4032 && lo[1] == 4032 && hi[1] == 4096, "last device %lld %lld", (long long)lo[0], (long long)lo[1]);
    CHECK(secs < 0.1, "10 index maps of 4096 devices took %.3fs (sum %lld)", secs, (long long)sum);
    dlrun_sharding_release(s);
    dlrun_mesh_release(m);
    free(devs);
    dlrun_runtime_release(big);
  }
}

static void test_transfer(void) {
  TEST("reshard rows to columns: right bytes, 7/8 moved, async with dependencies") {
    dlrun_device *devs[8];
    for (size_t i = 0; i < 8; i++) devs[i] = dlrun_device_get(rt, "sim", i);
    const char *names[1] = {"x"};
    int64_t sizes[1] = {8};
    dlrun_mesh *m;
    dlrun_mesh_create(devs, 8, 1, names, sizes, &m);
    dlrun_sharding *rows = named(m, 1, "x", NULL), *cols = named(m, 2, NULL, "x");
    int64_t dims[2] = {64, 64};
    dlrun_scalar start = {.kind = DLRUN_SCALAR_INT, .i = 0}, step = {.kind = DLRUN_SCALAR_INT, .i = 1};
    dlrun_sharding *flat1;
    dlrun_single_device_sharding_create(devs[3], DLRUN_MEM_DEVICE, &flat1);
    dlrun_array *seq, *x, *y;
    /* fill on one device, scatter to rows (queued after the fill), reshard */
    CHECK(dlrun_array_arange(flat1, DLRUN_INT32, &start, &step, 4096, &seq) == DLRUN_OK, "arange");
    dlrun_array *seq2d;
    int32_t *host = malloc(4096 * sizeof *host);
    dlrun_array_read(seq, 0, 4096 * 4, host);
    CHECK(dlrun_array_from_host(rows, DLRUN_INT32, 2, dims, host, 4096 * 4, &seq2d) == DLRUN_OK, "from_host");
    dlrun_transfer_stats_reset(rt);
    CHECK(dlrun_device_put(seq2d, cols, NULL, &y) == DLRUN_OK, "put");
    dlrun_transfer_stats st;
    dlrun_transfer_stats_get(rt, &st);
    CHECK(st.bytes_moved == 4096 * 4 * 7 / 8 && st.local_bytes == 4096 * 4 / 8, "moved %llu local %llu",
          (unsigned long long)st.bytes_moved, (unsigned long long)st.local_bytes);
    CHECK(st.copies == 64 && st.shares == 0, "copies %llu", (unsigned long long)st.copies);
    dlrun_array_release(seq2d); /* the copies still hold the sources */
    memset(host, 0, 4096 * 4);
    CHECK(dlrun_array_read(y, 0, 4096 * 4, host) == DLRUN_OK, "read");
    int right = 1;
    for (int i = 0; i < 4096; i++) right &= host[i] == i;
    CHECK(right, "values differ after reshard");
    /* same sharding: the same array comes back */
    CHECK(dlrun_device_put(y, cols, NULL, &x) == DLRUN_OK && x == y, "not the same array");
    dlrun_array_release(x);
    dlrun_put_options both = {.may_alias = DLRUN_ALIAS_ALLOW, .donate = true};
    CHECK(dlrun_device_put(y, rows, &both, &x) == DLRUN_ERR_VALUE, "may_alias+donate accepted");
    CHECK_STR_CONTAINS(dlrun_last_error(), "may_alias and donate cannot be True at the same time.");
    free(host);
    dlrun_array_release(y);
    dlrun_array_release(seq);
    dlrun_sharding_release(flat1);
    dlrun_sharding_release(rows);
    dlrun_sharding_release(cols);
    dlrun_mesh_release(m);
  }
  TEST("a put that runs out of memory frees everything and leaves the source") {
    dlrun_runtime *small;
    dlrun_config cfg = {.devices = "sim:4", .device_memory = 4096};
    dlrun_runtime_create(&cfg, &small);
    dlrun_device *devs[4];
    for (size_t i = 0; i < 4; i++) devs[i] = dlrun_device_get(small, "sim", i);
    const char *names[1] = {"x"};
    int64_t sizes[1] = {4};
    dlrun_mesh *m;
    dlrun_mesh_create(devs, 4, 1, names, sizes, &m);
    dlrun_partition_spec none = {.nentries = 0};
    dlrun_sharding *rows = named(m, 1, "x", NULL), *repl;
    dlrun_named_sharding_create(m, &none, DLRUN_MEM_DEVICE, &repl);
    int64_t dims[1] = {1024}; /* 4 KiB of float32: a replica fills a device */
    dlrun_scalar one = {.kind = DLRUN_SCALAR_INT, .i = 1};
    dlrun_array *x, *y = NULL;
    CHECK(dlrun_array_full(rows, DLRUN_FLOAT32, 1, dims, &one, &x) == DLRUN_OK, "full");
    uint64_t before[4];
    dlrun_memory_stats ms;
    for (int i = 0; i < 4; i++) {
      dlrun_device_memory_stats(devs[i], DLRUN_MEM_DEVICE, &ms);
      before[i] = ms.bytes_in_use;
    }
    CHECK(dlrun_device_put(x, repl, NULL, &y) == DLRUN_ERR_RESOURCE_EXHAUSTED, "no OOM");
    CHECK(y == NULL, "out set");
    int same = 1;
    for (int i = 0; i < 4; i++) {
      dlrun_device_memory_stats(devs[i], DLRUN_MEM_DEVICE, &ms);
      same &= ms.bytes_in_use == before[i];
    }
    CHECK(same, "pools changed by a failed put");
    float back[1024];
    CHECK(dlrun_array_read(x, 0, sizeof back, back) == DLRUN_OK && back[1023] == 1.0f, "source");
    dlrun_array_release(x);
    dlrun_sharding_release(rows);
    dlrun_sharding_release(repl);
    dlrun_mesh_release(m);
    dlrun_runtime_release(small);
  }
}

/* A reshard rows -> columns of an int32 [rows, 1024] array (runs of 1 KiB)
 * over 4 sim devices of a runtime made with DLRUN_STREAM_BYTES=setting:
 * the bytes it copied with streaming stores (-1: the runtime refused the
 * setting); *right: its values. */
static int64_t streamed_by_reshard(const char *setting, int64_t rows, int *right) {
  setenv("DLRUN_STREAM_BYTES", setting, 1);
  dlrun_config cfg = {.devices = "sim:4", .device_memory = 1 << 24};
  dlrun_runtime *r;
  dlrun_status st = dlrun_runtime_create(&cfg, &r);
  unsetenv("DLRUN_STREAM_BYTES");
  if (st) return -1;
  int64_t dims[2] = {rows, 1024};
  size_t n = (size_t)rows * 1024;
  line_mesh l;
  *right = line_mesh_make(r, "sim", 4, &l);
  dlrun_sharding *by_rows = l.rows, *by_cols = l.cols;
  int32_t *host = malloc(n * sizeof *host);
  for (size_t i = 0; i < n; i++) host[i] = (int32_t)i;
  dlrun_array *x = NULL, *y = NULL;
  dlrun_array_from_host(by_rows, DLRUN_INT32, 2, dims, host, n * sizeof *host, &x);
  uint64_t before = dlrun_host_streamed_bytes();
  *right = *right && dlrun_device_put(x, by_cols, NULL, &y) == DLRUN_OK &&
           dlrun_array_block_until_ready(y) == DLRUN_OK;
  int64_t streamed = (int64_t)(dlrun_host_streamed_bytes() - before);
  memset(host, 0, n * sizeof *host);
  *right = *right && dlrun_array_read(y, 0, n * sizeof *host, host) == DLRUN_OK;
  for (size_t i = 0; i < n && *right; i++) *right = host[i] == (int32_t)i;
  free(host);
  dlrun_array_release(x);
  dlrun_array_release(y);
  line_mesh_free(&l);
  dlrun_runtime_release(r);
  return streamed;
}

static void test_streaming(void) {
  TEST("a put that writes DLRUN_STREAM_BYTES or more streams every long run; a smaller one, "
       "or with the setting off, none; auto is off where processes outnumber cores; a bad "
       "setting is refused") {
#if defined(__SSE2__)
    const int64_t all = 512 * 1024 * 4; /* every piece's runs are 1 KiB */
#else
    const int64_t all = 0; /* no streaming stores here: the hint is ignored */
#endif
    const struct {
      const char *setting;
      int64_t rows, want;
    } cases[] = {{"1MiB", 512, all}, {"2MiB", 512, all}, {"2097153", 512, 0},
                 {"1MiB", 64, 0},    {"off", 512, 0},    {"auto", 512, 0}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
      int right = 0;
      int64_t got = streamed_by_reshard(cases[i].setting, cases[i].rows, &right);
      CHECK(got == cases[i].want && right,
            "DLRUN_STREAM_BYTES=%s, %lld rows: %lld bytes streamed, want %lld; values %s",
            cases[i].setting, (long long)cases[i].rows, (long long)got,
            (long long)cases[i].want, right ? "right" : "wrong");
    }
    int right;
    CHECK(streamed_by_reshard("lots", 64, &right) == -1, "DLRUN_STREAM_BYTES=lots accepted");
    CHECK_STR_CONTAINS(dlrun_last_error(), "DLRUN_STREAM_BYTES=\"lots\" is not auto, off or a "
                                           "size");
    /* More processes than cores on this host: auto is off, a size is kept. */
    uint64_t bytes = 0;
    CHECK(dlrun_stream_setting(true, &bytes) == DLRUN_OK && bytes == UINT64_MAX,
          "crowded auto: %llu", (unsigned long long)bytes);
    CHECK(dlrun_stream_setting(false, &bytes) == DLRUN_OK && bytes == 16 << 20,
          "auto: %llu", (unsigned long long)bytes);
    setenv("DLRUN_STREAM_BYTES", "1MiB", 1);
    CHECK(dlrun_stream_setting(true, &bytes) == DLRUN_OK && bytes == 1 << 20,
          "crowded 1MiB: %llu", (unsigned long long)bytes);
    setenv("DLRUN_STREAM_BYTES", "0", 1);
    dlrun_config cfg = {.devices = "sim:1"};
    CHECK(dlrun_check_config(&cfg) == DLRUN_ERR_VALUE, "dlrun_check_config took 0 bytes");
    CHECK_STR_CONTAINS(dlrun_last_error(), "e.g. \"16MiB\"");
    unsetenv("DLRUN_STREAM_BYTES");
  }
}

int main(void) {
  dlrun_config cfg = {.devices = "sim:8", .device_memory = 1 << 24};
  if (dlrun_runtime_create(&cfg, &rt)) {
    printf("runtime: %s\n", dlrun_last_error());
    return 1;
  }
  test_worked_example();
  test_messages();
  test_equivalence();
  test_box_copy();
  test_index_speed();
  test_transfer();
  test_streaming();
  dlrun_runtime_release(rt);
  return check_summary("sharding");
}
