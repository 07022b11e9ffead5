/* device_put between processes: a collective call of every process.
 *
 * Every process computes the same global plan from (source sharding,
 * target sharding, shape): for each piece of each destination shard, one
 * holder of the data is chosen (one on the destination device, else one on
 * the destination's process, else spread over the holders by position).
 * Each process then keeps only its part: copies into its own shards from
 * its own holders go through the in-process engine (asynchronous, as
 * device_put on one process); a piece whose holder is another process's is
 * one message from that process, sent straight from the holder's memory and
 * received straight into the destination buffer (through the platforms'
 * transport views) or, where the transport cannot reach a memory, staged
 * through a host block of at most one message (messages.c); between two
 * processes that may map each other's memory (one host), one copy by the
 * receiver straight out of the holder's memory instead (message_pulls.c);
 * never through process 0 or a host copy of the array.
 * Both ends list a pair's messages in the same (plan) order, which is the
 * order MPI matches them in. */
#include <stdio.h>
#include <string.h>

#include "array_impl.h"
#include "core/alloc.h"
#include "core/status_impl.h"
#include "device/boxes.h"
#include "device/buffer_transport.h"
#include "device/copy.h"
#include "device/streaming.h"
#include "distributed/distributed_impl.h"
#include "grid.h"
#include "messages.h"
#include "transfer_impl.h"

typedef struct gplanner {
  dlrun_array *src;
  dlrun_buffer **src_bufs; /* this process's source shards (NULL: another's) */
  const dlrun_sharding *dst;
  int me;
  size_t esize;
  uint64_t limit; /* bytes per message */
  /* The destination shard being planned. */
  dlrun_device *dst_dev;
  int dst_proc;
  dlrun_memory_kind dst_kind;
  dlrun_buffer *dst_buf; /* this process's, else NULL */
  const int64_t *dst_lo, *dst_shard_dims;
  size_t spread;         /* rotates the choice among holders */
  dlrun_copy_plan *copies;
  const int64_t *dst_strides;
  dlrun_copy_task *task; /* made for the first local piece */
  /* Replicas on one process receive once: twin[i] is the first destination
   * shard on i's process with i's index, and a later one copies what came
   * from other processes from it, once it has arrived (the second plan). */
  const size_t *twin;
  size_t i;
  dlrun_buffer **dst_bufs;
  dlrun_copy_plan *copies2;
  dlrun_copy_task *task2;
  dlrun_message_list sends, recvs;
  dlrun_transfer_stats stats;
  dlrun_status st;
} gplanner;

static int holder_process(const gplanner *p, size_t h) {
  return dlrun_device_process_index(dlrun_sharding_device(p->src->sharding, h));
}

/* The holder every process chooses for a piece. */
static size_t choose(gplanner *p, const size_t *holders, size_t nholders) {
  size_t spread = p->spread++, on_proc = 0;
  for (size_t h = 0; h < nholders; h++) {
    if (dlrun_sharding_device(p->src->sharding, holders[h]) == p->dst_dev) return holders[h];
    on_proc += holder_process(p, holders[h]) == p->dst_proc;
  }
  if (on_proc == 0) return holders[spread % nholders];
  size_t k = spread % on_proc;
  for (size_t h = 0; h < nholders; h++)
    if (holder_process(p, holders[h]) == p->dst_proc && k-- == 0) return holders[h];
  return holders[0]; /* not reached */
}

static uint64_t box_bytes(size_t esize, int ndim, const int64_t *lo, const int64_t *hi) {
  uint64_t bytes = esize;
  for (int d = 0; d < ndim; d++) bytes *= (uint64_t)(hi[d] - lo[d]);
  return bytes;
}

/* One message per chunk of the box of at most p->limit bytes: whole inner
 * dimensions, the outermost dimensions cut. Both ends cut alike. */
