/* Internal: the transport a joined job runs on, a vtable filled by a module
 * loaded at run time (libdlrun_mpi.so). The module sees only this header:
 * plain C types, no other dlrun internals, so that it can be built apart
 * against the MPI library. Every wait is bounded: a call returns
 * DLRUN_TRANSPORT_TIMEOUT when the other processes do not arrive within
 * `timeout_s`, naming those it can in `err`. */
#ifndef DLRUN_DIST_TRANSPORT_H
#define DLRUN_DIST_TRANSPORT_H

#include <stddef.h>

/* Raised when the vtable changes; the loader refuses other values. */
#define DLRUN_TRANSPORT_ABI 2
/* The function a module exports, by this name. */
#define DLRUN_TRANSPORT_OPEN_SYMBOL "dlrun_transport_open"

enum { DLRUN_TRANSPORT_OK = 0, DLRUN_TRANSPORT_FAILED = 1, DLRUN_TRANSPORT_TIMEOUT = 2 };

typedef struct dlrun_transport {
  int abi;
  const char *name; /* "mpi" */
  int rank, size;   /* this process, and how many */
  /* Every process r contributes counts[r] bytes (send, counts[rank] of
   * them); recv gets process r's at displs[r]. Every process passes the
   * same counts and displs. */
  int (*allgatherv)(const void *send, void *recv, const size_t *counts, const size_t *displs,
                    double timeout_s, char *err, size_t errlen);
  /* End every process of the job now with `code`. */
  void (*abort)(int code);
  /* Leave the job. */
  void (*finalize)(void);
} dlrun_transport;

/* Join (MPI_Init) and fill *out. Returns DLRUN_TRANSPORT_OK, or fails
 * with a message in err. */
typedef int (*dlrun_transport_open_fn)(int abi, dlrun_transport *out, char *err, size_t errlen);

#endif
