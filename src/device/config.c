/* Parsing the memory settings of a configuration: capacities as sizes or
 * fractions of host RAM, and preallocation switches. */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/status_impl.h"
#include "device_impl.h"

dlrun_status dlrun_parse_capacity(const char *text, uint64_t *bytes, double *fraction) {
  DLRUN_NONNULL(bytes, "dlrun_parse_capacity", "bytes");
  DLRUN_NONNULL(fraction, "dlrun_parse_capacity", "fraction");
  *bytes = 0;
  *fraction = 0;
  size_t n = text ? strlen(text) : 0;
  while (n && isspace((unsigned char)text[n - 1])) n--;
  if (!n || text[n - 1] != '%') return dlrun_parse_size(text, bytes);
  char *end;
  errno = 0;
  double pct = strtod(text, &end);
  while (end < text + n - 1 && isspace((unsigned char)*end)) end++;
  if (end != text + n - 1 || errno || !isfinite(pct) || !(pct > 0) || pct > 100)
    return dlrun_fail(DLRUN_ERR_VALUE,
                      "invalid memory share \"%s\" (expected a percentage of host RAM above 0 "
                      "and at most 100, e.g. \"25%%\")",
                      text);
  *fraction = pct / 100;
  return DLRUN_OK;
}

dlrun_status dlrun_parse_preallocate(const char *text, dlrun_preallocate *out) {
  DLRUN_NONNULL(out, "dlrun_parse_preallocate", "out");
  static const char *const on[] = {"true", "1", "on", "yes"}, *const off[] = {"false", "0", "off",
                                                                             "no"};
  for (int i = 0; text && i < 4; i++) {
    if (strcasecmp(text, on[i]) == 0) return *out = DLRUN_PREALLOCATE_ON, DLRUN_OK;
    if (strcasecmp(text, off[i]) == 0) return *out = DLRUN_PREALLOCATE_OFF, DLRUN_OK;
  }
  return dlrun_fail(DLRUN_ERR_VALUE, "invalid preallocation \"%s\" (expected true or false)",
                    text ? text : "(null)");
}
