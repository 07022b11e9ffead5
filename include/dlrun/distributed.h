/* Many processes: joining an SPMD job (every process runs the same program,
 * as JAX's multi-controller model) through a transport module loaded only
 * when a job is joined. A program that never joins needs no MPI library.
 *
 * The `dlrun` command joins by itself when it finds an MPI launch (see
 * `dlrun --help`, --distributed). A host application calls
 * dlrun_distributed_init once, before it creates a runtime, and
 * dlrun_distributed_shutdown before it exits. Collectives over arrays of
 * host values (JAX's multihost_utils) are in multihost.h. */
#ifndef DLRUN_DISTRIBUTED_H
#define DLRUN_DISTRIBUTED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "status.h"

/* How to join. Zero is the default. */
typedef enum dlrun_distributed_mode {
  DLRUN_DISTRIBUTED_AUTO = 0, /* join when launched by mpirun (Open MPI's or MPICH's
                                 environment), else run alone */
  DLRUN_DISTRIBUTED_OFF = 1,  /* run alone, even under mpirun */
  DLRUN_DISTRIBUTED_MPI = 2,  /* join through MPI (alone, a job of one, when not launched) */
} dlrun_distributed_mode;

/* Options of dlrun_distributed_init; all zero (or a NULL pointer) asks for
 * the defaults. Read during the call only. */
typedef struct dlrun_distributed_options {
  dlrun_distributed_mode mode;
  /* Seconds any wait for the other processes may last before it fails
   * with DLRUN_ERR_RUNTIME; 0: $DLRUN_DISTRIBUTED_TIMEOUT, else 300. */
  double timeout_s;
  /* The largest message between two processes, in bytes (4096 to 1 GiB);
   * larger pieces go as several. 0: $DLRUN_DISTRIBUTED_MESSAGE_BYTES, else
   * 1 GiB. Every process of a job must use the same. */
  uint64_t message_bytes;
  /* The transport module to load; NULL: $DLRUN_MPI_MODULE, else
   * libdlrun_mpi.so beside the library (or the executable linking it
   * statically), then in ../lib from there, then the loader's search path. */
  const char *module;
} dlrun_distributed_options;

/* Join the job as `options` say. Errors: an unknown mode or a negative
 * timeout (ValueError); a launch found but the module or the MPI library
 * missing, or a second call after a join (RuntimeError). Collective once
 * joined: processes whose message sizes differ fail, each of them, with
 * ValueError "DLRUN_DISTRIBUTED_MESSAGE_BYTES mismatch: process 0 has
 * '4096', process 1 '8192'", still joined (call dlrun_distributed_shutdown).
 * Calling it when not launched with mode AUTO just records that this
 * process runs alone. */
DLRUN_API dlrun_status dlrun_distributed_init(const dlrun_distributed_options *options);
/* Whether this process has joined a job (of any size, one included). */
DLRUN_API bool dlrun_distributed_joined(void);
/* This process's index in the job, 0..count-1; 0 and 1 when alone. */
DLRUN_API int dlrun_process_index(void);
DLRUN_API int dlrun_process_count(void);
/* The transport's name ("mpi") once joined, else NULL. */
DLRUN_API const char *dlrun_distributed_transport(void);
/* The bound on every wait for other processes, in seconds. */
DLRUN_API double dlrun_distributed_timeout(void);
/* Wait until every process has called this with the same `name` (a
 * barrier). Fails with DLRUN_ERR_RUNTIME, on every process, when the names
 * differ (naming both), and when the wait passes the timeout. Alone: checks
 * nothing, returns DLRUN_OK. */
DLRUN_API dlrun_status dlrun_sync_global(const char *name);
/* The same with a name of `len` bytes, which may hold NUL ("a\0b" and
 * "a\0c" differ): names are compared whole. */
DLRUN_API dlrun_status dlrun_sync_global_n(const char *name, size_t len);
/* Collective: this process has made its last collective call; returns
 * once every process has. `what` names the point in messages (NULL:
 * "dlrun_distributed_finish"; dlrun's command line passes "the end of the
 * script"). A process still at another collective call fails there, and
 * this fails too, on every process, with RuntimeError naming both calls
 * ("device_put mismatch: process 0 called 'device_put', process 1 'the end
 * of the script' ..."), rather than waiting forever for a peer that has
 * finished; this process then waits at its end (meeting again, at most the
 * timeout more) until every process is at its end, so that ending the job
 * does not cut their errors short; dlrun_distributed_abort then leaves the
 * job in step instead of aborting it. A wait past the timeout fails too.
 * Call it before
 * dlrun_distributed_shutdown when the work ended well. Alone: DLRUN_OK. */
DLRUN_API dlrun_status dlrun_distributed_finish(const char *what);
/* Collective: join the agreement that precedes collective `call`, for a
 * caller that checks the call's arguments itself before making it (the Lua
 * binding's collective entry points, dl.export of a global array). `mine` is
 * this process's check: DLRUN_OK, or the status of its failure, `message`
 * its text. Every process passes the same `call` and, when `what` is not
 * NULL, the same `value` (`what` names it in the message). Returns `mine`
 * with `message` on this process when it failed; else RuntimeError on every
 * process when another failed ("<call> failed on process 1: ValueError:
 * <its message>"), made another collective call ("<call> mismatch: ..."),
 * or passed another value ("<call> mismatch: <what> differs: process 0 has
 * '...', process 1 '...'"); a wait past the timeout fails too. Alone:
 * `mine`, with `message`. */
DLRUN_API dlrun_status dlrun_distributed_agree(const char *call, const char *what,
                                               const char *value, dlrun_status mine,
                                               const char *message);
/* End the whole job now with exit status `code` (every process, without
 * waiting for them): what an uncaught error on one process must do. Alone:
 * exit(code). Never returns. */
DLRUN_API void dlrun_distributed_abort(int code);
/* Leave the job (MPI_Finalize: waits for the other processes to leave
 * too). Later calls, and calls without a join, do nothing. */
DLRUN_API void dlrun_distributed_shutdown(void);

#endif
