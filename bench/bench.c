/* dlrun benchmarks 1, 2, 3, 5, 6 and 9 (OpenCL), each against an in-process
 * C reference on the same bytes (see bench/README.md).
 *
 *   bench [--quick] [--only NAME[,NAME...]]
 *
 * NAME: gather, column_gather, reshard, pool, scale, opencl. Prints one JSON object
 * (all numbers, medians and every sample) on stdout; progress goes to stderr.
 * Exit status 1 when dlrun fails a call or a correctness check (a wrong
 * result, transfer_stats not exactly 7/8), 0 otherwise: missing a speed
 * target is reported, not an error (bench/run.sh judges the targets).
 *
 * Timing: CLOCK_MONOTONIC wall time. dlrun calls are timed from the call to
 * the end of block_until_ready, after one untimed warm-up run so that the
 * destination pools are warm (pages already touched); references run on
 * pre-touched memory. Each figure is the median of several runs. The
 * gathers have two memcpy references: one memcpy of the whole array on one
 * thread, and the same pieces as dlrun's copy split over as many threads as
 * the engine runs (the machine's copy limit for that work). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "dlrun/dlrun.h"
#include "dlrun/platform.h" /* dlrun_platforms_list: is OpenCL there (9) */
#include "median.h"
#include "mem/pool.h" /* internal: the pool benchmark drives a pool directly */

#define MIB (1024.0 * 1024.0)

/* ------------------------------------------------------------ utilities */

static bool quick;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void note(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs("bench: ", stderr);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
}

#define CHECK(call)                                                                        \
  do {                                                                                     \
    dlrun_status st_ = (call);                                                             \
    if (st_ != DLRUN_OK) {                                                                 \
      fprintf(stderr, "bench: %s:%d: %s failed: %s: %s\n", __FILE__, __LINE__, #call,      \
              dlrun_status_name(st_), dlrun_last_error());                                 \
      exit(1);                                                                             \
    }                                                                                      \
  } while (0)

static void die(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs("bench: ", stderr);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  exit(1);
}

static void *xmalloc(size_t n) {
  void *p = malloc(n ? n : 1);
  if (!p) die("out of host memory (%zu bytes)", n);
  return p;
}


/* Host memory, touched (page faults out of the way). */
static void *touched(size_t n, unsigned char fill) {
  void *p = xmalloc(n);
  memset(p, fill, n);
  return p;
}

/* Keeps the compiler from dropping work whose result is otherwise unused. */
void *volatile bench_sink;

/* ------------------------------------------------------------ JSON out */

static FILE *js;
static int js_depth;
static bool js_first[16];

static void js_sep(void) {
  if (!js_first[js_depth]) fputc(',', js);
  js_first[js_depth] = false;
}
static void js_key(const char *k) {
  js_sep();
  fprintf(js, "\"%s\":", k);
}
static void js_open(const char *k) {
  if (k) js_key(k); else js_sep();
  fputc('{', js);
  js_first[++js_depth] = true;
}
static void js_close(void) {
  fputc('}', js);
  js_depth--;
}
static void js_num(const char *k, double v) {
  js_key(k);
  if (isfinite(v)) fprintf(js, "%.9g", v); else fputs("null", js);
}
static void js_int(const char *k, long long v) {
  js_key(k);
  fprintf(js, "%lld", v);
}
/* A string value, escaped as JSON needs. */
static void js_str(const char *k, const char *v) {
  js_key(k);
  fputc('"', js);
  for (const unsigned char *p = (const unsigned char *)v; *p; p++) {
    if (*p == '"' || *p == '\\') fprintf(js, "\\%c", *p);
    else if (*p < 0x20) fprintf(js, "\\u%04x", *p);
    else fputc(*p, js);
  }
  fputc('"', js);
}
static void js_bool(const char *k, bool v) {
  js_key(k);
  fputs(v ? "true" : "false", js);
}
static void js_nums(const char *k, const double *v, int n) {
  js_key(k);
  fputc('[', js);
  for (int i = 0; i < n; i++) fprintf(js, "%s%.9g", i ? "," : "", v[i]);
  fputc(']', js);
}
static void js_ints(const char *k, const long long *v, int n) {
  js_key(k);
  fputc('[', js);
  for (int i = 0; i < n; i++) fprintf(js, "%s%lld", i ? "," : "", v[i]);
  fputc(']', js);
}

/* ------------------------------------------------------------ dlrun helpers */

static dlrun_runtime *make_runtime(const char *devices, uint64_t device_memory) {
  dlrun_config cfg = {.devices = devices, .device_memory = device_memory};
  dlrun_runtime *rt;
  CHECK(dlrun_runtime_create(&cfg, &rt));
  return rt;
}

/* A 1-axis mesh "x" over the first n devices of `platform`. */
static dlrun_mesh *make_mesh(dlrun_runtime *rt, const char *platform, size_t n) {
  dlrun_device **devs = xmalloc(n * sizeof *devs);
  for (size_t i = 0; i < n; i++)
    if (!(devs[i] = dlrun_device_get(rt, platform, i))) die("no %s device %zu", platform, i);
  const char *names[1] = {"x"};
  int64_t sizes[1] = {(int64_t)n};
  dlrun_mesh *m;
  CHECK(dlrun_mesh_create(devs, n, 1, names, sizes, &m));
  free(devs);
  return m;
}

/* NamedSharding(mesh, P(...)) of a 2-d array split along `dim` (0 rows, 1 columns). */
static dlrun_sharding *split_sharding(dlrun_mesh *m, int dim) {
  dlrun_partition_spec spec;
  memset(&spec, 0, sizeof spec);
  spec.nentries = dim + 1;
  spec.entries[dim].naxes = 1;
  spec.entries[dim].axes[0] = "x";
  dlrun_sharding *s;
  CHECK(dlrun_named_sharding_create(m, &spec, DLRUN_MEM_DEVICE, &s));
  return s;
}

static dlrun_sharding *device_sharding(dlrun_runtime *rt, const char *platform, size_t i) {
  dlrun_sharding *s;
  CHECK(dlrun_single_device_sharding_create(dlrun_device_get(rt, platform, i), DLRUN_MEM_DEVICE,
                                            &s));
  return s;
}

/* Host data of a float32 [rows, cols] array: element (r, c) = r * cols + c
 * (exact in float32 below 2^24; beyond, still a fixed pattern to compare). */
