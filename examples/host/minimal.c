/* A host application embedding dlrun: shard an array over four simulated
 * devices, gather it to one, and read it back. Build: `make examples`
 * (build/examples/minimal), or link with libdlrun.a -pthread -lm. The
 * README's tour of the C API is an excerpt of this file (the suite checks it). */
#include <stdio.h>

#include <dlrun/dlrun.h>

/* Report a failed call: its status and the calling thread's last message. */
static int fail(const char *what, dlrun_status st) {
  fprintf(stderr, "%s: %s: %s\n", what, dlrun_status_name(st), dlrun_last_error());
  return 1;
}

int main(void) {
  dlrun_status st;
  dlrun_config cfg = {.devices = "sim:4", .device_memory = 64u << 20};
  dlrun_runtime *rt;                         /* the caller owns one reference */
  if ((st = dlrun_runtime_create(&cfg, &rt))) return fail("runtime", st);

  /* A 1-D mesh over the four devices and a sharding that splits rows. */
  dlrun_device *devs[4];
  for (size_t i = 0; i < 4; i++) devs[i] = dlrun_device_get(rt, "sim", i);
  const char *axis = "x";
  int64_t size = 4;
  dlrun_mesh *mesh;
  if ((st = dlrun_mesh_create(devs, 4, 1, &axis, &size, &mesh))) return fail("mesh", st);
  dlrun_partition_spec rows = {.nentries = 1, .entries = {{.naxes = 1, .axes = {"x"}}}};
  dlrun_sharding *sharded, *single;
  if ((st = dlrun_named_sharding_create(mesh, &rows, DLRUN_MEM_DEVICE, &sharded)))
    return fail("sharding", st);
  if ((st = dlrun_single_device_sharding_create(devs[0], DLRUN_MEM_DEVICE, &single)))
    return fail("single", st);

  /* 16 values 0..15, each device filling its own quarter in place. */
  dlrun_scalar start = {.kind = DLRUN_SCALAR_INT, .i = 0}, step = {.kind = DLRUN_SCALAR_INT, .i = 1};
  dlrun_array *x, *gathered;
  if ((st = dlrun_array_arange(sharded, DLRUN_FLOAT32, &start, &step, 16, &x)))
    return fail("arange", st);
  /* Device to device: the other three quarters move onto the first device. */
  if ((st = dlrun_device_put(x, single, NULL, &gathered))) return fail("device_put", st);

  float out[16];
  if ((st = dlrun_array_read(gathered, 0, sizeof out, out))) /* waits for the copies */
    return fail("read", st);
  dlrun_transfer_stats stats;
  dlrun_transfer_stats_get(rt, &stats);
  printf("gathered %zu shards: %g ... %g, %llu bytes moved between devices\n",
         dlrun_array_shard_count(x), out[0], out[15], (unsigned long long)stats.bytes_moved);

  dlrun_array_release(gathered);
  dlrun_array_release(x);
  dlrun_sharding_release(single);
  dlrun_sharding_release(sharded);
  dlrun_mesh_release(mesh);
  dlrun_runtime_release(rt);                 /* the last reference frees everything */
  return 0;
}
