/* Internal: small text helpers for messages. */
#ifndef DLRUN_TEXT_H
#define DLRUN_TEXT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Python-style tuple "(8, 2)", "(10,)", "()" of n values into buf (always
 * terminated). Returns buf. */
const char *dlrun_tuple_string(const int64_t *v, int n, char *buf, size_t size);

/* Text built piece by piece into a fixed buffer, truncated safely. */
typedef struct dlrun_text {
  char *buf;
  size_t size, used;
} dlrun_text;

/* Start an empty text in buf (size > 0). */
dlrun_text dlrun_text_start(char *buf, size_t size);
/* Append printf-style text; once full, further appends do nothing. */
void dlrun_text_append(dlrun_text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
