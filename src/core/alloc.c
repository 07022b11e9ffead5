#include "alloc.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "dlrun/debug.h"
#include "status_impl.h"

/* Per kind: the allocation to fail (0: none) and the count so far. */
static atomic_int_fast64_t fail_at[2], counted[2];
static atomic_int failed[2];
static atomic_int env_read;

static void read_env(void) {
  if (atomic_exchange(&env_read, 1)) return;
  const char *names[2] = {"DLRUN_FAIL_HOST_ALLOC", "DLRUN_FAIL_POOL_ALLOC"};
  for (int k = 0; k < 2; k++) {
    const char *v = getenv(names[k]);
    if (v && *v) dlrun_debug_fail_alloc((dlrun_alloc_kind)k, strtoll(v, NULL, 10));
  }
}

int dlrun_inject_failure(int kind) {
  if (!atomic_load_explicit(&env_read, memory_order_relaxed)) read_env();
  if (!atomic_load_explicit(&fail_at[kind], memory_order_relaxed)) return 0;
  int_fast64_t n = atomic_fetch_add(&counted[kind], 1) + 1;
  if (n != atomic_load(&fail_at[kind])) return 0;
  atomic_store(&failed[kind], 1);
  return 1;
}

void dlrun_debug_fail_alloc(dlrun_alloc_kind kind, int64_t k) {
  if (kind != DLRUN_ALLOC_HOST && kind != DLRUN_ALLOC_POOL) return;
  atomic_store(&env_read, 1);
  atomic_store(&counted[kind], 0);
  atomic_store(&failed[kind], 0);
  atomic_store(&fail_at[kind], k > 0 ? k : 0);
}

int64_t dlrun_debug_alloc_count(dlrun_alloc_kind kind) {
  return kind <= DLRUN_ALLOC_POOL ? atomic_load(&counted[kind]) : 0;
}

int dlrun_debug_alloc_failed(dlrun_alloc_kind kind) {
  return kind <= DLRUN_ALLOC_POOL ? atomic_load(&failed[kind]) : 0;
}

void *dlrun_malloc(size_t n) {
  if (dlrun_inject_failure(DLRUN_ALLOC_HOST)) return NULL;
  return malloc(n ? n : 1);
}

/* Small blocks are zeroed here rather than by calloc: glibc's calloc skips
 * its per-thread cache, from which malloc serves the small objects made and
 * freed per call (an import's array, mesh and buffer). explicit_bzero, as
 * the compiler turns malloc + memset back into calloc. Large blocks keep
 * calloc's fresh zero pages. */
#define ZEROED_BY_HAND 4096

void *dlrun_calloc(size_t count, size_t size) {
  if (dlrun_inject_failure(DLRUN_ALLOC_HOST)) return NULL;
  count = count ? count : 1;
  size = size ? size : 1;
  size_t n;
  if (__builtin_mul_overflow(count, size, &n) || n > ZEROED_BY_HAND) return calloc(count, size);
  void *p = malloc(n);
  if (p) explicit_bzero(p, n);
  return p;
}

void dlrun_free(void *p) { free(p); }

dlrun_status dlrun_grow(void *array, size_t n, size_t *cap, size_t size, size_t first) {
  if (n < *cap) return DLRUN_OK;
  size_t want = *cap ? 2 * *cap : first, bytes;
  if (want < *cap || __builtin_mul_overflow(want, size, &bytes))
    return dlrun_fail_oom_host(SIZE_MAX);
  void *old, *p = dlrun_malloc(bytes);
  if (!p) return dlrun_fail_oom_host(bytes);
  memcpy(&old, array, sizeof old); /* the caller's T *, whatever T */
  if (n) memcpy(p, old, n * size);
  dlrun_free(old);
  memcpy(array, &p, sizeof p);
  *cap = want;
  return DLRUN_OK;
}

char *dlrun_strdup(const char *s) {
  size_t n = strlen(s) + 1;
  char *d = dlrun_malloc(n);
  if (d) memcpy(d, s, n);
  return d;
}

dlrun_status dlrun_fail_oom_host(size_t n) {
  return dlrun_fail(DLRUN_ERR_RESOURCE_EXHAUSTED,
                    "out of host memory allocating %zu bytes", n);
}
