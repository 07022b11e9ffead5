/* Copy plans (device/copy.h): the device layer's half of the transfer
 * engine. */
#include <string.h>

#include "copy.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/alloc.h"
#include "core/status_impl.h"
#include "timeline.h"
#include "enqueue.h"
#include "work_trace.h"
#include "workers.h"
#include "boxes.h"
#include "copy_route.h"

/* A run of a task's pieces that one device queue copies: the task's own
 * destination queue in the common case; the source's for device memory
 * only its platform reaches; and for a piece between two device platforms,
 * two steps through a host block (staged). */
typedef struct copy_group {
  dlrun_device *queue;
  dlrun_copy_op op;
  const dlrun_event *after; /* a staged second step: the first step's done */
  bool staging;             /* a staged first step: its block is read back at once */
  dlrun_event done;
} copy_group;

/* One destination's copies. Its storage is a slot of the plan's block,
 * sized to the rank; the common task (one piece, one group, at most one
 * dependency) needs nothing else. Piece i reads srcs[i]; its coordinates
 * are coords(t, i): the source block's origin, then lo, then hi. */
struct dlrun_copy_task {
  dlrun_copy_plan *plan;
  dlrun_buffer *dst; /* a reference, released with the plan */
  size_t npieces, cap;
  dlrun_buffer **srcs;
  int64_t *piece_coords;
  /* Made when sealed: the pieces as the queues see them, with their
   * source strides; the groups; staging blocks (host memory). */
  dlrun_copy_piece *pieces, one_piece;
  int64_t *src_strides;
  copy_group *groups, one_group;
  size_t ngroups;
  dlrun_event *dones;  /* the groups' done events, when they are joined */
  dlrun_copy_op *join; /* then the join on the destination's queue: a copy of no
                          pieces (allocated with dones) */
  void **stages;       /* staging blocks, one per staged piece */
  size_t nstages;
  dlrun_event *deps;   /* the sources' ready events not yet done; set when queued */
  size_t ndeps;
  uint64_t bytes;
  bool queued;
  dlrun_buffer *one_src;
  dlrun_event one_dep;
  int64_t own[]; /* dst_lo, dst_strides, then the first piece's coordinates and strides */
};
typedef struct dlrun_copy_task copy_task;

/* Tasks queued together (queue_fan): what their copies read until they
 * are done, freed with the plan. */
typedef struct fan_block {
  struct fan_block *next;
  dlrun_event done;     /* the copies' work: every join waits for it */
  dlrun_copy_op *joins; /* one per task, on its destination's queue */
  dlrun_copy_op **ops;  /* the tasks' copies */
  dlrun_event *waits;   /* the tasks' dependencies */
} fan_block;

struct dlrun_copy_plan {
  atomic_size_t pending; /* queued tasks not finished, plus the runner */
  dlrun_runtime *rt;     /* whose workers the runner holds, once it queued */
  size_t queued;
  bool stream;   /* dlrun_copy_plan_stream */
  bool separate; /* dlrun_copy_plan_separate */
  copy_task **fan; /* cap: tasks waiting to be queued together (queue_fan) */
  size_t nfan;
  fan_block *blocks;
  int ndim;
  size_t esize;
  dlrun_buffer **srcs; /* one reference each */
  size_t nsrcs;
  size_t ntasks, cap, stride;
  unsigned char *tasks; /* cap slots of `stride` bytes, after the header */
  int64_t src_shape[];  /* ndim: the source array's shard shape */
};
typedef struct dlrun_copy_plan copy_plan;

#define ALIGN16(n) (((n) + 15) & ~(size_t)15)

static copy_task *task_at(const copy_plan *p, size_t i) {
  return (copy_task *)(void *)(p->tasks + i * p->stride);
}

static int64_t *coords(const copy_task *t, size_t i) {
  return t->piece_coords + i * 3 * (size_t)t->plan->ndim;
}
static const int64_t *dst_lo(const copy_task *t) { return t->own; }
static const int64_t *dst_strides(const copy_task *t) { return t->own + t->plan->ndim; }

