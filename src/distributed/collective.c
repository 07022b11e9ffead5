/* The exchanges of a joined job (distributed/distributed_impl.h), under the agreements of
 * agree.c. Every wait is the transport's, bounded by the job's timeout. */
#include <stdio.h>
#include <string.h>

#include "core/alloc.h"
#include "core/status_impl.h"
#include "distributed/distributed_impl.h"
#include "distributed/transport.h"

int dlrun_distributed_allgatherv(const void *send, void *recv, const size_t *counts,
                                 const size_t *displs, char *err, size_t errlen) {
  const dlrun_transport *t = dlrun_distributed_job_transport();
  return t->allgatherv(send, recv, counts, displs, dlrun_distributed_timeout(), err, errlen);
}

/* Counts and offsets of n processes on the stack up to this many: an
 * exchange that every process has agreed to make must not be skipped by one
 * for want of memory (its peers would wait for it). */
#define STACK_PROCESSES 64

/* An allgatherv of nbytes from every process, or (root >= 0) from root
 * alone, all landing in place in recv. */
static int gather_even(const void *send, void *recv, size_t nbytes, int root, char *err,
                       size_t errlen) {
  size_t n = (size_t)dlrun_process_count(), stack[2 * STACK_PROCESSES];
  size_t *counts = n <= STACK_PROCESSES ? stack : dlrun_malloc(2 * n * sizeof *counts);
  if (!counts) {
    snprintf(err, errlen, "out of host memory allocating %zu bytes", 2 * n * sizeof *counts);
    return DLRUN_TRANSPORT_FAILED;
  }
  for (size_t r = 0; r < n; r++) {
    bool sends = root < 0 || r == (size_t)root;
    counts[r] = sends ? nbytes : 0;
    counts[n + r] = root < 0 ? r * nbytes : 0;
  }
  int rc = dlrun_distributed_allgatherv(send, recv, counts, counts + n, err, errlen);
  if (counts != stack) dlrun_free(counts);
  return rc;
}

int dlrun_distributed_allgather(const void *send, size_t nbytes, void *recv, char *err,
                                size_t errlen) {
  return gather_even(send, recv, nbytes, -1, err, errlen);
}

int dlrun_distributed_exchange(const dlrun_transport_message *sends, size_t nsends,
                               const dlrun_transport_message *recvs, size_t nrecvs, char *err,
                               size_t errlen) {
  const dlrun_transport *t = dlrun_distributed_job_transport();
  return t->exchange(sends, nsends, recvs, nrecvs, dlrun_distributed_timeout(), err, errlen);
}

/* An allgather in which only the root contributes: no list of messages to
 * allocate once every process is committed to it. */
int dlrun_distributed_bcast(void *buf, size_t nbytes, int root, char *err, size_t errlen) {
  return gather_even(buf, buf, nbytes, root, err, errlen);
}
