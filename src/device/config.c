/* The memory settings of a configuration: capacities as sizes or shares of
 * host RAM, and preallocation, parsed and resolved against the environment. */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "config.h"
#include "core/status_impl.h"

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

/* Per capacity setting: its name, its variables and its option. */
const char *const dlrun_setting_names[] = {"device_memory", "pinned_host_memory", "host_memory"};
const char *const dlrun_preallocate_names[] = {"device_preallocate", "pinned_host_preallocate"};
static const char *const MEMORY_ENV[] = {"DLRUN_DEVICE_MEMORY", "DLRUN_PINNED_HOST_MEMORY",
                                         "DLRUN_HOST_MEMORY"};
static const char *const PREALLOC_ENV[] = {"DLRUN_DEVICE_PREALLOCATE",
                                           "DLRUN_PINNED_HOST_PREALLOCATE"};
const char *const dlrun_memory_hints[] = {
    "device_memory (dl.configure, --device-memory, DLRUN_DEVICE_MEMORY)",
    "pinned_host_memory (dl.configure, --pinned-host-memory, DLRUN_PINNED_HOST_MEMORY)",
    "host_memory (dl.configure, --host-memory, DLRUN_HOST_MEMORY)"};
/* How messages name each setting's memory. */
const char *const dlrun_setting_memory_names[] = {"device", "pinned_host", "host"};

static dlrun_status check_memory_size(int k, uint64_t bytes) {
  if (bytes < DLRUN_DEVICE_MEMORY_MIN)
    return dlrun_fail(DLRUN_ERR_VALUE, "%s memory of %llu bytes is too small (at least %u bytes)",
                      dlrun_setting_memory_names[k], (unsigned long long)bytes,
                      DLRUN_DEVICE_MEMORY_MIN);
  return DLRUN_OK;
}

void dlrun_config_fields(dlrun_config *c, int k, uint64_t **bytes, double **fraction,
                         dlrun_preallocate **pre) {
  switch (k) {
  case DLRUN_MEM_DEVICE:
    *bytes = &c->device_memory, *fraction = &c->device_memory_fraction;
    *pre = &c->device_preallocate;
    break;
  case DLRUN_MEM_PINNED_HOST:
    *bytes = &c->pinned_host_memory, *fraction = &c->pinned_host_memory_fraction;
    *pre = &c->pinned_host_preallocate;
    break;
  default: /* DLRUN_SETTING_HOST */
    *bytes = &c->host_memory, *fraction = &c->host_memory_fraction;
    *pre = NULL;
  }
}

/* One setting's values as a config gives them. */
void dlrun_config_kind(const dlrun_config *c, int k, uint64_t *bytes, double *fraction,
                       dlrun_preallocate *pre) {
  static const dlrun_config none;
  uint64_t *b;
  double *f;
  dlrun_preallocate *p;
  dlrun_config_fields((dlrun_config *)(c ? c : &none), k, &b, &f, &p); /* read only */
  *bytes = *b, *fraction = *f, *pre = p ? *p : DLRUN_PREALLOCATE_DEFAULT;
}

dlrun_status dlrun_check_kind(int k, uint64_t bytes, double fraction, dlrun_preallocate pre) {
  if (bytes && fraction)
    return dlrun_fail(DLRUN_ERR_VALUE, "%s and %s_fraction are both set (expected one of them)",
                      dlrun_setting_names[k], dlrun_setting_names[k]);
  if (fraction && !(fraction > 0 && fraction <= 1))
    return dlrun_fail(DLRUN_ERR_VALUE, "%s_fraction must be above 0 and at most 1, got %g",
                      dlrun_setting_names[k], fraction);
  if ((int)pre < 0 || pre > DLRUN_PREALLOCATE_ON)
    return dlrun_fail(DLRUN_ERR_VALUE, "%s must be DLRUN_PREALLOCATE_DEFAULT, _OFF or _ON, got %d",
                      dlrun_preallocate_names[k], (int)pre);
  return bytes ? check_memory_size(k, bytes) : DLRUN_OK;
}

/* One kind's memory settings: the config's, else its variables' (empty
 * counts as unset); a bad variable is named in the message. */
static dlrun_status resolve_kind(const dlrun_config *config, int k, dlrun_memory_settings *m) {
  uint64_t bytes;
  double fraction;
  dlrun_preallocate pre;
  dlrun_config_kind(config, k, &bytes, &fraction, &pre);
  dlrun_status st = dlrun_check_kind(k, bytes, fraction, pre);
  if (st) return st;
  const char *env = getenv(MEMORY_ENV[k]);
  if (!bytes && !fraction && env && *env &&
      ((st = dlrun_parse_capacity(env, &bytes, &fraction)) ||
       (bytes && (st = check_memory_size(k, bytes)))))
    return dlrun_fail_prefix(st, "%s: ", MEMORY_ENV[k]);
  env = k < DLRUN_MEM_KIND_COUNT ? getenv(PREALLOC_ENV[k]) : NULL;
  if (pre == DLRUN_PREALLOCATE_DEFAULT && env && *env &&
      (st = dlrun_parse_preallocate(env, &pre)))
    return dlrun_fail_prefix(st, "%s: ", PREALLOC_ENV[k]);
  m->bytes[k] = bytes;
  m->fraction[k] = fraction;
  if (k < DLRUN_MEM_KIND_COUNT) m->preallocate[k] = pre == DLRUN_PREALLOCATE_ON;
  return DLRUN_OK;
}

dlrun_status dlrun_resolve_memory_settings(const dlrun_config *config,
                                           dlrun_memory_settings *m) {
  *m = (dlrun_memory_settings){0};
  for (int k = 0; k < DLRUN_CAPACITY_SETTINGS; k++) {
    dlrun_status st = resolve_kind(config, k, m);
    if (st) return st;
  }
  return DLRUN_OK;
}
