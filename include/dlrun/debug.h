/* Test hooks: make the k-th allocation fail, to prove that every failure
 * path of dlrun cleans up. Always compiled in; one relaxed atomic load per
 * allocation when off. Also set from the environment at the first
 * allocation: DLRUN_FAIL_HOST_ALLOC=k, DLRUN_FAIL_POOL_ALLOC=k. */
#ifndef DLRUN_DEBUG_H
#define DLRUN_DEBUG_H

#include <stdint.h>

#include "export.h"
#include "runtime.h"
#include "status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum dlrun_alloc_kind {
  DLRUN_ALLOC_HOST, /* dlrun's own host memory (malloc) */
  DLRUN_ALLOC_POOL  /* device memory pools */
} dlrun_alloc_kind;

/* From now on, the k-th allocation of `kind` fails (k >= 1; 0 turns the
 * hook off). Only that one fails: later ones succeed again. */
DLRUN_API void dlrun_debug_fail_alloc(dlrun_alloc_kind kind, int64_t k);
/* Allocations of `kind` attempted since the last dlrun_debug_fail_alloc
 * call (counted while a hook is set). */
DLRUN_API int64_t dlrun_debug_alloc_count(dlrun_alloc_kind kind);
/* Whether the set failure has happened. */
DLRUN_API int dlrun_debug_alloc_failed(dlrun_alloc_kind kind);

/* Make the next `count` operations of kind `what` ("copy" or "fill")
 * enqueued on dev fail on the device, as a driver error would (0 stops):
 * the failure travels the real path, so block_until_ready, reads, export
 * and device_put raise it. ValueError for another `what`; RuntimeError
 * when dev's platform cannot inject failures or dev is another process's. */
DLRUN_API dlrun_status dlrun_debug_inject_failure(dlrun_device *dev, const char *what,
                                                  unsigned count);

#ifdef __cplusplus
}
#endif
#endif
