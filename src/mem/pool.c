/* A best-fit, coalescing pool over one address range (see pool.h).
 *
 * The range is cut into chunks that tile it in address order. Each chunk is a
 * host-memory struct (`dlrun_block`) on a doubly linked list in address order,
 * so freeing merges with free neighbours in O(1). Free chunks are also kept in
 * an AVL tree ordered by (size, offset): best fit is the leftmost node whose
 * size is large enough, which is the smallest fitting chunk and, among equal
 * sizes, the lowest address. Everything is O(log n) in the number of free
 * chunks. Chunks are never left adjacent and both free, so each free chunk is
 * a maximal gap between allocated ones; in a segmented pool (pool.h) the
 * range starts as one free chunk per segment and chunks never merge across
 * a segment boundary, so no chunk, and no block, ever crosses one. */
#include "mem/pool.h"
#include "mem/pool_impl.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/alloc.h"
#include "core/status_impl.h"
#include "core/trace_impl.h"
#include "dlrun/debug.h"

#define HUMAN_CAP 32

/* With the mutex held: a trace sample of bytes_in_use, when tracing. */
static void trace_in_use(const dlrun_pool *pool) {
  if (pool->counter && dlrun_trace_enabled())
    dlrun_trace_counter(pool->counter, "bytes_in_use", pool->bytes_in_use);
}

/* ---- Free index: an intrusive AVL tree keyed by (size, offset). ---- */

static int node_height(const dlrun_block *n) { return n ? n->height : 0; }

static void node_update(dlrun_block *n) {
  int l = node_height(n->left), r = node_height(n->right);
  n->height = 1 + (l > r ? l : r);
}

static bool key_less(const dlrun_block *a, const dlrun_block *b) {
  return a->size < b->size || (a->size == b->size && a->offset < b->offset);
}

static dlrun_block *rotate_right(dlrun_block *y) {
  dlrun_block *x = y->left;
  y->left = x->right;
  x->right = y;
  node_update(y);
  node_update(x);
  return x;
}

static dlrun_block *rotate_left(dlrun_block *x) {
  dlrun_block *y = x->right;
  x->right = y->left;
  y->left = x;
  node_update(x);
  node_update(y);
  return y;
}

/* Restore the AVL property at `n` after one of its subtrees changed height by
 * at most one; returns the subtree's new root. */
static dlrun_block *rebalance(dlrun_block *n) {
  node_update(n);
  int balance = node_height(n->left) - node_height(n->right);
  if (balance > 1) {
    if (node_height(n->left->left) < node_height(n->left->right)) n->left = rotate_left(n->left);
    return rotate_right(n);
  }
  if (balance < -1) {
    if (node_height(n->right->right) < node_height(n->right->left))
      n->right = rotate_right(n->right);
    return rotate_left(n);
  }
  return n;
}

static dlrun_block *avl_insert(dlrun_block *root, dlrun_block *node) {
  if (!root) {
    node->left = node->right = NULL;
    node->height = 1;
    return node;
  }
  if (key_less(node, root))
    root->left = avl_insert(root->left, node);
  else
    root->right = avl_insert(root->right, node);
  return rebalance(root);
}

static dlrun_block *avl_remove_min(dlrun_block *root, dlrun_block **min) {
  if (!root->left) {
    *min = root;
    return root->right;
  }
  root->left = avl_remove_min(root->left, min);
  return rebalance(root);
}

/* Remove `node`, which must be in the tree (keys are unique). */
static dlrun_block *avl_remove(dlrun_block *root, dlrun_block *node) {
  if (!root) return NULL;
  if (root == node) {
    dlrun_block *left = root->left, *right = root->right, *succ;
    if (!right) return left;
    right = avl_remove_min(right, &succ);
    succ->left = left;
    succ->right = right;
    return rebalance(succ);
  }
  if (key_less(node, root))
    root->left = avl_remove(root->left, node);
  else
    root->right = avl_remove(root->right, node);
  return rebalance(root);
}

/* The smallest chunk of at least `size` bytes, lowest address on ties. */
static dlrun_block *avl_best_fit(dlrun_block *n, uint64_t size) {
  dlrun_block *best = NULL;
  while (n) {
    if (n->size >= size) {
      best = n;
      n = n->left;
    } else {
      n = n->right;
    }
  }
  return best;
}

