/* The messages of a device_put between processes (messages.h). A staged
 * message travels as one contiguous block of at most
 * $DLRUN_DISTRIBUTED_MESSAGE_BYTES (the planner cuts boxes to that size):
 * host memory per peer and direction, sized to its largest message, reused
 * by every round and freed at the end. The rounds bound the staging memory
 * to two such blocks per peer whatever the size of the array. */
#include <stdio.h>
#include <string.h>

#include "core/alloc.h"
#include "core/status_impl.h"
#include "core/trace_impl.h"
#include "device/boxes.h"
#include "device/buffer.h"
#include "device/buffer_transport.h"
#include "device/work_trace.h"
#include "distributed/distributed_impl.h"
#include "message_pulls.h"

static dlrun_reach job_reach(void) {
  switch (dlrun_distributed_device_memory_mode()) {
  case DLRUN_DISTRIBUTED_DEVICE_MEMORY_DIRECT:
    return dlrun_distributed_device_aware() ? DLRUN_REACH_DIRECT : DLRUN_REACH_DIRECT_HOST;
  case DLRUN_DISTRIBUTED_DEVICE_MEMORY_STAGED: return DLRUN_REACH_STAGED;
  default:
    return dlrun_distributed_device_aware() == 1 ? DLRUN_REACH_DEVICE_VIEWS
                                                 : DLRUN_REACH_HOST_VIEWS;
  }
}

static dlrun_message *message_slot(dlrun_message_list *l) {
  if (!l->per_peer) {
    size_t n = (size_t)dlrun_process_count();
    if (!(l->per_peer = dlrun_calloc(n, sizeof *l->per_peer))) return NULL;
  }
  if (dlrun_grow(&l->v, l->n, &l->cap, sizeof *l->v, 16)) return NULL;
  return &l->v[l->n];
}

dlrun_status dlrun_message_add(dlrun_message_list *l, dlrun_buffer *b, size_t esize, int ndim,
                               const int64_t *shard_dims, const int64_t *origin,
                               const int64_t *lo, const int64_t *hi, int peer, size_t shard,
                               const int64_t *src_origin) {
  dlrun_message *m = message_slot(l);
  if (!m) return dlrun_fail_oom_host(sizeof *m);
  bool direct;
  dlrun_status st = dlrun_buffer_reach(b, job_reach(), &direct);
  if (st) return st;
  *m = (dlrun_message){.round = l->per_peer[peer]++, .buf = b, .staged = !direct,
                       .shard = shard, .bytes = dlrun_box_bytes(esize, ndim, lo, hi)};
  size_t n = (size_t)ndim * sizeof *lo;
  memcpy(m->origin, origin, n);
  memcpy(m->lo, lo, n);
  memcpy(m->hi, hi, n);
  memcpy(m->src_origin, src_origin, n);
  if (direct) st = dlrun_buffer_message(b, esize, ndim, shard_dims, origin, lo, hi, peer, &m->wire);
  else
    m->wire = (dlrun_transport_message){.peer = peer, .ndim = 1, .count = {(int64_t)m->bytes},
                                         .stride = {1}};
  if (!st) l->n++;
  return st;
}

void dlrun_message_list_free(dlrun_message_list *l) {
  dlrun_free(l->v);
  dlrun_free(l->per_peer);
  *l = (dlrun_message_list){0};
}

/* The most rounds this process's messages need (1 + the largest round),
 * and the largest staged message per peer (sizes[peer]). */
static size_t rounds_of(const dlrun_message_list *l, uint64_t *sizes, bool *staged) {
  size_t rounds = 0;
  for (size_t i = 0; i < l->n; i++) {
    const dlrun_message *m = &l->v[i];
    if (m->round + 1 > rounds) rounds = m->round + 1;
    if (!m->staged) continue;
    *staged = true;
    if (m->bytes > sizes[m->wire.peer]) sizes[m->wire.peer] = m->bytes;
  }
  return rounds;
}

