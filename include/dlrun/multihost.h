/* Collectives over the processes of a distributed job (distributed.h: the
 * processes it joined), with the semantics and names of JAX's
 * multihost_utils, kept so that JAX users find them. Every process calls
 * them, in the same order, with the same shapes and dtypes (checked: a
 * mismatch is a RuntimeError on every process, never a hang). Results are
 * new host arrays (on this process's host device) that the caller owns and
 * releases with dlrun_array_release. Alone (one process) they work as a job
 * of one. */
#ifndef DLRUN_MULTIHOST_H
#define DLRUN_MULTIHOST_H

#include "array.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The value of x on every process.
 * - x not fully addressable (a global array): its global value, which
 *   needs tiled (else ValueError "Gathering global non-fully-addressable
 *   arrays only supports tiled=True"); each byte is sent once to each
 *   process that lacks it.
 * - x fully addressable (this process's own data): every process gives
 *   one array of the same shape and dtype; stacked on a new axis 0
 *   (shape [process_count, ...]), or with tiled concatenated along axis 0
 *   (a 0-d array is always stacked). */
DLRUN_API dlrun_status dlrun_process_allgather(dlrun_array *x, bool tiled, dlrun_array **out);

/* The value of x on the source process, on every process. is_source: 1 on
 * the one source process and 0 on the others, or -1 on every process for
 * process 0. x must be fully addressable, with the same shape and dtype
 * everywhere. */
DLRUN_API dlrun_status dlrun_broadcast_one_to_all(dlrun_array *x, int is_source,
                                                  dlrun_array **out);

/* DLRUN_OK when every process holds the same value in x (fully
 * addressable, same shape and dtype); else DLRUN_ERR_ASSERTION on every
 * process: "<message> Processes 1 and 3 hold values different from
 * process 0's (first at element 5)." message may be NULL. */
DLRUN_API dlrun_status dlrun_assert_equal(dlrun_array *x, const char *message);

#ifdef __cplusplus
}
#endif
#endif
