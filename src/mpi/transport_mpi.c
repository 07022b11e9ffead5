/* The MPI transport (libdlrun_mpi.so): distributed/transport.h on standard MPI-3.1
 * calls only, so that Open MPI and MPICH both serve. Loaded by
 * src/distributed/distributed.c when a job is joined; nothing else links MPI.
 *
 * Waits are bounded by polling nonblocking requests against a deadline.
 * The small exchanges are point to point between every pair, so that a
 * timeout can name exactly the processes that did not arrive; each call
 * has its own tag, so that a late message of a failed call never matches a
 * later one. */
#include <mpi.h>
#if defined(__has_include)
#if __has_include(<mpi-ext.h>)
#include <mpi-ext.h> /* Open MPI's extensions: MPIX_Query_cuda_support */
#endif
#endif
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "distributed/transport.h"

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

/* "processes 1 and 2 did not arrive within 5 s" into err, for the ranks
 * whose flag is 0. */
static int timed_out(const int *arrived, int pending, double timeout_s, char *err,
                     size_t errlen) {
  char who[256];
  list_missing(arrived, who, sizeof who);
  snprintf(err, errlen, "process%s %s did not arrive within %g s", pending > 1 ? "es" : "", who,
           timeout_s);
  return DLRUN_TRANSPORT_TIMEOUT;
}

/* "<what> failed: <MPI's error string>" into err. */
static int mpi_failed(int code, const char *what, char *err, size_t errlen) {
  char text[MPI_MAX_ERROR_STRING] = "";
  int len = 0;
  if (MPI_Error_string(code, text, &len) != MPI_SUCCESS)
    snprintf(text, sizeof text, "code %d", code);
  snprintf(err, errlen, "%s failed: %s", what, text);
  return DLRUN_TRANSPORT_FAILED;
}

/* Take back the requests of a failed call: the receives reqs[0, nrecvs),
 * then the sends. A cancelled receive is waited for until MPI says it is
 * complete (cancelled, or it matched a message that then arrived): only
 * then may its buffer, the caller's, be freed. MPI guarantees that the wait
 * of a cancelled receive returns whatever the other processes do (MPI-3.1,
 * 3.8.4); should it still not complete within the timeout, a message could
 * land in memory already given back, so the job ends instead. Sends only
 * read their buffers: they are released, and a peer that is never to
 * receive them never matches them (each call has its own tag). */
