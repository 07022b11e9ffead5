/* The operation protocol of a platform with a queue of its own, written
 * once for the driver platform modules (cuda, opencl) and any new one.
 *
 * An op (a copy, a fill, a record) is some driver commands on a device's
 * in-order queue and one point of the device's timeline (svc->timeline_*;
 * or of the driver's own events, opq_driver.begin_point).
 * It completes when everything it holds has been released (opq_release):
 * the enqueue itself, its commands (the driver's completion), and each
 * event it waited for (opq_wait). Only then is it known whether it failed,
 * and its point completes, in queue order: ops that complete early wait in
 * the device's list for the ones before them (opq_drain).
 *
 * How it failed is worded here, the same on every platform: the first
 * failed wait's message; "<device>: <what> failed: injected device
 * failure" for a test's injected failure; "<device>: <what> failed:
 * <driver error> (<code>)" for the driver's. The op's completion callback
 * (a copy's dlrun_copy_op.complete) runs just before its point completes.
 *
 * What stays the driver's: its commands and events, how its queue waits
 * (a native event, a user event, or an op held back until a gate opens),
 * and the text of its error codes (opq_driver). Built into each module
 * (it sees platform.h and the services only, as the module does). */
#ifndef DLRUN_PLATFORMS_OP_QUEUE_H
#define DLRUN_PLATFORMS_OP_QUEUE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

#include "dlrun/platform.h"

typedef struct opq_queue opq_queue;
typedef struct opq_op opq_op;

/* The driver's part. Each op is the driver's own struct with an opq_op as
 * its first member. */
typedef struct opq_driver {
  /* The driver's name for an error code: "CUDA_ERROR_ILLEGAL_ADDRESS". */
  const char *(*error_name)(int code);
  /* Free the driver's op (opq_op_destroy, then its own). */
  void (*free_op)(opq_op *op);
  /* (optional) The op is about to complete its point (it leaves the
   * driver's lookups). */
  void (*retire)(opq_op *op);
  /* (optional) An op became complete, or one of its gates opened (q->lock
   * held): the driver's own thread has work (it completes points with
   * opq_drain, runs ops whose gates opened). NULL: the thread that
   * released the op drains the queue. */
  void (*wake)(opq_queue *q);
  /* (optional) Points of the driver's own events (q->lock held when
   * begun), for a platform whose events are not timelines. NULL: the
   * timeline q->tl. */
  dlrun_event (*begin_point)(opq_queue *q);
  void (*complete_point)(opq_queue *q, dlrun_event point, dlrun_status st, const char *msg);
} opq_driver;

/* The ops of one device's queue. */
struct opq_queue {
  const dlrun_platform_services *svc;
  const opq_driver *drv;
  void *owner;          /* the driver's device */
  const char *name;     /* the device's: "CudaDevice(id=0)" */
  dlrun_timeline *tl;   /* its points (unless the driver's own) */
  pthread_mutex_t lock; /* the op list and the driver queue's order */
  pthread_cond_t idle;  /* the op list emptied */
  opq_op *head, *tail;  /* ops begun and not yet completed, in order */
  bool draining;
  unsigned inject[2];   /* failures to inject, by dlrun_work_kind */
};

struct opq_op {
  opq_op *next;
  opq_queue *q;
  const char *what;      /* "copy", "fill", "record" */
  dlrun_event point;
  atomic_int pending;    /* holds not yet released */
  bool complete;         /* under q->lock */
  bool abandoned;        /* its enqueue failed after waits held it: no point */
  bool injected;         /* a failure injected by a test */
  int gates;             /* under q->lock: waits that hold it back (opq_waits_gate) */
  pthread_mutex_t flock; /* err and wait_msg */
  int err;               /* the driver's first failure (0: none) */
  char *wait_msg;        /* the first failed wait's message */
  void (*on_complete)(void *ctx);
  void *ctx;
};

