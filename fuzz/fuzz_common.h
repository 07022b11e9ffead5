/* Shared helpers of the libFuzzer targets: a reader that turns the fuzzer's
 * bytes into values (reading past the end gives zeros, so every input is
 * meaningful), and FUZZ_CHECK, which aborts with a message when an
 * invariant does not hold (libFuzzer then saves the input as a crash). */
#ifndef DLRUN_FUZZ_COMMON_H
#define DLRUN_FUZZ_COMMON_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlrun/dlrun.h"

typedef struct fuzz_reader {
  const uint8_t *p;
  size_t n;
} fuzz_reader;

static inline uint8_t fz_u8(fuzz_reader *r) {
  if (!r->n) return 0;
  r->n--;
  return *r->p++;
}

static inline uint16_t fz_u16(fuzz_reader *r) {
  uint16_t v = fz_u8(r);
  return (uint16_t)(v | (uint16_t)fz_u8(r) << 8);
}

static inline uint32_t fz_u32(fuzz_reader *r) {
  uint32_t v = fz_u16(r);
  return v | (uint32_t)fz_u16(r) << 16;
}

static inline uint64_t fz_u64(fuzz_reader *r) {
  uint64_t v = fz_u32(r);
  return v | (uint64_t)fz_u32(r) << 32;
}

static inline bool fz_bool(fuzz_reader *r) { return fz_u8(r) & 1; }

/* A value in [0, n) (n >= 1). */
static inline unsigned fz_below(fuzz_reader *r, unsigned n) { return fz_u8(r) % n; }

__attribute__((noreturn, format(printf, 3, 4))) static void fuzz_fail(const char *file, int line,
                                                                      const char *fmt, ...) {
  va_list ap;
  fprintf(stderr, "\n=== dlrun fuzz invariant violated at %s:%d: ", file, line);
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fprintf(stderr, "\n    last dlrun error: %s\n", dlrun_last_error());
  abort();
}

#define FUZZ_CHECK(cond, ...)                                  \
  do {                                                         \
    if (!(cond)) fuzz_fail(__FILE__, __LINE__, __VA_ARGS__);   \
  } while (0)

/* Every failing call must leave a message. */
#define FUZZ_CHECK_FAILED_WITH_MESSAGE(st)                                         \
  FUZZ_CHECK((st) != DLRUN_OK && (st) < DLRUN_STATUS_COUNT && dlrun_last_error()[0], \
             "status %d without a message", (int)(st))

/* Allocation failure injected through dlrun's test hook (dlrun/debug.h):
 * one input byte >= 0xF0 makes the k-th host (even byte) or pool (odd
 * byte) allocation of the calls under test fail; k is the next byte. The
 * hook is process-wide: the targets only arm it around calls that allocate
 * on the calling thread. */
typedef struct fuzz_fault {
  bool on;
  dlrun_alloc_kind kind;
  int64_t k;
  bool seen; /* the failure happened before the last fuzz_fault_hit */
} fuzz_fault;

static inline fuzz_fault fuzz_fault_read(fuzz_reader *r) {
  fuzz_fault f = {false, DLRUN_ALLOC_HOST, 0, false};
  uint8_t v = fz_u8(r);
  if (v < 0xF0) return f;
  f.on = true;
  f.kind = (v & 1) ? DLRUN_ALLOC_POOL : DLRUN_ALLOC_HOST;
  f.k = 1 + fz_u8(r) % 24;
  return f;
}

static inline void fuzz_fault_arm(fuzz_fault *f) {
  if (f->on) dlrun_debug_fail_alloc(f->kind, f->k);
  f->seen = false;
}

/* Whether the injected failure happened since the last call. */
static inline bool fuzz_fault_hit(fuzz_fault *f) {
  if (!f->on || f->seen || !dlrun_debug_alloc_failed(f->kind)) return false;
  f->seen = true;
  return true;
}

static inline void fuzz_fault_disarm(fuzz_fault *f) {
  if (f->on) dlrun_debug_fail_alloc(f->kind, 0);
}

/* Helpers that loop over every element are kept out of the coverage
 * feedback: their comparisons would only slow fuzzing down. */
#define FUZZ_NO_COVERAGE __attribute__((no_sanitize("coverage"), noinline))

/* Fill dst with `pattern` repeated (or a counter when it is empty). */
static inline FUZZ_NO_COVERAGE void fuzz_fill(unsigned char *dst, size_t n, const uint8_t *pattern,
                                       size_t plen) {
  if (!n) return;
  if (!plen) {
    for (size_t i = 0; i < n; i++) dst[i] = (unsigned char)(i * 131 + 7);
    return;
  }
  size_t done = plen < n ? plen : n;
  memcpy(dst, pattern, done);
  while (done < n) {
    size_t k = done < n - done ? done : n - done;
    memcpy(dst + done, dst, k);
    done += k;
  }
}

/* A runtime made once per process (never released: LeakSanitizer sees it
 * through the static pointer, so it is not a leak). */
static inline dlrun_runtime *fuzz_runtime(const char *spec) {
  dlrun_config cfg = {.devices = spec, .device_memory = 64ull << 20};
  dlrun_runtime *rt = NULL;
  dlrun_status st = dlrun_runtime_create(&cfg, &rt);
  if (st) {
    fprintf(stderr, "cannot create runtime \"%s\": %s\n", spec, dlrun_last_error());
    abort();
  }
  return rt;
}

#endif
