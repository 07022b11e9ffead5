/* Internal: the messages of a device_put between processes, and how they
 * go (messages.c): straight from and into device memory through the
 * platforms' transport views, or staged through host memory where the
 * transport cannot reach a memory (dlrun_buffer_reach). */
#ifndef DLRUN_MESSAGES_H
#define DLRUN_MESSAGES_H

#include "array_impl.h"
#include "dist/transport.h"

/* One message: the box [lo, hi) of buf (whose block starts at `origin`). */
typedef struct dlrun_message {
  dlrun_transport_piece piece; /* staged: base is set per round */
  dlrun_buffer *buf;           /* staged: copied from or into; NULL: direct */
  int64_t origin[DLRUN_MAX_NDIM], lo[DLRUN_MAX_NDIM], hi[DLRUN_MAX_NDIM];
  uint64_t bytes;
  size_t round; /* its place among this peer's messages in its direction */
} dlrun_message;

typedef struct dlrun_message_list {
  dlrun_message *v;
  size_t n, cap;
  size_t *per_peer; /* messages listed so far per process */
} dlrun_message_list;

/* Add the message of the box [lo, hi) of b (block of shape shard_dims at
 * origin) to or from `peer`: direct or staged as dlrun_buffer_reach says
 * for this job. */
dlrun_status dlrun_message_add(dlrun_message_list *l, dlrun_buffer *b, size_t esize, int ndim,
                               const int64_t *shard_dims, const int64_t *origin,
                               const int64_t *lo, const int64_t *hi, int peer);

/* Everything the exchange needs, made before the call's second agreement
 * so that nothing after it fails on one process alone for want of memory. */
typedef struct dlrun_message_exchange {
  dlrun_message_list *sends, *recvs;
  size_t esize;
  int ndim;
  const int64_t *src_shard_dims, *dst_shard_dims;
  dlrun_transport_piece *round_sends, *round_recvs;
  unsigned char **send_blocks, **recv_blocks; /* per process, reused by every round */
  uint64_t *all;                              /* two words per process */
} dlrun_message_exchange;

dlrun_status dlrun_message_exchange_prepare(dlrun_message_exchange *x);
/* Collective: send and receive every message. Without staging on any
 * process: one exchange of the transport. With it: in rounds, one message
 * per peer and direction each (both ends count alike), each staged send
 * copied out on its device's queue first and each staged receive copied
 * in after; every process learns of a failed copy before the next round
 * (an agreement per round), so a failure is an error on every process. */
dlrun_status dlrun_message_exchange_run(dlrun_message_exchange *x);
void dlrun_message_exchange_free(dlrun_message_exchange *x);
void dlrun_message_list_free(dlrun_message_list *l);

#endif
