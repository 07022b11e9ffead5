/* C tests of what users steer and see of device memory (docs/architecture.md,
 * "Pools a user steers and sees"): memory given back shows in the process's
 * RSS (anonymous pools and sim's private two-mapping memory), snapshots match
 * the live arrays and exports, the out-of-memory text, per-kind settings and
 * preallocation. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "dlrun/dlrun.h"
#include "core/status_impl.h"
#include "mem/pool.h"

#define MIB (1024ull * 1024)

/* Resident bytes of this process (/proc/self/statm, second field). */
static uint64_t rss(void) {
  FILE *f = fopen("/proc/self/statm", "r");
  unsigned long long size = 0, res = 0;
  if (!f) return 0;
  int ok = fscanf(f, "%llu %llu", &size, &res) == 2;
  fclose(f);
  return ok ? res * (uint64_t)sysconf(_SC_PAGESIZE) : 0;
}

static dlrun_runtime *make(const dlrun_config *cfg) {
  dlrun_runtime *rt = NULL;
  if (dlrun_runtime_create(cfg, &rt)) printf("  runtime_create: %s\n", dlrun_last_error());
  return rt;
}

static dlrun_array *ones(dlrun_device *dev, dlrun_dtype dtype, int ndim, const int64_t *dims) {
  dlrun_sharding *s = NULL;
  dlrun_array *a = NULL;
  dlrun_scalar one = {.kind = DLRUN_SCALAR_INT, .i = 1};
  if (dlrun_single_device_sharding_create(dev, DLRUN_MEM_DEVICE, &s) ||
      dlrun_array_full(s, dtype, ndim, dims, &one, &a) || dlrun_array_block_until_ready(a))
    printf("  ones: %s\n", dlrun_last_error());
  dlrun_sharding_release(s);
  return a;
}

static void test_pool_release(void) {
  TEST("a pool gives free pages back: RSS drops, the pool stays usable") {
    dlrun_pool *pool = NULL;
    CHECK(dlrun_pool_create("P", 64 * MIB, &pool) == DLRUN_OK, "create");
    dlrun_block *b = NULL;
    CHECK(pool && dlrun_pool_alloc(pool, 48 * MIB, &b) == DLRUN_OK, "alloc");
    if (!b) break;
    memset(dlrun_block_ptr(b), 7, 48 * MIB);
    uint64_t held = rss();
    dlrun_pool_free(pool, b);
    CHECK(rss() + MIB > held, "freeing alone returns nothing to the system");
    uint64_t back = dlrun_pool_release_unused(pool);
    uint64_t after = rss();
    CHECK(back == 48 * MIB, "released %llu", (unsigned long long)back);
    CHECK(after + 40 * MIB < held, "RSS %llu -> %llu", (unsigned long long)held,
          (unsigned long long)after);
    CHECK(dlrun_pool_release_unused(pool) == 0, "a second release gives back nothing");
    dlrun_pool_stats s;
    dlrun_pool_get_stats(pool, &s);
    CHECK(s.bytes_reserved == 0, "reserved %llu", (unsigned long long)s.bytes_reserved);
    CHECK(dlrun_pool_alloc(pool, 64 * MIB, &b) == DLRUN_OK, "the whole pool after a release");
    CHECK(((unsigned char *)dlrun_block_ptr(b))[12345] == 0, "released pages read as zero");
    dlrun_pool_destroy(pool);
  }
}

static dlrun_status map_it(void *ctx, uint64_t size, void **base) {
  (void)ctx;
  return dlrun_map_range(size, true, base);
}
static void unmap_it(void *ctx, void *base, uint64_t size) {
  (void)ctx;
  dlrun_unmap_range(base, size);
}
static dlrun_status no_ram(void *ctx, void *data, uint64_t size) {
  (void)ctx;
  (void)data;
  return dlrun_fail(DLRUN_ERR_RESOURCE_EXHAUSTED, "cannot commit %llu bytes: no RAM",
                    (unsigned long long)size);
}