static dlrun_status add_messages(gplanner *p, bool send, dlrun_buffer *b,
                                 const int64_t *shard_dims, const int64_t *origin, int peer,
                                 size_t shard, const int64_t *src_origin, const int64_t *lo,
                                 const int64_t *hi) {
  int ndim = p->src->ndim;
  /* d: the dimension cut into runs of `step` indices, each `inner` bytes;
   * those before it go one index at a time; -1: one message. */
  int d = -1;
  uint64_t inner = p->esize;
  if (box_bytes(p->esize, ndim, lo, hi) > p->limit) {
    d = ndim - 1;
    while (d > 0 && inner * (uint64_t)(hi[d] - lo[d]) <= p->limit) {
      inner *= (uint64_t)(hi[d] - lo[d]);
      d--;
    }
  }
  /* Dimensions before d one index at a time, d in runs of `step`. */
  int64_t step = d >= 0 ? (int64_t)(p->limit / inner) : 0;
  int64_t clo[DLRUN_MAX_NDIM], chi[DLRUN_MAX_NDIM];
  memcpy(clo, lo, (size_t)ndim * sizeof *lo);
  memcpy(chi, hi, (size_t)ndim * sizeof *hi);
  for (int e = 0; e < d; e++) chi[e] = clo[e] + 1;
  if (d >= 0) chi[d] = clo[d] + step < hi[d] ? clo[d] + step : hi[d];
  for (;;) {
    dlrun_status st = dlrun_message_add(send ? &p->sends : &p->recvs, b, p->esize, ndim,
                                        shard_dims, origin, clo, chi, peer, shard, src_origin);
    if (st) return st;
    if (d < 0) return DLRUN_OK;
    /* Next chunk: dimension d by a step, then the odometer before it. */
    int e = d;
    clo[e] = chi[e];
    while (e >= 0 && clo[e] >= hi[e]) {
      clo[e] = lo[e];
      if (--e >= 0) clo[e]++;
    }
    if (e < 0) return DLRUN_OK;
    for (int f = 0; f < d; f++) chi[f] = clo[f] + 1;
    chi[d] = clo[d] + step < hi[d] ? clo[d] + step : hi[d];
  }
}

static int plan_piece(void *ctx, const int64_t *lo, const int64_t *hi, const size_t *holders,
                      size_t nholders) {
  gplanner *p = ctx;
  size_t h = choose(p, holders, nholders);
  int hp = holder_process(p, h);
  bool here = p->dst_proc == p->me, held = hp == p->me;
  if (!here && !held) return 0;
  int64_t src_lo[DLRUN_MAX_NDIM], src_hi[DLRUN_MAX_NDIM];
  dlrun_sharding_shard_index(p->src->sharding, h, p->src->ndim, p->src->dims, src_lo, src_hi);
  uint64_t bytes = box_bytes(p->esize, p->src->ndim, lo, hi);
  if (here && held) { /* within this process: the engine's copy */
    if (!p->task && ((p->st = dlrun_copy_plan_add_task(p->copies, p->dst_buf, p->dst_lo,
                                                       p->dst_strides, &p->task))))
      return 1;
    dlrun_buffer *src = p->src_bufs[h];
    if ((p->st = dlrun_copy_task_add(p->task, src, src_lo, lo, hi))) return 1;
    bool local = src->dev == p->dst_dev && src->kind == p->dst_kind;
    *(local ? &p->stats.local_bytes : &p->stats.bytes_moved) += bytes;
    return 0;
  }
  if (p->twin[p->i] != p->i && hp != p->dst_proc) { /* from the twin, here */
    if (!here) return 0;
    if (!p->task2 && ((p->st = dlrun_copy_plan_add_task(p->copies2, p->dst_buf, p->dst_lo,
                                                        p->dst_strides, &p->task2))))
      return 1;
    p->st = dlrun_copy_task_add(p->task2, p->dst_bufs[p->twin[p->i]], p->dst_lo, lo, hi);
    p->stats.bytes_moved += bytes;
    return p->st != DLRUN_OK;
  }
  if (here) {
    p->st = add_messages(p, false, p->dst_buf, p->dst_shard_dims, p->dst_lo, hp, h, src_lo, lo,
                         hi);
    p->stats.bytes_received += bytes;
    p->stats.bytes_moved += bytes;
  } else {
    p->st = add_messages(p, true, p->src_bufs[h], p->src->shard_dims, src_lo, p->dst_proc, h,
                         src_lo, lo, hi);
    p->stats.bytes_sent += bytes;
  }
  return p->st != DLRUN_OK;
}