static float *host_matrix(int64_t rows, int64_t cols) {
  float *h = xmalloc((size_t)(rows * cols) * sizeof *h);
  for (int64_t i = 0; i < rows * cols; i++) h[i] = (float)i;
  return h;
}

/* One device_put(src, dst) + block_until_ready, timed; the result is
 * released after the clock stops. With `check` (host copy of the whole
 * array, row major) the result is read back and compared first. */
static double put_once(dlrun_array *src, dlrun_sharding *dst, const float *check,
                       const char *what) {
  dlrun_array *y;
  double t0 = now_s();
  CHECK(dlrun_device_put(src, dst, NULL, &y));
  CHECK(dlrun_array_block_until_ready(y));
  double t = now_s() - t0;
  if (check) {
    uint64_t n = dlrun_array_nbytes(y);
    void *back = xmalloc(n);
    CHECK(dlrun_array_read(y, 0, n, back));
    if (memcmp(back, check, n) != 0) die("%s: the result differs from the source", what);
    free(back);
  }
  dlrun_array_release(y);
  return t;
}

/* ------------------------------------------------------------ parallel memcpy reference */

/* The number of copy threads the engine runs: the rule of worker_count() in
 * src/device/runtime.c (online CPUs, at least 2, at most 64), which no
 * public call reports. */
static int engine_threads(void) {
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  if (n < 2) n = 2;
  if (n > 64) n = 64;
  return (int)n;
}

/* A gather's bytes as the engine sees them: `nsrc` source shards, each
 * contiguous, holding `rows` pieces of `piece` bytes one after another. The
 * destination holds piece (row r, shard s) at index r * nsrc + s, every
 * piece after the previous one: row sharding is nsrc pieces of a whole
 * shard (rows 1), column sharding one piece per row and shard. */
typedef struct gather_layout {
  size_t nsrc, rows, piece;
} gather_layout;

/* The reference: `nthreads` threads (the calling one and nthreads - 1
 * started once, waiting on a barrier between runs, as the engine's workers
 * wait between tasks), thread i copying the i-th contiguous share of the
 * destination's bytes, piece by piece from the shard each piece comes from. */
typedef struct par_copy {
  gather_layout l;
  const unsigned char *src; /* the nsrc shards, one after another */
  unsigned char *dst;
  int nthreads;
  pthread_t *threads;
  struct par_arg *args;
  pthread_barrier_t start, done;
  bool stop; /* read by the threads after `start`, which orders it */
} par_copy;

typedef struct par_arg {
  par_copy *pc;
  int i;
} par_arg;

static void par_share(const par_copy *pc, int i) {
  size_t p = pc->l.piece, total = pc->l.nsrc * pc->l.rows * p;
  size_t a = total / (size_t)pc->nthreads * (size_t)i;
  size_t b = i == pc->nthreads - 1 ? total : total / (size_t)pc->nthreads * (size_t)(i + 1);
  size_t shard = pc->l.rows * p;
  while (a < b) {
    size_t k = a / p, off = a % p, n = p - off < b - a ? p - off : b - a;
    const unsigned char *from = pc->src + (k % pc->l.nsrc) * shard + (k / pc->l.nsrc) * p + off;
    memcpy(pc->dst + a, from, n);
    a += n;
  }
}

static void *par_thread(void *arg) {
  par_arg *pa = arg;
  for (;;) {
    pthread_barrier_wait(&pa->pc->start);
    if (pa->pc->stop) return NULL;
    par_share(pa->pc, pa->i);
    pthread_barrier_wait(&pa->pc->done);
  }
}

static void par_start(par_copy *pc, gather_layout l, const unsigned char *src, unsigned char *dst,
                      int nthreads) {
  *pc = (par_copy){.l = l, .src = src, .dst = dst, .nthreads = nthreads};
  pthread_barrier_init(&pc->start, NULL, (unsigned)nthreads);
  pthread_barrier_init(&pc->done, NULL, (unsigned)nthreads);
  pc->threads = xmalloc((size_t)nthreads * sizeof *pc->threads);
  pc->args = xmalloc((size_t)nthreads * sizeof *pc->args);
  for (int i = 1; i < nthreads; i++) {
    pc->args[i] = (par_arg){pc, i};
    if (pthread_create(&pc->threads[i], NULL, par_thread, &pc->args[i]))
      die("parallel memcpy: cannot start thread %d of %d", i, nthreads);
  }
}

/* One parallel copy, timed from the release of the threads to the last one's end. */
static double par_run(par_copy *pc) {
  double t0 = now_s();
  pthread_barrier_wait(&pc->start);
  par_share(pc, 0);
  pthread_barrier_wait(&pc->done);
  double t = now_s() - t0;
  bench_sink = pc->dst;
  return t;
}

static void par_stop(par_copy *pc) {
  pc->stop = true;
  pthread_barrier_wait(&pc->start);
  for (int i = 1; i < pc->nthreads; i++) pthread_join(pc->threads[i], NULL);
  pthread_barrier_destroy(&pc->start);
  pthread_barrier_destroy(&pc->done);
  free(pc->threads);
  free(pc->args);
}

/* device_put against memcpy of `ref_bytes` between pre-touched host
 * buffers, alternating run by run so that drifts of a shared machine hit
 * all alike. With `par` (a gather's layout; needs `check`), also against the
 * parallel reference (pref): the same pieces, read from shards laid out as
 * the engine's, by the engine's number of threads. One warm-up each;
 * `check` as put_once, on the warm-up; the parallel result is checked too. */
