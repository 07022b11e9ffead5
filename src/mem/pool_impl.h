/* Internal to src/mem: the pool's structures, shared by pool.c (allocation)
 * and pool_manage.c (preallocation, release, snapshots). */
#ifndef DLRUN_POOL_IMPL_H
#define DLRUN_POOL_IMPL_H

#include <pthread.h>

#include "mem/pool.h"

struct dlrun_block {
  uint64_t offset;           /* from the start of the range; 256-aligned */
  uint64_t size;             /* multiple of 256, > 0 */
  uint64_t requested_size;   /* what the caller asked for; 0 when free */
  dlrun_block *prev, *next;  /* neighbours in address order */
  dlrun_block *left, *right; /* free index links; meaningful only when free */
  dlrun_pool *pool;
  int height;                /* AVL height of this node's subtree */
  bool in_use;
  void *tag;                 /* the allocator's owner (a buffer); NULL when free */
};

struct dlrun_pool {
  pthread_mutex_t mu;
  char *label;
  char *hint; /* the setting that sizes this pool, for OOM advice; NULL: none */
  char *counter; /* the trace counter of bytes in use; NULL: none */
  uint64_t capacity;
  unsigned char *base;    /* NULL until the first allocation maps the range */
  dlrun_range_source source; /* where the range comes from */
  uint64_t segment;       /* 0, or source.segment (< capacity): see pool.h */
  dlrun_block *first;     /* chunk at offset 0, once mapped */
  dlrun_block *free_root; /* AVL tree of free chunks by (size, offset) */
  dlrun_block *spare;     /* one chunk struct kept for the next split */
  size_t num_free;
  /* Statistics kept incrementally; see dlrun_pool_stats. */
  uint64_t bytes_in_use;
  uint64_t peak_bytes_in_use;
  uint64_t bytes_reserved;
  uint64_t num_allocs;
  uint64_t num_live_allocs;
  uint64_t largest_alloc_size;
  uint64_t requested_bytes_in_use;
};

/* With the mutex held: map the range on first use (one free chunk). */
dlrun_status dlrun_pool_ensure_mapped(dlrun_pool *pool);
/* With the mutex held: the largest free chunk (when unmapped: the capacity,
 * or the segment). */
uint64_t dlrun_pool_largest_free(const dlrun_pool *pool);
/* The number of segments (1 when unsegmented) and the size of the i-th. */
uint64_t dlrun_pool_segments(const dlrun_pool *pool);
uint64_t dlrun_pool_segment_size(const dlrun_pool *pool, uint64_t i);

#endif
