/* Parsing of device specs ("sim:8,cpu:2", "auto") and sizes ("2GiB"). */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/status_impl.h"
#include "device_impl.h"
#include "modules.h"

static const char *skip_space(const char *p, const char *end) {
  while (p < end && isspace((unsigned char)*p)) p++;
  return p;
}

static const char *trim_end(const char *p, const char *end) {
  while (end > p && isspace((unsigned char)end[-1])) end--;
  return end;
}

static dlrun_status parse_count(const char *text, const char *p, const char *end,
                                const char *platform, size_t *out) {
  char buf[32];
  size_t n = (size_t)(end - p);
  if (n == 0 || n >= sizeof buf) goto bad;
  memcpy(buf, p, n);
  buf[n] = 0;
  for (size_t i = 0; i < n; i++)
    if (!isdigit((unsigned char)buf[i]) && !(i == 0 && buf[i] == '-')) goto bad;
  errno = 0;
  long long v = strtoll(buf, NULL, 10);
  if (errno || v < 1 || v > DLRUN_MAX_DEVICES) goto bad;
  *out = (size_t)v;
  return DLRUN_OK;
bad:
  return dlrun_fail(DLRUN_ERR_VALUE,
                    "invalid device count \"%.*s\" for %s in device spec \"%s\" "
                    "(expected an integer from 1 to %d)",
                    (int)n, p, platform, text, DLRUN_MAX_DEVICES);
}

/* One entry "name" or "name:count". */
static dlrun_status parse_entry(const char *text, const char *p, const char *end,
                                dlrun_device_spec *out) {
  p = skip_space(p, end);
  end = trim_end(p, end);
  if (p == end)
    return dlrun_fail(DLRUN_ERR_VALUE, "invalid device spec \"%s\": empty entry", text);
  const char *colon = memchr(p, ':', (size_t)(end - p));
  const char *name_end = trim_end(p, colon ? colon : end);
  size_t name_len = (size_t)(name_end - p);
  if (name_len == 4 && memcmp(p, "auto", 4) == 0)
    return dlrun_fail(DLRUN_ERR_VALUE,
                      "invalid device spec \"%s\": \"auto\" must stand alone", text);
  const dlrun_platform *pl = dlrun_platform_find(p, name_len);
  if (!pl) { /* a module that did not load is known, with why; else the list */
    char known[200] = "";
    dlrun_platform_status all[DLRUN_MAX_LISTED];
    size_t n = dlrun_platforms_list(all, DLRUN_MAX_LISTED);
    for (size_t i = 0; i < n; i++) {
      if (strlen(all[i].name) == name_len && memcmp(all[i].name, p, name_len) == 0)
        return dlrun_fail(DLRUN_ERR_VALUE, "platform %s in device spec \"%s\" is not available "
                          "on this machine: %s", all[i].name, text, all[i].why);
      strncat(known, all[i].name, sizeof known - strlen(known) - 1);
      strncat(known, ", ", sizeof known - strlen(known) - 1);
    }
    return dlrun_fail(DLRUN_ERR_VALUE,
                      "unknown platform \"%.*s\" in device spec \"%s\" (expected %sor auto)",
                      (int)name_len, p, text, known);
  }
  char why[160];
  size_t present = 0;
  if (pl->probe && !pl->probe(false, &present, why, sizeof why))
    return dlrun_fail(DLRUN_ERR_VALUE, "platform %s in device spec \"%s\" is not available on "
                      "this machine: %s", pl->name, text, why);
  size_t count = 1;
  if (colon) {
    const char *c = skip_space(colon + 1, end);
    dlrun_status st = parse_count(text, c, end, pl->name, &count);
    if (st) return st;
  }
  if (pl->probe && count > present)
    return dlrun_fail(DLRUN_ERR_VALUE, "device spec \"%s\" asks for %zu %s devices; this machine "
                      "has %zu", text, count, pl->name, present);
  for (size_t i = 0; i < out->ngroups; i++)
    if (out->groups[i].platform == pl)
      return dlrun_fail(DLRUN_ERR_VALUE, "platform %s appears twice in device spec \"%s\"",
                        pl->name, text);
  out->groups[out->ngroups++] = (dlrun_device_group){.platform = pl, .count = count};
  return DLRUN_OK;
}