static dlrun_block *avl_find(dlrun_block *n, const dlrun_block *key) {
  while (n && n != key) n = key_less(key, n) ? n->left : n->right;
  return n;
}

static void index_insert(dlrun_pool *pool, dlrun_block *c) {
  pool->free_root = avl_insert(pool->free_root, c);
  pool->num_free++;
}

static void index_remove(dlrun_pool *pool, dlrun_block *c) {
  pool->free_root = avl_remove(pool->free_root, c);
  pool->num_free--;
}

/* ---- Pool state helpers (all called with the mutex held). ---- */

static uint64_t round_up(uint64_t size) {
  return (size + (DLRUN_POOL_ALIGN - 1)) & ~(uint64_t)(DLRUN_POOL_ALIGN - 1);
}

/* Before the range is mapped the whole capacity counts as one free chunk, so
 * statistics do not jump at the first allocation. */
uint64_t dlrun_pool_largest_free(const dlrun_pool *pool) {
  if (!pool->base) return pool->segment ? pool->segment : pool->capacity;
  const dlrun_block *n = pool->free_root;
  if (!n) return 0;
  while (n->right) n = n->right;
  return n->size;
}

uint64_t dlrun_pool_segments(const dlrun_pool *pool) {
  return pool->segment ? (pool->capacity + pool->segment - 1) / pool->segment : 1;
}

uint64_t dlrun_pool_segment_size(const dlrun_pool *pool, uint64_t i) {
  if (!pool->segment) return pool->capacity;
  uint64_t start = i * pool->segment, left = pool->capacity - start;
  return left < pool->segment ? left : pool->segment;
}

/* Whether chunk c starts a segment: it never merges with the chunk before. */
static bool starts_segment(const dlrun_pool *pool, const dlrun_block *c) {
  return pool->segment && c->offset % pool->segment == 0;
}

/* A chunk struct, the pool's spare one first: a split and its merge, the
 * steady pattern of an allocation that comes and goes, then allocate
 * nothing on the host. */
static dlrun_block *chunk_new(dlrun_pool *pool) {
  dlrun_block *c = pool->spare;
  if (c) {
    pool->spare = NULL;
    memset(c, 0, sizeof *c);
  } else {
    c = dlrun_calloc(1, sizeof *c);
  }
  if (c) c->pool = pool;
  return c;
}

static void chunk_free(dlrun_pool *pool, dlrun_block *c) {
  if (pool->spare) dlrun_free(c);
  else pool->spare = c;
}

/* The free chunk that ends the range, if any: growing the capacity extends it. */
static uint64_t tail_free(const dlrun_pool *pool) {
  if (!pool->base) return pool->capacity;
  const dlrun_block *c = pool->first;
  while (c->next) c = c->next;
  return c->in_use ? 0 : c->size;
}

/* The one-line out-of-memory message pool.h refers to:
 *   Out of memory on <label> while allocating <size> bytes (<human size>):
 *   <in use> bytes in use of a <limit> byte limit (<human in use> of <human
 *   limit>); the largest free block is <n> bytes (<human n>) and <r> bytes
 *   (<human r>) are reserved but unallocated[; <advice>].
 * <size> is the request as made, before rounding. The advice names the
 * setting (the pool's hint) and the capacity that would fit the request. */
