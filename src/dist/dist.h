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

#endif