static void time_put_vs_memcpy(dlrun_array *src, dlrun_sharding *dst, size_t ref_bytes, int reps,
                               double *dl, double *ref, const gather_layout *par, double *pref,
                               const float *check, const char *what) {
  unsigned char *from = touched(ref_bytes, 1), *to = touched(ref_bytes, 2);
  unsigned char *psrc = NULL, *pdst = NULL;
  par_copy pc;
  if (par) {
    /* The shards: piece k of the result comes from shard k % nsrc. */
    size_t shard = par->rows * par->piece, npieces = par->nsrc * par->rows;
    psrc = touched(ref_bytes, 3);
    pdst = touched(ref_bytes, 4);
    for (size_t k = 0; k < npieces; k++)
      memcpy(psrc + (k % par->nsrc) * shard + (k / par->nsrc) * par->piece,
             (const unsigned char *)check + k * par->piece, par->piece);
    par_start(&pc, *par, psrc, pdst, engine_threads());
  }
  for (int r = -1; r < reps; r++) {
    double t = put_once(src, dst, r < 0 ? check : NULL, what);
    double t0 = now_s();
    memcpy(to, from, ref_bytes);
    bench_sink = to;
    double t1 = now_s();
    double tp = par ? par_run(&pc) : 0;
    if (r >= 0) {
      dl[r] = t;
      ref[r] = t1 - t0;
      if (par) pref[r] = tp;
    }
  }
  if (to[ref_bytes - 1] != 1) die("memcpy reference did not copy");
  if (par) {
    par_stop(&pc);
    if (memcmp(pdst, check, ref_bytes) != 0) die("%s: the parallel memcpy reference differs", what);
    free(psrc);
    free(pdst);
  }
  free(from);
  free(to);
}

/* ------------------------------------------------------------ 1, 2, 3: gather and reshard */

typedef struct shape2 {
  int64_t rows, cols;
} shape2;

static void emit_samples(const char *key, const double *v, int reps) {
  char k[64];
  js_num(key, median(v, reps));
  snprintf(k, sizeof k, "%s_samples", key);
  js_nums(k, v, reps);
}

/* The runs alternate: the median of the run-by-run ratios is robust against
 * a machine whose speed drifts. */
static void emit_paired(const char *key, const double *dl, const double *ref, int reps) {
  double *pr = xmalloc((size_t)reps * sizeof *pr);
  for (int r = 0; r < reps; r++) pr[r] = ref[r] / dl[r];
  js_num(key, median(pr, reps));
  free(pr);
}

static void emit_pair(const char *dl_key, const double *dl, const char *ref_key, const double *ref,
                      int reps) {
  emit_paired("paired_ratio_median", dl, ref, reps);
  emit_samples(dl_key, dl, reps);
  emit_samples(ref_key, ref, reps);
}

static void emit_parallel(const gather_layout *l, const double *dl, const double *pref, int reps) {
  js_int("parallel_threads", engine_threads());
  js_int("parallel_pieces", (long long)(l->nsrc * l->rows));
  js_int("parallel_piece_bytes", (long long)l->piece);
  emit_paired("parallel_paired_ratio_median", dl, pref, reps);
  emit_samples("parallel_memcpy_s", pref, reps);
}

static bool bench_gathers(bool do_gather, bool do_cols, bool do_reshard) {
  bool ok = true;
  shape2 sh = quick ? (shape2){4096, 2048} : (shape2){16384, 4096}; /* 32 / 256 MiB */
  int reps = quick ? 5 : 11;
  const size_t ndev = 8;
  uint64_t nbytes = (uint64_t)(sh.rows * sh.cols) * sizeof(float);
  note("gather/reshard: float32[%lld,%lld] (%.0f MiB) over %zu sim devices, %d runs",
       (long long)sh.rows, (long long)sh.cols, nbytes / MIB, ndev, reps);

  dlrun_runtime *rt = make_runtime("sim:8", nbytes * 4);
  dlrun_mesh *mesh = make_mesh(rt, "sim", ndev);
  dlrun_sharding *rows = split_sharding(mesh, 0), *cols = split_sharding(mesh, 1);
  dlrun_sharding *one = device_sharding(rt, "sim", 0);
  float *host = host_matrix(sh.rows, sh.cols);
  int64_t dims[2] = {sh.rows, sh.cols};
  double *dl = xmalloc((size_t)reps * sizeof *dl), *ref = xmalloc((size_t)reps * sizeof *ref);
  double *pref = xmalloc((size_t)reps * sizeof *pref);
  /* The gathers' pieces: a whole row shard each; a row of a column shard each. */
  size_t row_bytes = (size_t)sh.cols * sizeof(float);
  gather_layout by_rows = {.nsrc = ndev, .rows = 1, .piece = nbytes / ndev};
  gather_layout by_cols = {.nsrc = ndev, .rows = (size_t)sh.rows, .piece = row_bytes / ndev};
  dlrun_transfer_stats ts;

  if (do_gather || do_reshard) {
    dlrun_array *x;
    CHECK(dlrun_array_from_host(rows, DLRUN_FLOAT32, 2, dims, host, nbytes, &x));
    CHECK(dlrun_array_block_until_ready(x));
    if (do_gather) {
      note("1 gather: rows-sharded -> SimDevice(id=0)");
      time_put_vs_memcpy(x, one, nbytes, reps, dl, ref, &by_rows, pref, host, "gather");
      js_open("gather");
      js_int("bytes", (long long)nbytes);
      js_ints("shape", (long long[]){sh.rows, sh.cols}, 2);
      js_int("devices", (long long)ndev);
      js_int("runs", reps);
      emit_pair("dlrun_s", dl, "memcpy_s", ref, reps);
      emit_parallel(&by_rows, dl, pref, reps);
      js_close();
    }
    if (do_reshard) {
      note("3 reshard: P('x', nil) -> P(nil, 'x')");
      uint64_t must_move = nbytes / ndev * (ndev - 1);
      /* One put on its own, with fresh stats: exactly 7/8 must move. */
      dlrun_array *y;
      dlrun_transfer_stats_reset(rt);
      CHECK(dlrun_device_put(x, cols, NULL, &y));
      CHECK(dlrun_array_block_until_ready(y));
      dlrun_transfer_stats_get(rt, &ts);
      dlrun_array_release(y);
      bool exact = ts.bytes_moved == must_move;
      if (!exact) {
        ok = false;
        note("3 reshard: transfer_stats bytes_moved %llu, want exactly %llu (7/8)",
             (unsigned long long)ts.bytes_moved, (unsigned long long)must_move);
      }
      time_put_vs_memcpy(x, cols, must_move, reps, dl, ref, NULL, NULL, NULL, "reshard");
      /* The values: gather the columns back to one device and compare. */
      CHECK(dlrun_device_put(x, cols, NULL, &y));
      dlrun_array *back;
      CHECK(dlrun_device_put(y, one, NULL, &back));
      float *got = xmalloc(nbytes);
      CHECK(dlrun_array_read(back, 0, nbytes, got));
      if (memcmp(got, host, nbytes) != 0) {
        ok = false;
        note("3 reshard: values differ after rows -> cols -> one device");
      }
      free(got);
      dlrun_array_release(back);
      dlrun_array_release(y);
      js_open("reshard");
      js_int("bytes", (long long)nbytes);
      js_int("memcpy_bytes", (long long)must_move);
      js_int("devices", (long long)ndev);
      js_int("runs", reps);
      emit_pair("dlrun_s", dl, "memcpy_s", ref, reps);
      js_int("bytes_moved", (long long)ts.bytes_moved);
      js_int("local_bytes", (long long)ts.local_bytes);
      js_int("copies", (long long)ts.copies);
      js_int("shares", (long long)ts.shares);
      js_int("expected_bytes_moved", (long long)must_move);
      js_bool("bytes_moved_exact", exact);
      js_close();
    }
    dlrun_array_release(x);
  }

  if (do_cols) {
    note("2 column gather: columns-sharded -> SimDevice(id=0)");
    dlrun_array *x;
    CHECK(dlrun_array_from_host(cols, DLRUN_FLOAT32, 2, dims, host, nbytes, &x));
    CHECK(dlrun_array_block_until_ready(x));
    time_put_vs_memcpy(x, one, nbytes, reps, dl, ref, &by_cols, pref, host, "column gather");
    dlrun_array_release(x);
    js_open("column_gather");
    js_int("bytes", (long long)nbytes);
    js_ints("shape", (long long[]){sh.rows, sh.cols}, 2);
    js_int("devices", (long long)ndev);
    js_int("runs", reps);
    emit_pair("dlrun_s", dl, "memcpy_s", ref, reps);
    emit_parallel(&by_cols, dl, pref, reps);
    js_close();
  }

  free(dl);
  free(ref);
  free(pref);
  free(host);
  dlrun_sharding_release(one);
  dlrun_sharding_release(rows);
  dlrun_sharding_release(cols);
  dlrun_mesh_release(mesh);
  dlrun_runtime_release(rt);
  return ok;
}