static void take_back(MPI_Request *reqs, size_t nrecvs, size_t n, double timeout_s) {
  for (size_t i = 0; i < nrecvs; i++)
    if (reqs[i] != MPI_REQUEST_NULL) MPI_Cancel(&reqs[i]);
  double deadline = now_s() + timeout_s;
  for (size_t i = 0; i < nrecvs; i++) {
    int done = reqs[i] == MPI_REQUEST_NULL;
    while (!done) {
      if (MPI_Test(&reqs[i], &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) break;
      if (done) break;
      if (now_s() > deadline) {
        fprintf(stderr, "dlrun: a cancelled receive from another process did not complete "
                        "within %g s; ending the job so that it cannot write into freed "
                        "memory\n", timeout_s);
        MPI_Abort(comm, 1);
      }
      sched_yield();
    }
  }
  for (size_t i = nrecvs; i < n; i++)
    if (reqs[i] != MPI_REQUEST_NULL) MPI_Request_free(&reqs[i]);
}

/* Between two polls of a wait: yield while the wait is young (processes in
 * step meet within microseconds), then, when the call moves little data (an
 * agreement), sleep, a little longer each time up to about 100 us, so that
 * a long wait leaves the core to this process's worker threads, copying
 * meanwhile, and to the host's other processes. A call that moves data
 * keeps yielding: MPI moves a large message's bytes only while polled. */
#define SLEEPY_BYTES ((size_t)1 << 16)

static void pause_poll(unsigned *polls, size_t bytes) {
  unsigned n = (*polls)++;
  if (n < 32 || bytes > SLEEPY_BYTES) {
    sched_yield();
    return;
  }
  unsigned shift = n - 32 < 7 ? n - 32 : 7;
  nanosleep(&(struct timespec){0, 1000L << shift}, NULL);
}

/* Bytes per message: MPI counts are int. A larger contribution goes as
 * several messages, in order. */
#define CHUNK ((size_t)1 << 30)

static size_t nchunks(size_t bytes) { return bytes == 0 ? 1 : (bytes + CHUNK - 1) / CHUNK; }

static int allgatherv(const void *send, void *recv, const size_t *counts, const size_t *displs,
                      double timeout_s, char *err, size_t errlen) {
  int tag = (int)(call_seq++ % 30000u);
  unsigned char *out = recv;
  if (out + displs[rank] != (const unsigned char *)send) /* a broadcast's root: in place */
    memcpy(out + displs[rank], send, counts[rank]);
  size_t nreq = 0;
  for (int r = 0; r < size; r++)
    if (r != rank) nreq += nchunks(counts[r]) + nchunks(counts[rank]);
  size_t nproc = size > 0 ? (size_t)size : 1;
  MPI_Request *reqs = malloc((nreq ? nreq : 1) * sizeof *reqs);
  size_t *first = malloc(nproc * sizeof *first); /* r's first receive request */
  int *arrived = calloc(nproc, sizeof *arrived);
  if (!reqs || !first || !arrived) {
    free(reqs);
    free(first);
    free(arrived);
    snprintf(err, errlen, "not enough memory");
    return DLRUN_TRANSPORT_FAILED;
  }
  for (size_t i = 0; i < nreq; i++) reqs[i] = MPI_REQUEST_NULL;
  int rc = DLRUN_TRANSPORT_OK, e = MPI_SUCCESS;
  size_t k = 0;
  for (int r = 0; r < size && !e; r++) {
    if (r == rank) continue;
    first[r] = k;
    for (size_t c = 0; c < nchunks(counts[r]) && !e; c++) {
      size_t off = c * CHUNK, n = counts[r] - off < CHUNK ? counts[r] - off : CHUNK;
      e = MPI_Irecv(out + displs[r] + off, (int)n, MPI_BYTE, r, tag, comm, &reqs[k++]);
      if (e) reqs[k - 1] = MPI_REQUEST_NULL;
    }
  }
  size_t sends = k;
  for (int r = 0; r < size && !e; r++) {
    if (r == rank) continue;
    for (size_t c = 0; c < nchunks(counts[rank]) && !e; c++) {
      size_t off = c * CHUNK, n = counts[rank] - off < CHUNK ? counts[rank] - off : CHUNK;
      e = MPI_Isend((const unsigned char *)send + off, (int)n, MPI_BYTE, r, tag, comm,
                    &reqs[k++]);
      if (e) reqs[k - 1] = MPI_REQUEST_NULL;
    }
  }
  if (e) rc = mpi_failed(e, "posting a message", err, errlen);
  double deadline = now_s() + timeout_s;
  int pending = size - 1;
  unsigned polls = 0;
  size_t total = 0;
  for (int r = 0; r < size; r++) total += counts[r];
  while (rc == DLRUN_TRANSPORT_OK && pending > 0) {
    for (int r = 0; r < size && !e; r++) {
      if (r == rank || arrived[r]) continue;
      int done = 0;
      e = MPI_Testall((int)nchunks(counts[r]), &reqs[first[r]], &done, MPI_STATUSES_IGNORE);
      if (done && !e) {
        arrived[r] = 1;
        pending--;
      }
    }
    if (e) rc = mpi_failed(e, "receiving a message", err, errlen);
    else if (pending == 0) break;
    else if (now_s() > deadline) rc = timed_out(arrived, pending, timeout_s, err, errlen);
    else pause_poll(&polls, total);
  }
  /* Everyone received from everyone, so every send is matched: finish them. */
  if (rc == DLRUN_TRANSPORT_OK &&
      (e = MPI_Waitall((int)(k - sends), &reqs[sends], MPI_STATUSES_IGNORE)))
    rc = mpi_failed(e, "sending a message", err, errlen);
  if (rc != DLRUN_TRANSPORT_OK) take_back(reqs, sends, k, timeout_s);
  free(reqs);
  free(first);
  free(arrived);
  return rc;
}

/* The MPI datatype of a message: its contiguous bytes, repeated outward by
 * byte-strided vectors. */
static int message_type(const dlrun_transport_message *p, MPI_Datatype *out) {
  MPI_Datatype t;
  if (MPI_Type_contiguous((int)p->count[p->ndim - 1], MPI_BYTE, &t) != MPI_SUCCESS) return 1;
  for (int d = p->ndim - 2; d >= 0; d--) {
    MPI_Datatype outer;
    int rc = MPI_Type_create_hvector((int)p->count[d], 1, (MPI_Aint)p->stride[d], t, &outer);
    MPI_Type_free(&t);
    if (rc != MPI_SUCCESS) return 1;
    t = outer;
  }
  if (MPI_Type_commit(&t) != MPI_SUCCESS) {
    MPI_Type_free(&t);
    return 1;
  }
  *out = t;
  return 0;
}

static int exchange(const dlrun_transport_message *sends, size_t nsends,
                    const dlrun_transport_message *recvs, size_t nrecvs, double timeout_s,
                    char *err, size_t errlen) {
  int tag = (int)(call_seq++ % 30000u);
  size_t n = nsends + nrecvs;
  MPI_Request *reqs = malloc((n ? n : 1) * sizeof *reqs);
  MPI_Datatype *types = malloc((n ? n : 1) * sizeof *types);
  int *arrived = calloc(size > 0 ? (size_t)size : 1, sizeof *arrived);
  if (!reqs || !types || !arrived) {
    free(reqs);
    free(types);
    free(arrived);
    snprintf(err, errlen, "not enough memory");
    return DLRUN_TRANSPORT_FAILED;
  }
  int rc = DLRUN_TRANSPORT_OK;
  size_t posted = 0;
  /* Receives first (recvs, then sends, in reqs), so that no send waits
   * for a receive this process has not posted yet. */
  for (size_t i = 0; i < n && rc == DLRUN_TRANSPORT_OK; i++) {
    const dlrun_transport_message *p = i < nrecvs ? &recvs[i] : &sends[i - nrecvs];
    if (message_type(p, &types[i])) {
      snprintf(err, errlen, "could not describe a message of %d dimensions", p->ndim);
      rc = DLRUN_TRANSPORT_FAILED;
      break;
    }
    int e = i < nrecvs ? MPI_Irecv(p->base, 1, types[i], p->peer, tag, comm, &reqs[i])
                       : MPI_Isend(p->base, 1, types[i], p->peer, tag, comm, &reqs[i]);
    posted = i + 1;
    if (e != MPI_SUCCESS) {
      reqs[i] = MPI_REQUEST_NULL;
      char what[64];
      snprintf(what, sizeof what, "posting a message to process %d", p->peer);
      rc = mpi_failed(e, what, err, errlen);
    }
  }
  double deadline = now_s() + timeout_s;
  while (rc == DLRUN_TRANSPORT_OK) {
    int done = 0, e = MPI_Testall((int)n, reqs, &done, MPI_STATUSES_IGNORE);
    if (e != MPI_SUCCESS) {
      rc = mpi_failed(e, "exchanging messages", err, errlen);
      break;
    }
    if (done) break;
    if (now_s() > deadline) {
      /* Who is missing: the peers of the messages still pending. */
      int pending = 0;
      for (int r = 0; r < size; r++) arrived[r] = 1;
      for (size_t i = 0; i < n; i++) {
        if (reqs[i] == MPI_REQUEST_NULL) continue;
        int peer = i < nrecvs ? recvs[i].peer : sends[i - nrecvs].peer;
        pending += arrived[peer];
        arrived[peer] = 0;
      }
      rc = timed_out(arrived, pending, timeout_s, err, errlen);
      break;
    }
    sched_yield(); /* oversubscribed processes: let the others run */
  }
  if (rc != DLRUN_TRANSPORT_OK)
    take_back(reqs, nrecvs < posted ? nrecvs : posted, posted, timeout_s);
  for (size_t i = 0; i < posted; i++) MPI_Type_free(&types[i]);
  free(reqs);
  free(types);
  free(arrived);
  return rc;
}

/* Whether this MPI reaches CUDA device memory: 1 yes, 0 no, -1 it cannot
 * say. Asked at run time where the MPI has the query (a library built
 * CUDA-aware may still run without CUDA support). */
static int cuda_aware(void) {
#if defined(MPIX_CUDA_AWARE_SUPPORT) && MPIX_CUDA_AWARE_SUPPORT
  return MPIX_Query_cuda_support() == 1;
#elif defined(MPIX_CUDA_AWARE_SUPPORT)
  return 0; /* built without CUDA support */
#else
  return -1;
#endif
}

/* The lowest rank of this host's processes: rank 0 of MPI's shared-memory
 * communicator, translated to dlrun's (a local call, no message). */
static int host_of(int *host) {
  MPI_Comm node;
  int e = MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node);
  if (e != MPI_SUCCESS) return e;
  MPI_Group node_group, group;
  int first = 0;
  if ((e = MPI_Comm_group(node, &node_group)) == MPI_SUCCESS) {
    if ((e = MPI_Comm_group(comm, &group)) == MPI_SUCCESS) {
      e = MPI_Group_translate_ranks(node_group, 1, &first, group, host);
      MPI_Group_free(&group);
    }
    MPI_Group_free(&node_group);
  }
  MPI_Comm_free(&node);
  return e;
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
  int e = MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  if (e != MPI_SUCCESS) return mpi_failed(e, "MPI_Comm_dup", err, errlen);
  if ((e = MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN)) != MPI_SUCCESS ||
      (e = MPI_Comm_rank(comm, &rank)) != MPI_SUCCESS ||
      (e = MPI_Comm_size(comm, &size)) != MPI_SUCCESS) {
    MPI_Comm_free(&comm);
    comm = MPI_COMM_NULL;
    return mpi_failed(e, "setting up dlrun's communicator", err, errlen);
  }
  int host = rank;
  if ((e = host_of(&host)) != MPI_SUCCESS) {
    MPI_Comm_free(&comm);
    comm = MPI_COMM_NULL;
    return mpi_failed(e, "finding the processes of this host", err, errlen);
  }
  *out = (dlrun_transport){.abi = DLRUN_TRANSPORT_ABI, .name = "mpi", .rank = rank,
                           .size = size, .host = host, .device_memory = cuda_aware(),
                           .allgatherv = allgatherv, .exchange = exchange, .abort = abort_job,
                           .finalize = finalize};
  return DLRUN_TRANSPORT_OK;
}