static dlrun_status fail_oom(const dlrun_pool *pool, uint64_t size) {
  char h_size[HUMAN_CAP], h_used[HUMAN_CAP], h_limit[HUMAN_CAP], h_free[HUMAN_CAP];
  char h_cached[HUMAN_CAP], h_need[HUMAN_CAP], advice[320] = "";
  uint64_t free_max = dlrun_pool_largest_free(pool);
  uint64_t cached = pool->bytes_reserved - pool->bytes_in_use;
  if (pool->hint) {
    uint64_t rounded = size > UINT64_MAX - DLRUN_POOL_ALIGN ? UINT64_MAX : round_up(size);
    uint64_t base = pool->capacity - tail_free(pool);
    /* A block that would cross a segment boundary starts at the next one. */
    if (pool->segment && base / pool->segment != (base + rounded - 1) / pool->segment)
      base = (base / pool->segment + 1) * pool->segment;
    uint64_t need = rounded > UINT64_MAX - base ? UINT64_MAX : base + rounded;
    /* A capacity a person would type: whole MiB, or whole 4 KiB below that. */
    uint64_t unit = need > (1u << 20) ? (1u << 20) : 4096;
    if (need <= UINT64_MAX - unit) need = (need + unit - 1) / unit * unit;
    bool fragmented = pool->capacity - pool->bytes_in_use >= rounded;
    snprintf(advice, sizeof advice, "; %sraise %s to at least %llu bytes (%s)",
             fragmented ? "the free memory is fragmented: free arrays no longer needed, or " : "",
             pool->hint, (unsigned long long)need, dlrun_format_bytes(need, h_need, sizeof h_need));
  }
  return dlrun_fail(
      DLRUN_ERR_RESOURCE_EXHAUSTED,
      "Out of memory on %s while allocating %llu bytes (%s): %llu bytes in use "
      "of a %llu byte limit (%s of %s); the largest free block is %llu bytes (%s) and %llu "
      "bytes (%s) are reserved but unallocated%s.",
      pool->label, (unsigned long long)size, dlrun_format_bytes(size, h_size, sizeof h_size),
      (unsigned long long)pool->bytes_in_use, (unsigned long long)pool->capacity,
      dlrun_format_bytes(pool->bytes_in_use, h_used, sizeof h_used),
      dlrun_format_bytes(pool->capacity, h_limit, sizeof h_limit), (unsigned long long)free_max,
      dlrun_format_bytes(free_max, h_free, sizeof h_free), (unsigned long long)cached,
      dlrun_format_bytes(cached, h_cached, sizeof h_cached), advice);
}

/* A request larger than the segment: no free memory could ever hold it. */
static dlrun_status fail_segment(const dlrun_pool *pool, uint64_t size) {
  char h_size[HUMAN_CAP], h_segment[HUMAN_CAP];
  return dlrun_fail(DLRUN_ERR_RESOURCE_EXHAUSTED,
                    "Out of memory on %s while allocating %llu bytes (%s): the request exceeds "
                    "the largest block %s can hold (%llu bytes, %s: the device's maximum "
                    "allocation).",
                    pool->label, (unsigned long long)size,
                    dlrun_format_bytes(size, h_size, sizeof h_size), pool->label,
                    (unsigned long long)pool->segment,
                    dlrun_format_bytes(pool->segment, h_segment, sizeof h_segment));
}

static void free_chunk_list(dlrun_block *c) {
  while (c) {
    dlrun_block *next = c->next;
    dlrun_free(c);
    c = next;
  }
}

/* Map the range and make it one free chunk (one per segment), on first use
 * only. The chunk structs are allocated first so that a host failure leaves
 * nothing mapped. */
dlrun_status dlrun_pool_ensure_mapped(dlrun_pool *pool) {
  if (pool->base) return DLRUN_OK;
  char human[HUMAN_CAP];
  if (pool->capacity > SIZE_MAX)
    return dlrun_fail(DLRUN_ERR_RESOURCE_EXHAUSTED,
                      "cannot reserve %llu bytes (%s) for %s: larger than the address space",
                      (unsigned long long)pool->capacity,
                      dlrun_format_bytes(pool->capacity, human, sizeof human), pool->label);
  dlrun_block *first = NULL, *last = NULL;
  uint64_t nseg = dlrun_pool_segments(pool);
  for (uint64_t i = 0; i < nseg; i++) {
    dlrun_block *c = chunk_new(pool);
    if (!c) {
      free_chunk_list(first);
      return dlrun_fail_oom_host(sizeof *c);
    }
    c->offset = i * pool->segment;
    c->size = dlrun_pool_segment_size(pool, i);
    c->prev = last;
    if (last) last->next = c;
    else first = c;
    last = c;
  }
  void *p;
  dlrun_status st = pool->source.reserve(pool->source.ctx, pool->capacity, &p);
  if (st) {
    free_chunk_list(first);
    return dlrun_fail_prefix(st, "%s: ", pool->label);
  }
  pool->base = p;
  pool->first = first;
  for (dlrun_block *c = first; c; c = c->next) index_insert(pool, c);
  return DLRUN_OK;
}

