/* Host execution, the device queue of platforms whose work runs on the
 * host's threads (cpu, sim). One implementation of the platform's work and
 * event slots: each device's queue is a work queue (work_queue.h) on the runtime's
 * shared workers; a copy is cut into units that idle workers share; the
 * library's host copy and fill loops do the bytes, through the platform's
 * view of its memory. */
#ifndef DLRUN_HOST_HOSTEXEC_H
#define DLRUN_HOST_HOSTEXEC_H

#include <stdatomic.h>

#include "dlrun/platform.h"
#include "work_queue.h"

/* The head of every host-executed device's context (its impl begins with
 * one): its work queue, and where the host reaches the device's bytes. */
typedef struct dlrun_host_queue {
  dlrun_work_queue work;
  dlrun_device *dev;
  /* The host address of the bytes at device address `data` of dev's
   * `kind` memory (the address itself for host-readable memory). */
  void *(*view)(const dlrun_device *dev, dlrun_memory_kind kind, const void *data);
  atomic_uint inject[2]; /* failures to inject, per dlrun_work_kind */
} dlrun_host_queue;

/* Fails only for lack of memory. */
dlrun_status dlrun_host_queue_init(dlrun_host_queue *q, dlrun_device *dev,
                                   void *(*view)(const dlrun_device *, dlrun_memory_kind,
                                                 const void *));
void dlrun_host_queue_fini(dlrun_host_queue *q); /* waits for its work */

/* The slots (dlrun/platform.h) of a host-executed platform. */
dlrun_status dlrun_hostexec_copy(dlrun_device *dev, dlrun_copy_op *op, const dlrun_event *waits,
                                 size_t nwaits, dlrun_event *done);
dlrun_status dlrun_hostexec_copy_boxes(dlrun_device *dev, dlrun_copy_op *const *ops, size_t nops,
                                       const dlrun_event *waits, size_t nwaits,
                                       dlrun_event *done);
dlrun_status dlrun_hostexec_fill(dlrun_device *dev, dlrun_memory_kind kind, void *data,
                                 uint64_t nbytes, const dlrun_fill *f, const dlrun_event *waits,
                                 size_t nwaits, dlrun_event *done);
dlrun_status dlrun_hostexec_record(dlrun_device *dev, const dlrun_event *waits, size_t nwaits,
                                   dlrun_event *done);
dlrun_status dlrun_hostexec_inject(dlrun_device *dev, dlrun_work_kind what, unsigned count);

/* A host-executed platform's event slots and traces_own_work, set in its
 * vtable when it is opened (the library knows timeline events by them). */
void dlrun_hostexec_use_timelines(dlrun_platform *pl);

#endif
