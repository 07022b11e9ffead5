/* Internal: what the layers above ask of a joined job. */
#ifndef DLRUN_DIST_DIST_H
#define DLRUN_DIST_DIST_H

#include "dlrun/distributed.h"

/* Collective: whether every process passed the same configuration `value`
 * (a device spec). ValueError on every process when not, naming this
 * process's value and another's ("<what> mismatch: process 0 has '...',
 * process 1 '...'"); RuntimeError when the wait passes the timeout. Alone:
 * DLRUN_OK. */
dlrun_status dlrun_dist_agree_config(const char *what, const char *value);
/* The same for any collective: "<what> mismatch: ..." (ValueError or
 * RuntimeError), "<call>: ... did not arrive ..." on a timeout. */
dlrun_status dlrun_dist_agree(const char *call, const char *what, const char *value,
                              bool as_value_error);

/* Joined only. Process r's counts[r] bytes land at recv + displs[r] on
 * every process (send holds this process's); every process passes the same
 * counts and displs. Returns 0, or a transport code with a message in err
 * (a timeout names who did not arrive). */
int dlrun_dist_allgatherv(const void *send, void *recv, const size_t *counts,
                          const size_t *displs, char *err, size_t errlen);
/* The same with nbytes from every process, in process order. */
int dlrun_dist_allgather(const void *send, size_t nbytes, void *recv, char *err, size_t errlen);

#endif