/* ------------------------------------------------------------ 5: pools */

/* xorshift64*: the trace is the same on every machine and every run. */
static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint64_t rng_next(void) {
  uint64_t x = rng_state;
  x ^= x >> 12;
  x ^= x << 25;
  x ^= x >> 27;
  rng_state = x;
  return x * 0x2545F4914F6CDD1Dull;
}
static double rng_unit(void) { return (double)(rng_next() >> 11) * (1.0 / 9007199254740992.0); }

typedef struct trace_op {
  uint32_t slot; /* allocation number */
  uint32_t is_free;
  uint64_t size; /* bytes requested (allocs) */
} trace_op;

typedef struct trace {
  trace_op *ops;
  size_t nops, nallocs;
  size_t peak_op;     /* ops[0..peak_op] done: live bytes are at their peak */
  uint64_t peak_live; /* requested bytes live at the peak */
  size_t peak_count;  /* live allocations at the peak */
  uint64_t min_size, max_size;
  double mean_size;
} trace;

/* A mixed-size trace: `nallocs` allocations of sizes log-uniform in
 * [256 B, 64 MiB], interleaved with frees. Each step allocates or frees; the
 * chance to free grows with the number of live blocks (about `target` live
 * at equilibrium), and an allocation that would take the live bytes over
 * `cap` frees instead. A free takes the newest live block half of the time
 * (short-lived temporaries) and a random live one otherwise (long-lived
 * data). Everything still live at the end is freed in random order. */
static trace make_trace(size_t nallocs, size_t target, uint64_t cap) {
  trace t = {0};
  t.ops = xmalloc(2 * nallocs * sizeof *t.ops);
  uint32_t *live = xmalloc(nallocs * sizeof *live);
  uint64_t *size_of = xmalloc(nallocs * sizeof *size_of);
  size_t nlive = 0;
  uint64_t live_bytes = 0;
  const double lo = log(256.0), hi = log(64.0 * MIB);
  t.min_size = UINT64_MAX;
  double total = 0;
  uint64_t pending = 0; /* size drawn for the next allocation (0: none) */
  while (t.nallocs < nallocs || nlive) {
    if (t.nallocs < nallocs && !pending) pending = (uint64_t)llround(exp(lo + (hi - lo) * rng_unit()));
    bool do_free;
    if (t.nallocs == nallocs) do_free = true;
    else if (!nlive) do_free = false;
    else if (live_bytes + pending > cap) do_free = true;
    else do_free = rng_unit() < (double)nlive / (double)(nlive + target);
    if (do_free) {
      size_t k = t.nallocs == nallocs || rng_unit() < 0.5 ? (size_t)(rng_next() % nlive) : nlive - 1;
      uint32_t slot = live[k];
      live[k] = live[--nlive];
      live_bytes -= size_of[slot];
      t.ops[t.nops++] = (trace_op){.slot = slot, .is_free = 1, .size = size_of[slot]};
    } else {
      uint32_t slot = (uint32_t)t.nallocs++;
      size_of[slot] = pending;
      pending = 0;
      live[nlive++] = slot;
      live_bytes += size_of[slot];
      t.ops[t.nops++] = (trace_op){.slot = slot, .is_free = 0, .size = size_of[slot]};
      total += (double)size_of[slot];
      if (size_of[slot] < t.min_size) t.min_size = size_of[slot];
      if (size_of[slot] > t.max_size) t.max_size = size_of[slot];
      if (live_bytes > t.peak_live) {
        t.peak_live = live_bytes;
        t.peak_op = t.nops - 1;
        t.peak_count = nlive;
      }
    }
  }
  t.mean_size = total / (double)t.nallocs;
  free(live);
  free(size_of);
  return t;
}

/* Replay ops[0..n) on the pool. Returns false when an allocation fails. */
static bool replay_pool(dlrun_pool *pool, const trace *t, size_t n, dlrun_block **blocks) {
  for (size_t i = 0; i < n; i++) {
    const trace_op *op = &t->ops[i];
    if (op->is_free) {
      dlrun_pool_free(pool, blocks[op->slot]);
    } else if (dlrun_pool_alloc(pool, op->size, &blocks[op->slot]) != DLRUN_OK) {
      note("5 pool: allocation %u of %llu bytes failed: %s", op->slot,
           (unsigned long long)op->size, dlrun_last_error());
      return false;
    }
  }
  return true;
}

