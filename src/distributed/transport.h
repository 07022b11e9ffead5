/* Internal: the transport a joined job runs on, a vtable filled by a module
 * loaded at run time (libdlrun_mpi.so). The module sees only this header:
 * plain C types, no other dlrun internals, so that it can be built apart
 * against the MPI library. Every wait is bounded: a call returns
 * DLRUN_TRANSPORT_TIMEOUT when the other processes do not arrive within
 * `timeout_s`, naming those it can in `err`. */
#ifndef DLRUN_DISTRIBUTED_TRANSPORT_H
#define DLRUN_DISTRIBUTED_TRANSPORT_H

#include <stddef.h>
#include <stdint.h>

/* Raised when the vtable changes; the loader refuses other values. */
#define DLRUN_TRANSPORT_ABI 5
/* The function a module exports, by this name. */
#define DLRUN_TRANSPORT_OPEN_SYMBOL "dlrun_transport_open"

enum { DLRUN_TRANSPORT_OK = 0, DLRUN_TRANSPORT_FAILED = 1, DLRUN_TRANSPORT_TIMEOUT = 2 };

/* Dimensions of a message: an array's 32 plus one for strided elements. */
#define DLRUN_TRANSPORT_MAX_DIMS 33

/* One message of an exchange: a strided block of memory the transport may
 * read (a send) or write (a receive) directly. Dimension ndim-1 is
 * count[ndim-1] contiguous bytes; each outer dimension d repeats the block
 * inside it count[d] times, stride[d] bytes apart. At most 1 GiB in all. */
typedef struct dlrun_transport_message {
  int peer; /* the other process */
  int ndim; /* 1 to DLRUN_TRANSPORT_MAX_DIMS */
  void *base;
  int64_t count[DLRUN_TRANSPORT_MAX_DIMS];
  int64_t stride[DLRUN_TRANSPORT_MAX_DIMS];
} dlrun_transport_message;

typedef struct dlrun_transport {
  int abi;
  const char *name; /* "mpi" */
  int rank, size;   /* this process, and how many */
  /* This process's host: the lowest rank of the processes that share its
   * memory system (MPI's shared-memory communicator), so that two
   * processes with the same host may map each other's memory. */
  int host;
  /* Whether the transport reads and writes device memory at its device
   * addresses (a CUDA-aware MPI): 1 (MPIX_Query_cuda_support() said so),
   * 0 (it said not), -1 (the MPI cannot say). */
  int device_memory;
  /* Every process r contributes counts[r] bytes (send, counts[rank] of
   * them); recv gets process r's at displs[r]. Every process passes the
   * same counts and displs. */
  int (*allgatherv)(const void *send, void *recv, const size_t *counts, const size_t *displs,
                    double timeout_s, char *err, size_t errlen);
  /* Post every receive and send, then wait for all of them. Messages
   * between two processes match in the order listed, so both sides list
   * them in the same order. A timeout names the processes whose messages
   * did not come. */
  int (*exchange)(const dlrun_transport_message *sends, size_t nsends,
                  const dlrun_transport_message *recvs, size_t nrecvs, double timeout_s, char *err,
                  size_t errlen);
  /* End every process of the job now with `code`. */
  void (*abort)(int code);
  /* Leave the job. */
  void (*finalize)(void);
} dlrun_transport;

/* Join (MPI_Init) and fill *out. Returns DLRUN_TRANSPORT_OK, or fails
 * with a message in err. */
typedef int (*dlrun_transport_open_fn)(int abi, dlrun_transport *out, char *err, size_t errlen);

#endif
