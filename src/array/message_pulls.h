/* Internal: turning messages into pulls (message_pulls.c), for messages.c. */
#ifndef DLRUN_MESSAGE_PULLS_H
#define DLRUN_MESSAGE_PULLS_H

#include "messages.h"

/* The layout of x->all with this process's part written (its rounds and
 * staging, then, in a job whose processes may map each other's memory, its
 * switch and where each of its source shards is shared: 4 words a shard);
 * after the exchange of x->all, which messages are pulls (both ends decide
 * alike, from x->all) and whether any process shares a shard (every process
 * then agrees that the pulls are done); and this process's pulls. */
dlrun_status dlrun_message_pulls_layout(dlrun_message_exchange *x, uint64_t rounds, bool staged);
bool dlrun_message_pulls_mark(dlrun_message_exchange *x);
dlrun_status dlrun_message_pulls_run(dlrun_message_exchange *x);

#endif