static void release_sources(dlrun_buffer **srcs, size_t n) {
  for (size_t i = 0; i < n; i++) dlrun_buffer_release(srcs[i]);
  dlrun_free(srcs);
}

void dlrun_copy_plan_free(copy_plan *p) {
  if (!p) return;
  for (size_t i = 0; i < p->ntasks; i++) {
    copy_task *t = task_at(p, i);
    if (t->pieces != &t->one_piece) dlrun_free(t->pieces);
    if (t->groups != &t->one_group) dlrun_free(t->groups);
    for (size_t k = 0; k < t->nstages; k++) dlrun_free(t->stages[k]);
    dlrun_free(t->stages);
    dlrun_free(t->join); /* with dones */
    if (t->deps != &t->one_dep) dlrun_free(t->deps);
    if (t->srcs != &t->one_src) {
      dlrun_free(t->srcs);
      dlrun_free(t->piece_coords);
    }
    dlrun_buffer_release(t->dst);
  }
  release_sources(p->srcs, p->nsrcs);
  while (p->blocks) {
    fan_block *b = p->blocks;
    p->blocks = b->next;
    dlrun_free(b);
  }
  dlrun_free(p);
}

dlrun_status dlrun_copy_plan_create(size_t ntasks, int ndim, size_t esize,
                                    const int64_t *src_shape, dlrun_buffer **srcs, size_t nsrcs,
                                    copy_plan **out) {
  size_t nd = (size_t)ndim;
  size_t head = ALIGN16(sizeof(copy_plan) + nd * sizeof(int64_t));
  size_t stride = ALIGN16(sizeof(copy_task) + 6 * nd * sizeof(int64_t));
  size_t per = stride + sizeof(copy_task *); /* a slot and its place in the fan */
  size_t size = head + ntasks * per;
  copy_plan *p = ntasks <= (SIZE_MAX - head) / per ? dlrun_malloc(size) : NULL;
  *out = p;
  if (!p) {
    release_sources(srcs, nsrcs);
    return dlrun_fail_oom_host(size);
  }
  *p = (copy_plan){.ndim = ndim, .esize = esize, .srcs = srcs, .nsrcs = nsrcs, .cap = ntasks,
                   .stride = stride, .tasks = (unsigned char *)p + head};
  p->fan = (copy_task **)(void *)(p->tasks + ntasks * stride);
  memcpy(p->src_shape, src_shape, nd * sizeof *src_shape);
  return DLRUN_OK;
}

dlrun_status dlrun_copy_plan_add_task(copy_plan *p, dlrun_buffer *dst, const int64_t *lo,
                                      const int64_t *strides, copy_task **out) {
  if (p->ntasks == p->cap)
    return dlrun_fail(DLRUN_ERR_RUNTIME, "copy plan: more than %zu tasks", p->cap);
  size_t nd = (size_t)p->ndim;
  copy_task *t = task_at(p, p->ntasks++);
  *t = (copy_task){.plan = p, .dst = dst, .cap = 1, .srcs = &t->one_src,
                   .piece_coords = t->own + 2 * nd, .src_strides = t->own + 5 * nd,
                   .pieces = &t->one_piece, .groups = &t->one_group, .deps = &t->one_dep};
  dlrun_buffer_retain(dst);
  memcpy(t->own, lo, nd * sizeof *lo);
  memcpy(t->own + nd, strides, nd * sizeof *strides);
  *out = t;
  return DLRUN_OK;
}

/* Room for twice as many pieces. */
static dlrun_status grow(copy_task *t) {
  size_t cap = t->cap * 2, per = 3 * (size_t)t->plan->ndim;
  dlrun_buffer **srcs = dlrun_malloc(cap * sizeof *srcs);
  int64_t *pc = dlrun_malloc((cap * per + 1) * sizeof *pc); /* +1: rank 0 has none */
  if (!srcs || !pc) {
    dlrun_free(srcs);
    dlrun_free(pc);
    return dlrun_fail_oom_host(cap * (sizeof *srcs + per * sizeof *pc));
  }
  memcpy(srcs, t->srcs, t->npieces * sizeof *srcs);
  memcpy(pc, t->piece_coords, t->npieces * per * sizeof *pc);
  if (t->srcs != &t->one_src) {
    dlrun_free(t->srcs);
    dlrun_free(t->piece_coords);
  }
  t->srcs = srcs;
  t->piece_coords = pc;
  t->cap = cap;
  return DLRUN_OK;
}

