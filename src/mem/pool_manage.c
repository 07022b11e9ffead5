/* What a pool's user steers and inspects beyond allocation: preallocation,
 * giving free memory back, peak reset, and walking the chunks (snapshots). */
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/alloc.h"
#include "core/status_impl.h"
#include "mem/pool.h"
#include "mem/pool_impl.h"

#define HUMAN_CAP 32

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
