/* Internal: the block grid of a sharded array, for planning copies.
 *
 * A sharding cuts each dimension d into parts[d] equal blocks; every block
 * is held by one or more shards (replicas). The grid lists, per block, the
 * shard positions holding it, so that any box of the array can be covered
 * by pieces each taken from one shard. */
#ifndef DLRUN_GRID_H
#define DLRUN_GRID_H

#include "array_impl.h"

typedef struct dlrun_grid {
  int ndim;
  int64_t parts[DLRUN_MAX_NDIM];
  int64_t block[DLRUN_MAX_NDIM]; /* block extent per dimension */
  size_t nblocks;
  size_t *first;  /* holders of block b: holder[first[b] .. first[b + 1]) */
  size_t *holder; /* shard positions, in sharding order */
} dlrun_grid;

dlrun_status dlrun_grid_build(const dlrun_array *a, dlrun_grid *g);
void dlrun_grid_free(dlrun_grid *g);

/* Called for each block meeting the box: the piece [lo, hi) of the box in
 * that block, and the block's holders. Returns nonzero to stop. */
typedef int (*dlrun_piece_fn)(void *ctx, const int64_t *lo, const int64_t *hi,
                              const size_t *holders, size_t nholders);

/* Cover the box [lo, hi) (global coordinates). Returns what fn returned to
 * stop, else 0. Empty boxes call nothing. */
int dlrun_grid_cover(const dlrun_grid *g, const int64_t *lo, const int64_t *hi,
                     dlrun_piece_fn fn, void *ctx);

#endif