dlrun_status dlrun_parse_device_spec(const char *text, dlrun_device_spec *out) {
  memset(out, 0, sizeof *out);
  dlrun_platform_modules_load(); /* a spec may name a module's platform */
  if (!text) return dlrun_fail(DLRUN_ERR_VALUE, "device spec is missing");
  const char *end = text + strlen(text);
  const char *p = skip_space(text, end);
  if (p == trim_end(p, end))
    return dlrun_fail(DLRUN_ERR_VALUE,
                      "empty device spec \"%s\" (expected e.g. \"sim:8\", \"cpu:4\", "
                      "\"sim:8,cpu:2\" or \"auto\")",
                      text);
  if ((size_t)(trim_end(p, end) - p) == 4 && memcmp(p, "auto", 4) == 0) {
    /* The first accelerator platform present, with all its devices; else
     * eight simulated ones. */
    out->groups[0] = (dlrun_device_group){.platform = dlrun_platform_find("sim", 3), .count = 8};
    const dlrun_platform *all[DLRUN_MAX_PLATFORMS];
    size_t nall = dlrun_platform_list(all, DLRUN_MAX_PLATFORMS);
    for (size_t i = 0; i < nall; i++) {
      const dlrun_platform *pl = all[i];
      char why[160];
      size_t n = 0;
      if (pl->is_accelerator && pl->probe && pl->probe(true, &n, why, sizeof why) && n > 0) {
        out->groups[0] = (dlrun_device_group){.platform = pl, .count = n};
        break;
      }
    }
    out->ngroups = 1;
    return DLRUN_OK;
  }
  size_t total = 0;
  while (p <= end) {
    const char *comma = memchr(p, ',', (size_t)(end - p));
    const char *stop = comma ? comma : end;
    if (out->ngroups == sizeof out->groups / sizeof out->groups[0])
      return dlrun_fail(DLRUN_ERR_VALUE, "invalid device spec \"%s\": too many entries", text);
    dlrun_status st = parse_entry(text, p, stop, out);
    if (st) return st;
    total += out->groups[out->ngroups - 1].count;
    if (!comma) break;
    p = comma + 1;
  }
  if (total > DLRUN_MAX_DEVICES)
    return dlrun_fail(DLRUN_ERR_VALUE, "device spec \"%s\" asks for %zu devices (at most %d)",
                      text, total, DLRUN_MAX_DEVICES);
  return DLRUN_OK;
}

void dlrun_complete_device_spec(dlrun_device_spec *spec) {
  for (size_t g = 0; g < spec->ngroups; g++)
    if (strcmp(spec->groups[g].platform->name, "cpu") == 0) return;
  /* A group per registered platform at most, cpu among them: without cpu
   * there is always room for it. */
  if (spec->ngroups >= sizeof spec->groups / sizeof spec->groups[0]) return;
  spec->groups[spec->ngroups++] =
      (dlrun_device_group){.platform = dlrun_platform_find("cpu", 3), .count = 1};
}

const char *dlrun_format_device_spec(const dlrun_device_spec *spec, char *buf, size_t n) {
  size_t used = 0;
  buf[0] = 0;
  for (size_t g = 0; g < spec->ngroups && used < n; g++)
    used += (size_t)snprintf(buf + used, n - used, "%s%s:%zu", g ? "," : "",
                             spec->groups[g].platform->name, spec->groups[g].count);
  return buf;
}

dlrun_status dlrun_check_device_spec(const char *spec) {
  dlrun_device_spec parsed;
  return dlrun_parse_device_spec(spec, &parsed);
}

typedef struct unit {
  const char *name;
  double factor;
} unit;

static const unit units[] = {
    {"", 1.0},           {"B", 1.0},
    {"KiB", 1024.0},     {"MiB", 1048576.0},       {"GiB", 1073741824.0},
    {"TiB", 1099511627776.0},
    {"kB", 1e3},         {"KB", 1e3},              {"MB", 1e6},
    {"GB", 1e9},         {"TB", 1e12},
    {"K", 1024.0},       {"M", 1048576.0},         {"G", 1073741824.0},
    {"T", 1099511627776.0},
};

dlrun_status dlrun_parse_size(const char *text, uint64_t *out) {
  DLRUN_NONNULL(out, "dlrun_parse_size", "out");
  if (!text) return dlrun_fail(DLRUN_ERR_VALUE, "memory size is missing");
  const char *p = text;
  while (isspace((unsigned char)*p)) p++;
  char *num_end;
  errno = 0;
  double v = strtod(p, &num_end);
  if (num_end == p || errno || !isfinite(v) || *p == '-' || *p == '+' ||
      (num_end - p >= 2 && (p[1] == 'x' || p[1] == 'X')))
    goto bad;
  const char *u = num_end;
  while (isspace((unsigned char)*u)) u++;
  const char *u_end = u + strlen(u);
  while (u_end > u && isspace((unsigned char)u_end[-1])) u_end--;
  for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
    if (strlen(units[i].name) != (size_t)(u_end - u) ||
        memcmp(units[i].name, u, (size_t)(u_end - u)) != 0)
      continue;
    double bytes = floor(v * units[i].factor);
    if (bytes < 1.0) goto bad;
    if (bytes >= 18446744073709551616.0)
      return dlrun_fail(DLRUN_ERR_VALUE, "memory size \"%s\" is too large", text);
    *out = (uint64_t)bytes;
    return DLRUN_OK;
  }
bad:
  return dlrun_fail(DLRUN_ERR_VALUE,
                    "invalid memory size \"%s\" (expected a positive number with an optional "
                    "unit: B, KiB, MiB, GiB, TiB, kB, MB, GB, TB; e.g. \"2GiB\")",
                    text);
}
