/* C tests of the __partitioned__ description (include/dlrun/partitioned.h):
 * grid, starts, locations with every replica, one tensor per partition, and
 * the one release call deleting tensors nobody took. Run under ASan and
 * valgrind by make check-asan / check-valgrind. */
#include <stdint.h>
#include <string.h>

#include "check.h"
#include "dlrun/dlrun.h"

static dlrun_runtime *rt;
static dlrun_device *devs[8];

/* An [8, 3] float32 array 0, 1, ... under P("x") of a {4, 2} mesh: 4 row
 * blocks, each held by 2 devices. */
static dlrun_array *rows_array(void) {
  const char *axes[2] = {"x", "y"};
  int64_t sizes[2] = {4, 2};
  dlrun_mesh *mesh = NULL;
  dlrun_sharding *s = NULL;
  dlrun_array *a = NULL;
  dlrun_partition_spec spec = {.nentries = 1, .entries = {{.naxes = 1, .axes = {"x"}}}};
  float data[24];
  for (int i = 0; i < 24; i++) data[i] = (float)i;
  int64_t dims[2] = {8, 3};
  if (dlrun_mesh_create(devs, 8, 2, axes, sizes, &mesh) ||
      dlrun_named_sharding_create(mesh, &spec, DLRUN_MEM_DEVICE, &s) ||
      dlrun_array_from_host(s, DLRUN_FLOAT32, 2, dims, data, sizeof data, &a))
    printf("  setup: %s\n", dlrun_last_error());
  dlrun_sharding_release(s);
  dlrun_mesh_release(mesh);
  return a;
}

static void test_describe(void) {
  TEST("a replicated row split: grid, starts, every replica, versioned shared tensors") {
    dlrun_array *a = rows_array();
    dlrun_transfer_stats stats = {0};
    dlrun_partitioned *p = NULL;
    CHECK(dlrun_array_partitioned(a, NULL, &p) == DLRUN_OK, "%s", dlrun_last_error());
    CHECK(p && p->ndim == 2 && p->shape[0] == 8 && p->shape[1] == 3, "shape");
    CHECK(p && p->tiling[0] == 4 && p->tiling[1] == 1, "tiling %lld %lld",
          p ? (long long)p->tiling[0] : -1, p ? (long long)p->tiling[1] : -1);
    CHECK(p && p->npartitions == 4 && p->nlocals == 4 && p->dtype == DLRUN_FLOAT32, "counts");
    CHECK(dlrun_live_exports(rt) == 4, "live %lld", (long long)dlrun_live_exports(rt));
    for (size_t k = 0; p && k < p->npartitions; k++) {
      dlrun_partition *q = &p->partitions[k];
      CHECK(q->position[0] == (int64_t)k && q->position[1] == 0, "position of %zu", k);
      CHECK(q->start[0] == 2 * (int64_t)k && q->start[1] == 0, "start of %zu", k);
      CHECK(q->shape[0] == 2 && q->shape[1] == 3, "shape of %zu", k);
      CHECK(q->nlocations == 2, "locations of %zu: %zu", k, q->nlocations);
      CHECK(q->locations[0].device == devs[2 * k] && q->locations[0].replica_id == 0 &&
                q->locations[1].device == devs[2 * k + 1] && q->locations[1].replica_id == 1 &&
                q->locations[0].process == 0,
            "holders of %zu", k);
      CHECK(q->data_device == devs[2 * k] && p->locals[k] == k, "data of %zu", k);
      DLManagedTensorVersioned *t = q->data.versioned;
      CHECK(t && !q->data.legacy && !q->data.copied, "versioned, shared");
      CHECK(t && (t->flags & DLPACK_FLAG_BITMASK_READ_ONLY) && t->dl_tensor.ndim == 2 &&
                t->dl_tensor.shape[0] == 2 && t->dl_tensor.shape[1] == 3,
            "tensor of %zu", k);
      /* DLPack 1.2: strides set, and the version whose rules dlrun follows. */
      CHECK(t && t->dl_tensor.strides && t->dl_tensor.strides[0] == 3 &&
                t->dl_tensor.strides[1] == 1 && t->version.major == 1 && t->version.minor == 2,
            "strides and version of %zu", k);
    }
    /* Take one tensor: the consumer deletes it, the release the rest. */
    DLManagedTensorVersioned *taken = p ? p->partitions[1].data.versioned : NULL;
    if (p) p->partitions[1].data = (dlrun_exported){0};
    dlrun_partitioned_release(p);
    CHECK(dlrun_live_exports(rt) == 1, "after release %lld", (long long)dlrun_live_exports(rt));
    if (taken) taken->deleter(taken);
    CHECK(dlrun_live_exports(rt) == 0, "after deleter");
    /* Legacy tensors copy by default, and the stats say how much. */
    dlrun_export_options legacy = {.stats = &stats};
    p = NULL;
    CHECK(dlrun_array_partitioned(a, &legacy, &p) == DLRUN_OK, "%s", dlrun_last_error());
    CHECK(p && p->partitions[0].data.legacy && p->partitions[0].data.copied, "legacy copy");
    for (size_t k = 0; p && k < p->npartitions; k++) {
      const DLManagedTensor *l = p->partitions[k].data.legacy;
      CHECK(l && l->dl_tensor.strides && l->dl_tensor.strides[0] == 3 &&
                l->dl_tensor.strides[1] == 1,
            "legacy strides of %zu", k);
    }
    CHECK(stats.bytes_moved + stats.local_bytes == 4 * 2 * 3 * sizeof(float),
          "copied %llu", (unsigned long long)(stats.bytes_moved + stats.local_bytes));
    dlrun_partitioned_release(p);
    CHECK(dlrun_live_exports(rt) == 0, "legacy released");
    dlrun_array_release(a);
  }
}

