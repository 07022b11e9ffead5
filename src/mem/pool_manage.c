/* What a pool's user steers and inspects beyond allocation: preallocation,
 * giving free memory back, peak reset, and walking the chunks (snapshots). */
#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/alloc.h"
#include "core/status_impl.h"
#include "core/trace_impl.h"
#include "mem/pool.h"
#include "mem/pool_impl.h"

#define HUMAN_CAP 32

dlrun_status dlrun_commit_range(void *base, uint64_t size) {
#ifdef MADV_POPULATE_WRITE
  if (madvise(base, (size_t)size, MADV_POPULATE_WRITE) == 0) return DLRUN_OK;
  if (errno != EINVAL) {
    char human[HUMAN_CAP];
    return dlrun_fail(DLRUN_ERR_RESOURCE_EXHAUSTED, "cannot commit %llu bytes (%s): %s",
                      (unsigned long long)size, dlrun_format_bytes(size, human, sizeof human),
                      strerror(errno));
  }
#endif
  /* An older kernel: touch every page (the OOM killer, not an error, if RAM is short). */
  long page = sysconf(_SC_PAGESIZE);
  for (uint64_t at = 0; at < size; at += (uint64_t)page) ((volatile unsigned char *)base)[at] = 0;
  return DLRUN_OK;
}

/* Resident pages of [base, base + size), counted in steps so that the
 * vector mincore fills stays small. */
static uint64_t resident_bytes(unsigned char *base, uint64_t size, uint64_t page) {
  unsigned char vec[4096];
  uint64_t n = 0, step = sizeof vec * page;
  for (uint64_t at = 0; at < size; at += step) {
    uint64_t len = size - at < step ? size - at : step;
    if (mincore(base + at, (size_t)len, vec) != 0) return size; /* unknown: say all */
    for (uint64_t i = 0; i < (len + page - 1) / page; i++) n += vec[i] & 1;
  }
  return n * page;
}

uint64_t dlrun_decommit_range(void *base, uint64_t size) {
  if (!size) return 0;
  uint64_t held = resident_bytes(base, size, (uint64_t)sysconf(_SC_PAGESIZE));
  madvise(base, (size_t)size, MADV_DONTNEED);
  return held;
}

dlrun_status dlrun_pool_set_hint(dlrun_pool *pool, const char *hint) {
  char *copy = NULL;
  if (hint && !(copy = dlrun_strdup(hint))) return dlrun_fail_oom_host(strlen(hint) + 1);
  pthread_mutex_lock(&pool->mu);
  dlrun_free(pool->hint);
  pool->hint = copy;
  pthread_mutex_unlock(&pool->mu);
  return DLRUN_OK;
}

dlrun_status dlrun_pool_set_counter(dlrun_pool *pool, const char *name) {
  char *copy = NULL;
  if (name && !(copy = dlrun_strdup(name))) return dlrun_fail_oom_host(strlen(name) + 1);
  pthread_mutex_lock(&pool->mu);
  dlrun_free(pool->counter);
  pool->counter = copy;
  pthread_mutex_unlock(&pool->mu);
  return DLRUN_OK;
}

void dlrun_pool_trace(const dlrun_pool *pool) {
  if (pool->counter && dlrun_trace_enabled())
    dlrun_trace_counter(pool->counter, "bytes_in_use", pool->bytes_in_use);
}

dlrun_status dlrun_pool_preallocate(dlrun_pool *pool) {
  pthread_mutex_lock(&pool->mu);
  dlrun_status st = dlrun_pool_ensure_mapped(pool);
  if (!st && !pool->source.commit)
    st = dlrun_fail(DLRUN_ERR_RUNTIME, "%s cannot be preallocated: its memory has no commit",
                    pool->label);
  else if (!st && (st = pool->source.commit(pool->source.ctx, pool->base, pool->capacity)))
    st = dlrun_fail_prefix(st, "cannot preallocate %s: ", pool->label);
  if (!st) pool->bytes_reserved = pool->capacity;
  pthread_mutex_unlock(&pool->mu);
  return st;
}

uint64_t dlrun_pool_release_unused(dlrun_pool *pool) {
  uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE), released = 0, end = 0;
  pthread_mutex_lock(&pool->mu);
  if (pool->base && pool->source.decommit) {
    for (dlrun_block *c = pool->first; c; c = c->next) {
      if (c->in_use) {
        end = c->offset + c->size;
        continue;
      }
      /* Whole pages only: a page shared with a live block keeps its bytes. */
      uint64_t lo = (c->offset + page - 1) / page * page;
      uint64_t hi = c->offset + c->size, touched = (pool->bytes_reserved + page - 1) / page * page;
      if (hi > touched) hi = touched; /* beyond: never touched */
      hi = hi / page * page;
      if (hi <= lo) continue;
      released += pool->source.decommit(pool->source.ctx, pool->base + lo, hi - lo);
    }
    pool->bytes_reserved = end;
  }
  pthread_mutex_unlock(&pool->mu);
  return released;
}

void dlrun_pool_reset_peak(dlrun_pool *pool) {
  pthread_mutex_lock(&pool->mu);
  pool->peak_bytes_in_use = pool->bytes_in_use;
  uint64_t largest = 0;
  for (dlrun_block *c = pool->first; c; c = c->next)
    if (c->in_use && c->size > largest) largest = c->size;
  pool->largest_alloc_size = largest;
  pthread_mutex_unlock(&pool->mu);
}

int dlrun_pool_visit(dlrun_pool *pool, dlrun_pool_visit_fn fn, void *ctx) {
  int rc = 0;
  pthread_mutex_lock(&pool->mu);
  for (uint64_t i = 0; !pool->base && !rc && i < dlrun_pool_segments(pool); i++)
    rc = fn(ctx, i * pool->segment, dlrun_pool_segment_size(pool, i), 0, false, NULL);
  for (dlrun_block *c = pool->first; c && !rc; c = c->next)
    rc = fn(ctx, c->offset, c->size, c->requested_size, c->in_use, c->tag);
  pthread_mutex_unlock(&pool->mu);
  return rc;
}
