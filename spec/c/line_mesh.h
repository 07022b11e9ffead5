/* For C tests: n devices of one platform of a runtime on a 1-D mesh "x",
 * with the row and the column sharding of 2-D arrays over it. */
#ifndef DLRUN_SPEC_LINE_MESH_H
#define DLRUN_SPEC_LINE_MESH_H

#include <stdbool.h>

#include "dlrun/dlrun.h"

typedef struct line_mesh {
  dlrun_mesh *mesh;
  dlrun_sharding *rows, *cols; /* P('x'), P(None, 'x') */
} line_mesh;

/* False (with dlrun_last_error) when a part cannot be made; line_mesh_free
 * frees what was, either way. n is at most 128. */
static inline bool line_mesh_make(dlrun_runtime *rt, const char *platform, size_t n,
                                  line_mesh *l) {
  *l = (line_mesh){0};
  dlrun_device *devs[128];
  if (n > 128) return false;
  for (size_t i = 0; i < n; i++) devs[i] = dlrun_device_get(rt, platform, i);
  const char *names[1] = {"x"};
  int64_t sizes[1] = {(int64_t)n};
  dlrun_partition_spec rows = {.nentries = 1, .entries = {{.naxes = 1, .axes = {"x"}}}};
  dlrun_partition_spec cols = {.nentries = 2,
                               .entries = {{.naxes = 0}, {.naxes = 1, .axes = {"x"}}}};
  bool ok = dlrun_mesh_create(devs, n, 1, names, sizes, &l->mesh) == DLRUN_OK &&
            dlrun_named_sharding_create(l->mesh, &rows, DLRUN_MEM_DEVICE, &l->rows) == DLRUN_OK &&
            dlrun_named_sharding_create(l->mesh, &cols, DLRUN_MEM_DEVICE, &l->cols) == DLRUN_OK;
  return ok;
}

static inline void line_mesh_free(line_mesh *l) {
  dlrun_sharding_release(l->rows);
  dlrun_sharding_release(l->cols);
  dlrun_mesh_release(l->mesh);
  *l = (line_mesh){0};
}

#endif
