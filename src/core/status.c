#include "status_impl.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define MESSAGE_CAP 1024

static _Thread_local char last_message[MESSAGE_CAP];

const char *dlrun_last_error(void) { return last_message; }

const char *dlrun_status_name(dlrun_status status) {
  switch (status) {
  case DLRUN_OK: return "OK";
  case DLRUN_ERR_VALUE: return "ValueError";
  case DLRUN_ERR_INDIVISIBLE: return "IndivisibleError";
  case DLRUN_ERR_DUPLICATE_SPEC: return "DuplicateSpecError";
  case DLRUN_ERR_TYPE: return "TypeError";
  case DLRUN_ERR_BUFFER: return "BufferError";
  case DLRUN_ERR_RUNTIME: return "RuntimeError";
  case DLRUN_ERR_RESOURCE_EXHAUSTED: return "ResourceExhaustedError";
  case DLRUN_ERR_ASSERTION: return "AssertionError";
  case DLRUN_STATUS_COUNT: break;
  }
  return "RuntimeError";
}

dlrun_status dlrun_fail(dlrun_status status, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(last_message, sizeof last_message, fmt, ap);
  va_end(ap);
  return status;
}

dlrun_status dlrun_fail_prefix(dlrun_status status, const char *fmt, ...) {
  char old[MESSAGE_CAP];
  memcpy(old, last_message, sizeof old);
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(last_message, sizeof last_message, fmt, ap);
  va_end(ap);
  if (n >= 0 && (size_t)n < sizeof last_message)
    snprintf(last_message + n, sizeof last_message - (size_t)n, "%s", old);
  return status;
}

const char *dlrun_format_bytes(unsigned long long bytes, char *buf, unsigned long n) {
  static const char *units[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  if (bytes < 1024) {
    snprintf(buf, n, "%lluB", bytes);
    return buf;
  }
  double v = (double)bytes;
  int u = -1;
  while (v >= 1024.0 && u < 5) {
    v /= 1024.0;
    u++;
  }
  snprintf(buf, n, "%.2f%s", v, units[u]);
  return buf;
}