static void test_round_trip(void) {
  TEST("a partition's tensor imports wrapped, with no copy") {
    dlrun_array *a = rows_array(), *b = NULL;
    dlrun_partitioned *p = NULL;
    CHECK(dlrun_array_partitioned(a, NULL, &p) == DLRUN_OK, "%s", dlrun_last_error());
    dlrun_import_outcome how = DLRUN_IMPORT_REFUSED;
    DLManagedTensorVersioned *t = p ? p->partitions[2].data.versioned : NULL;
    if (p) p->partitions[2].data = (dlrun_exported){0};
    CHECK(dlrun_import(rt, NULL, t, NULL, &b, &how) == DLRUN_OK, "%s", dlrun_last_error());
    CHECK(how == DLRUN_IMPORT_WRAPPED && b && dlrun_array_device(b) == devs[4], "wrapped");
    float got[6] = {0};
    CHECK(b && dlrun_array_read(b, 0, sizeof got, got) == DLRUN_OK && got[0] == 12.f &&
              got[5] == 17.f,
          "rows 4-5: %g %g", got[0], got[5]);
    dlrun_array_release(b);
    dlrun_partitioned_release(p);
    dlrun_array_release(a);
    CHECK(dlrun_live_exports(rt) == 0, "none left");
  }
}

static void test_errors(void) {
  TEST("NULL arguments and deleted arrays fail, leaving nothing") {
    dlrun_partitioned *p = (dlrun_partitioned *)&p;
    CHECK(dlrun_array_partitioned(NULL, NULL, &p) == DLRUN_ERR_VALUE && p == NULL, "NULL array");
    CHECK_STR_CONTAINS(dlrun_last_error(), "dlrun_array_partitioned: array is NULL");
    dlrun_array *a = rows_array();
    CHECK(dlrun_array_partitioned(a, NULL, NULL) == DLRUN_ERR_VALUE, "NULL out");
    dlrun_array_delete(a);
    p = (dlrun_partitioned *)&p;
    CHECK(dlrun_array_partitioned(a, NULL, &p) == DLRUN_ERR_RUNTIME && p == NULL, "deleted");
    CHECK_STR_CONTAINS(dlrun_last_error(), "Array has been deleted with shape=float32[8,3].");
    dlrun_export_options bad = {.has_max_version = true, .max_major = 0, .max_minor = 4};
    dlrun_array *c = rows_array();
    CHECK(dlrun_array_partitioned(c, &bad, &p) != DLRUN_OK && p == NULL, "version 0.4");
    CHECK(dlrun_live_exports(rt) == 0, "no tensor left behind");
    dlrun_partitioned_release(NULL);
    dlrun_array_release(c);
    dlrun_array_release(a);
  }
}

int main(void) {
  dlrun_config cfg = {.devices = "sim:8", .device_memory = 1 << 24};
  if (dlrun_runtime_create(&cfg, &rt)) {
    printf("runtime: %s\n", dlrun_last_error());
    return 1;
  }
  for (size_t i = 0; i < 8; i++) devs[i] = dlrun_device_get(rt, "sim", i);
  test_describe();
  test_round_trip();
  test_errors();
  dlrun_runtime_release(rt);
  return check_summary("partitioned");
}
