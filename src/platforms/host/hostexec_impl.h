/* What host execution's copies share (hostexec.c, fancopy.c). */
#ifndef DLRUN_HOST_HOSTEXEC_IMPL_H
#define DLRUN_HOST_HOSTEXEC_IMPL_H

#include "hostexec.h"

dlrun_host_queue *dlrun_hostexec_queue(const dlrun_device *dev);
/* The host address of an end's bytes. */
void *dlrun_hostexec_view(const dlrun_box_end *e);
/* The bytes of the box [lo, hi) of esize-byte elements. */
uint64_t dlrun_hostexec_box_bytes(size_t esize, int ndim, const int64_t *lo, const int64_t *hi);
/* Whether the next operation of kind `what` on q is to fail (a test's). */
bool dlrun_hostexec_take_injected(dlrun_host_queue *q, dlrun_work_kind what);
dlrun_status dlrun_hostexec_injected(const dlrun_host_queue *q, const char *op);
/* Copy the part [lo, hi) of op's piece p, traced on track's queue. */
void dlrun_hostexec_copy_part(const dlrun_device *track, const dlrun_copy_op *op,
                              const dlrun_copy_piece *p, const int64_t *lo, const int64_t *hi);

#endif