/* Cut `c` down to `size` bytes; the tail becomes the free chunk `rest`. */
static void split(dlrun_pool *pool, dlrun_block *c, uint64_t size, dlrun_block *rest) {
  rest->offset = c->offset + size;
  rest->size = c->size - size;
  rest->prev = c;
  rest->next = c->next;
  if (c->next) c->next->prev = rest;
  c->next = rest;
  c->size = size;
  index_insert(pool, rest);
}

static void mark_allocated(dlrun_pool *pool, dlrun_block *c, uint64_t requested, void *tag) {
  c->in_use = true;
  c->tag = tag;
  c->requested_size = requested;
  pool->bytes_in_use += c->size;
  pool->requested_bytes_in_use += requested;
  pool->num_allocs++;
  pool->num_live_allocs++;
  if (pool->bytes_in_use > pool->peak_bytes_in_use) pool->peak_bytes_in_use = pool->bytes_in_use;
  if (c->size > pool->largest_alloc_size) pool->largest_alloc_size = c->size;
  if (c->offset + c->size > pool->bytes_reserved) pool->bytes_reserved = c->offset + c->size;
}

static dlrun_status alloc_locked(dlrun_pool *pool, uint64_t size, void *tag, dlrun_block **out) {
  if (size == 0) return dlrun_fail(DLRUN_ERR_VALUE, "cannot allocate 0 bytes on %s", pool->label);
  if (pool->segment && size > pool->segment) return fail_segment(pool, size);
  /* capacity is a multiple of 256, so rounding a size <= capacity cannot wrap. */
  if (size > pool->capacity) return fail_oom(pool, size);
  uint64_t rounded = round_up(size);
  dlrun_status st = dlrun_pool_ensure_mapped(pool);
  if (st != DLRUN_OK) return st;
  dlrun_block *c = avl_best_fit(pool->free_root, rounded);
  if (!c) return fail_oom(pool, size);
  /* Get the remainder's struct before touching anything, so failure is clean. */
  dlrun_block *rest = NULL;
  if (c->size > rounded) {
    rest = chunk_new(pool);
    if (!rest) return dlrun_fail_oom_host(sizeof *rest);
  }
  index_remove(pool, c);
  if (rest) split(pool, c, rounded, rest);
  mark_allocated(pool, c, size, tag);
  *out = c;
  return DLRUN_OK;
}

/* Fold `src` (the chunk right after `dst`) into `dst` and drop its struct. */
static void absorb(dlrun_block *dst, dlrun_block *src) {
  dst->size += src->size;
  dst->next = src->next;
  if (src->next) src->next->prev = dst;
  chunk_free(dst->pool, src);
}

static void free_locked(dlrun_pool *pool, dlrun_block *c) {
  pool->bytes_in_use -= c->size;
  pool->requested_bytes_in_use -= c->requested_size;
  pool->num_live_allocs--;
  c->in_use = false;
  c->requested_size = 0;
  c->tag = NULL;
  if (c->next && !c->next->in_use && !starts_segment(pool, c->next)) {
    index_remove(pool, c->next);
    absorb(c, c->next);
  }
  if (c->prev && !c->prev->in_use && !starts_segment(pool, c)) {
    dlrun_block *p = c->prev;
    index_remove(pool, p);
    absorb(p, c);
    c = p;
  }
  index_insert(pool, c);
}

/* ---- Public functions. ---- */

/* The default range source: anonymous memory. */
static dlrun_status anon_reserve(void *ctx, uint64_t size, void **base) {
  (void)ctx;
  return dlrun_map_range(size, true, base);
}

static void anon_release(void *ctx, void *base, uint64_t size) {
  (void)ctx;
  dlrun_unmap_range(base, size);
}

static dlrun_status anon_commit(void *ctx, void *data, uint64_t size) {
  (void)ctx;
  return dlrun_commit_range(data, size);
}

static uint64_t anon_decommit(void *ctx, void *data, uint64_t size) {
  (void)ctx;
  return dlrun_decommit_range(data, size);
}

dlrun_status dlrun_pool_create(const char *label, uint64_t capacity, dlrun_pool **out) {
  return dlrun_pool_create_with(label, capacity, NULL, out);
}