static bool replay_malloc(const trace *t, void **ptrs) {
  for (size_t i = 0; i < t->nops; i++) {
    const trace_op *op = &t->ops[i];
    if (op->is_free) {
      free(ptrs[op->slot]);
    } else if (!(ptrs[op->slot] = malloc(op->size))) {
      return false;
    }
  }
  bench_sink = ptrs;
  return true;
}

static bool bench_pool(void) {
  size_t nallocs = quick ? 20000 : 50000;
  int reps = quick ? 5 : 9;
  const uint64_t capacity = 4ull << 30, cap = 7ull << 28; /* pool 4 GiB; live <= 1.75 GiB */
  trace t = make_trace(nallocs, 200, cap);
  note("5 pool: %zu ops (%zu allocations, %llu..%llu bytes, mean %.0f), peak live %.0f MiB in "
       "%zu blocks, %d runs", t.nops, t.nallocs, (unsigned long long)t.min_size,
       (unsigned long long)t.max_size, t.mean_size, t.peak_live / MIB, t.peak_count, reps);
  dlrun_pool *pool;
  CHECK(dlrun_pool_create("bench", capacity, &pool));
  dlrun_block **blocks = xmalloc(t.nallocs * sizeof *blocks);
  void **ptrs = xmalloc(t.nallocs * sizeof *ptrs);
  double *dl = xmalloc((size_t)reps * sizeof *dl), *ref = xmalloc((size_t)reps * sizeof *ref);
  bool ok = true;

  /* Fragmentation at the peak: replay up to it, look, finish (untimed; also
   * the warm-up). */
  dlrun_pool_stats at_peak;
  if (!replay_pool(pool, &t, t.peak_op + 1, blocks)) die("5 pool: the trace does not fit");
  dlrun_pool_get_stats(pool, &at_peak);
  trace rest = t;
  rest.ops = t.ops + t.peak_op + 1;
  if (!replay_pool(pool, &rest, t.nops - t.peak_op - 1, blocks)) die("5 pool: the trace does not fit");
  dlrun_pool_stats end;
  dlrun_pool_get_stats(pool, &end);
  if (end.bytes_in_use != 0 || dlrun_pool_free_chunk_count(pool) != 1) {
    ok = false;
    note("5 pool: after the trace %llu bytes in use, %zu free chunks (want 0 and 1)",
         (unsigned long long)end.bytes_in_use, dlrun_pool_free_chunk_count(pool));
  }
  if (!replay_malloc(&t, ptrs)) die("5 pool: malloc failed on the trace");

  /* Interleave the two so that drifts of the machine hit both alike. */
  for (int r = 0; r < reps; r++) {
    double t0 = now_s();
    bool fit = replay_pool(pool, &t, t.nops, blocks);
    double t1 = now_s();
    if (!fit) die("5 pool: the trace does not fit");
    bool m = replay_malloc(&t, ptrs);
    double t2 = now_s();
    if (!m) die("5 pool: malloc failed on the trace");
    dl[r] = t1 - t0;
    ref[r] = t2 - t1;
  }
  dlrun_pool_check(pool) == DLRUN_OK ? (void)0 : (void)(ok = false, note("5 pool: %s", dlrun_last_error()));

  js_open("pool");
  js_int("ops", (long long)t.nops);
  js_int("allocs", (long long)t.nallocs);
  js_int("min_size", (long long)t.min_size);
  js_int("max_size", (long long)t.max_size);
  js_num("mean_size", t.mean_size);
  js_int("capacity", (long long)capacity);
  js_int("runs", reps);
  emit_pair("dlrun_s", dl, "malloc_s", ref, reps);
  js_num("dlrun_ns_per_op", median(dl, reps) / (double)t.nops * 1e9);
  js_num("malloc_ns_per_op", median(ref, reps) / (double)t.nops * 1e9);
  js_open("peak");
  js_int("op", (long long)t.peak_op);
  js_int("live_blocks", (long long)t.peak_count);
  js_int("requested_bytes", (long long)t.peak_live);
  js_int("bytes_in_use", (long long)at_peak.bytes_in_use);
  js_int("bytes_reserved", (long long)at_peak.bytes_reserved);
  js_int("free_bytes", (long long)at_peak.free_bytes);
  js_int("largest_free_block_bytes", (long long)at_peak.largest_free_block_bytes);
  js_num("fragmentation", at_peak.fragmentation);
  /* The same measure over the part of the range ever used: free space
   * between the peak's blocks that no block that size could use. */
  uint64_t hole = at_peak.bytes_reserved - at_peak.bytes_in_use;
  js_int("free_bytes_below_high_water", (long long)hole);
  js_close();
  js_close();
  note("5 pool: fragmentation at the peak %.4f (largest free %.0f MiB of %.0f MiB free; %.0f MiB "
       "free below the high-water mark of %.0f MiB)", at_peak.fragmentation,
       at_peak.largest_free_block_bytes / MIB, at_peak.free_bytes / MIB, hole / MIB,
       at_peak.bytes_reserved / MIB);

  free(dl);
  free(ref);
  free(blocks);
  free(ptrs);
  free(t.ops);
  dlrun_pool_destroy(pool);
  return ok;
}

/* ------------------------------------------------------------ 6: scale */

/* One device count's set-up: its own runtime, the source on device 0, the
 * row sharding over all its devices. */
typedef struct scale_setup {
  dlrun_runtime *rt;
  dlrun_sharding *one, *rows;
  dlrun_mesh *mesh;
  dlrun_array *x;
} scale_setup;

