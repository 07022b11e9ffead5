/* libFuzzer target: the device-spec parser and the memory-size parser.
 *
 * The input, made NUL-terminated, goes whole into dlrun_check_device_spec
 * and dlrun_parse_size. When it contains a '|', the part before goes into
 * dlrun_check_device_spec and the part after into dlrun_parse_size, and if
 * both are accepted a runtime is created from the pair (device memory
 * capped at 64 MiB) and released; without a '|', an accepted spec alone
 * creates one (default device memory). Runtimes are only created for specs
 * of at most MAX_RUNTIME_DEVICES devices.
 *
 * Oracle:
 *   - every failure leaves a message; parse_size never returns 0 bytes and
 *     leaves its output alone on failure; plain decimal integers parse to
 *     their own value;
 *   - check_device_spec agrees with the internal parser, and an accepted
 *     spec creates a runtime (unless it would be too large to create here)
 *     whose device counts are the spec's (plus the host cpu device) and
 *     whose canonical spec parses back to the same devices;
 *   - the device memory given is the accelerators' pool limit (rounded
 *     down to the pool alignment). */
#include <ctype.h>

#include "device/device_impl.h"
#include "fuzz_common.h"

/* Runtimes start worker threads and pools: keep the ones made here small. */
#define MAX_RUNTIME_DEVICES 16

static void check_size(const char *text) {
  uint64_t v = 0x5a5a5a5a5a5a5a5aull;
  dlrun_status st = dlrun_parse_size(text, &v);
  if (st) {
    FUZZ_CHECK_FAILED_WITH_MESSAGE(st);
    FUZZ_CHECK(v == 0x5a5a5a5a5a5a5a5aull, "failed parse_size wrote its output");
    return;
  }
  FUZZ_CHECK(v >= 1, "parse_size(\"%s\") gave 0 bytes", text);
  /* Plain decimal integers of up to 15 digits (exact in a double) are
   * their own value, whatever surrounding spaces. */
  const char *p = text;
  while (isspace((unsigned char)*p)) p++;
  size_t n = 0;
  while (isdigit((unsigned char)p[n])) n++;
  const char *q = p + n;
  while (isspace((unsigned char)*q)) q++;
  if (n > 0 && n <= 15 && !*q) {
    uint64_t want = strtoull(p, NULL, 10);
    FUZZ_CHECK(v == want, "parse_size(\"%s\") = %llu, expected %llu", text,
               (unsigned long long)v, (unsigned long long)want);
  }
}

static size_t spec_total(const dlrun_device_spec *s, const char *platform) {
  size_t n = 0;
  for (size_t g = 0; g < s->ngroups; g++)
    if (!platform || strcmp(s->groups[g].platform->name, platform) == 0) n += s->groups[g].count;
  return n;
}

static void check_spec(const char *spec, const char *size_text) {
  dlrun_status st = dlrun_check_device_spec(spec);
  dlrun_device_spec parsed;
  dlrun_status st2 = dlrun_parse_device_spec(spec, &parsed);
  FUZZ_CHECK(st == st2, "check_device_spec and the parser disagree on \"%s\"", spec);
  if (st) {
    FUZZ_CHECK_FAILED_WITH_MESSAGE(st);
    FUZZ_CHECK(st == DLRUN_ERR_VALUE, "bad spec \"%s\" gave status %d, not ValueError", spec,
               (int)st);
    return;
  }
  size_t total = spec_total(&parsed, NULL);
  FUZZ_CHECK(parsed.ngroups >= 1 && total >= 1 && total <= DLRUN_MAX_DEVICES,
             "accepted spec \"%s\" has %zu groups, %zu devices", spec, parsed.ngroups, total);
  if (!size_text || total > MAX_RUNTIME_DEVICES) return;

  uint64_t memory = 0;
  if (*size_text && dlrun_parse_size(size_text, &memory)) return;
  /* Pools of up to 64 MiB: they reserve lazily, but stay modest. */
  if (memory > (64ull << 20)) memory = 64ull << 20;
  dlrun_config cfg = {.devices = spec, .device_memory = memory};
  dlrun_runtime *r = NULL;
  st = dlrun_runtime_create(&cfg, &r);
  if (memory && memory < DLRUN_DEVICE_MEMORY_MIN) { /* below the smallest device memory */
    FUZZ_CHECK(st == DLRUN_ERR_VALUE, "runtime_create accepted %llu bytes of device memory",
               (unsigned long long)memory);
    FUZZ_CHECK_FAILED_WITH_MESSAGE(st);
    FUZZ_CHECK(r == NULL, "failed runtime_create left *out set");
    return;
  }
  FUZZ_CHECK(st == DLRUN_OK, "runtime_create(\"%s\", %llu) failed", spec,
             (unsigned long long)memory);
  size_t sims = spec_total(&parsed, "sim"), cpus = spec_total(&parsed, "cpu");
  FUZZ_CHECK(dlrun_device_count(r, "sim") == sims, "\"%s\": %zu sim devices, expected %zu", spec,
             dlrun_device_count(r, "sim"), sims);
  FUZZ_CHECK(dlrun_device_count(r, "cpu") == (cpus ? cpus : 1),
             "\"%s\": %zu cpu devices, expected %zu", spec, dlrun_device_count(r, "cpu"),
             cpus ? cpus : 1);
  FUZZ_CHECK(dlrun_host_device(r) != NULL, "no host device");
  FUZZ_CHECK(strcmp(dlrun_default_backend(r), sims ? "sim" : "cpu") == 0,
             "default backend %s", dlrun_default_backend(r));
  for (size_t i = 0; i < sims; i++) {
    dlrun_device *d = dlrun_device_get(r, "sim", i);
    FUZZ_CHECK(d && dlrun_device_id(d) == (int)i, "sim device %zu missing or misnumbered", i);
    FUZZ_CHECK(dlrun_device_runtime(d) == r, "device of another runtime");
    if (memory) {
      dlrun_memory_stats ms;
      FUZZ_CHECK(dlrun_device_memory_stats(d, DLRUN_MEM_DEVICE, &ms) == DLRUN_OK, "memory stats");
      FUZZ_CHECK(ms.bytes_limit == (memory & ~(uint64_t)(DLRUN_POOL_ALIGN - 1)),
                 "device memory %llu asked, limit %llu", (unsigned long long)memory,
                 (unsigned long long)ms.bytes_limit);
    }
  }
  FUZZ_CHECK(dlrun_device_get(r, "sim", sims) == NULL, "a sim device past the end");
  /* The canonical spec names the same devices. */
  const char *canon = dlrun_runtime_spec(r);
  dlrun_device_spec again;
  FUZZ_CHECK(dlrun_parse_device_spec(canon, &again) == DLRUN_OK, "canonical spec \"%s\" of \"%s\" "
             "does not parse", canon, spec);
  FUZZ_CHECK(spec_total(&again, "sim") == sims && spec_total(&again, "cpu") == (cpus ? cpus : 1),
             "canonical spec \"%s\" of \"%s\" names other devices", canon, spec);
  dlrun_runtime_release(r);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  /* Only what the input says counts. */
  unsetenv("DLRUN_DEVICE_MEMORY");
  unsetenv("DLRUN_DEVICES");
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > 4096) return 0;
  char *text = malloc(size + 1);
  memcpy(text, data, size);
  text[size] = 0;
  check_size(text);
  char *bar = strchr(text, '|');
  if (bar) {
    *bar = 0;
    check_size(bar + 1);
    check_spec(text, bar + 1);
  } else {
    check_spec(text, "");
  }
  free(text);
  return 0;
}