dlrun_status dlrun_copy_task_add(copy_task *t, dlrun_buffer *src, const int64_t *src_lo,
                                 const int64_t *lo, const int64_t *hi) {
  if (t->npieces == t->cap) {
    dlrun_status st = grow(t);
    if (st) return st;
  }
  size_t nd = (size_t)t->plan->ndim;
  int64_t *c = coords(t, t->npieces);
  t->srcs[t->npieces++] = src;
  memcpy(c, src_lo, nd * sizeof *src_lo);
  memcpy(c + nd, lo, nd * sizeof *lo);
  memcpy(c + 2 * nd, hi, nd * sizeof *hi);
  return DLRUN_OK;
}

size_t dlrun_copy_task_piece_count(const copy_task *t) { return t->npieces; }

static uint64_t piece_bytes(const copy_task *t, size_t i) {
  const int64_t *c = coords(t, i);
  int nd = t->plan->ndim;
  return dlrun_box_bytes(t->plan->esize, nd, c + nd, c + 2 * nd);
}

/* Room for the pieces as queues see them, their source strides, and the
 * dependencies (at planning, so that queueing allocates nothing). */
static dlrun_status alloc_pieces(copy_task *t) {
  size_t n = t->npieces, nd = (size_t)t->plan->ndim;
  if (n <= 1) return DLRUN_OK;
  if (!(t->pieces = dlrun_malloc(n * (sizeof *t->pieces + nd * sizeof(int64_t)) + 1))) {
    t->pieces = &t->one_piece;
    return dlrun_fail_oom_host(n * sizeof *t->pieces);
  }
  t->src_strides = (int64_t *)(void *)(t->pieces + n);
  if (!(t->deps = dlrun_malloc(n * sizeof *t->deps))) {
    t->deps = &t->one_dep;
    return dlrun_fail_oom_host(n * sizeof *t->deps);
  }
  return DLRUN_OK;
}

/* Piece i as the copy sees it: its source end and box. */
static dlrun_box_end source_end(copy_task *t, size_t i) {
  const copy_plan *p = t->plan;
  int nd = p->ndim;
  int64_t scratch[DLRUN_MAX_NDIM], *strides = t->src_strides + i * (size_t)nd;
  const int64_t *layout = dlrun_buffer_layout(t->srcs[i], nd, p->src_shape, scratch);
  memcpy(strides, layout, (size_t)nd * sizeof *strides);
  return dlrun_buffer_end(t->srcs[i], coords(t, i), strides);
}

/* A host block for a staged piece: the box, row-major, from origin lo. */
static dlrun_status stage_block(copy_task *t, size_t i, dlrun_box_end *out) {
  const copy_plan *p = t->plan;
  int nd = p->ndim;
  const int64_t *c = coords(t, i), *lo = c + nd;
  uint64_t bytes = piece_bytes(t, i);
  int64_t shape[DLRUN_MAX_NDIM];
  for (int d = 0; d < nd; d++) shape[d] = c[2 * nd + d] - lo[d];
  /* Its strides live after the block's bytes (the task has no other room). */
  size_t at = (size_t)((bytes + 15) & ~(uint64_t)15);
  unsigned char *block = dlrun_malloc(at + (size_t)nd * sizeof(int64_t) + 1);
  if (!block) return dlrun_fail_oom_host(at);
  int64_t *strides = (int64_t *)(void *)(block + at);
  dlrun_row_major_strides(nd, shape, strides);
  t->stages[t->nstages++] = block;
  *out = dlrun_host_end(block, lo, strides);
  return DLRUN_OK;
}

