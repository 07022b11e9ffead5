/* C tests of the copy out of another process's memory (src/device/peer_memory.c),
 * with this process standing in for both ends (its own pid): sim memory
 * made shareable, a shard shared (dlrun_buffer_share), a strided box of it
 * copied into a buffer of another device (dlrun_buffers_pull, through the
 * sim platform's map_shared), two boxes of it into buffers of two devices
 * in one pull (read together), the region mapped once however many copies
 * read it, a failed mapping (the DLRUN_FAIL_IPC_MAP hook) and a shard that
 * is not inside its region refused with the reason, and every mapping
 * undone by dlrun_peer_memory_unmap_all. Runs under ASan and valgrind with the
 * other C tests. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "array/array_impl.h"
#include "check.h"
#include "device/peer_memory.h"
#include "dlrun/dlrun.h"
#include "mem/shared_file.h"

#define ROWS 16
#define COLS 8

static dlrun_array *iota(dlrun_device *dev) {
  float v[ROWS * COLS];
  for (int i = 0; i < ROWS * COLS; i++) v[i] = (float)i;
  dlrun_sharding *s = NULL;
  dlrun_array *a = NULL;
  int64_t dims[2] = {ROWS, COLS};
  if (dlrun_single_device_sharding_create(dev, DLRUN_MEM_DEVICE, &s) ||
      dlrun_array_from_host(s, DLRUN_FLOAT32, 2, dims, v, sizeof v, &a) ||
      dlrun_array_block_until_ready(a))
    printf("  iota: %s\n", dlrun_last_error());
  dlrun_sharding_release(s);
  return a;
}

/* Copy rows [4, 12) and columns [2, 6) of a's shard into dst (a block of
 * shape [8, 4] at (4, 2)). */
static dlrun_status pull(dlrun_buffer *dst, const dlrun_device *from,
                         const dlrun_shared_source *src) {
  const int64_t dst_dims[2] = {8, 4}, dst_origin[2] = {4, 2}, lo[2] = {4, 2}, hi[2] = {12, 6};
  const int64_t src_dims[2] = {ROWS, COLS}, src_origin[2] = {0, 0};
  dlrun_pull_dst to = {.buf = dst, .origin = dst_origin, .lo = lo, .hi = hi};
  return dlrun_buffers_pull(1, &to, sizeof(float), 2, dst_dims, from, 0, (int)getpid(), src,
                            src_dims, src_origin, false);
}

/* Whether buffer b of device d holds rows [4, 12) and columns [c0, c0 + w)
 * of the iota array. */
static bool holds(dlrun_device *d, dlrun_buffer *b, int c0, int w) {
  float got[8 * COLS];
  if (dlrun_device_copy_to_host(d, DLRUN_MEM_DEVICE, b->data, (size_t)(8 * w) * sizeof *got,
                                got))
    return false;
  for (int i = 0; i < 8; i++)
    for (int j = 0; j < w; j++)
      if (got[i * w + j] != (float)((4 + i) * COLS + c0 + j)) return false;
  return true;
}

static void test_pull(void) {
  TEST("a box copied out of shared sim memory: one mapping, the right values, refusals") {
    setenv("DLRUN_FAIL_IPC_MAP", "1", 1); /* the first mapping fails (read once) */
    dlrun_shared_files_set_wanted(true);
    dlrun_config cfg = {.devices = "sim:3", .device_memory = 1 << 20};
    dlrun_runtime *rt = NULL;
    CHECK(dlrun_runtime_create(&cfg, &rt) == DLRUN_OK, "%s", dlrun_last_error());
    dlrun_device *d0 = dlrun_device_get(rt, "sim", 0), *d1 = dlrun_device_get(rt, "sim", 1);
    dlrun_array *a = iota(d0);
    dlrun_shared_source src;
    CHECK(a && dlrun_buffer_share(a->bufs[0], &src), "the shard is not shared");
    CHECK(src.size == (1 << 20) && src.offset + ROWS * COLS * 4 <= src.size,
          "region %llu offset %llu", (unsigned long long)src.size,
          (unsigned long long)src.offset);
    dlrun_buffer *dst = NULL;
    CHECK(dlrun_buffer_create(d1, DLRUN_MEM_DEVICE, 8 * 4 * sizeof(float), &dst) == DLRUN_OK,
          "%s", dlrun_last_error());
    CHECK(pull(dst, d0, &src) == DLRUN_ERR_RUNTIME, "the injected failure did not fail");
    CHECK(strstr(dlrun_last_error(), "cannot map the memory of process 0: injected failure"),
          "%s", dlrun_last_error());
    CHECK(dlrun_peer_memory_mapped_count() == 0, "%zu mappings after a failed one",
          dlrun_peer_memory_mapped_count());
    for (int k = 0; k < 3; k++)
      CHECK(pull(dst, d0, &src) == DLRUN_OK, "%s", dlrun_last_error());
    CHECK(dlrun_peer_memory_mapped_count() == 1, "%zu mappings for 3 copies from one region",
          dlrun_peer_memory_mapped_count());
    CHECK(holds(d1, dst, 2, 4), "the box's values");
    /* Two boxes of the shard, into two devices' buffers, in one pull. */
    dlrun_device *d2 = dlrun_device_get(rt, "sim", 2);
    dlrun_buffer *left = NULL, *right = NULL;
    CHECK(dlrun_buffer_create(d1, DLRUN_MEM_DEVICE, 8 * 4 * sizeof(float), &left) == DLRUN_OK &&
              dlrun_buffer_create(d2, DLRUN_MEM_DEVICE, 8 * 4 * sizeof(float), &right) ==
                  DLRUN_OK,
          "%s", dlrun_last_error());
    const int64_t dims[2] = {8, 4}, src_dims[2] = {ROWS, COLS}, src_origin[2] = {0, 0};
    const int64_t left_lo[2] = {4, 0}, left_hi[2] = {12, 4}, right_lo[2] = {4, 4},
                  right_hi[2] = {12, 8};
    dlrun_pull_dst both[2] = {{.buf = left, .origin = left_lo, .lo = left_lo, .hi = left_hi},
                              {.buf = right, .origin = right_lo, .lo = right_lo, .hi = right_hi}};
    CHECK(dlrun_buffers_pull(2, both, sizeof(float), 2, dims, d0, 0, (int)getpid(), &src,
                             src_dims, src_origin, true) == DLRUN_OK,
          "%s", dlrun_last_error());
    CHECK(holds(d1, left, 0, 4) && holds(d2, right, 4, 4), "the two boxes' values");
    dlrun_buffer_release(left);
    dlrun_buffer_release(right);
    dlrun_shared_source past = src;
    past.offset = src.size - 64;
    CHECK(pull(dst, d0, &past) == DLRUN_ERR_RUNTIME, "a shard past its region was read");
    CHECK(strstr(dlrun_last_error(), "process 0 shared a shard of 512 bytes at"), "%s",
          dlrun_last_error());
    dlrun_peer_memory_unmap_all();
    CHECK(dlrun_peer_memory_mapped_count() == 0, "%zu mappings left",
          dlrun_peer_memory_mapped_count());
    dlrun_buffer_release(dst);
    dlrun_array_release(a);
    dlrun_runtime_release(rt);
    dlrun_shared_files_set_wanted(false);
    unsetenv("DLRUN_FAIL_IPC_MAP");
  }
}

int main(void) {
  unsetenv("DLRUN_DEVICE_MEMORY");
  test_pull();
  return check_summary("ipc_pull");
}