static void test_pool_preallocate(void) {
  TEST("preallocation commits the whole range, or says which pool could not") {
    dlrun_pool *pool = NULL;
    CHECK(dlrun_pool_create("P", 4 * MIB, &pool) == DLRUN_OK, "create");
    uint64_t before = rss();
    CHECK(pool && dlrun_pool_preallocate(pool) == DLRUN_OK, "preallocate: %s", dlrun_last_error());
    CHECK(rss() >= before + 4 * MIB - 65536, "RSS %llu -> %llu", (unsigned long long)before,
          (unsigned long long)rss());
    dlrun_pool_stats s;
    dlrun_pool_get_stats(pool, &s);
    CHECK(s.bytes_reserved == 4 * MIB && s.bytes_in_use == 0, "reserved %llu",
          (unsigned long long)s.bytes_reserved);
    CHECK(dlrun_pool_release_unused(pool) == 4 * MIB, "all of it given back");
    dlrun_pool_destroy(pool);
    dlrun_range_source src = {map_it, unmap_it, NULL, no_ram, NULL, 0};
    CHECK(dlrun_pool_create_with("Q", MIB, &src, &pool) == DLRUN_OK, "create Q");
    CHECK(pool && dlrun_pool_preallocate(pool) == DLRUN_ERR_RESOURCE_EXHAUSTED, "status");
    CHECK(strcmp(dlrun_last_error(), "cannot preallocate Q: cannot commit 1048576 bytes: no RAM") ==
              0,
          "message: %s", dlrun_last_error());
    CHECK(dlrun_pool_release_unused(pool) == 0, "no decommit: nothing given back");
    dlrun_pool_destroy(pool);
  }
}

static void test_sim_release(void) {
  TEST("sim private memory is given back too, and reported") {
    dlrun_config cfg = {.devices = "sim:1", .device_memory = 64 * MIB};
    dlrun_runtime *rt = make(&cfg);
    if (!rt) break;
    dlrun_device *d = dlrun_device_get(rt, "sim", 0);
    int64_t dims[1] = {8 * 1024 * 1024}; /* 32 MiB of float32 */
    dlrun_array *a = ones(d, DLRUN_FLOAT32, 1, dims);
    uint64_t held = rss();
    dlrun_array_release(a);
    dlrun_device_synchronize(d);
    dlrun_memory_stats m;
    dlrun_device_memory_stats(d, DLRUN_MEM_DEVICE, &m);
    CHECK(m.bytes_in_use == 0 && m.bytes_reserved == 32 * MIB, "in use %llu, reserved %llu",
          (unsigned long long)m.bytes_in_use, (unsigned long long)m.bytes_reserved);
    uint64_t back = 0;
    CHECK(dlrun_device_release_unused(d, &back) == DLRUN_OK, "release");
    uint64_t after = rss();
    CHECK(back == 32 * MIB, "released %llu", (unsigned long long)back);
    CHECK(after + 28 * MIB < held, "RSS %llu -> %llu", (unsigned long long)held,
          (unsigned long long)after);
    dlrun_device_memory_stats(d, DLRUN_MEM_DEVICE, &m);
    CHECK(m.bytes_reserved == 0, "reserved after %llu", (unsigned long long)m.bytes_reserved);
    CHECK(dlrun_runtime_release_unused(rt) == 0, "nothing left to give back");
    dlrun_runtime_release(rt);
  }
}

static void test_snapshot(void) {
  TEST("a snapshot lists every block with the array or export holding it") {
    dlrun_config cfg = {.devices = "sim:2", .device_memory = 1 * MIB};
    dlrun_runtime *rt = make(&cfg);
    if (!rt) break;
    dlrun_device *d = dlrun_device_get(rt, "sim", 0);
    int64_t da[2] = {64, 32}, db[1] = {100};
    dlrun_array *a = ones(d, DLRUN_FLOAT32, 2, da), *b = ones(d, DLRUN_INT32, 1, db);
    dlrun_exported ex = {0};
    dlrun_export_options share = {.legacy_sharing = DLRUN_LEGACY_SHARE}; /* no copy */
    CHECK(dlrun_export(b, &share, &ex) == DLRUN_OK, "export: %s", dlrun_last_error());
    dlrun_array_release(b); /* only the export holds b's memory now */
    dlrun_memory_snapshot *snap = NULL;
    CHECK(dlrun_device_memory_snapshot(d, DLRUN_MEM_DEVICE, &snap) == DLRUN_OK, "snapshot");
    if (!snap) break;
    CHECK(snap->nsegments == 1 && snap->segments[0].size == MIB, "one segment of 1 MiB");
    const dlrun_memory_segment *seg = &snap->segments[0];
    CHECK(seg->nblocks == 3, "%zu blocks", seg->nblocks);
    if (seg->nblocks == 3) {
      const dlrun_memory_block *x = &seg->blocks[0], *y = &seg->blocks[1], *f = &seg->blocks[2];
      CHECK(x->offset == 0 && x->size == 8192 && x->requested_size == 8192 && x->allocated &&
                x->owner == DLRUN_OWNER_ARRAY,
            "first block");
      CHECK(x->dtype && strcmp(x->dtype, "float32") == 0 && x->ndim == 2 && x->shape[0] == 64 &&
                x->shape[1] == 32,
            "first block's array");
      CHECK(x->sharding && strstr(x->sharding, "SingleDeviceSharding(device=SimDevice(id=0)"),
            "sharding %s", x->sharding ? x->sharding : "(null)");
      CHECK(y->offset == 8192 && y->size == 512 && y->requested_size == 400 &&
                y->owner == DLRUN_OWNER_EXPORT && strcmp(y->dtype, "int32") == 0,
            "second block: owner %s", dlrun_owner_kind_name(y->owner));
      CHECK(!f->allocated && f->owner == DLRUN_OWNER_NONE && f->offset == 8704 &&
                f->size == MIB - 8704,
            "the free rest");
    }
    CHECK(snap->stats.bytes_in_use == 8704, "stats in use %llu",
          (unsigned long long)snap->stats.bytes_in_use);
    dlrun_memory_snapshot_free(snap);
    if (ex.legacy) ex.legacy->deleter(ex.legacy);
    if (ex.versioned) ex.versioned->deleter(ex.versioned);
    dlrun_array_release(a);
    dlrun_device_synchronize(d);
    CHECK(dlrun_device_memory_snapshot(d, DLRUN_MEM_DEVICE, &snap) == DLRUN_OK, "again");
    CHECK(snap && snap->segments[0].nblocks == 1 && !snap->segments[0].blocks[0].allocated,
          "all free again");
    dlrun_memory_snapshot_free(snap);
    dlrun_memory_stats m;
    dlrun_device_memory_stats(d, DLRUN_MEM_DEVICE, &m);
    CHECK(m.peak_bytes_in_use == 8704, "peak");
    CHECK(dlrun_device_reset_peak_memory_stats(d, DLRUN_MEM_DEVICE) == DLRUN_OK, "reset");
    dlrun_device_memory_stats(d, DLRUN_MEM_DEVICE, &m);
    CHECK(m.peak_bytes_in_use == 0 && m.largest_alloc_size == 0, "peak after reset");
    CHECK(dlrun_device_reset_peak_memory_stats(d, (dlrun_memory_kind)7) == DLRUN_ERR_VALUE,
          "a bad kind");
    dlrun_runtime_release(rt);
  }
}