/* The routes being sorted (qsort has no context argument); planning runs
 * on one thread per plan, so a thread-local serves. */
static _Thread_local const dlrun_copy_route *sort_routes;

/* Unstaged before staged, then by queue. */
static int by_queue(const void *a, const void *b) {
  const dlrun_copy_route *x = &sort_routes[*(const size_t *)a], *y = &sort_routes[*(const size_t *)b];
  if (x->staged != y->staged) return x->staged ? 1 : -1;
  uintptr_t qx = (uintptr_t)x->queue, qy = (uintptr_t)y->queue;
  if (qx != qy) return qx < qy ? -1 : 1;
  return *(const size_t *)a < *(const size_t *)b ? -1 : *(const size_t *)a > *(const size_t *)b;
}

/* Route every piece and gather the pieces of one queue into a group (the
 * pieces array is reordered so that each group's are adjacent). */
dlrun_status dlrun_copy_task_seal(copy_task *t) {
  const copy_plan *p = t->plan;
  int nd = p->ndim;
  size_t n = t->npieces;
  dlrun_status st = alloc_pieces(t);
  if (st) return st;
  dlrun_copy_route *routes = n > 1 ? dlrun_malloc(n * sizeof *routes) : NULL;
  dlrun_copy_route one_route;
  if (n > 1 && !routes) return dlrun_fail_oom_host(n * sizeof *routes);
  if (n <= 1) routes = &one_route;
  dlrun_box_end dst = dlrun_buffer_end(t->dst, dst_lo(t), dst_strides(t));
  size_t staged = 0;
  for (size_t i = 0; i < n; i++) {
    dlrun_box_end src = source_end(t, i);
    dlrun_copy_route_of(&dst, &src, &routes[i]);
    staged += routes[i].staged;
    t->bytes += piece_bytes(t, i);
  }
  /* Groups: one per distinct queue of unstaged pieces (the pieces sorted by
   * queue: a gather from thousands of devices stays n log n), two per
   * staged piece. */
  size_t *order = n > 1 ? dlrun_malloc(n * sizeof *order) : NULL, one_order = 0;
  if (n > 1 && !order) st = dlrun_fail_oom_host(n * sizeof *order);
  if (n <= 1) order = &one_order;
  size_t max_groups = 2 * staged, at = 0;
  if (!st) {
    for (size_t i = 0; i < n; i++) order[i] = i;
    sort_routes = routes;
    if (n > 1) qsort(order, n, sizeof *order, by_queue);
    for (size_t k = 0; k < n; k++)
      max_groups += !routes[order[k]].staged &&
                    (k == 0 || routes[order[k - 1]].queue != routes[order[k]].queue);
  }
  if (!st && max_groups > 1 && !(t->groups = dlrun_calloc(max_groups, sizeof *t->groups))) {
    t->groups = &t->one_group;
    st = dlrun_fail_oom_host(max_groups * sizeof *t->groups);
  }
  /* Two allocations per staged piece: its block and its second step's piece. */
  if (!st && staged && !(t->stages = dlrun_calloc(2 * staged, sizeof *t->stages)))
    st = dlrun_fail_oom_host(2 * staged * sizeof *t->stages);
  for (size_t k = 0; k < n && !st; k++) { /* unstaged pieces, grouped by queue */
    const dlrun_copy_route *r = &routes[order[k]];
    if (r->staged) continue;
    if (k == 0 || routes[order[k - 1]].queue != r->queue)
      t->groups[t->ngroups++] = (copy_group){
          .queue = r->queue,
          .op = {.esize = p->esize, .ndim = nd, .dst = r->dst, .pieces = t->pieces + at}};
    const int64_t *c = coords(t, order[k]);
    t->pieces[at++] = (dlrun_copy_piece){.src = r->src, .lo = c + nd, .hi = c + 2 * nd};
    t->groups[t->ngroups - 1].op.npieces++;
  }
  if (order != &one_order) dlrun_free(order);
  for (size_t i = 0; i < n && !st; i++) { /* staged pieces: two steps each */
    if (!routes[i].staged) continue;
    dlrun_box_end host;
    if ((st = stage_block(t, i, &host))) break;
    const int64_t *c = coords(t, i);
    dlrun_copy_piece *first = &t->pieces[at++];
    *first = (dlrun_copy_piece){.src = routes[i].src, .lo = c + nd, .hi = c + 2 * nd};
    copy_group *g1 = &t->groups[t->ngroups++], *g2 = &t->groups[t->ngroups++];
    *g1 = (copy_group){.queue = routes[i].src_queue, .staging = true,
                       .op = {.esize = p->esize, .ndim = nd, .dst = host, .npieces = 1,
                              .pieces = first}};
    /* The second step reads the block: its piece is the host end. */
    dlrun_copy_piece *second = dlrun_malloc(sizeof *second);
    if (!second) {
      st = dlrun_fail_oom_host(sizeof *second);
      break;
    }
    *second = (dlrun_copy_piece){.src = host, .lo = c + nd, .hi = c + 2 * nd};
    t->stages[t->nstages++] = second; /* freed with the blocks */
    *g2 = (copy_group){.queue = routes[i].queue, .after = &g1->done,
                       .op = {.esize = p->esize, .ndim = nd, .dst = routes[i].dst,
                              .npieces = 1, .pieces = second}};
  }
  if (routes != &one_route) dlrun_free(routes);
  if (st) return st;
  /* Joined on the destination's queue unless one group on it does all. */
  if (t->ngroups > 1 || (t->ngroups == 1 && t->groups[0].queue != t->dst->dev)) {
    size_t bytes = sizeof *t->join + t->ngroups * sizeof *t->dones;
    if (!(t->join = dlrun_malloc(bytes))) return dlrun_fail_oom_host(bytes);
    t->dones = (dlrun_event *)(void *)(t->join + 1);
  }
  return DLRUN_OK;
}

