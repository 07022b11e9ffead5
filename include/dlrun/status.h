/* Status codes and the per-thread message of the last failure.
 *
 * Every fallible dlrun function returns a dlrun_status. On failure it also
 * records a message, kept per thread until the next failure on that thread.
 * The core never aborts on bad input and never calls Lua. */
#ifndef DLRUN_STATUS_H
#define DLRUN_STATUS_H

#include "export.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum dlrun_status {
  DLRUN_OK = 0,
  DLRUN_ERR_VALUE,              /* ValueError: a bad argument value */
  DLRUN_ERR_INDIVISIBLE,        /* IndivisibleError (a ValueError) */
  DLRUN_ERR_DUPLICATE_SPEC,     /* DuplicateSpecError (a ValueError) */
  DLRUN_ERR_TYPE,               /* TypeError: a value of the wrong kind */
  DLRUN_ERR_BUFFER,             /* BufferError: DLPack export/import refused */
  DLRUN_ERR_RUNTIME,            /* RuntimeError: bad state (deleted array...) */
  DLRUN_ERR_RESOURCE_EXHAUSTED, /* out of pool or host memory */
  DLRUN_ERR_ASSERTION,          /* AssertionError: processes hold different values */
  DLRUN_STATUS_COUNT
} dlrun_status;

/* Message of the last failure on the calling thread ("" if none). The string
 * is owned by dlrun and valid until the next failing call on this thread. */
DLRUN_API const char *dlrun_last_error(void);

/* Error class name of a status: "ValueError", "BufferError", ...; "OK". */
DLRUN_API const char *dlrun_status_name(dlrun_status status);

#ifdef __cplusplus
}
#endif
#endif
