/* The double's configuration, read once from the environment (README.md
 * lists the variables). A malformed value is reported on stderr and makes
 * cuInit fail with CUDA_ERROR_INVALID_VALUE, so a test never runs on a
 * configuration it did not ask for. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "double.h"

static const struct {
  const char *name, *symbol;
} entry_names[DBL_ID_COUNT] = {
#define DBL_NAME(field, name, version, symbol, params) {name, #symbol},
    DLCU_ENTRIES(DBL_NAME)
#undef DBL_NAME
};

dbl_id dbl_id_of(const char *name) {
  for (int i = 0; i < DBL_ID_COUNT; i++)
    if (strcmp(name, entry_names[i].name) == 0 || strcmp(name, entry_names[i].symbol) == 0)
      return (dbl_id)i;
  return DBL_ID_COUNT;
}

static void bad(dbl_config *cfg, const char *var, const char *value, const char *expected) {
  fprintf(stderr, "cuda double: %s=\"%s\": expected %s\n", var, value, expected);
  cfg->error = DLCU_ERROR_INVALID_VALUE;
}

/* An unsigned number with an optional K, M or G suffix (powers of 1024). */
static bool parse_size(const char *s, uint64_t *out) {
  char *end;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno || end == s || *s == '-') return false;
  int shift = 0;
  if (*end == 'K' || *end == 'k') shift = 10;
  if (*end == 'M' || *end == 'm') shift = 20;
  if (*end == 'G' || *end == 'g') shift = 30;
  if (shift) end++;
  if (*end || (shift && v >> (64 - shift))) return false;
  *out = (uint64_t)v << shift;
  return true;
}

static bool flag(const char *var) {
  const char *v = getenv(var);
  return v && *v && strcmp(v, "0") != 0;
}

/* "0-1,2-3" (pairs, both directions) or "all". */
static void parse_no_peer(dbl_config *cfg, const char *v) {
  if (strcmp(v, "all") == 0) {
    for (int i = 0; i < DBL_MAX_DEVICES; i++) cfg->no_peer[i] = ~(uint64_t)0;
    return;
  }
  const char *p = v;
  while (*p) {
    char *end;
    long a = strtol(p, &end, 10);
    if (end == p || *end != '-') goto fail;
    p = end + 1;
    long b = strtol(p, &end, 10);
    if (end == p || (*end && *end != ',') || a < 0 || b < 0 || a >= DBL_MAX_DEVICES ||
        b >= DBL_MAX_DEVICES)
      goto fail;
    cfg->no_peer[a] |= (uint64_t)1 << b;
    cfg->no_peer[b] |= (uint64_t)1 << a;
    p = *end ? end + 1 : end;
  }
  return;
fail:
  bad(cfg, "CUDA_DOUBLE_NO_PEER", v, "\"all\" or pairs of ordinals such as \"0-1,2-3\"");
}

/* "symbol:n[+][:code][:async|:sticky]", comma-separated. */
static void parse_fails(dbl_config *cfg, const char *v) {
  char buf[1024];
  snprintf(buf, sizeof buf, "%s", v);
  char *save = NULL;
  for (char *item = strtok_r(buf, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
    if (cfg->nfails == DBL_MAX_FAILS) goto fail;
    dbl_fail *f = &cfg->fails[cfg->nfails];
    *f = (dbl_fail){.code = DLCU_ERROR_UNKNOWN};
    char *save2 = NULL, *sym = strtok_r(item, ":", &save2), *n = strtok_r(NULL, ":", &save2);
    if (!sym || !n || (f->id = dbl_id_of(sym)) == DBL_ID_COUNT) goto fail;
    char *end;
    f->n = strtoul(n, &end, 10);
    if (end == n || f->n == 0) goto fail;
    f->from_n = *end == '+';
    if (*end && strcmp(end, "+") != 0) goto fail;
    for (char *more = strtok_r(NULL, ":", &save2); more; more = strtok_r(NULL, ":", &save2)) {
      if (strcmp(more, "async") == 0 || strcmp(more, "sticky") == 0) {
        f->async = true;
        f->sticky |= more[0] == 's';
        continue;
      }
      long code = strtol(more, &end, 10);
      if (end == more || *end || code <= 0) goto fail;
      f->code = (dlcu_result)code;
    }
    cfg->nfails++;
  }
  return;
fail:
  bad(cfg, "CUDA_DOUBLE_FAIL", v,
      "items \"entry:n[+][:code][:async|:sticky]\" separated by commas, entry a name of the driver API "
      "subset, n from 1");
}

void dbl_config_read(dbl_config *cfg) {
  *cfg = (dbl_config){.devices = 4, .memory = 256u << 20, .granularity = 2u << 20,
                      .version = 12080};
  const char *v;
  uint64_t n;
  if ((v = getenv("CUDA_DOUBLE_DEVICES")) && *v) {
    if (!parse_size(v, &n) || n > DBL_MAX_DEVICES || strpbrk(v, "KkMmGg"))
      bad(cfg, "CUDA_DOUBLE_DEVICES", v, "a number of devices from 0 to 64");
    else
      cfg->devices = (int)n;
  }
  if ((v = getenv("CUDA_DOUBLE_MEMORY")) && *v) {
    if (!parse_size(v, &n) || n < 4096 || n > (64ull << 30))
      bad(cfg, "CUDA_DOUBLE_MEMORY", v, "bytes per device (K, M, G suffixes), 4K to 64G");
    else
      cfg->memory = n;
  }
  if ((v = getenv("CUDA_DOUBLE_GRANULARITY")) && *v) {
    if (!parse_size(v, &n) || n < 4096 || (n & (n - 1)))
      bad(cfg, "CUDA_DOUBLE_GRANULARITY", v, "a power of two of at least 4096 bytes");
    else
      cfg->granularity = n;
  }
  if ((v = getenv("CUDA_DOUBLE_VERSION")) && *v) {
    if (!parse_size(v, &n) || n < 1000 || n > 99990 || strpbrk(v, "KkMmGg"))
      bad(cfg, "CUDA_DOUBLE_VERSION", v, "a driver version such as 12080");
    else
      cfg->version = (int)n;
  }
  cfg->no_vmm = flag("CUDA_DOUBLE_NO_VMM");
  cfg->stub = flag("CUDA_DOUBLE_STUB");
  cfg->no_proc_address = flag("CUDA_DOUBLE_NO_PROC_ADDRESS");
  cfg->report_leaks = flag("CUDA_DOUBLE_REPORT_LEAKS");
  if ((v = getenv("CUDA_DOUBLE_NO_PEER")) && *v) parse_no_peer(cfg, v);
  if ((v = getenv("CUDA_DOUBLE_FAIL")) && *v) parse_fails(cfg, v);
}
