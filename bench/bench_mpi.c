/* dlrun benchmark 8: collectives between processes against raw MPI on the
 * same bytes between the same processes (see bench/README.md).
 *
 *   mpirun -n N bench_mpi [--quick] [--only reshard|allgather] [--runs N]
 *
 * Every process joins dlrun's job (dlrun_distributed_init over the MPI
 * transport module, on the MPI this program initialised) with 2 sim devices;
 * the references use MPI_COMM_WORLD directly. Process 0 prints one JSON
 * object on stdout; progress goes to stderr. Exit status 1 when a call or a
 * check fails (wrong values, bytes moved unlike the reference's).
 *
 * Each run starts after a barrier; its time is the slowest process's (an
 * MPI_MAX reduction, outside the clock). dlrun and the reference alternate
 * run by run after one untimed warm-up each, which also checks values. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <mpi.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

/* dlrun_distributed_set_one_copy: the reshard with the one-copy path off */
#include "device/host_loops.h"
#include "distributed/distributed_impl.h"
#include "dlrun/dlrun.h"
#include "median.h"

#define K 2 /* sim devices per process */

static int me, np;
static bool quick;
static int runs; /* --runs N: instead of 7 (5 quick) */
static const char *only; /* --only reshard|allgather: one part (for profiles) */

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void note(const char *fmt, ...) {
  if (me != 0) return;
  va_list ap;
  va_start(ap, fmt);
  fputs("bench_mpi: ", stderr);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
}

/* Any failure ends the whole job: the others would wait for this process. */
static void die(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "bench_mpi[%d]: ", me);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  MPI_Abort(MPI_COMM_WORLD, 1);
  exit(1);
}

#define CHECK(call)                                                                        \
  do {                                                                                     \
    dlrun_status st_ = (call);                                                             \
    if (st_ != DLRUN_OK)                                                                   \
      die("%s:%d: %s failed: %s: %s", __FILE__, __LINE__, #call, dlrun_status_name(st_),   \
          dlrun_last_error());                                                             \
  } while (0)

static void *xmalloc(size_t n) {
  void *p = malloc(n ? n : 1);
  if (!p) die("out of host memory (%zu bytes)", n);
  return p;
}

/* Minor page faults of this process so far. */
static long minor_faults(void) {
  struct rusage u;
  getrusage(RUSAGE_SELF, &u);
  return u.ru_minflt;
}