/* twin[i] for every destination shard (gplanner). */
static dlrun_status find_twins(const dlrun_array *src, const dlrun_sharding *dst, size_t n,
                               size_t *twin) {
  dlrun_array layout = {.ndim = src->ndim, .sharding = (dlrun_sharding *)dst, .nshards = n};
  memcpy(layout.dims, src->dims, (size_t)src->ndim * sizeof *src->dims);
  dlrun_sharding_shard_shape(dst, src->ndim, src->dims, layout.shard_dims);
  dlrun_grid g;
  size_t nproc = (size_t)dlrun_process_count();
  size_t *seen = dlrun_calloc(nproc, sizeof *seen); /* 1 + the first shard, per process */
  dlrun_status st = seen ? dlrun_grid_build(&layout, &g) : dlrun_fail_oom_host(nproc * sizeof *seen);
  if (st) {
    dlrun_free(seen);
    return st;
  }
  for (size_t b = 0; b < g.nblocks; b++) {
    for (size_t k = g.first[b]; k < g.first[b + 1]; k++) {
      size_t i = g.holder[k];
      size_t proc = (size_t)dlrun_device_process_index(dlrun_sharding_device(dst, i));
      if (!seen[proc]) seen[proc] = i + 1;
      twin[i] = seen[proc] - 1;
    }
    for (size_t k = g.first[b]; k < g.first[b + 1]; k++)
      seen[dlrun_device_process_index(dlrun_sharding_device(dst, g.holder[k]))] = 0;
  }
  dlrun_grid_free(&g);
  dlrun_free(seen);
  return DLRUN_OK;
}

static bool holds_any(dlrun_buffer **bufs, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (bufs[i]) return true;
  return false;
}

/* The text every process must agree on: the array, the shardings, the
 * options. */
static dlrun_status agree(dlrun_array *src, dlrun_sharding *dst, const dlrun_put_options *o,
                          dlrun_status mine) {
  char array[320], from[1024], to[1024], opts[64];
  dlrun_shape_string(src->dtype, src->ndim, src->dims, array, sizeof array);
  dlrun_sharding_describe(src->sharding, from, sizeof from);
  dlrun_sharding_describe(dst, to, sizeof to);
  snprintf(opts, sizeof opts, "may_alias=%d donate=%d", (int)o->may_alias, (int)o->donate);
  dlrun_distributed_field fields[] = {{"the array", array},
                                      {"the source sharding", from},
                                      {"the target sharding", to},
                                      {"the options", opts}};
  return dlrun_distributed_agree_call("device_put", mine, sizeof fields / sizeof *fields, fields);
}

/* Wait until the sources the messages read are written; a failure to
 * write one (a device's) is this process's failure, agreed on with the
 * others before any message goes. */
static dlrun_status sources_written(const gplanner *p) {
  for (size_t i = 0; i < p->src->nshards; i++) {
    dlrun_status st = p->src_bufs[i] ? dlrun_event_wait(p->src_bufs[i]->ready) : DLRUN_OK;
    if (st) return st;
  }
  return DLRUN_OK;
}

