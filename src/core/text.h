/* Internal: small text helpers for messages. */
#ifndef DLRUN_TEXT_H
#define DLRUN_TEXT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* (dlrun_tuple_string, the Python-style tuple text, is public: dlrun/shape.h.) */

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