/* Drop `n` holds on the plan; the last frees it. */
static void plan_done(copy_plan *p, size_t n) {
  if (atomic_fetch_sub(&p->pending, n) == n) dlrun_copy_plan_free(p);
}

/* The task's copies are done (or failed): count them, let the plan go. */
static void task_finished(copy_task *t) {
  atomic_fetch_add(&t->dst->dev->rt->bytes_done, t->bytes);
  plan_done(t->plan, 1); /* may free t */
}

/* A copy op's completion (dlrun_copy_op.complete), on whatever thread the
 * platform completes work: counted as an event callback (what it releases
 * must not tear the runtime down there). */
static void finish_task(void *t) { task_finished(t); }
static void task_finished_ctx(void *t) { dlrun_timeline_run_as_callback(finish_task, t); }

/* Enqueue every group of t after deps; on a failure, wait for the groups
 * already enqueued (they read the plan) and return it. */
static dlrun_status enqueue_groups(copy_task *t) {
  dlrun_status st = DLRUN_OK;
  size_t queued = 0;
  if (!t->dones) { /* the one group's op is the task's last: it finishes the task */
    t->groups[0].op.complete = task_finished_ctx;
    t->groups[0].op.complete_ctx = t;
  }
  for (; queued < t->ngroups; queued++) {
    copy_group *g = &t->groups[queued];
    g->op.stream = t->plan->stream && !g->staging;
    const dlrun_event *waits = g->after ? g->after : t->deps;
    size_t nwaits = g->after ? 1 : t->ndeps;
    if ((st = dlrun_queue_copy_box(g->queue, &g->op, waits, nwaits, &g->done))) break;
    if (t->dones) t->dones[queued] = g->done;
  }
  if (!t->dones) { /* one group, on the destination's queue */
    if (!st) t->dst->ready = t->groups[0].done;
    return st;
  }
  if (!st) {
    *t->join = (dlrun_copy_op){.esize = t->plan->esize, .ndim = t->plan->ndim,
                               .complete = task_finished_ctx, .complete_ctx = t};
    st = dlrun_queue_copy_box(t->dst->dev, t->join, t->dones, t->ngroups, &t->dst->ready);
  }
  if (st) { /* the queued groups read the plan: they finish first */
    dlrun_workers_flush(t->dst->dev->rt->workers);
    dlrun_events_wait(t->dones, queued);
  }
  return st;
}