/* Make the messages go (the sources they read are written: sources_written). */
static dlrun_status exchange(gplanner *p, dlrun_message_exchange *x) {
  dlrun_status st = dlrun_message_exchange_run(x);
  if (st) return st;
  p->stats.copies += p->recvs.n;
  /* Each device counts its end, as of a copy within a process: summed over
   * the job, bytes in and out each equal the processes' bytes_moved. */
  for (size_t i = 0; i < p->sends.n; i++)
    dlrun_buffer_count_message(p->sends.v[i].buf, p->sends.v[i].bytes, false);
  for (size_t i = 0; i < p->recvs.n; i++)
    dlrun_buffer_count_message(p->recvs.v[i].buf, p->recvs.v[i].bytes, true);
  return DLRUN_OK;
}

/* A put between processes, planned whole before its second agreement
 * (global_plan_make, global_plan_start), then run and freed whatever
 * happened (global_plan_free). */
typedef struct global_plan {
  gplanner p;
  dlrun_sharding *dst;
  size_t n;       /* destination shards */
  bool may_share; /* a destination shard may be a source shard */
  bool holds;     /* this process holds a source shard */
  dlrun_buffer **dst_bufs;  /* the result's, until the array takes them */
  size_t *twin;             /* gplanner */
  dlrun_buffer **twin_srcs; /* the second plan's sources (the plan owns them) */
  dlrun_grid grid;
  int64_t shard_dims[DLRUN_MAX_NDIM], dst_strides[DLRUN_MAX_NDIM];
  int64_t lo[DLRUN_MAX_NDIM], hi[DLRUN_MAX_NDIM];
  uint64_t shard_nbytes;
  uint64_t writes; /* this process's new destination buffers' bytes: whether copies stream */
  dlrun_message_exchange x;
} global_plan;

static void global_plan_init(global_plan *g, dlrun_array *src, dlrun_sharding *dst,
                             bool may_share) {
  *g = (global_plan){.dst = dst, .n = dlrun_sharding_device_count(dst), .may_share = may_share};
  gplanner *p = &g->p;
  *p = (gplanner){.src = src, .dst = dst, .me = dlrun_process_index(),
                  .esize = dlrun_dtype_get(src->dtype)->size,
                  .limit = dlrun_distributed_message_bytes()};
  uint64_t nbytes;
  dlrun_array_layout(dst, src->dtype, src->ndim, src->dims, g->shard_dims, &nbytes,
                     &g->shard_nbytes);
  dlrun_row_major_strides(src->ndim, g->shard_dims, g->dst_strides);
  p->dst_shard_dims = g->shard_dims;
  p->dst_strides = g->dst_strides;
  p->dst_lo = g->lo;
  p->dst_kind = dlrun_sharding_memory_kind(dst);
  g->x = (dlrun_message_exchange){.sends = &p->sends, .recvs = &p->recvs, .esize = p->esize,
                                  .ndim = src->ndim, .src_shard_dims = src->shard_dims,
                                  .dst_shard_dims = g->shard_dims,
                                  .src_sharding = src->sharding, .nshards = src->nshards};
}

/* The sources, referenced twice (the engine's plan takes one set, the
 * messages read through the other until they are sent), the twins, the
 * grid of the sources and both copy plans. */