static bool bench_scale(void) {
  static const size_t counts[] = {8, 64, 512, 4096};
  enum { NC = sizeof counts / sizeof counts[0] };
  int reps = quick ? 5 : 15, map_reps = quick ? 5 : 21;
  shape2 sh = {8192, 2048}; /* 64 MiB float32; rows divide by 4096 */
  uint64_t nbytes = (uint64_t)(sh.rows * sh.cols) * sizeof(float);
  int64_t dims[2] = {sh.rows, sh.cols};
  note("6 scale: float32[%lld,%lld] (%.0f MiB) from SimDevice(id=0) onto 8..4096 devices, %d "
       "runs each, interleaved", (long long)sh.rows, (long long)sh.cols, nbytes / MIB, reps);
  float *host = host_matrix(sh.rows, sh.cols);
  double med[NC], create_s[NC];
  double *samples = xmalloc((size_t)(NC * reps) * sizeof *samples);
  double map_s = 0, map_replica_s = 0;
  bool ok = true;
  scale_setup su[NC];
  for (int c = 0; c < NC; c++) {
    char spec[32];
    snprintf(spec, sizeof spec, "sim:%zu", counts[c]);
    double t0 = now_s();
    /* Device 0 holds the whole source and its destination shard. */
    su[c].rt = make_runtime(spec, 2 * nbytes + (1u << 20));
    create_s[c] = now_s() - t0;
    su[c].one = device_sharding(su[c].rt, "sim", 0);
    su[c].mesh = make_mesh(su[c].rt, "sim", counts[c]);
    su[c].rows = split_sharding(su[c].mesh, 0);
    CHECK(dlrun_array_from_host(su[c].one, DLRUN_FLOAT32, 2, dims, host, nbytes, &su[c].x));
    CHECK(dlrun_array_block_until_ready(su[c].x));
    put_once(su[c].x, su[c].rows, NULL, "scale"); /* warms the destination pools */
  }
  /* Round robin over the counts, so that drifts of the machine hit all alike. */
  for (int r = 0; r < reps; r++)
    for (int c = 0; c < NC; c++) samples[c * reps + r] = put_once(su[c].x, su[c].rows, NULL, "scale");
  for (int c = 0; c < NC; c++) {
    size_t n = counts[c];
    med[c] = median(samples + c * reps, reps);
    note("6 scale: %zu devices: %.3f ms (runtime created in %.1f ms)", n, med[c] * 1e3,
         create_s[c] * 1e3);
    dlrun_sharding *rows = su[c].rows;
    dlrun_array *x = su[c].x;
    if (c == NC - 1) {
      /* Correctness at 4096: a few shards against the host data. */
      dlrun_array *y;
      CHECK(dlrun_device_put(x, rows, NULL, &y));
      size_t probe[] = {0, 1, n / 2, n - 1};
      for (size_t k = 0; k < sizeof probe / sizeof *probe; k++) {
        dlrun_array *s;
        CHECK(dlrun_array_shard_data(y, probe[k], &s));
        uint64_t sb = dlrun_array_nbytes(s);
        void *got = xmalloc(sb);
        CHECK(dlrun_array_read(s, 0, sb, got));
        if (memcmp(got, (const char *)host + probe[k] * sb, sb) != 0) {
          ok = false;
          note("6 scale: shard %zu of %zu differs", probe[k], n);
        }
        free(got);
        dlrun_array_release(s);
      }
      dlrun_array_release(y);
      /* The index map: every device's shard index, as devices_indices_map. */
      double *ms = xmalloc((size_t)map_reps * sizeof *ms);
      double *rs = xmalloc((size_t)map_reps * sizeof *rs);
      int64_t lo[2], hi[2], acc = 0;
      for (int r = -1; r < map_reps; r++) {
        double a = now_s();
        for (size_t i = 0; i < n; i++) {
          dlrun_sharding_shard_index(rows, i, 2, dims, lo, hi);
          acc += lo[0] + hi[1];
        }
        double b = now_s();
        for (size_t i = 0; i < n; i++) acc += dlrun_sharding_replica_id(rows, i, 2, dims);
        double e = now_s();
        if (r >= 0) {
          ms[r] = b - a;
          rs[r] = e - b;
        }
      }
      bench_sink = (void *)(intptr_t)acc;
      map_s = median(ms, map_reps);
      map_replica_s = median(rs, map_reps);
      free(ms);
      free(rs);
    }
    dlrun_array_release(x);
    dlrun_sharding_release(rows);
    dlrun_mesh_release(su[c].mesh);
    dlrun_sharding_release(su[c].one);
    dlrun_runtime_release(su[c].rt);
  }
  js_open("scale");
  js_int("bytes", (long long)nbytes);
  js_ints("shape", (long long[]){sh.rows, sh.cols}, 2);
  js_int("runs", reps);
  long long cl[NC];
  for (int c = 0; c < NC; c++) cl[c] = (long long)counts[c];
  js_ints("devices", cl, NC);
  js_nums("dlrun_s", med, NC);
  js_key("dlrun_s_samples");
  fputc('[', js);
  for (int c = 0; c < NC; c++) {
    fputs(c ? ",[" : "[", js);
    for (int r = 0; r < reps; r++) fprintf(js, "%s%.9g", r ? "," : "", samples[c * reps + r]);
    fputc(']', js);
  }
  fputc(']', js);
  js_nums("runtime_create_s", create_s, NC);
  js_num("ratio_4096_over_8", med[NC - 1] / med[0]);
  js_num("per_shard_overhead_s", (med[NC - 1] - med[0]) / (double)(counts[NC - 1] - counts[0]));
  js_num("index_map_s", map_s);
  js_num("index_map_pct_of_put", 100.0 * map_s / med[NC - 1]);
  js_num("replica_ids_s", map_replica_s);
  js_close();
  free(samples);
  free(host);
  return ok;
}

/* ------------------------------------------------------------ 9: OpenCL */

/* Part 9 runs on the OpenCL platform's devices: opencl:4 (pocl gives four
 * CPU devices with POCL_DEVICES="pthread pthread pthread pthread", set in
 * main when unset). Unlike the other parts a wrong value does not stop the
 * program: it is recorded (checks_ok in part 9's object) so that its lines
 * read FAILED while the rest is reported. */
#define OCL_DEVICES 4

/* Why opencl:OCL_DEVICES cannot run here, into `why`; false when it can. */
static bool opencl_missing(char *why, size_t n) {
  dlrun_platform_status st[16];
  size_t count = dlrun_platforms_list(st, 16);
  for (size_t i = 0; i < count && i < 16; i++) {
    if (strcmp(st[i].name, "opencl") != 0) continue;
    if (!st[i].available) snprintf(why, n, "OpenCL platform not available: %s", st[i].why);
    else if (st[i].ndevices < OCL_DEVICES)
      snprintf(why, n, "the OpenCL platform has %zu devices, part 9 needs %d", st[i].ndevices,
               OCL_DEVICES);
    else return false;
    return true;
  }
  snprintf(why, n, "no OpenCL platform is known to this build");
  return true;
}