static void test_oom_text(void) {
  TEST("out of memory names the reserved bytes and the setting to raise") {
    dlrun_config cfg = {.devices = "sim:1", .device_memory = 1 * MIB};
    dlrun_runtime *rt = make(&cfg);
    if (!rt) break;
    dlrun_device *d = dlrun_device_get(rt, "sim", 0);
    int64_t small[1] = {65536}, big[1] = {512 * 1024};
    dlrun_array *a = ones(d, DLRUN_FLOAT32, 1, small); /* 256 KiB */
    dlrun_array_release(a);
    dlrun_device_synchronize(d);
    dlrun_sharding *s = NULL;
    dlrun_array *b = NULL;
    dlrun_scalar z = {.kind = DLRUN_SCALAR_INT};
    dlrun_single_device_sharding_create(d, DLRUN_MEM_DEVICE, &s);
    CHECK(dlrun_array_full(s, DLRUN_FLOAT32, 1, big, &z, &b) == DLRUN_ERR_RESOURCE_EXHAUSTED,
          "status");
    const char *want =
        "Out of memory on SimDevice(id=0) while allocating 2097152 bytes (2.00MiB): 0 bytes in "
        "use of a 1048576 byte limit (0B of 1.00MiB); the largest free block is 1048576 bytes "
        "(1.00MiB) and 262144 bytes (256.00KiB) are reserved but unallocated; raise "
        "device_memory (dl.configure, --device-memory, DLRUN_DEVICE_MEMORY) to at least "
        "2097152 bytes (2.00MiB).";
    CHECK(strcmp(dlrun_last_error(), want) == 0, "message: %s", dlrun_last_error());
    dlrun_sharding_release(s);
    dlrun_runtime_release(rt);
  }
}