void dlrun_copy_plan_stream(copy_plan *p, bool on) { p->stream = on; }
void dlrun_copy_plan_separate(copy_plan *p) { p->separate = true; }

void dlrun_copy_plan_start(copy_plan *p) {
  atomic_init(&p->pending, 1); /* the runner's hold */
  p->rt = NULL;
  p->queued = 0;
  p->nfan = 0;
}

/* The runtime whose workers run the plan, held on first use. */
static dlrun_status hold_workers(copy_plan *p, dlrun_runtime *rt) {
  if (p->rt) return DLRUN_OK;
  dlrun_status st = dlrun_workers_hold(rt->workers);
  if (!st) p->rt = rt;
  return st;
}

/* t's copies are queued: count what it moves between devices. */
static void count_queued(copy_task *t) {
  t->queued = true;
  dlrun_device *dst = t->dst->dev;
  for (size_t k = 0; k < t->npieces; k++) {
    dlrun_buffer *src = t->srcs[k];
    if (src->dev == dst) continue;
    uint64_t bytes = piece_bytes(t, k);
    atomic_fetch_add(&src->dev->bytes_out, bytes);
    atomic_fetch_add(&dst->bytes_in, bytes);
  }
}

/* Counted before the task can finish, so done never passes queued; taken
 * back when it is not queued after all. */
static void count_pending(copy_plan *p, copy_task *t) {
  atomic_fetch_add(&p->rt->bytes_queued, t->bytes);
  atomic_fetch_add(&p->pending, 1);
}
static void uncount_pending(copy_plan *p, copy_task *t) {
  atomic_fetch_sub(&p->pending, 1);
  atomic_fetch_sub(&p->rt->bytes_queued, t->bytes); /* what will never be done */
}

static dlrun_status queue_one(copy_plan *p, copy_task *t) {
  count_pending(p, t);
  dlrun_status st = enqueue_groups(t);
  if (st) uncount_pending(p, t);
  else count_queued(t);
  return st;
}

/* Whether t may be queued with others (queue_fan): all its copies are one
 * op on its destination's queue, of a platform that takes several at once. */
static bool fusable(const copy_task *t) {
  const copy_group *g = &t->groups[0];
  return !t->plan->separate && t->ngroups == 1 && !t->dones && !g->after && !g->staging &&
         g->queue->platform->copy_boxes;
}

static fan_block *fan_block_new(copy_plan *p, size_t n, size_t nwaits) {
  size_t head = ALIGN16(sizeof(fan_block)), joins = ALIGN16(n * sizeof(dlrun_copy_op));
  size_t ops = ALIGN16(n * sizeof(dlrun_copy_op *));
  size_t bytes = head + joins + ops + nwaits * sizeof(dlrun_event);
  fan_block *b = dlrun_malloc(bytes);
  if (!b) {
    dlrun_fail_oom_host(bytes);
    return NULL;
  }
  b->joins = (dlrun_copy_op *)(void *)((char *)b + head);
  b->ops = (dlrun_copy_op **)(void *)((char *)b + head + joins);
  b->waits = (dlrun_event *)(void *)((char *)b + head + joins + ops);
  b->next = p->blocks;
  p->blocks = b;
  return b;
}

/* Queue the tasks waiting in the fan as one unit of work on the first one's
 * queue (copy_boxes: the platform reads their shared sources once), then
 * each destination's join after it, so that every destination's ready
 * event stays on its own queue. */