typedef enum ocl_op {
  OCL_GATHER,    /* device_put of the row-sharded array onto OpenclDevice(id=0) */
  OCL_TO_DEVICE, /* dlrun_array_from_host onto OpenclDevice(id=0) */
  OCL_TO_HOST,   /* dlrun_array_read of the array on OpenclDevice(id=0) */
  OCL_FULL,      /* dlrun_array_full(1.5f) on OpenclDevice(id=0) */
  OCL_ZEROS,     /* dlrun_array_full(0) */
  OCL_ARANGE,    /* dlrun_array_arange(0, 1) */
} ocl_op;

typedef struct ocl_ctx {
  dlrun_sharding *rows, *one; /* P('x') over the devices; OpenclDevice(id=0) */
  dlrun_array *sharded, *on_dev; /* the source value, row-sharded and on device 0 */
  const float *host;             /* that value, row major */
  float *back;                   /* reads land here (pre-touched) */
  int64_t dims[2];
  uint64_t nbytes;
} ocl_ctx;

/* The array an operation makes (NULL for reads); untimed callers check it. */
static dlrun_array *ocl_make(ocl_ctx *c, ocl_op op) {
  dlrun_array *y = NULL;
  int64_t n = (int64_t)(c->nbytes / sizeof(float));
  switch (op) {
  case OCL_GATHER: CHECK(dlrun_device_put(c->sharded, c->one, NULL, &y)); break;
  case OCL_TO_DEVICE:
    CHECK(dlrun_array_from_host(c->one, DLRUN_FLOAT32, 2, c->dims, c->host, c->nbytes, &y));
    break;
  case OCL_TO_HOST: CHECK(dlrun_array_read(c->on_dev, 0, c->nbytes, c->back)); return NULL;
  case OCL_FULL:
  case OCL_ZEROS: {
    dlrun_scalar v = {.kind = DLRUN_SCALAR_FLOAT, .re = op == OCL_FULL ? 1.5 : 0.0};
    CHECK(dlrun_array_full(c->one, DLRUN_FLOAT32, 2, c->dims, &v, &y));
    break;
  }
  case OCL_ARANGE: {
    dlrun_scalar start = {.kind = DLRUN_SCALAR_FLOAT, .re = 0}, step = start;
    step.re = 1;
    CHECK(dlrun_array_arange(c->one, DLRUN_FLOAT32, &start, &step, n, &y));
    break;
  }
  }
  CHECK(dlrun_array_block_until_ready(y));
  return y;
}

/* One timed run; the result is released after the clock stops. */
static double ocl_time(ocl_ctx *c, ocl_op op) {
  double t0 = now_s();
  dlrun_array *y = ocl_make(c, op);
  double t = now_s() - t0;
  dlrun_array_release(y);
  return t;
}

/* Whether element i of an operation's result holds what it should. */
static bool ocl_expected(const ocl_ctx *c, ocl_op op, const float *got, size_t n) {
  for (size_t i = 0; i < n; i++) {
    float want = op == OCL_FULL ? 1.5f : op == OCL_ZEROS ? 0.0f : op == OCL_ARANGE ? (float)i
                                                                              : c->host[i];
    if (memcmp(&got[i], &want, sizeof want) != 0) {
      note("9: element %zu is %g, want %g", i, (double)got[i], (double)want);
      return false;
    }
  }
  return true;
}

/* Runs the operation once more, untimed, and compares every element of its
 * result (read into c->back, scribbled over first) with the expected one;
 * nbytes of the result must be the source's. */
static bool ocl_check(ocl_ctx *c, ocl_op op, const char *what) {
  memset(c->back, 0xA5, c->nbytes);
  dlrun_array *y = ocl_make(c, op);
  bool ok = true;
  if (y) {
    ok = dlrun_array_nbytes(y) == c->nbytes;
    if (ok) CHECK(dlrun_array_read(y, 0, c->nbytes, c->back));
    dlrun_array_release(y);
  }
  ok = ok && ocl_expected(c, op, c->back, c->nbytes / sizeof(float));
  if (!ok) note("9 %s: the result differs from the expected value", what);
  return ok;
}

typedef enum ocl_ref { REF_MEMCPY, REF_MEMSET, REF_PARALLEL } ocl_ref;

/* dlrun's operation against its reference on the same bytes, alternating
 * run by run after one untimed warm-up of each; then the check. Emits the
 * part's object `key`. */
static bool ocl_case(ocl_ctx *c, ocl_op op, ocl_ref ref_kind, par_copy *pc, int reps,
                     const char *key) {
  double *dl = xmalloc((size_t)reps * sizeof *dl), *ref = xmalloc((size_t)reps * sizeof *ref);
  bool par = ref_kind == REF_PARALLEL;
  unsigned char *from = par ? NULL : touched(c->nbytes, 1);
  unsigned char *to = par ? NULL : touched(c->nbytes, 2);
  for (int r = -1; r < reps; r++) {
    double t = ocl_time(c, op), t0 = now_s(), tr;
    if (par) {
      tr = par_run(pc);
    } else {
      if (ref_kind == REF_MEMCPY) memcpy(to, from, c->nbytes);
      else memset(to, 0, c->nbytes);
      bench_sink = to;
      tr = now_s() - t0;
    }
    if (r >= 0) {
      dl[r] = t;
      ref[r] = tr;
    }
  }
  bool ok = ocl_check(c, op, key);
  if (ref_kind == REF_MEMCPY && to[c->nbytes - 1] != 1) die("9 %s: memcpy did not copy", key);
  js_open(key);
  js_int("bytes", (long long)c->nbytes);
  js_int("runs", reps);
  js_bool("values_ok", ok);
  const char *ref_key = ref_kind == REF_MEMSET ? "memset_s" : "memcpy_s";
  if (par) {
    emit_samples("dlrun_s", dl, reps);
    emit_parallel(&pc->l, dl, ref, reps);
  } else {
    emit_pair("dlrun_s", dl, ref_key, ref, reps);
  }
  js_close();
  note("9 %s: dlrun %.2f ms, reference %.2f ms%s", key, median(dl, reps) * 1e3,
       median(ref, reps) * 1e3, ok ? "" : " (values WRONG)");
  free(dl);
  free(ref);
  free(from);
  free(to);
  return ok;
}

/* Exactly the gather's bytes move: the 3 shards on other devices count as
 * moved, device 0's own shard as local. */