static dlrun_status plan_sources(global_plan *g) {
  gplanner *p = &g->p;
  dlrun_array *src = p->src;
  size_t n = g->n;
  dlrun_buffer **plan_srcs = dlrun_malloc(src->nshards * sizeof *plan_srcs);
  p->src_bufs = dlrun_calloc(src->nshards, sizeof *p->src_bufs);
  g->dst_bufs = dlrun_calloc(n, sizeof *g->dst_bufs);
  g->twin = dlrun_malloc(n * sizeof *g->twin);
  p->twin = g->twin;
  p->dst_bufs = g->dst_bufs;
  g->x.src_bufs = p->src_bufs;
  dlrun_status st = DLRUN_OK;
  if (!plan_srcs || !p->src_bufs || !g->dst_bufs || !g->twin)
    st = dlrun_fail_oom_host(2 * src->nshards * sizeof(void *) + 2 * n * sizeof(void *));
  if (!st) st = find_twins(src, p->dst, n, g->twin);
  if (!st && !(st = dlrun_array_acquire_buffers(src, p->src_bufs)) &&
      (st = dlrun_array_acquire_buffers(src, plan_srcs))) {
    for (size_t i = 0; i < src->nshards; i++) dlrun_buffer_release(p->src_bufs[i]);
    memset(p->src_bufs, 0, src->nshards * sizeof *p->src_bufs);
  }
  if (st) {
    dlrun_free(plan_srcs);
    return st;
  }
  g->holds = holds_any(p->src_bufs, src->nshards);
  /* The plan takes plan_srcs, whatever happens. */
  if ((st = dlrun_copy_plan_create(n, src->ndim, p->esize, src->shard_dims, plan_srcs,
                                   src->nshards, &p->copies)) ||
      (st = dlrun_grid_build(src, &g->grid)))
    return st;
  /* The second plan reads the destination buffers (a reference each, taken
   * once they are all made: global_plan_make). */
  if (!(g->twin_srcs = dlrun_calloc(n, sizeof *g->twin_srcs)))
    return dlrun_fail_oom_host(n * sizeof *g->twin_srcs);
  if ((st = dlrun_copy_plan_create(n, src->ndim, p->esize, g->shard_dims, g->twin_srcs, n,
                                   &p->copies2)))
    return st;
  /* It is queued after the exchange, where nothing may fail on one process
   * alone for want of memory: each copy on its own, as queueing them
   * together allocates. */
  dlrun_copy_plan_separate(p->copies2);
  return DLRUN_OK;
}

/* Destination shard i: a source shard shared, or (on this process) a new
 * buffer, and its pieces: copies within this process, copies from its
 * twin, messages to or from other processes. */
static dlrun_status plan_destination(global_plan *g, size_t i) {
  gplanner *p = &g->p;
  dlrun_array *src = p->src;
  p->dst_dev = dlrun_sharding_device(g->dst, i);
  p->dst_proc = dlrun_device_process_index(p->dst_dev);
  p->dst_buf = NULL;
  p->task = p->task2 = NULL;
  p->spread = p->i = i;
  bool here = p->dst_proc == p->me;
  if (!here && !g->holds) return DLRUN_OK; /* nothing to send from here */
  dlrun_sharding_shard_index(g->dst, i, src->ndim, src->dims, g->lo, g->hi);
  if (here) {
    ptrdiff_t j = g->may_share ? dlrun_put_shareable(src, g->dst, i, g->lo, g->hi) : -1;
    if (j >= 0) { /* every piece's holder is on this device: no messages either */
      g->dst_bufs[i] = p->src_bufs[j];
      dlrun_buffer_retain(g->dst_bufs[i]);
      p->stats.shares++;
      return DLRUN_OK;
    }
    dlrun_status st = dlrun_buffer_create(p->dst_dev, p->dst_kind, g->shard_nbytes,
                                          &g->dst_bufs[i]);
    if (st) return st;
    p->dst_buf = g->dst_bufs[i];
    g->writes += g->shard_nbytes;
  }
  if (g->shard_nbytes == 0) return DLRUN_OK;
  dlrun_grid_cover(&g->grid, g->lo, g->hi, plan_piece, p);
  dlrun_status st = p->st;
  dlrun_copy_task *tasks[2] = {p->task, p->task2};
  for (size_t k = 0; k < 2 && !st; k++)
    if (tasks[k] && !(st = dlrun_copy_task_seal(tasks[k])))
      p->stats.copies += dlrun_copy_task_piece_count(tasks[k]);
  return st;
}