/* ---- the queue ---- */
void opq_queue_init(opq_queue *q, const dlrun_platform_services *svc, const opq_driver *drv,
                    void *owner, const char *name);
/* Wait until every op has completed its point (q->lock held). */
void opq_queue_wait_idle(opq_queue *q);
void opq_queue_destroy(opq_queue *q);

/* ---- an op ---- */
/* Start op (zeroed by the caller) of `what` on q with `holds` holds. */
void opq_op_init(opq_op *op, opq_queue *q, const char *what, int holds);
void opq_op_destroy(opq_op *op);
/* Whether the next op of kind inject_kind (or -1) is to fail (q->lock held). */
bool opq_take_injected(opq_queue *q, int inject_kind);
/* The driver's failure `code` (0: none); the first is kept. */
void opq_note_error(opq_op *op, int code);
void opq_note_wait_failure(opq_op *op, const char *msg);
/* Whether the op already fails (a failed wait or an injected failure): its
 * work need not run. */
bool opq_failing(opq_op *op);
/* Give op its point and put it last in q's list (q->lock held). */
void opq_push(opq_op *op);
/* One of op's holds is released: when it was the last, the op is complete
 * (its point completes in order) or, abandoned, freed. The _locked form,
 * with q->lock held, leaves draining to the driver's wake hook. */
void opq_release(opq_op *op);
void opq_release_locked(opq_op *op);
/* Complete, in order, the points of the complete ops at the head of q's
 * list (one thread at a time). */
void opq_drain(opq_queue *q);
/* The failure "<device>: <what> failed: <driver error> (<code>)" of an
 * enqueue that queued nothing. */
dlrun_status opq_fail_enqueue(opq_queue *q, const char *what, int code);

/* ---- waits on events ---- */
/* The status of the complete event ev, and its failure's message. */
const char *opq_failure_of(const dlrun_platform_services *svc, dlrun_event ev, dlrun_status *st);
/* Whether op has nothing to wait for in ev: none, or complete already (a
 * failure is noted in op, and *failed set: may be NULL). */
bool opq_settled(opq_op *op, dlrun_event ev, bool *failed);

/* A wait on a pending event, the driver's struct with it first. */
typedef struct opq_wait opq_wait;
struct opq_wait {
  opq_op *op;      /* told when ev completes (a hold of op); NULL: no one */
  dlrun_event ev;
  const dlrun_platform_services *svc;
  int retries;     /* called back before ev read as complete */
  bool gate;       /* opq_waits_gate's: it holds op back */
  /* The driver's: ev completed (its failure noted in op): open its gate
   * and free w. Never calls the driver's queue functions that block. */
  void (*opened)(opq_wait *w);
};
/* Be called back when w->ev completes (svc->event_then): the failure is
 * noted, w->opened(w) runs, then w->op is released. Fails only for lack of
 * memory, and then nothing happens. */
dlrun_status opq_wait_then(const dlrun_platform_services *svc, opq_wait *w);
/* End w now: note msg (NULL: none) in w->op, open, release. */
void opq_wait_end(opq_wait *w, const char *msg);

/* Waits for a driver that holds an op back, unsubmitted, until its gates
 * open (it has no user events: CUDA, the skeleton). Before op is queued
 * (q->lock held or op not yet seen by anyone): the waits already complete
 * are noted; each pending one becomes a hold of op and, unless
 * ordered(op, ev) says the driver's queue orders it already (a pending op
 * of its own queues), a gate (op->gates) that the driver's wake hook hears
 * open; no memory for one fails op. Returns how many are in ws (room for
 * n), to register with opq_waits_then once op has its point. */
size_t opq_waits_gate(opq_op *op, const dlrun_event *waits, size_t n,
                      bool (*ordered)(opq_op *op, dlrun_event ev), opq_wait **ws);
/* Be called back for each (without q->lock); one that cannot be (no
 * memory) fails op, even if its event completed meanwhile. */
void opq_waits_then(opq_wait **ws, size_t n);

#endif