static bool ocl_gather_bytes(dlrun_runtime *rt, ocl_ctx *c) {
  dlrun_transfer_stats ts;
  dlrun_transfer_stats_reset(rt);
  dlrun_array_release(ocl_make(c, OCL_GATHER));
  dlrun_transfer_stats_get(rt, &ts);
  uint64_t moved = c->nbytes / OCL_DEVICES * (OCL_DEVICES - 1), local = c->nbytes - moved;
  bool exact = ts.bytes_moved == moved && ts.local_bytes == local;
  if (!exact)
    note("9 gather: transfer_stats bytes_moved %llu and local_bytes %llu, want %llu and %llu",
         (unsigned long long)ts.bytes_moved, (unsigned long long)ts.local_bytes,
         (unsigned long long)moved, (unsigned long long)local);
  js_open("gather_bytes");
  js_int("bytes_moved", (long long)ts.bytes_moved);
  js_int("local_bytes", (long long)ts.local_bytes);
  js_int("expected_bytes_moved", (long long)moved);
  js_int("expected_local_bytes", (long long)local);
  js_bool("exact", exact);
  js_close();
  return exact;
}

static bool bench_opencl(void) {
  char why[300];
  js_open("opencl");
  if (opencl_missing(why, sizeof why)) {
    note("9 opencl: skipped: %s", why);
    js_str("skipped", why);
    js_close();
    return true;
  }
  shape2 sh = quick ? (shape2){2048, 2048} : (shape2){8192, 2048}; /* 16 / 64 MiB */
  int reps = quick ? 5 : 11;
  ocl_ctx c = {.dims = {sh.rows, sh.cols}};
  c.nbytes = (uint64_t)(sh.rows * sh.cols) * sizeof(float);
  char spec[32];
  snprintf(spec, sizeof spec, "opencl:%d", OCL_DEVICES);
  note("9 opencl: float32[%lld,%lld] (%.0f MiB) on %s, %d runs", (long long)sh.rows,
       (long long)sh.cols, c.nbytes / MIB, spec, reps);
  dlrun_runtime *rt = make_runtime(spec, 0);
  dlrun_mesh *mesh = make_mesh(rt, "opencl", OCL_DEVICES);
  c.rows = split_sharding(mesh, 0);
  c.one = device_sharding(rt, "opencl", 0);
  float *host = host_matrix(sh.rows, sh.cols);
  c.host = host;
  c.back = touched(c.nbytes, 0);
  CHECK(dlrun_array_from_host(c.rows, DLRUN_FLOAT32, 2, c.dims, host, c.nbytes, &c.sharded));
  CHECK(dlrun_array_from_host(c.one, DLRUN_FLOAT32, 2, c.dims, host, c.nbytes, &c.on_dev));
  CHECK(dlrun_array_block_until_ready(c.sharded));
  CHECK(dlrun_array_block_until_ready(c.on_dev));

  /* The parallel reference: the 4 row shards' bytes, laid out as dlrun's. */
  gather_layout by_rows = {.nsrc = OCL_DEVICES, .rows = 1, .piece = c.nbytes / OCL_DEVICES};
  unsigned char *psrc = touched(c.nbytes, 3), *pdst = touched(c.nbytes, 4);
  memcpy(psrc, host, c.nbytes); /* one piece per shard: the shards in order */
  par_copy pc;
  par_start(&pc, by_rows, psrc, pdst, engine_threads());
  bool ok = true;
  js_int("devices", OCL_DEVICES);
  js_ints("shape", (long long[]){sh.rows, sh.cols}, 2);
  ok &= ocl_case(&c, OCL_GATHER, REF_PARALLEL, &pc, reps, "gather");
  par_stop(&pc);
  if (memcmp(pdst, host, c.nbytes) != 0) die("9 gather: the parallel memcpy reference differs");
  free(psrc);
  free(pdst);
  ok &= ocl_gather_bytes(rt, &c);
  ok &= ocl_case(&c, OCL_TO_DEVICE, REF_MEMCPY, NULL, reps, "to_device");
  ok &= ocl_case(&c, OCL_TO_HOST, REF_MEMCPY, NULL, reps, "to_host");
  ok &= ocl_case(&c, OCL_FULL, REF_MEMSET, NULL, reps, "full");
  ok &= ocl_case(&c, OCL_ZEROS, REF_MEMSET, NULL, reps, "zeros");
  ok &= ocl_case(&c, OCL_ARANGE, REF_MEMSET, NULL, reps, "arange");
  js_bool("checks_ok", ok);
  js_close();

  dlrun_array_release(c.sharded);
  dlrun_array_release(c.on_dev);
  free(c.back);
  free(host);
  dlrun_sharding_release(c.one);
  dlrun_sharding_release(c.rows);
  dlrun_mesh_release(mesh);
  dlrun_runtime_release(rt);
  return ok;
}

/* ------------------------------------------------------------ main */

static bool wanted(const char *only, const char *name) {
  if (!only) return true;
  size_t n = strlen(name);
  for (const char *p = only; (p = strstr(p, name)); p += n)
    if ((p == only || p[-1] == ',') && (p[n] == ',' || p[n] == 0)) return true;
  return false;
}

int main(int argc, char **argv) {
  const char *only = NULL;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--quick") == 0) quick = true;
    else if (strcmp(argv[i], "--only") == 0 && i + 1 < argc) only = argv[++i];
    else {
      fprintf(stderr, "usage: %s [--quick] [--only gather,column_gather,reshard,pool,scale,opencl]\n",
              argv[0]);
      return 2;
    }
  }
  /* pocl's four CPU devices, unless the user chose pocl's devices. */
  setenv("POCL_DEVICES", "pthread pthread pthread pthread", 0);
  js = stdout;
  js_first[0] = true;
  js_open(NULL);
  js_bool("quick", quick);
  bool ok = true;
  bool g = wanted(only, "gather"), cg = wanted(only, "column_gather"), rs = wanted(only, "reshard");
  if (g || cg || rs) ok &= bench_gathers(g, cg, rs);
  if (wanted(only, "pool")) ok &= bench_pool();
  if (wanted(only, "scale")) ok &= bench_scale();
  if (wanted(only, "opencl")) ok &= bench_opencl();
  js_bool("checks_ok", ok);
  js_close();
  fputc('\n', js);
  return ok ? 0 : 1;
}
