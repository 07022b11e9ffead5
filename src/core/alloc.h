/* Internal: every host allocation of dlrun goes through these, so that tests
 * can make the k-th one fail. They return NULL on failure and never abort;
 * the caller reports DLRUN_ERR_RESOURCE_EXHAUSTED (see dlrun_fail_oom_host). */
#ifndef DLRUN_ALLOC_H
#define DLRUN_ALLOC_H

#include <stddef.h>

#include "dlrun/status.h"

void *dlrun_malloc(size_t n);
void *dlrun_calloc(size_t count, size_t size);
void dlrun_free(void *p);
char *dlrun_strdup(const char *s);
/* Room in the array *(T **)array, of *cap elements of `size` bytes of which
 * n are used, for one more: when full, a block of twice the capacity
 * (`first` elements the first time) replaces it, the n elements moved.
 * Out of memory: "out of host memory" recorded, the array unchanged. */
dlrun_status dlrun_grow(void *array, size_t n, size_t *cap, size_t size, size_t first);

/* Whether the allocation now being made must fail (the test hook of
 * include/dlrun/debug.h). */
int dlrun_inject_failure(int kind);

/* Record "out of host memory allocating N bytes" and return the status. */
dlrun_status dlrun_fail_oom_host(size_t n);

#endif