static dlrun_status alloc_blocks(unsigned char **blocks, const uint64_t *sizes, size_t n) {
  for (size_t r = 0; r < n; r++)
    if (sizes[r] && !(blocks[r] = dlrun_malloc((size_t)sizes[r])))
      return dlrun_fail_oom_host((size_t)sizes[r]);
  return DLRUN_OK;
}

dlrun_status dlrun_message_exchange_prepare(dlrun_message_exchange *x) {
  size_t n = (size_t)dlrun_process_count();
  size_t ns = x->sends->n ? x->sends->n : 1, nr = x->recvs->n ? x->recvs->n : 1;
  x->round_sends = dlrun_malloc(ns * sizeof *x->round_sends);
  x->round_recvs = dlrun_malloc(nr * sizeof *x->round_recvs);
  x->send_blocks = dlrun_calloc(n, sizeof *x->send_blocks);
  x->recv_blocks = dlrun_calloc(n, sizeof *x->recv_blocks);
  uint64_t *sizes = dlrun_calloc(n, sizeof *sizes);
  if (!x->round_sends || !x->round_recvs || !x->send_blocks || !x->recv_blocks || !sizes) {
    dlrun_free(sizes);
    return dlrun_fail_oom_host((ns + nr) * sizeof *x->round_sends + 3 * n * sizeof(void *));
  }
  bool staged = false;
  size_t a = rounds_of(x->sends, sizes, &staged);
  dlrun_status st = alloc_blocks(x->send_blocks, sizes, n);
  memset(sizes, 0, n * sizeof *sizes);
  size_t b = rounds_of(x->recvs, sizes, &staged);
  if (!st) st = alloc_blocks(x->recv_blocks, sizes, n);
  dlrun_free(sizes);
  if (!st) st = dlrun_message_pulls_layout(x, a > b ? a : b, staged);
  return st;
}

/* This round's messages of l into out (all of them when round is
 * SIZE_MAX), staged ones pointed at their peer's block. */
static size_t round_messages(const dlrun_message_list *l, size_t round, unsigned char **blocks,
                           dlrun_transport_message *out) {
  size_t k = 0;
  for (size_t i = 0; i < l->n; i++) {
    const dlrun_message *m = &l->v[i];
    if (m->pull || (round != SIZE_MAX && m->round != round)) continue;
    out[k] = m->wire;
    if (m->staged) out[k].base = blocks[m->wire.peer];
    k++;
  }
  return k;
}

/* Copy this round's staged messages of l out of (out) or into their
 * buffers; the first failure is returned, the rest are skipped. */
static dlrun_status stage_round(const dlrun_message_exchange *x, const dlrun_message_list *l,
                                size_t round, unsigned char **blocks, bool out,
                                const int64_t *shard_dims) {
  for (size_t i = 0; i < l->n; i++) {
    const dlrun_message *m = &l->v[i];
    if (m->round != round || !m->staged || m->pull) continue;
    dlrun_status st = dlrun_buffer_stage(m->buf, x->esize, x->ndim, shard_dims, m->origin, m->lo,
                                         m->hi, blocks[m->wire.peer], out);
    if (st) return st;
  }
  return DLRUN_OK;
}

static dlrun_status transport_exchange(size_t nsends, const dlrun_transport_message *sends,
                                       size_t nrecvs, const dlrun_transport_message *recvs) {
  char err[320] = "";
  if (dlrun_distributed_exchange(sends, nsends, recvs, nrecvs, err, sizeof err) !=
      DLRUN_TRANSPORT_OK)
    return dlrun_fail(DLRUN_ERR_RUNTIME, "device_put: %s", err);
  return DLRUN_OK;
}

/* A "receive" event for each message of `round` (SIZE_MAX: all) that came
 * through the transport, on its device's track since `start`: no queue of
 * this process copied it, so nothing else names where it came from. */
