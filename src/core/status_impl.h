/* Internal: recording failures. */
#ifndef DLRUN_STATUS_IMPL_H
#define DLRUN_STATUS_IMPL_H

#include "dlrun/status.h"

/* Record a printf-style message for the calling thread and return `status`. */
dlrun_status dlrun_fail(dlrun_status status, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Prefix the current thread's message with printf-style text; returns status. */
dlrun_status dlrun_fail_prefix(dlrun_status status, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Guard of a public function: a NULL argument is a ValueError naming it. */
#define DLRUN_NONNULL(p, fn, what)                                               \
  do {                                                                           \
    if (!(p)) return dlrun_fail(DLRUN_ERR_VALUE, "%s: %s is NULL", fn, what);    \
  } while (0)

/* Format a byte count for humans: "1.50GiB", "256B". Returns buf. */
const char *dlrun_format_bytes(unsigned long long bytes, char *buf, unsigned long n);

#endif
