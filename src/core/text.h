/* Internal: small text helpers for messages. */
#ifndef DLRUN_TEXT_H
#define DLRUN_TEXT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* "(8, 2)", "(10,)", "()" (Python tuples) or "[8, 2]" (lists) of n values
 * into buf (always terminated). Returns buf. */
const char *dlrun_int_sequence(const int64_t *v, int n, bool tuple, char *buf, size_t size);
const char *dlrun_tuple_string(const int64_t *v, int n, char *buf, size_t size);

#endif
