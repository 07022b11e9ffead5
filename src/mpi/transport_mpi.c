/* The MPI transport (libdlrun_mpi.so): dist/transport.h on standard MPI-3.1
 * calls only, so that Open MPI and MPICH both serve. Loaded by
 * src/dist/distributed.c when a job is joined; nothing else links MPI.
 *
 * Waits are bounded by polling nonblocking requests against a deadline.
 * The small exchanges are point to point between every pair, so that a
 * timeout can name exactly the processes that did not arrive; each call
 * has its own tag, so that a late message of a failed call never matches a
 * later one. */
#include <mpi.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dist/transport.h"

#define EXPORT __attribute__((visibility("default")))

static MPI_Comm comm = MPI_COMM_NULL;
static int rank, size;
static unsigned call_seq; /* the tag of the next exchange */

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* "3, 5 and 6" of the ranks whose flag is 0, into buf. */
static void list_missing(const int *arrived, char *buf, size_t n) {
  size_t len = 0, count = 0, total = 0;
  for (int r = 0; r < size; r++) total += r != rank && !arrived[r];
  buf[0] = '\0';
  for (int r = 0; r < size && len < n; r++) {
    if (r == rank || arrived[r]) continue;
    count++;
    const char *sep = count == 1 ? "" : count == total ? " and " : ", ";
    len += (size_t)snprintf(buf + len, n - len, "%s%d", sep, r);
  }
}

static int allgather(const void *send, size_t nbytes, void *recv, double timeout_s, char *err,
                     size_t errlen) {
  if (nbytes > (size_t)0x7fffffff) {
    snprintf(err, errlen, "allgather of %zu bytes: more than one message can carry", nbytes);
    return DLRUN_TRANSPORT_FAILED;
  }
  int tag = (int)(call_seq++ % 30000u);
  unsigned char *out = recv;
  memcpy(out + (size_t)rank * nbytes, send, nbytes);
  MPI_Request *reqs = malloc(2 * (size_t)size * sizeof *reqs);
  int *arrived = calloc((size_t)size, sizeof *arrived);
  if (!reqs || !arrived) {
    free(reqs);
    free(arrived);
    snprintf(err, errlen, "not enough memory");
    return DLRUN_TRANSPORT_FAILED;
  }
  int nreq = 0;
  for (int r = 0; r < size; r++) {
    if (r == rank) continue;
    MPI_Irecv(out + (size_t)r * nbytes, (int)nbytes, MPI_BYTE, r, tag, comm, &reqs[2 * r]);
    MPI_Isend(send, (int)nbytes, MPI_BYTE, r, tag, comm, &reqs[2 * r + 1]);
    nreq += 2;
  }
  double deadline = now_s() + timeout_s;
  int rc = DLRUN_TRANSPORT_OK, pending = size - 1;
  while (pending > 0) {
    for (int r = 0; r < size; r++) {
      if (r == rank || arrived[r]) continue;
      int done = 0;
      MPI_Test(&reqs[2 * r], &done, MPI_STATUS_IGNORE);
      if (done) {
        arrived[r] = 1;
        pending--;
      }
    }
    if (pending == 0) break;
    if (now_s() > deadline) {
      char who[256];
      list_missing(arrived, who, sizeof who);
      snprintf(err, errlen, "process%s %s did not arrive within %g s", pending > 1 ? "es" : "",
               who, timeout_s);
      rc = DLRUN_TRANSPORT_TIMEOUT;
      break;
    }
    sched_yield(); /* oversubscribed processes: let the others run */
  }
  for (int r = 0; r < size; r++) {
    if (r == rank) continue;
    if (!arrived[r]) { /* a failed call: take back the receive, leave the send */
      MPI_Cancel(&reqs[2 * r]);
      MPI_Request_free(&reqs[2 * r]);
      MPI_Request_free(&reqs[2 * r + 1]);
    } else if (rc == DLRUN_TRANSPORT_OK) {
      MPI_Wait(&reqs[2 * r + 1], MPI_STATUS_IGNORE); /* received by all: sends end */
    } else {
      MPI_Request_free(&reqs[2 * r + 1]);
    }
  }
  (void)nreq;
  free(reqs);
  free(arrived);
  return rc;
}

static void abort_job(int code) { MPI_Abort(comm == MPI_COMM_NULL ? MPI_COMM_WORLD : comm, code); }

static void finalize(void) {
  int finished = 0;
  MPI_Finalized(&finished);
  if (finished) return;
  if (comm != MPI_COMM_NULL) MPI_Comm_free(&comm);
  MPI_Finalize();
}

EXPORT int dlrun_transport_open(int abi, dlrun_transport *out, char *err, size_t errlen) {
  if (abi != DLRUN_TRANSPORT_ABI) {
    snprintf(err, errlen, "the module speaks transport ABI %d, dlrun %d", DLRUN_TRANSPORT_ABI,
             abi);
    return DLRUN_TRANSPORT_FAILED;
  }
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized && MPI_Init(NULL, NULL) != MPI_SUCCESS) {
    snprintf(err, errlen, "MPI_Init failed");
    return DLRUN_TRANSPORT_FAILED;
  }
  /* A communicator of dlrun's own, so that a host application's messages
   * on MPI_COMM_WORLD never meet dlrun's. Errors come back as codes. */
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  *out = (dlrun_transport){.abi = DLRUN_TRANSPORT_ABI, .name = "mpi", .rank = rank,
                           .size = size, .allgather = allgather, .abort = abort_job,
                           .finalize = finalize};
  return DLRUN_TRANSPORT_OK;
}
