/* Internal: timelines, the events of one in-order queue (dlrun/platform.h
 * gives platforms the same functions through their services).
 *
 * A point is a sequence number: begun in order, completed in order (the
 * queue is in order, so completing point k completes every point before
 * it). A point completes done or failed; a failure keeps its status and
 * message for as long as the timeline lives, so that an event read much
 * later still says why. Waiters are parked without a thread: a callback
 * runs when the point completes. */
#ifndef DLRUN_DEVICE_TIMELINE_H
#define DLRUN_DEVICE_TIMELINE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "dlrun/platform.h"

/* A parked waiter (dlrun/platform.h's dlrun_event_waiter): the storage is
 * the caller's. An `early` waiter runs just before the point is seen
 * complete: work that releases what the completed work held (buffers,
 * plans), so that whoever waits on the host finds that memory back in its
 * pool; inside it the point still reads pending. Every other waiter runs
 * after, seeing the point complete. */
typedef dlrun_event_waiter dlrun_waiter;

typedef struct dlrun_failure dlrun_failure;

struct dlrun_timeline {
  const dlrun_platform *platform; /* whose events its points are */
  pthread_mutex_t mu;
  pthread_cond_t cv;
  _Atomic uint64_t begun;
  _Atomic uint64_t completed; /* read without the lock by queries */
  int sleepers;               /* threads waiting on cv */
  dlrun_waiter *waiters;
  dlrun_failure *failures; /* newest first */
  uint64_t lost_seq;        /* the last failure that had no memory for its record */
  dlrun_status lost_status;
};

void dlrun_timeline_init(dlrun_timeline *tl, const dlrun_platform *pl);
void dlrun_timeline_fini(dlrun_timeline *tl); /* every point complete */
dlrun_status dlrun_timeline_create(const dlrun_platform *pl, dlrun_timeline **out);
void dlrun_timeline_destroy(dlrun_timeline *tl);

/* The next point, begun now (callers serialise their queue's begins, so
 * that points follow the queue's order). */
dlrun_event dlrun_timeline_begin(dlrun_timeline *tl);
/* The point after every point begun so far. */
dlrun_event dlrun_timeline_last(dlrun_timeline *tl);
/* Complete every point up to `point`; it fails with (st, msg) when st is
 * not DLRUN_OK. Runs the waiters it releases. */
void dlrun_timeline_complete(dlrun_timeline *tl, dlrun_event point, dlrun_status st,
                             const char *msg);

/* A timeline's events (dlrun_event's handle is the timeline and the seq). */
bool dlrun_timeline_query(dlrun_event ev);
dlrun_status dlrun_timeline_wait(dlrun_event ev);
dlrun_status dlrun_timeline_then(dlrun_event ev, void (*fn)(void *ctx), void *ctx);
/* The same, early (see dlrun_waiter). */
dlrun_status dlrun_timeline_then_early(dlrun_event ev, void (*fn)(void *ctx), void *ctx);
/* Its status once complete (with the message recorded), else DLRUN_OK. */
dlrun_status dlrun_timeline_status(dlrun_event ev);
/* Park w (w->fn and w->early set by the caller) until ev completes: false,
 * with nothing parked, when it already has. */
bool dlrun_timeline_park(dlrun_event ev, dlrun_waiter *w);

/* Whether the calling thread is running an event's callbacks (of a
 * timeline's, or a foreign event's through dlrun_event_then): what it
 * releases must not tear down the queue it runs for. */
bool dlrun_in_event_callback(void);
/* fn(ctx), counted as an event callback. */
void dlrun_timeline_run_as_callback(void (*fn)(void *ctx), void *ctx);

/* Whether ev is one of a timeline's events (every built-in platform's). */
bool dlrun_event_is_timeline(dlrun_event ev);

#endif
