/* Internal: the messages of a device_put between processes, and how they
 * go (messages.c): straight from and into device memory through the
 * platforms' transport views, or staged through host memory where the
 * transport cannot reach a memory (dlrun_buffer_reach). */
#ifndef DLRUN_MESSAGES_H
#define DLRUN_MESSAGES_H

#include "array_impl.h"
#include "device/buffer_transport.h"
#include "distributed/transport.h"

/* One message: the box [lo, hi) of buf (whose block starts at `origin`),
 * read from source shard `shard` (whose block starts at src_origin). */
typedef struct dlrun_message {
  dlrun_transport_message wire; /* as the transport sends it; staged: base set per round */
  dlrun_buffer *buf;           /* read from (a send) or written (a receive) */
  bool staged;                 /* through a host block, not buf's own memory */
  bool pull;                   /* copied straight out of the sender's memory */
  size_t shard;
  int64_t origin[DLRUN_MAX_NDIM], lo[DLRUN_MAX_NDIM], hi[DLRUN_MAX_NDIM];
  int64_t src_origin[DLRUN_MAX_NDIM];
  uint64_t bytes;
  size_t round; /* its place among this peer's messages in its direction */
} dlrun_message;

typedef struct dlrun_message_list {
  dlrun_message *v;
  size_t n, cap;
  size_t *per_peer; /* messages listed so far per process */
} dlrun_message_list;

/* Add the message of the box [lo, hi) of b (block of shape shard_dims at
 * origin) to or from `peer`, whose bytes are those of source shard `shard`
 * (block at src_origin): direct or staged as dlrun_buffer_reach says for
 * this job (or, decided at the exchange, copied straight between the two
 * memories: message_pulls.c). */
dlrun_status dlrun_message_add(dlrun_message_list *l, dlrun_buffer *b, size_t esize, int ndim,
                               const int64_t *shard_dims, const int64_t *origin,
                               const int64_t *lo, const int64_t *hi, int peer, size_t shard,
                               const int64_t *src_origin);

/* Everything the exchange needs, made before the call's second agreement
 * so that nothing after it fails on one process alone for want of memory. */
typedef struct dlrun_message_exchange {
  dlrun_message_list *sends, *recvs;
  size_t esize;
  int ndim;
  const int64_t *src_shard_dims, *dst_shard_dims;
  /* The source array's sharding and this process's shards of it (NULL:
   * another's), for the one-copy path. */
  const dlrun_sharding *src_sharding;
  dlrun_buffer *const *src_bufs;
  size_t nshards;
  dlrun_transport_message *round_sends, *round_recvs;
  unsigned char **send_blocks, **recv_blocks; /* per process, reused by every round */
  /* What every process says before the messages go (message_pulls.c lays
   * it out): how many rounds its messages need, whether any is staged,
   * and where its shards are in memory its peers may map. */
  uint64_t *all;
  size_t *counts, *displs; /* bytes, per process, of `all` */
  size_t *slot;            /* per source shard: its words in `all` (NULL: no pulls) */
  bool any_peers;          /* the job has processes that may map each other's memory */
  bool stream;             /* pulls stream (the call writes more than the caches hold) */
  uint64_t pulled;         /* bytes this process copied out of its peers' memory */
} dlrun_message_exchange;

dlrun_status dlrun_message_exchange_prepare(dlrun_message_exchange *x);
/* Collective: send and receive every message. Messages between processes
 * that may map each other's memory first: the receiver copies each
 * straight out of the sender's memory, and every process agrees that all
 * are copied (or learns which failed) before anything else goes. Then,
 * without staging on any process: one exchange of the transport. With it: in rounds, one message
 * per peer and direction each (both ends count alike), each staged send
 * copied out on its device's queue first and each staged receive copied
 * in after; every process learns of a failed copy before the next round
 * (an agreement per round), so a failure is an error on every process. */
dlrun_status dlrun_message_exchange_run(dlrun_message_exchange *x);
void dlrun_message_exchange_free(dlrun_message_exchange *x);
void dlrun_message_list_free(dlrun_message_list *l);

/* The layout of x->all (message_pulls.h): a header per process, then its
 * shards' words. */
#define DLRUN_MESSAGE_HEADER_WORDS 3
/* Process r's words of x->all, its header first. */
static inline uint64_t *dlrun_message_words(const dlrun_message_exchange *x, size_t r) {
  return x->all + x->displs[r] / sizeof *x->all;
}

#endif