dlrun_status dlrun_pool_create_with(const char *label, uint64_t capacity,
                                    const dlrun_range_source *source, dlrun_pool **out) {
  if (!out) return dlrun_fail(DLRUN_ERR_VALUE, "dlrun_pool_create: out must not be NULL");
  *out = NULL;
  if (!label) return dlrun_fail(DLRUN_ERR_VALUE, "dlrun_pool_create: label must not be NULL");
  uint64_t rounded = capacity & ~(uint64_t)(DLRUN_POOL_ALIGN - 1);
  if (rounded == 0)
    return dlrun_fail(DLRUN_ERR_VALUE, "pool capacity for %s must be at least %u bytes, got %llu",
                      label, DLRUN_POOL_ALIGN, (unsigned long long)capacity);
  uint64_t segment = source ? source->segment : 0;
  if (segment % DLRUN_POOL_ALIGN)
    return dlrun_fail(DLRUN_ERR_VALUE,
                      "the segment of pool %s must be a multiple of %u bytes, got %llu", label,
                      DLRUN_POOL_ALIGN, (unsigned long long)segment);
  dlrun_pool *pool = dlrun_calloc(1, sizeof *pool);
  if (!pool) return dlrun_fail_oom_host(sizeof *pool);
  pool->label = dlrun_strdup(label);
  if (!pool->label) {
    dlrun_free(pool);
    return dlrun_fail_oom_host(strlen(label) + 1);
  }
  if (pthread_mutex_init(&pool->mu, NULL) != 0) {
    dlrun_free(pool->label);
    dlrun_free(pool);
    return dlrun_fail(DLRUN_ERR_RESOURCE_EXHAUSTED, "cannot create the mutex of pool %s", label);
  }
  pool->capacity = rounded;
  pool->segment = segment < rounded ? segment : 0;
  pool->source = source ? *source
                        : (dlrun_range_source){anon_reserve, anon_release, NULL, anon_commit,
                                               anon_decommit, 0};
  *out = pool;
  return DLRUN_OK;
}

void dlrun_pool_destroy(dlrun_pool *pool) {
  if (!pool) return;
  pthread_mutex_lock(&pool->mu);
  free_chunk_list(pool->first);
  dlrun_free(pool->spare);
  if (pool->base) pool->source.release(pool->source.ctx, pool->base, pool->capacity);
  pthread_mutex_unlock(&pool->mu);
  pthread_mutex_destroy(&pool->mu);
  dlrun_free(pool->label);
  dlrun_free(pool->hint);
  dlrun_free(pool->counter);
  dlrun_free(pool);
}

dlrun_status dlrun_pool_alloc(dlrun_pool *pool, uint64_t size, dlrun_block **out_block) {
  return dlrun_pool_alloc_tagged(pool, size, NULL, out_block);
}

dlrun_status dlrun_pool_alloc_tagged(dlrun_pool *pool, uint64_t size, void *tag,
                                     dlrun_block **out_block) {
  if (!out_block)
    return dlrun_fail(DLRUN_ERR_VALUE, "dlrun_pool_alloc: out_block must not be NULL");
  *out_block = NULL;
  if (!pool) return dlrun_fail(DLRUN_ERR_VALUE, "dlrun_pool_alloc: pool must not be NULL");
  if (dlrun_inject_failure(DLRUN_ALLOC_POOL))
    return dlrun_fail(DLRUN_ERR_RESOURCE_EXHAUSTED,
                      "Out of memory on %s while allocating %llu bytes (injected failure)",
                      pool->label, (unsigned long long)size);
  pthread_mutex_lock(&pool->mu);
  dlrun_status st = alloc_locked(pool, size, tag, out_block);
  if (!st) trace_in_use(pool);
  pthread_mutex_unlock(&pool->mu);
  return st;
}

void dlrun_pool_free(dlrun_pool *pool, dlrun_block *block) {
  if (!pool || !block) return;
  pthread_mutex_lock(&pool->mu);
  /* A second free of a chunk that still exists would corrupt the index. */
  if (block->pool == pool && block->in_use) {
    free_locked(pool, block);
    trace_in_use(pool);
  }
  pthread_mutex_unlock(&pool->mu);
}

