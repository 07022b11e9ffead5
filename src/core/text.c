/* Small text helpers for messages (core/text.h) and the public tuple text
 * (dlrun/shape.h). */
#include <stdarg.h>
#include <stdio.h>

#include "dlrun/shape.h"
#include "text.h"

dlrun_text dlrun_text_start(char *buf, size_t size) {
  if (size) buf[0] = '\0';
  return (dlrun_text){.buf = buf, .size = size};
}

void dlrun_text_append(dlrun_text *t, const char *fmt, ...) {
  if (t->used + 1 >= t->size) return;
  va_list ap;
  va_start(ap, fmt);
  int k = vsnprintf(t->buf + t->used, t->size - t->used, fmt, ap);
  va_end(ap);
  if (k > 0) t->used += (size_t)k < t->size - t->used ? (size_t)k : t->size - t->used - 1;
}

const char *dlrun_tuple_string(const int64_t *v, int n, char *buf, size_t size) {
  size_t used = (size_t)snprintf(buf, size, "(");
  for (int i = 0; i < n && used < size; i++)
    used += (size_t)snprintf(buf + used, size - used, "%s%lld", i ? ", " : "", (long long)v[i]);
  if (used < size) snprintf(buf + used, size - used, n == 1 ? ",)" : ")");
  return buf;
}
