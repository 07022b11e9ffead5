/* Internal: small text helpers for messages. */
#ifndef DLRUN_TEXT_H
#define DLRUN_TEXT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Python-style tuple "(8, 2)", "(10,)", "()" of n values into buf (always
 * terminated). Returns buf. */
const char *dlrun_tuple_string(const int64_t *v, int n, char *buf, size_t size);

#endif