/* A live chunk's fields do not change until it is freed, and the range base
 * is set before any chunk exists, so these need no lock. */
void *dlrun_block_ptr(const dlrun_block *block) { return block->pool->base + block->offset; }

uint64_t dlrun_block_size(const dlrun_block *block) { return block->size; }

void dlrun_pool_get_stats(dlrun_pool *pool, dlrun_pool_stats *out) {
  pthread_mutex_lock(&pool->mu);
  out->bytes_in_use = pool->bytes_in_use;
  out->peak_bytes_in_use = pool->peak_bytes_in_use;
  out->bytes_limit = pool->capacity;
  out->bytes_reserved = pool->bytes_reserved;
  out->num_allocs = pool->num_allocs;
  out->num_live_allocs = pool->num_live_allocs;
  out->largest_alloc_size = pool->largest_alloc_size;
  out->largest_free_block_bytes = dlrun_pool_largest_free(pool);
  out->free_bytes = pool->capacity - pool->bytes_in_use;
  out->requested_bytes_in_use = pool->requested_bytes_in_use;
  /* Segmented: the most one free block could hold is a segment. */
  uint64_t whole = pool->segment && pool->segment < out->free_bytes ? pool->segment
                                                                    : out->free_bytes;
  out->fragmentation =
      whole ? 1.0 - (double)out->largest_free_block_bytes / (double)whole : 0.0;
  pthread_mutex_unlock(&pool->mu);
}

size_t dlrun_pool_free_chunk_count(dlrun_pool *pool) {
  pthread_mutex_lock(&pool->mu);
  /* unmapped: one logical free chunk per segment */
  size_t n = pool->base ? pool->num_free : (size_t)dlrun_pool_segments(pool);
  pthread_mutex_unlock(&pool->mu);
  return n;
}

/* ---- Invariant checks (for tests). ---- */

static dlrun_status broken(const dlrun_pool *pool, const char *what, const dlrun_block *c) {
  if (!c) return dlrun_fail(DLRUN_ERR_RUNTIME, "pool %s is inconsistent: %s", pool->label, what);
  return dlrun_fail(DLRUN_ERR_RUNTIME,
                    "pool %s is inconsistent: %s (chunk at offset %llu, size %llu)", pool->label,
                    what, (unsigned long long)c->offset, (unsigned long long)c->size);
}

/* Validate the subtree at `n`: order within (lo, hi), AVL heights and balance,
 * and that every node is a free chunk of this pool. Counts nodes into *count;
 * returns the first offending node and sets *what, or NULL. */
static const dlrun_block *check_tree(const dlrun_pool *pool, const dlrun_block *n,
                                     const dlrun_block *lo, const dlrun_block *hi, size_t *count,
                                     const char **what) {
  if (!n) return NULL;
  (*count)++;
  if (n->pool != pool || n->in_use) return *what = "the free index holds an allocated chunk", n;
  if ((lo && !key_less(lo, n)) || (hi && !key_less(n, hi)))
    return *what = "the free index is out of (size, offset) order", n;
  const dlrun_block *bad = check_tree(pool, n->left, lo, n, count, what);
  if (!bad) bad = check_tree(pool, n->right, n, hi, count, what);
  if (bad) return bad;
  int l = node_height(n->left), r = node_height(n->right);
  if (n->height != 1 + (l > r ? l : r)) return *what = "a free index height is stale", n;
  if (l - r > 1 || r - l > 1) return *what = "the free index is unbalanced", n;
  return NULL;
}

/* Totals gathered by walking the chunk list. */
typedef struct chunk_totals {
  uint64_t in_use, requested, live, free_chunks;
} chunk_totals;