static void test_settings(void) {
  TEST("per-kind capacities, shares of host RAM and their errors") {
    dlrun_config both = {.devices = "sim:1", .device_memory = MIB, .device_memory_fraction = .1};
    CHECK(dlrun_check_config(&both) == DLRUN_ERR_VALUE, "both accepted");
    CHECK_STR_CONTAINS(dlrun_last_error(),
                       "device_memory and device_memory_fraction are both set (expected one "
                       "of them)");
    dlrun_config over = {.devices = "sim:1", .pinned_host_memory_fraction = 1.5};
    CHECK(dlrun_check_config(&over) == DLRUN_ERR_VALUE, "1.5 accepted");
    CHECK_STR_CONTAINS(dlrun_last_error(),
                       "pinned_host_memory_fraction must be above 0 and at most 1, got 1.5");
    dlrun_config cfg = {.devices = "sim:2", .pinned_host_memory = 2 * MIB,
                        .device_memory_fraction = 0.01};
    dlrun_runtime *rt = make(&cfg);
    if (!rt) break;
    dlrun_memory_stats m;
    dlrun_device_memory_stats(dlrun_device_get(rt, "sim", 1), DLRUN_MEM_PINNED_HOST, &m);
    CHECK(m.bytes_limit == 2 * MIB, "pinned_host %llu", (unsigned long long)m.bytes_limit);
    dlrun_device_memory_stats(dlrun_device_get(rt, "sim", 1), DLRUN_MEM_DEVICE, &m);
    uint64_t ram = (uint64_t)sysconf(_SC_PHYS_PAGES) * (uint64_t)sysconf(_SC_PAGESIZE);
    uint64_t want = (uint64_t)((double)ram * 0.01) / 2 & ~(uint64_t)4095;
    CHECK(m.bytes_limit == want, "device %llu, want %llu", (unsigned long long)m.bytes_limit,
          (unsigned long long)want);
    dlrun_runtime_release(rt);
  }
  TEST("the environment: percentages and preallocation, bad values named") {
    dlrun_config cfg = {.devices = "sim:1"};
    setenv("DLRUN_DEVICE_PREALLOCATE", "maybe", 1);
    CHECK(dlrun_check_config(&cfg) == DLRUN_ERR_VALUE, "maybe accepted");
    CHECK_STR_CONTAINS(dlrun_last_error(),
                       "DLRUN_DEVICE_PREALLOCATE: invalid preallocation \"maybe\" (expected "
                       "true or false)");
    setenv("DLRUN_DEVICE_PREALLOCATE", "true", 1);
    setenv("DLRUN_DEVICE_MEMORY", "8MiB", 1);
    uint64_t before = rss();
    dlrun_runtime *rt = make(&cfg);
    uint64_t after = rss();
    unsetenv("DLRUN_DEVICE_PREALLOCATE");
    unsetenv("DLRUN_DEVICE_MEMORY");
    if (!rt) break;
    dlrun_memory_stats m;
    dlrun_device_memory_stats(dlrun_device_get(rt, "sim", 0), DLRUN_MEM_DEVICE, &m);
    CHECK(m.bytes_limit == 8 * MIB && m.bytes_reserved == 8 * MIB && m.bytes_in_use == 0,
          "preallocated: limit %llu reserved %llu", (unsigned long long)m.bytes_limit,
          (unsigned long long)m.bytes_reserved);
    CHECK(after >= before + 7 * MIB, "RSS %llu -> %llu", (unsigned long long)before,
          (unsigned long long)after);
    dlrun_runtime_release(rt);
    setenv("DLRUN_PINNED_HOST_MEMORY", "150%", 1);
    CHECK(dlrun_check_config(&cfg) == DLRUN_ERR_VALUE, "150%% accepted");
    CHECK_STR_CONTAINS(dlrun_last_error(), "DLRUN_PINNED_HOST_MEMORY: invalid memory share "
                                           "\"150%\" (expected a percentage of host RAM above "
                                           "0 and at most 100, e.g. \"25%\")");
    unsetenv("DLRUN_PINNED_HOST_MEMORY");
  }
  TEST("settings after the default runtime started name the setting") {
    dlrun_config cfg = {.devices = "sim:1", .device_memory = 4 * MIB};
    CHECK(dlrun_default_set_config(&cfg) == DLRUN_OK, "before start");
    dlrun_runtime *rt = NULL;
    CHECK(dlrun_default_runtime(&rt) == DLRUN_OK, "start");
    CHECK(dlrun_default_set_config(&cfg) == DLRUN_OK, "the same again");
    dlrun_config late = {.pinned_host_preallocate = DLRUN_PREALLOCATE_ON};
    CHECK(dlrun_default_set_config(&late) == DLRUN_ERR_RUNTIME, "late accepted");
    CHECK(strcmp(dlrun_last_error(),
                 "configure must be called before the runtime is first used (it is already "
                 "running with devices sim:1,cpu:1): pinned_host_preallocate cannot change once "
                 "it runs (it is false)") == 0,
          "message: %s", dlrun_last_error());
    dlrun_config bigger = {.device_memory = 8 * MIB};
    CHECK(dlrun_default_set_config(&bigger) == DLRUN_ERR_RUNTIME, "late memory accepted");
    CHECK_STR_CONTAINS(dlrun_last_error(),
                       "device_memory cannot change once it runs (it is 4.00MiB per sim device)");
    dlrun_runtime_release(rt);
  }
}

int main(void) {
  unsetenv("DLRUN_DEVICE_MEMORY");
  unsetenv("DLRUN_PINNED_HOST_MEMORY");
  test_pool_release();
  test_pool_preallocate();
  test_sim_release();
  test_snapshot();
  test_oom_text();
  test_settings();
  return check_summary("memory");
}
