/* The messages of a device_put between processes that may map each
 * other's memory (processes on one host: dlrun_distributed_peer_readable):
 * such a piece is no message but one copy, by the receiver, straight out
 * of the sender's memory (device/peer_memory.h). Whether a piece goes so is
 * decided on both ends from what every process said before the exchange
 * (x->all), so both decide alike: the receiver may read the sender's
 * memory, both have the path on, and the sender shares the shard. */
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/status_impl.h"
#include "device/peer_memory.h"
#include "distributed/distributed_impl.h"
#include "message_pulls.h"

#define SHARD_WORDS (sizeof(dlrun_shared_source) / sizeof(uint64_t))

static int shard_process(const dlrun_message_exchange *x, size_t h) {
  return dlrun_device_process_index(dlrun_sharding_device(x->src_sharding, h));
}

/* Whether this process offers its shards to anyone: its switch is on and
 * some process may read its memory. */
static bool offers(int me, size_t n) {
  if (!dlrun_distributed_one_copy()) return false;
  for (size_t r = 0; r < n; r++)
    if (dlrun_distributed_peer_readable((int)r, me)) return true;
  return false;
}

dlrun_status dlrun_message_pulls_layout(dlrun_message_exchange *x, uint64_t rounds, bool staged) {
  size_t n = (size_t)dlrun_process_count(), me = (size_t)dlrun_process_index();
  size_t nshards = x->nshards;
  x->any_peers = dlrun_distributed_any_peers();
  x->counts = dlrun_calloc(n, sizeof *x->counts);
  x->displs = dlrun_calloc(n, sizeof *x->displs);
  x->slot = x->any_peers ? dlrun_malloc(nshards * sizeof *x->slot) : NULL;
  if (!x->counts || !x->displs || (x->any_peers && !x->slot))
    return dlrun_fail_oom_host(2 * n * sizeof(size_t) + nshards * sizeof(size_t));
  /* Words per process: the header, then its shards' (in shard order). */
  for (size_t r = 0; r < n; r++) x->counts[r] = DLRUN_MESSAGE_HEADER_WORDS;
  for (size_t h = 0; x->any_peers && h < nshards; h++) {
    size_t p = (size_t)shard_process(x, h);
    x->slot[h] = x->counts[p]; /* within p's part; made absolute below */
    x->counts[p] += SHARD_WORDS;
  }
  size_t words = 0;
  for (size_t r = 0; r < n; r++) {
    x->displs[r] = words;
    words += x->counts[r];
  }
  for (size_t h = 0; x->any_peers && h < nshards; h++) x->slot[h] += x->displs[shard_process(x, h)];
  if (!(x->all = dlrun_calloc(words, sizeof *x->all))) return dlrun_fail_oom_host(words * 8);
  for (size_t r = 0; r < n; r++) { /* the transport counts bytes */
    x->counts[r] *= sizeof *x->all;
    x->displs[r] *= sizeof *x->all;
  }
  uint64_t *mine = dlrun_message_words(x, me);
  bool offer = x->any_peers && offers((int)me, n);
  mine[0] = rounds;
  mine[1] = staged;
  mine[2] = x->any_peers && dlrun_distributed_one_copy();
  for (size_t h = 0; offer && h < nshards; h++)
    if ((size_t)shard_process(x, h) == me && x->src_bufs[h])
      dlrun_buffer_share(x->src_bufs[h], (dlrun_shared_source *)(x->all + x->slot[h]));
  return DLRUN_OK;
}

static const dlrun_shared_source *source_of(const dlrun_message_exchange *x, size_t shard) {
  return (const dlrun_shared_source *)(x->all + x->slot[shard]);
}

/* Whether the piece of `shard` from `sender` to `receiver` is a pull. */
static bool is_pull(const dlrun_message_exchange *x, int sender, int receiver, size_t shard) {
  return dlrun_distributed_peer_readable(receiver, sender) &&
         dlrun_message_words(x, (size_t)sender)[2] && dlrun_message_words(x, (size_t)receiver)[2] &&
         source_of(x, shard)->size != 0;
}

bool dlrun_message_pulls_mark(dlrun_message_exchange *x) {
  if (!x->any_peers) return false;
  int me = dlrun_process_index();
  for (size_t i = 0; i < x->sends->n; i++) {
    dlrun_message *m = &x->sends->v[i];
    m->pull = is_pull(x, me, m->wire.peer, m->shard);
  }
  for (size_t i = 0; i < x->recvs->n; i++) {
    dlrun_message *m = &x->recvs->v[i];
    m->pull = is_pull(x, m->wire.peer, me, m->shard);
  }
  size_t nshards = x->nshards;
  for (size_t h = 0; h < nshards; h++)
    if (source_of(x, h)->size) return true;
  return false;
}

/* The pulls being sorted (qsort has no context argument); an exchange
 * runs on one thread per process, so a thread-local serves. */
static _Thread_local const dlrun_message *sort_recvs;

/* By source shard, then in list order. */
static int by_shard(const void *a, const void *b) {
  size_t i = *(const size_t *)a, j = *(const size_t *)b;
  size_t si = sort_recvs[i].shard, sj = sort_recvs[j].shard;
  if (si != sj) return si < sj ? -1 : 1;
  return i < j ? -1 : i > j;
}

/* The pulls out of one source shard go together: its rows are read once
 * for all of this process's destinations where their platform allows. */
dlrun_status dlrun_message_pulls_run(dlrun_message_exchange *x) {
  size_t n = 0;
  for (size_t i = 0; i < x->recvs->n; i++) n += x->recvs->v[i].pull;
  if (n == 0) return DLRUN_OK;
  size_t *order = dlrun_malloc(n * sizeof *order);
  dlrun_pull_dst *dsts = dlrun_malloc(n * sizeof *dsts);
  dlrun_status st =
      order && dsts ? DLRUN_OK : dlrun_fail_oom_host(n * (sizeof *order + sizeof *dsts));
  n = 0;
  for (size_t i = 0; i < x->recvs->n && !st; i++)
    if (x->recvs->v[i].pull) order[n++] = i;
  if (!st) {
    sort_recvs = x->recvs->v;
    qsort(order, n, sizeof *order, by_shard);
  }
  for (size_t k = 0, next; k < n && !st; k = next) {
    const dlrun_message *m = &x->recvs->v[order[k]];
    uint64_t bytes = 0;
    for (next = k; next < n && x->recvs->v[order[next]].shard == m->shard; next++) {
      const dlrun_message *g = &x->recvs->v[order[next]];
      dsts[next - k] = (dlrun_pull_dst){.buf = g->buf, .origin = g->origin, .lo = g->lo,
                                         .hi = g->hi};
      bytes += g->bytes;
    }
    st = dlrun_buffers_pull(next - k, dsts, x->esize, x->ndim, x->dst_shard_dims,
                            dlrun_sharding_device(x->src_sharding, m->shard), m->wire.peer,
                            dlrun_distributed_peer_pid(m->wire.peer), source_of(x, m->shard),
                            x->src_shard_dims, m->src_origin, x->stream);
    if (!st) x->pulled += bytes;
  }
  dlrun_free(order);
  dlrun_free(dsts);
  return st;
}
