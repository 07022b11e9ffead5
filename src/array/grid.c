#include "grid.h"

#include <string.h>

#include "core/alloc.h"
#include "core/status_impl.h"

static size_t block_id(const dlrun_grid *g, const int64_t *k) {
  size_t id = 0;
  for (int d = 0; d < g->ndim; d++) id = id * (size_t)g->parts[d] + (size_t)k[d];
  return id;
}

dlrun_status dlrun_grid_build(const dlrun_array *a, dlrun_grid *g) {
  memset(g, 0, sizeof *g);
  g->ndim = a->ndim;
  g->nblocks = 1;
  for (int d = 0; d < a->ndim; d++) {
    g->parts[d] = dlrun_sharding_partitions(a->sharding, d);
    g->block[d] = a->shard_dims[d];
    g->nblocks *= (size_t)g->parts[d];
  }
  size_t n = a->nshards;
  size_t *ids = dlrun_malloc(n * sizeof *ids);
  g->first = dlrun_calloc(g->nblocks + 1, sizeof *g->first);
  g->holder = dlrun_malloc(n * sizeof *g->holder);
  if (!ids || !g->first || !g->holder) {
    dlrun_free(ids);
    dlrun_grid_free(g);
    return dlrun_fail_oom_host(n * 3 * sizeof(size_t));
  }
  /* Counting sort of shard positions by block, keeping sharding order. */
  int64_t lo[DLRUN_MAX_NDIM], hi[DLRUN_MAX_NDIM], k[DLRUN_MAX_NDIM];
  for (size_t i = 0; i < n; i++) {
    dlrun_sharding_shard_index(a->sharding, i, a->ndim, a->dims, lo, hi);
    for (int d = 0; d < a->ndim; d++) k[d] = g->block[d] ? lo[d] / g->block[d] : 0;
    ids[i] = block_id(g, k);
    g->first[ids[i] + 1]++;
  }
  for (size_t b = 0; b < g->nblocks; b++) g->first[b + 1] += g->first[b];
  size_t *fill = g->first; /* advanced while placing, then restored */
  for (size_t i = 0; i < n; i++) g->holder[fill[ids[i]]++] = i;
  for (size_t b = g->nblocks; b > 0; b--) g->first[b] = g->first[b - 1];
  g->first[0] = 0;
  dlrun_free(ids);
  return DLRUN_OK;
}

void dlrun_grid_free(dlrun_grid *g) {
  dlrun_free(g->first);
  dlrun_free(g->holder);
  g->first = g->holder = NULL;
}

int dlrun_grid_cover(const dlrun_grid *g, const int64_t *lo, const int64_t *hi,
                     dlrun_piece_fn fn, void *ctx) {
  int64_t k0[DLRUN_MAX_NDIM], k1[DLRUN_MAX_NDIM], k[DLRUN_MAX_NDIM];
  for (int d = 0; d < g->ndim; d++) {
    if (hi[d] <= lo[d]) return 0;
    k0[d] = lo[d] / g->block[d];
    k1[d] = (hi[d] - 1) / g->block[d];
    k[d] = k0[d];
  }
  int64_t plo[DLRUN_MAX_NDIM], phi[DLRUN_MAX_NDIM];
  for (;;) {
    for (int d = 0; d < g->ndim; d++) {
      int64_t b0 = k[d] * g->block[d], b1 = b0 + g->block[d];
      plo[d] = lo[d] > b0 ? lo[d] : b0;
      phi[d] = hi[d] < b1 ? hi[d] : b1;
    }
    size_t b = block_id(g, k);
    int stop = fn(ctx, plo, phi, g->holder + g->first[b], g->first[b + 1] - g->first[b]);
    if (stop) return stop;
    int d = g->ndim - 1;
    while (d >= 0 && ++k[d] > k1[d]) {
      k[d] = k0[d];
      d--;
    }
    if (d < 0) return 0;
  }
}