static void trace_receives(const dlrun_message_exchange *x, size_t round, uint64_t start) {
  if (!dlrun_trace_enabled()) return;
  for (size_t i = 0; i < x->recvs->n; i++) {
    const dlrun_message *m = &x->recvs->v[i];
    if (m->pull || (round != SIZE_MAX && m->round != round)) continue;
    const dlrun_device *src = dlrun_sharding_device(x->src_sharding, m->shard);
    const char *dst = dlrun_device_name(m->buf->dev);
    dlrun_trace_transfer(dst, "receive", start, m->bytes, dlrun_device_name(src),
                         dlrun_device_process_index(src), dst);
  }
}

dlrun_status dlrun_message_exchange_run(dlrun_message_exchange *x) {
  size_t n = (size_t)dlrun_process_count();
  char err[320] = "";
  if (dlrun_distributed_allgatherv(dlrun_message_words(x, (size_t)dlrun_process_index()), x->all,
                                   x->counts, x->displs, err, sizeof err) != DLRUN_TRANSPORT_OK)
    return dlrun_fail(DLRUN_ERR_RUNTIME, "device_put: %s", err);
  uint64_t rounds = 0, staged = 0;
  for (size_t r = 0; r < n; r++) {
    const uint64_t *h = dlrun_message_words(x, r);
    if (h[0] > rounds) rounds = h[0];
    staged |= h[1];
  }
  dlrun_status st = DLRUN_OK;
  if (dlrun_message_pulls_mark(x)) {
    /* Every pull is done, or every process learns which failed, before
     * the senders go on (they may free or reuse what was read). */
    st = dlrun_message_pulls_run(x);
    if ((st = dlrun_distributed_agree_call("device_put (copied between processes)", st, 0, NULL)))
      return st;
  }
  uint64_t start = dlrun_trace_enabled() ? dlrun_trace_now() : 0;
  if (!staged) { /* every message straight from and into memory: one exchange */
    size_t ns = round_messages(x->sends, SIZE_MAX, NULL, x->round_sends);
    size_t nr = round_messages(x->recvs, SIZE_MAX, NULL, x->round_recvs);
    st = transport_exchange(ns, x->round_sends, nr, x->round_recvs);
    if (!st) trace_receives(x, SIZE_MAX, start);
    return st;
  }
  for (size_t round = 0; round < rounds; round++) {
    if (!st) st = stage_round(x, x->sends, round, x->send_blocks, true, x->src_shard_dims);
    /* A copy that failed here, now or in the last round, is every
     * process's error before any message of this round goes. */
    if ((st = dlrun_distributed_agree_call("device_put (staged)", st, 0, NULL))) return st;
    size_t ns = round_messages(x->sends, round, x->send_blocks, x->round_sends);
    size_t nr = round_messages(x->recvs, round, x->recv_blocks, x->round_recvs);
    if (dlrun_trace_enabled()) start = dlrun_trace_now();
    if ((st = transport_exchange(ns, x->round_sends, nr, x->round_recvs))) return st;
    trace_receives(x, round, start);
    st = stage_round(x, x->recvs, round, x->recv_blocks, false, x->dst_shard_dims);
  }
  return dlrun_distributed_agree_call("device_put (staged)", st, 0, NULL);
}

void dlrun_message_exchange_free(dlrun_message_exchange *x) {
  size_t n = (size_t)dlrun_process_count();
  for (size_t r = 0; r < n; r++) {
    if (x->send_blocks) dlrun_free(x->send_blocks[r]);
    if (x->recv_blocks) dlrun_free(x->recv_blocks[r]);
  }
  dlrun_free(x->send_blocks);
  dlrun_free(x->recv_blocks);
  dlrun_free(x->round_sends);
  dlrun_free(x->round_recvs);
  dlrun_free(x->all);
  dlrun_free(x->counts);
  dlrun_free(x->displs);
  dlrun_free(x->slot);
}