static dlrun_status queue_fan(copy_plan *p) {
  size_t n = p->nfan, nwaits = 0;
  p->nfan = 0;
  if (n <= 1) return n ? queue_one(p, p->fan[0]) : DLRUN_OK;
  for (size_t i = 0; i < n; i++) nwaits += p->fan[i]->ndeps;
  fan_block *b = fan_block_new(p, n, nwaits);
  if (!b) return DLRUN_ERR_RESOURCE_EXHAUSTED;
  nwaits = 0;
  for (size_t i = 0; i < n; i++) {
    copy_task *t = p->fan[i];
    b->ops[i] = &t->groups[0].op;
    b->ops[i]->stream = p->stream;
    memcpy(b->waits + nwaits, t->deps, t->ndeps * sizeof *t->deps);
    nwaits += t->ndeps;
    count_pending(p, t);
  }
  dlrun_status st =
      dlrun_queue_copy_boxes(p->fan[0]->groups[0].queue, b->ops, n, b->waits, nwaits, &b->done);
  if (st) { /* nothing was queued */
    for (size_t i = 0; i < n; i++) uncount_pending(p, p->fan[i]);
    return st;
  }
  size_t joined = 0;
  for (; joined < n && !st; joined++) {
    copy_task *t = p->fan[joined];
    b->joins[joined] = (dlrun_copy_op){.esize = p->esize, .ndim = p->ndim,
                                       .complete = task_finished_ctx, .complete_ctx = t};
    st = dlrun_queue_copy_box(t->dst->dev, &b->joins[joined], &b->done, 1, &t->dst->ready);
    if (!st) count_queued(t);
  }
  if (st) { /* the queued work reads every task: it finishes first */
    dlrun_workers_flush(p->rt->workers);
    dlrun_event_wait(b->done);
    for (size_t i = joined - 1; i < n; i++) uncount_pending(p, p->fan[i]);
  }
  return st;
}

/* Tasks queued between two releases of the workers, and at most in a fan. */
#define BATCH 64

dlrun_status dlrun_copy_plan_queue(copy_plan *p, copy_task *t) {
  dlrun_status st = hold_workers(p, t->dst->dev->rt);
  if (st) return st;
  t->ndeps = 0;
  for (size_t k = 0; k < t->npieces; k++) {
    dlrun_buffer *src = t->srcs[k];
    if (!dlrun_event_done(src->ready) || dlrun_event_status(src->ready))
      t->deps[t->ndeps++] = src->ready; /* a failed one fails the copy */
  }
  if (!fusable(t)) st = queue_one(p, t);
  else {
    if (p->nfan && p->fan[0]->groups[0].queue->platform != t->groups[0].queue->platform)
      st = queue_fan(p); /* a fan is of one platform */
    if (!st) p->fan[p->nfan++] = t;
  }
  if (!st && ++p->queued % BATCH == 0) { /* let the workers start on what is queued */
    st = queue_fan(p);
    dlrun_workers_release(p->rt->workers);
    dlrun_workers_hold(p->rt->workers); /* cannot fail: a thread runs */
  }
  return st;
}

dlrun_status dlrun_copy_plan_finish(copy_plan *p) {
  dlrun_status st = queue_fan(p);
  if (st) {
    dlrun_copy_plan_abort(p);
    return st;
  }
  if (p->rt) dlrun_workers_release(p->rt->workers);
  plan_done(p, 1);
  return DLRUN_OK;
}

void dlrun_copy_plan_abort(copy_plan *p) {
  p->nfan = 0; /* never queued */
  if (p->rt) dlrun_workers_release(p->rt->workers);
  /* The runner's hold keeps every task, and its destination, alive. */
  for (size_t i = 0; i < p->ntasks; i++)
    if (task_at(p, i)->queued) dlrun_event_wait(task_at(p, i)->dst->ready);
  plan_done(p, 1);
}

dlrun_status dlrun_copy_plan_run(copy_plan *p) {
  dlrun_copy_plan_start(p);
  dlrun_status st = DLRUN_OK;
  for (size_t i = 0; i < p->ntasks && !st; i++) st = dlrun_copy_plan_queue(p, task_at(p, i));
  if (st) p->nfan = 0; /* nothing is queued after a failure */
  dlrun_status fin = dlrun_copy_plan_finish(p);
  return st ? st : fin;
}