/* The slowest process's time of a run (every process calls it). */
static double job_time(double t) {
  double m;
  MPI_Allreduce(&t, &m, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return m;
}

/* ------------------------------------------------------------ JSON (process 0) */

static bool js_first = true;

static void js_key(const char *k) {
  printf("%s\"%s\":", js_first ? "" : ",", k);
  js_first = false;
}
static void js_open(const char *k) {
  js_key(k);
  putchar('{');
  js_first = true;
}
static void js_close(void) {
  putchar('}');
  js_first = false;
}
static void js_num(const char *k, double v) {
  js_key(k);
  printf("%.9g", v);
}
static void js_int(const char *k, long long v) {
  js_key(k);
  printf("%lld", v);
}
static void js_bool(const char *k, bool v) {
  js_key(k);
  fputs(v ? "true" : "false", stdout);
}
static void js_nums(const char *k, const double *v, int n) {
  js_key(k);
  putchar('[');
  for (int i = 0; i < n; i++) printf("%s%.9g", i ? "," : "", v[i]);
  putchar(']');
}
static void js_u64s(const char *k, const uint64_t *v, int n) {
  js_key(k);
  putchar('[');
  for (int i = 0; i < n; i++) printf("%s%llu", i ? "," : "", (unsigned long long)v[i]);
  putchar(']');
}

/* One value per process, gathered on process 0 (all[np]). */
static void gather_u64(uint64_t v, uint64_t *all) {
  MPI_Gather(&v, 1, MPI_UINT64_T, all, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
}

/* ------------------------------------------------------------ the data */

/* Element (r, c) of the [rows, cols] array holds the bits of r * cols + c:
 * copies move bits, so any pattern checks them, and integers stay exact. */
static uint32_t value_at(int64_t r, int64_t c, int64_t cols) { return (uint32_t)(r * cols + c); }

/* Whether shard i of y (this process's) holds the right values. */
static bool shard_ok(dlrun_array *y, size_t i, int64_t cols) {
  dlrun_device *dev;
  int64_t lo[2], hi[2], rep;
  dlrun_array_shard_index(y, i, &dev, lo, hi, &rep);
  if (dlrun_device_process_index(dev) != me) return true;
  dlrun_array *s;
  CHECK(dlrun_array_shard_data(y, i, &s));
  uint64_t n = dlrun_array_nbytes(s);
  uint32_t *v = xmalloc(n);
  CHECK(dlrun_array_read(s, 0, n, v));
  dlrun_array_release(s);
  bool ok = true;
  int64_t w = hi[1] - lo[1];
  for (int64_t r = lo[0]; r < hi[0] && ok; r++)
    for (int64_t c = lo[1]; c < hi[1] && ok; c++)
      ok = v[(r - lo[0]) * w + (c - lo[1])] == value_at(r, c, cols);
  free(v);
  return ok;
}

static bool all_ok(bool ok) {
  int mine = ok, all;
  MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
  return all != 0;
}

static dlrun_sharding *split(dlrun_mesh *m, int dim) {
  dlrun_partition_spec spec;
  memset(&spec, 0, sizeof spec);
  spec.nentries = dim + 1;
  spec.entries[dim].naxes = 1;
  spec.entries[dim].axes[0] = "x";
  dlrun_sharding *s;
  CHECK(dlrun_named_sharding_create(m, &spec, DLRUN_MEM_DEVICE, &s));
  return s;
}

/* ------------------------------------------------------------ the reference messages */

/* What one process sends and receives: messages of `bytes[i]` to or from
 * `peer[i]`, packed one after another in a preallocated buffer. */
typedef struct msgs {
  int n, *peer;
  size_t *bytes, total;
  unsigned char *buf;
} msgs;

static void msgs_add(msgs *m, int peer, size_t bytes) {
  m->peer = realloc(m->peer, (size_t)(m->n + 1) * sizeof *m->peer);
  m->bytes = realloc(m->bytes, (size_t)(m->n + 1) * sizeof *m->bytes);
  if (!m->peer || !m->bytes) die("out of host memory");
  m->peer[m->n] = peer;
  m->bytes[m->n++] = bytes;
  m->total += bytes;
}

static void msgs_free(msgs *m) {
  free(m->peer);
  free(m->bytes);
  free(m->buf);
}

/* The reshard's messages as dlrun's plan cuts them: for each destination
 * shard (device j), each source shard (device i) on another process gives
 * one block, rows of i by columns of j, listed in that order. */
static void reshard_messages(int64_t rows, int64_t cols, uint64_t limit, msgs *sends,
                             msgs *recvs) {
  int d = np * K;
  size_t block = (size_t)(rows / d) * (size_t)(cols / d) * sizeof(float);
  if (block > limit) die("a block of %zu bytes would be cut into several messages", block);
  for (int j = 0; j < d; j++)
    for (int i = 0; i < d; i++) {
      int p = i / K, q = j / K;
      if (p == q) continue;
      if (p == me) msgs_add(sends, q, block);
      if (q == me) msgs_add(recvs, p, block);
    }
}

/* Post every receive, then every send, and wait: what dlrun's transport
 * does, on contiguous buffers. */
static void p2p_run(msgs *sends, msgs *recvs, int tag) {
  int n = sends->n + recvs->n;
  MPI_Request *reqs = xmalloc((size_t)n * sizeof *reqs);
  size_t off = 0;
  for (int k = 0; k < recvs->n; off += recvs->bytes[k++])
    MPI_Irecv(recvs->buf + off, (int)recvs->bytes[k], MPI_BYTE, recvs->peer[k], tag,
              MPI_COMM_WORLD, &reqs[k]);
  off = 0;
  for (int k = 0; k < sends->n; off += sends->bytes[k++])
    MPI_Isend(sends->buf + off, (int)sends->bytes[k], MPI_BYTE, sends->peer[k], tag,
              MPI_COMM_WORLD, &reqs[recvs->n + k]);
  MPI_Waitall(n, reqs, MPI_STATUSES_IGNORE);
  free(reqs);
}

/* For information: the same messages sent as dlrun's are, straight from
 * row-major source shards (a block of columns: a strided MPI datatype),
 * received contiguous. shards: this process's K source shards. */
static void p2p_strided_run(unsigned char *const *shards, int64_t rows, int64_t cols,
                            msgs *recvs, int tag) {
  int d = np * K, n = recvs->n;
  int64_t br = rows / d, bc = cols / d;
  MPI_Datatype row, block;
  MPI_Type_contiguous((int)(bc * (int64_t)sizeof(float)), MPI_BYTE, &row);
  MPI_Type_create_hvector((int)br, 1, (MPI_Aint)(cols * (int64_t)sizeof(float)), row, &block);
  MPI_Type_commit(&block);
  MPI_Type_free(&row);
  MPI_Request *reqs = xmalloc((size_t)(2 * n + 1) * sizeof *reqs);
  size_t off = 0;
  for (int k = 0; k < n; off += recvs->bytes[k++])
    MPI_Irecv(recvs->buf + off, (int)recvs->bytes[k], MPI_BYTE, recvs->peer[k], tag,
              MPI_COMM_WORLD, &reqs[k]);
  int k = n;
  for (int j = 0; j < d; j++)
    for (int i = me * K; i < (me + 1) * K; i++) {
      if (j / K == me) continue;
      unsigned char *base = shards[i - me * K] + (size_t)(j * bc) * sizeof(float);
      MPI_Isend(base, 1, block, j / K, tag, MPI_COMM_WORLD, &reqs[k++]);
    }
  MPI_Waitall(k, reqs, MPI_STATUSES_IGNORE);
  MPI_Type_free(&block);
  free(reqs);
}

/* ------------------------------------------------------------ timing */

/* Times and minor page faults (the most of any process) of each run. */
typedef struct result {
  double *dl, *ref, *dl_faults, *ref_faults;
  int reps;
} result;

static result result_new(int reps) {
  result r = {.reps = reps};
  double **v[] = {&r.dl, &r.ref, &r.dl_faults, &r.ref_faults};
  for (int i = 0; i < 4; i++) *v[i] = xmalloc((size_t)reps * sizeof(double));
  return r;
}

static void result_free(result *r) {
  free(r->dl);
  free(r->ref);
  free(r->dl_faults);
  free(r->ref_faults);
}

static void emit_times(const result *r, const char *ref_key) {
  double *pr = xmalloc((size_t)r->reps * sizeof *pr);
  for (int i = 0; i < r->reps; i++) pr[i] = r->ref[i] / r->dl[i];
  char k[64];
  js_num("paired_ratio_median", median(pr, r->reps));
  js_num("dlrun_s", median(r->dl, r->reps));
  js_nums("dlrun_s_samples", r->dl, r->reps);
  js_num(ref_key, median(r->ref, r->reps));
  snprintf(k, sizeof k, "%s_samples", ref_key);
  js_nums(k, r->ref, r->reps);
  /* Pages first touched inside the timed run: a cost the references,
   * on pre-touched buffers, do not pay. */
  js_num("dlrun_minor_faults", median(r->dl_faults, r->reps));
  js_num("ref_minor_faults", median(r->ref_faults, r->reps));
  free(pr);
}

/* This process's bytes sent and received, and the reference's, on process 0. */
static void emit_bytes(const dlrun_transfer_stats *s, uint64_t ref_sent, uint64_t ref_recv,
                       bool *ok) {
  uint64_t *a = xmalloc(4 * (size_t)np * sizeof *a);
  gather_u64(s->bytes_sent, a);
  gather_u64(s->bytes_received, a + np);
  gather_u64(ref_sent, a + 2 * np);
  gather_u64(ref_recv, a + 3 * np);
  bool same = true;
  if (me == 0)
    for (int p = 0; p < np; p++) same = same && a[p] == a[2 * np + p] && a[np + p] == a[3 * np + p];
  if (me == 0) {
    js_u64s("bytes_sent", a, np);
    js_u64s("bytes_received", a + np, np);
    js_u64s("ref_bytes_sent", a + 2 * np, np);
    js_u64s("ref_bytes_received", a + 3 * np, np);
    js_bool("bytes_equal", same);
  }
  MPI_Bcast(&same, 1, MPI_C_BOOL, 0, MPI_COMM_WORLD);
  if (!same) {
    note("bytes sent/received differ from the reference's");
    *ok = false;
  }
  free(a);
}

/* ------------------------------------------------------------ 8: reshard */

/* The same bytes in whole rows: this process's own rows of the array (in
 * `src`), each read once, its runs written to every destination shard's
 * block of `dst` (those of other processes included: stand-ins here), as a
 * reshard that pushed from the holder would copy. */
static void row_copies(unsigned char *dst, const unsigned char *src, int64_t rows, int64_t cols) {
  int64_t w = cols / (np * K), mine = rows / np;
  size_t run = (size_t)w * sizeof(float), row = (size_t)cols * sizeof(float);
  size_t block = (size_t)mine * run;
  for (int64_t r = 0; r < mine; r++)
    for (int g = 0; g < np * K; g++)
      memcpy(dst + (size_t)g * block + (size_t)r * run, src + (size_t)r * row + (size_t)g * run,
             run);
}

/* This process's destination shards of the reshard rows -> columns, copied
 * box by box as the reshard's copies go (shard by shard, source shard by
 * source shard, row by row), from `src`, the array's rows, into `dst`, the
 * shards one after another. */
static void box_copies(unsigned char *dst, const unsigned char *src, int64_t rows, int64_t cols) {
  int64_t w = cols / (np * K), rh = rows / (np * K);
  size_t run = (size_t)w * sizeof(float), row = (size_t)cols * sizeof(float);
  for (int j = 0; j < K; j++) {
    int64_t c0 = (int64_t)(me * K + j) * w;
    unsigned char *shard = dst + (size_t)j * (size_t)rows * run;
    for (int s = 0; s < np * K; s++)
      for (int64_t r = s * rh; r < (s + 1) * rh; r++)
        memcpy(shard + (size_t)r * run, src + (size_t)r * row + (size_t)c0 * sizeof(float), run);
  }
}

static bool bench_reshard(dlrun_runtime *rt, dlrun_array *x, dlrun_sharding *cols_s, int64_t rows,
                          int64_t cols, int reps) {
  bool ok = true;
  msgs sends = {0}, recvs = {0};
  reshard_messages(rows, cols, (uint64_t)1 << 30, &sends, &recvs);
  sends.buf = xmalloc(sends.total);
  recvs.buf = xmalloc(recvs.total);
  memset(sends.buf, 1, sends.total);
  memset(recvs.buf, 2, recvs.total);
  size_t shard_bytes = (size_t)(rows * cols) * sizeof(float) / (size_t)(np * K);
  unsigned char *shards[K];
  for (int i = 0; i < K; i++) memset(shards[i] = xmalloc(shard_bytes), 3, shard_bytes);
  double *strided = xmalloc((size_t)reps * sizeof(double));
  double *ipc_off = xmalloc((size_t)reps * sizeof(double));
  /* The machine's limit for dlrun's own work: each process writes every
   * byte of its destination shards (what comes from its peers and what it
   * relays out locally), here as one memcpy between pre-touched buffers,
   * every process at once. */
  size_t mine_bytes = (size_t)(rows * cols) * sizeof(float) / (size_t)np;
  unsigned char *lim_src = xmalloc(mine_bytes), *lim_dst = xmalloc(mine_bytes);
  memset(lim_src, 4, mine_bytes);
  memset(lim_dst, 5, mine_bytes);
  double *limit = xmalloc((size_t)reps * sizeof(double));
  /* The same limit in the reshard's own access pattern: every process
   * copies the boxes its destination shards take (each row's run of its
   * columns, out of rows of the whole width), from a pre-touched copy of
   * the array into pre-touched shards, one thread each, all at once. */
  size_t all_bytes = (size_t)(rows * cols) * sizeof(float);
  unsigned char *pat_src = xmalloc(all_bytes), *pat_dst = xmalloc(mine_bytes);
  memset(pat_src, 6, all_bytes);
  memset(pat_dst, 7, mine_bytes);
  double *boxes = xmalloc((size_t)reps * sizeof(double));
  /* The limit with streaming stores (as dlrun's copies make them in a call
   * this large, DLRUN_STREAM_BYTES): the same bytes as `limit`, copied by
   * dlrun's own box loop with its stores around the caches. */
  double *streamed = xmalloc((size_t)reps * sizeof(double));
  int64_t flat_lo[1] = {0}, flat_hi[1] = {(int64_t)mine_bytes}, unit[1] = {1};
  double *whole_rows = xmalloc((size_t)reps * sizeof(double));
  result r = result_new(reps);
  dlrun_transfer_stats st = {0};
  for (int k = -1; k < reps; k++) {
    dlrun_array *y;
    if (k < 0) dlrun_transfer_stats_reset(rt);
    MPI_Barrier(MPI_COMM_WORLD);
    long f0 = minor_faults();
    double t0 = now_s();
    CHECK(dlrun_device_put(x, cols_s, NULL, &y));
    CHECK(dlrun_array_block_until_ready(y));
    double t = job_time(now_s() - t0);
    double fd = job_time((double)(minor_faults() - f0));
    if (k < 0) {
      dlrun_transfer_stats_get(rt, &st);
      bool good = true;
      for (size_t i = 0; i < dlrun_array_shard_count(y); i++) good = good && shard_ok(y, i, cols);
      if (!all_ok(good)) {
        note("8 reshard: values differ after rows -> columns");
        ok = false;
      }
    }
    dlrun_array_release(y);
    MPI_Barrier(MPI_COMM_WORLD);
    f0 = minor_faults();
    t0 = now_s();
    p2p_run(&sends, &recvs, 8);
    double tr = job_time(now_s() - t0);
    double fr = job_time((double)(minor_faults() - f0));
    MPI_Barrier(MPI_COMM_WORLD);
    t0 = now_s();
    p2p_strided_run(shards, rows, cols, &recvs, 9);
    double ts = job_time(now_s() - t0);
    /* The same reshard with processes on this host copying through MPI. */
    dlrun_distributed_set_one_copy(false);
    MPI_Barrier(MPI_COMM_WORLD);
    t0 = now_s();
    CHECK(dlrun_device_put(x, cols_s, NULL, &y));
    CHECK(dlrun_array_block_until_ready(y));
    double to = job_time(now_s() - t0);
    dlrun_array_release(y);
    dlrun_distributed_set_one_copy(true);
    MPI_Barrier(MPI_COMM_WORLD);
    t0 = now_s();
    memcpy(lim_dst, lim_src, mine_bytes);
    double tm = job_time(now_s() - t0);
    MPI_Barrier(MPI_COMM_WORLD);
    t0 = now_s();
    dlrun_host_copy_box(1, 1, flat_lo, flat_hi, lim_dst, flat_lo, unit, lim_src, flat_lo, unit,
                        true);
    double tn = job_time(now_s() - t0);
    MPI_Barrier(MPI_COMM_WORLD);
    t0 = now_s();
    box_copies(pat_dst, pat_src, rows, cols);
    double tb = job_time(now_s() - t0);
    MPI_Barrier(MPI_COMM_WORLD);
    t0 = now_s();
    row_copies(pat_dst, pat_src, rows, cols);
    double tw = job_time(now_s() - t0);
    if (k >= 0) {
      r.dl[k] = t;
      r.ref[k] = tr;
      r.dl_faults[k] = fd;
      r.ref_faults[k] = fr;
      strided[k] = ts;
      ipc_off[k] = to;
      limit[k] = tm;
      streamed[k] = tn;
      boxes[k] = tb;
      whole_rows[k] = tw;
    }
  }
  if (me == 0) {
    js_open("reshard");
    js_int("bytes", (long long)(rows * cols * (int64_t)sizeof(float)));
    js_int("rows", rows);
    js_int("cols", cols);
    js_int("runs", reps);
    js_int("messages_sent", sends.n);
    js_int("message_bytes", sends.n ? (long long)sends.bytes[0] : 0);
    emit_times(&r, "mpi_s");
    js_num("mpi_strided_s", median(strided, reps));
    js_nums("mpi_strided_s_samples", strided, reps);
    js_num("dlrun_ipc_off_s", median(ipc_off, reps));
    js_nums("dlrun_ipc_off_s_samples", ipc_off, reps);
    js_int("ipc_bytes", (long long)st.ipc_bytes);
    js_num("memcpy_s", median(limit, reps));
    js_nums("memcpy_s_samples", limit, reps);
    js_int("memcpy_bytes_per_process", (long long)mine_bytes);
    js_num("streamed_copy_s", median(streamed, reps));
    js_nums("streamed_copy_s_samples", streamed, reps);
    js_num("box_copy_s", median(boxes, reps));
    js_nums("box_copy_s_samples", boxes, reps);
    js_num("row_copy_s", median(whole_rows, reps));
    js_nums("row_copy_s_samples", whole_rows, reps);
  }
  emit_bytes(&st, sends.total, recvs.total, &ok);
  for (int i = 0; i < K; i++) free(shards[i]);
  free(strided);
  free(ipc_off);
  free(limit);
  free(streamed);
  free(lim_src);
  free(lim_dst);
  free(pat_src);
  free(pat_dst);
  free(boxes);
  free(whole_rows);
  if (me == 0) js_close();
  msgs_free(&sends);
  msgs_free(&recvs);
  result_free(&r);
  return ok;
}

/* ------------------------------------------------------------ 8: allgather */

static bool bench_allgather(dlrun_runtime *rt, dlrun_array *x, int64_t rows, int64_t cols,
                            int reps) {
  bool ok = true;
  size_t nbytes = (size_t)(rows * cols) * sizeof(float), part = nbytes / (size_t)np;
  unsigned char *send = xmalloc(part), *recv = xmalloc(nbytes);
  memset(send, 1, part);
  memset(recv, 2, nbytes);
  result r = result_new(reps);
  dlrun_transfer_stats st = {0};
  for (int k = -1; k < reps; k++) {
    dlrun_array *y;
    if (k < 0) dlrun_transfer_stats_reset(rt);
    MPI_Barrier(MPI_COMM_WORLD);
    long f0 = minor_faults();
    double t0 = now_s();
    CHECK(dlrun_process_allgather(x, true, &y));
    CHECK(dlrun_array_block_until_ready(y));
    double t = job_time(now_s() - t0);
    double fd = job_time((double)(minor_faults() - f0));
    if (k < 0) {
      dlrun_transfer_stats_get(rt, &st);
      /* Read into the reference's buffer: it is overwritten next. */
      CHECK(dlrun_array_read(y, 0, nbytes, recv));
      const uint32_t *v = (const uint32_t *)recv;
      bool good = dlrun_array_nbytes(y) == nbytes;
      for (int64_t i = 0; i < rows * cols && good; i++) good = v[i] == (uint32_t)i;
      if (!all_ok(good)) {
        note("8 allgather: the gathered values differ from the source");
        ok = false;
      }
    }
    dlrun_array_release(y);
    MPI_Barrier(MPI_COMM_WORLD);
    f0 = minor_faults();
    t0 = now_s();
    MPI_Allgather(send, (int)part, MPI_BYTE, recv, (int)part, MPI_BYTE, MPI_COMM_WORLD);
    double tr = job_time(now_s() - t0);
    double fr = job_time((double)(minor_faults() - f0));
    if (k >= 0) {
      r.dl[k] = t;
      r.ref[k] = tr;
      r.dl_faults[k] = fd;
      r.ref_faults[k] = fr;
    }
  }
  if (me == 0) {
    js_open("allgather");
    js_int("bytes", (long long)nbytes);
    js_int("runs", reps);
    emit_times(&r, "mpi_s");
  }
  uint64_t ref_bytes = (uint64_t)part * (uint64_t)(np - 1); /* to / from each other process */
  emit_bytes(&st, ref_bytes, ref_bytes, &ok);
  if (me == 0) js_close();
  free(send);
  free(recv);
  result_free(&r);
  return ok;
}

/* ------------------------------------------------------------ main */

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  MPI_Comm_size(MPI_COMM_WORLD, &np);
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--quick")) quick = true;
    else if (!strcmp(argv[i], "--only") && i + 1 < argc) only = argv[++i];
    else if (!strcmp(argv[i], "--runs") && i + 1 < argc) runs = atoi(argv[++i]);
    else die("usage: %s [--quick] [--only reshard|allgather] [--runs N]", argv[0]);
  }
  /* MPI is initialised already: the module joins on it (it calls MPI_Init
   * only when nobody has). DLRUN_MPI_MODULE says where the module is. */
  dlrun_distributed_options o = {.mode = DLRUN_DISTRIBUTED_MPI};
  CHECK(dlrun_distributed_init(&o));
  if (dlrun_process_index() != me || dlrun_process_count() != np)
    die("dlrun sees process %d of %d, MPI %d of %d", dlrun_process_index(), dlrun_process_count(),
        me, np);

  int64_t rows = quick ? 4096 : 8192, cols = quick ? 2048 : 8192; /* 32 / 256 MiB */
  int reps = runs > 0 ? runs : quick ? 5 : 7;
  size_t nbytes = (size_t)(rows * cols) * sizeof(float);
  note("8: float32[%lld,%lld] (%.0f MiB) over %d processes x %d sim devices, %d runs",
       (long long)rows, (long long)cols, nbytes / 1048576.0, np, K, reps);

  dlrun_config cfg = {.devices = "sim:2", .device_memory = 2 * nbytes / (size_t)(np * K) + (64u << 20)};
  dlrun_runtime *rt;
  CHECK(dlrun_runtime_create(&cfg, &rt));
  size_t d = dlrun_device_count(rt, "sim");
  if (d != (size_t)(np * K)) die("%zu sim devices in the job, want %d", d, np * K);
  dlrun_device **devs = xmalloc(d * sizeof *devs);
  for (size_t i = 0; i < d; i++) devs[i] = dlrun_device_get(rt, "sim", i);
  const char *axis = "x";
  int64_t size = (int64_t)d;
  dlrun_mesh *mesh;
  CHECK(dlrun_mesh_create(devs, d, 1, &axis, &size, &mesh));
  free(devs);
  dlrun_sharding *rows_s = split(mesh, 0), *cols_s = split(mesh, 1);

  /* The source, rows over every device: each process writes only its own
   * rows of a host block whose other pages are never touched. */
  uint32_t *host = xmalloc(nbytes);
  int64_t r0 = rows / np * me, r1 = r0 + rows / np;
  for (int64_t r = r0; r < r1; r++)
    for (int64_t c = 0; c < cols; c++) host[r * cols + c] = value_at(r, c, cols);
  dlrun_array *x;
  int64_t dims[2] = {rows, cols};
  CHECK(dlrun_array_from_host(rows_s, DLRUN_FLOAT32, 2, dims, host, nbytes, &x));
  CHECK(dlrun_array_block_until_ready(x));
  free(host);

  if (me == 0) {
    printf("{");
    js_int("processes", np);
    js_int("devices_per_process", K);
    js_bool("quick", quick);
  }
  note("8 reshard: P('x', nil) -> P(nil, 'x') across processes, vs MPI_Isend/MPI_Irecv");
  bool ok = true;
  if (!only || !strcmp(only, "reshard")) ok = bench_reshard(rt, x, cols_s, rows, cols, reps);
  note("8 allgather: process_allgather(tiled) vs MPI_Allgather");
  if (!only || !strcmp(only, "allgather")) ok = bench_allgather(rt, x, rows, cols, reps) && ok;
  if (me == 0) {
    js_bool("checks_ok", ok);
    printf("}\n");
    fflush(stdout);
  }
  dlrun_array_release(x);
  dlrun_sharding_release(rows_s);
  dlrun_sharding_release(cols_s);
  dlrun_mesh_release(mesh);
  dlrun_runtime_release(rt);
  dlrun_distributed_shutdown(); /* MPI_Finalize, through the module */
  int done = 0;
  MPI_Finalized(&done);
  if (!done) MPI_Finalize();
  return ok ? 0 : 1;
}