/* Every allocation and every piece's place. */
static dlrun_status global_plan_make(global_plan *g) {
  dlrun_status st = plan_sources(g);
  for (size_t i = 0; i < g->n && !st; i++) st = plan_destination(g, i);
  for (size_t i = 0; i < g->n && !st; i++) {
    g->twin_srcs[i] = g->dst_bufs[i];
    if (g->twin_srcs[i]) dlrun_buffer_retain(g->twin_srcs[i]);
  }
  dlrun_grid_free(&g->grid);
  return st;
}

/* Everything else that can fail on this process alone, before the second
 * agreement: the result made, the copies within this process queued (they
 * hold what they read and write), the sources the messages read written,
 * the exchange prepared. */
static dlrun_status global_plan_start(global_plan *g, dlrun_array **out) {
  dlrun_array *src = g->p.src;
  dlrun_buffer **bufs = g->dst_bufs;
  g->dst_bufs = NULL; /* the array takes them, whatever happens */
  dlrun_status st = dlrun_array_wrap(src->dtype, src->ndim, src->dims, g->dst, bufs, out);
  if (st) return st;
  /* The local copies, the pulls and the twins' copies all stream, or none. */
  g->x.stream = dlrun_copy_streams(g->writes);
  dlrun_copy_plan_stream(g->p.copies, g->x.stream);
  dlrun_copy_plan_stream(g->p.copies2, g->x.stream);
  st = dlrun_copy_plan_run(g->p.copies);
  g->p.copies = NULL;
  if (st || (st = sources_written(&g->p))) return st;
  return dlrun_message_exchange_prepare(&g->x);
}

static void global_plan_free(global_plan *g) {
  dlrun_copy_plan_free(g->p.copies);
  dlrun_copy_plan_free(g->p.copies2);
  dlrun_free(g->twin);
  dlrun_buffers_release(g->dst_bufs, g->n);
  if (g->p.src_bufs) dlrun_buffers_release(g->p.src_bufs, g->p.src->nshards);
  dlrun_message_list_free(&g->p.sends);
  dlrun_message_list_free(&g->p.recvs);
}

dlrun_status dlrun_device_put_global(dlrun_array *src, dlrun_sharding *dst,
                                     const dlrun_put_options *o, dlrun_status valid,
                                     dlrun_array **out) {
  dlrun_status st = agree(src, dst, o, valid);
  if (st) return st;
  bool may_share = o->may_alias != DLRUN_ALIAS_NEVER;
  if (may_share && !o->donate && dlrun_sharding_equal(src->sharding, dst)) {
    if (o->stats) *o->stats = (dlrun_transfer_stats){0};
    dlrun_array_retain(src);
    *out = src;
    return DLRUN_OK;
  }
  global_plan g;
  global_plan_init(&g, src, dst, may_share || o->donate);
  /* Every failure on this process alone reaches the second agreement, so
   * that every process reaches the exchange, or every one learns there why
   * not; after it only the transport can fail, and then its peers' waits
   * fail too (and the queueing of the second plan, when no worker thread
   * can run at all). */
  st = global_plan_make(&g);
  if (!st) st = global_plan_start(&g, out);
  dlrun_status planned = dlrun_distributed_agree_call("device_put (planned)", st, 0, NULL);
  if (!st) st = planned;
  if (!st) st = exchange(&g.p, &g.x);
  g.p.stats.ipc_bytes = g.x.pulled;
  dlrun_message_exchange_free(&g.x);
  if (!st) { /* what came from other processes is in the twins now */
    st = dlrun_copy_plan_run(g.p.copies2);
    g.p.copies2 = NULL;
  }
  global_plan_free(&g);
  if (st) {
    dlrun_array_release(*out);
    *out = NULL;
    return st;
  }
  dlrun_count_transfer(dlrun_sharding_device(dst, 0)->rt, &g.p.stats);
  if (o->stats) *o->stats = g.p.stats;
  if (o->donate) dlrun_array_delete(src);
  return DLRUN_OK;
}