/* One chunk's local invariants, given the offset it must start at. */
static const char *check_chunk(const dlrun_pool *pool, const dlrun_block *c,
                               const dlrun_block *prev, uint64_t expected_offset) {
  if (c->pool != pool) return "a chunk belongs to another pool";
  if (c->prev != prev) return "a chunk's prev link is wrong";
  if (c->offset != expected_offset) return "chunks are not contiguous in address order";
  if (c->offset % DLRUN_POOL_ALIGN) return "a chunk offset is not 256-aligned";
  if (c->size == 0 || c->size % DLRUN_POOL_ALIGN)
    return "a chunk size is not a positive multiple of 256";
  if (c->size > pool->capacity - c->offset) return "a chunk runs past the end of the range";
  if (!c->in_use && prev && !prev->in_use && !starts_segment(pool, c))
    return "two adjacent chunks are both free";
  if (pool->segment && c->offset / pool->segment != (c->offset + c->size - 1) / pool->segment)
    return "a chunk crosses a segment boundary";
  if (c->in_use && (c->requested_size == 0 || round_up(c->requested_size) != c->size))
    return "an allocated chunk's size is not its requested size rounded up";
  if (!c->in_use && c->requested_size != 0) return "a free chunk has a requested size";
  if (!c->in_use && avl_find(pool->free_root, c) != c)
    return "a free chunk is missing from the free index";
  return NULL;
}

static dlrun_status check_chunks(const dlrun_pool *pool, chunk_totals *t) {
  uint64_t offset = 0;
  const dlrun_block *prev = NULL;
  for (const dlrun_block *c = pool->first; c; prev = c, c = c->next) {
    const char *what = check_chunk(pool, c, prev, offset);
    if (what) return broken(pool, what, c);
    offset += c->size;
    if (c->in_use) {
      t->in_use += c->size;
      t->requested += c->requested_size;
      t->live++;
    } else {
      t->free_chunks++;
    }
  }
  if (offset != pool->capacity)
    return broken(pool, "chunks do not cover exactly the capacity", prev);
  return DLRUN_OK;
}

static dlrun_status check_stats(const dlrun_pool *pool, const chunk_totals *t) {
  if (t->in_use != pool->bytes_in_use)
    return broken(pool, "bytes_in_use differs from the allocated chunks", NULL);
  if (t->requested != pool->requested_bytes_in_use)
    return broken(pool, "requested_bytes_in_use differs from the allocated chunks", NULL);
  if (t->live != pool->num_live_allocs)
    return broken(pool, "num_live_allocs differs from the allocated chunks", NULL);
  if (pool->num_live_allocs > pool->num_allocs)
    return broken(pool, "num_live_allocs exceeds num_allocs", NULL);
  if (pool->peak_bytes_in_use < pool->bytes_in_use)
    return broken(pool, "peak_bytes_in_use is below bytes_in_use", NULL);
  if (pool->bytes_reserved > pool->capacity)
    return broken(pool, "bytes_reserved exceeds the capacity", NULL);
  return DLRUN_OK;
}

static dlrun_status check_locked(const dlrun_pool *pool) {
  if (!pool->base) {
    if (pool->first || pool->free_root || pool->num_free || pool->bytes_in_use ||
        pool->num_live_allocs)
      return broken(pool, "an unmapped pool has chunks or allocations", NULL);
    return DLRUN_OK;
  }
  if (!pool->first) return broken(pool, "a mapped pool has no chunks", NULL);
  /* The tree first: the chunk walk searches it. */
  size_t nodes = 0;
  const char *what = NULL;
  const dlrun_block *bad = check_tree(pool, pool->free_root, NULL, NULL, &nodes, &what);
  if (bad) return broken(pool, what, bad);
  chunk_totals t = {0, 0, 0, 0};
  dlrun_status st = check_chunks(pool, &t);
  if (st == DLRUN_OK) st = check_stats(pool, &t);
  if (st != DLRUN_OK) return st;
  /* Every free chunk was found in the tree; equal counts make the sets equal. */
  if (nodes != t.free_chunks || nodes != pool->num_free)
    return broken(pool, "the free index and the free chunks differ in number", NULL);
  return DLRUN_OK;
}

dlrun_status dlrun_pool_check(dlrun_pool *pool) {
  pthread_mutex_lock(&pool->mu);
  dlrun_status st = check_locked(pool);
  pthread_mutex_unlock(&pool->mu);
  return st;
}

bool dlrun_pool_fits(dlrun_pool *pool, uint64_t size) {
  dlrun_pool_stats s;
  dlrun_pool_get_stats(pool, &s);
  uint64_t rounded = (size + DLRUN_POOL_ALIGN - 1) & ~(uint64_t)(DLRUN_POOL_ALIGN - 1);
  return rounded >= size && rounded <= s.largest_free_block_bytes;
}
