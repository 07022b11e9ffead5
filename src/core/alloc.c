#include "alloc.h"

#include <stdlib.h>
#include <string.h>

#include "status_impl.h"

void *dlrun_malloc(size_t n) { return malloc(n ? n : 1); }

void *dlrun_calloc(size_t count, size_t size) {
  return calloc(count ? count : 1, size ? size : 1);
}

void dlrun_free(void *p) { free(p); }

char *dlrun_strdup(const char *s) {
  size_t n = strlen(s) + 1;
  char *d = dlrun_malloc(n);
  if (d) memcpy(d, s, n);
  return d;
}

dlrun_status dlrun_fail_oom_host(size_t n) {
  return dlrun_fail(DLRUN_ERR_RESOURCE_EXHAUSTED,
                    "out of host memory allocating %zu bytes", n);
}
