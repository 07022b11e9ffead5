/* C tests of dlrun/distributed.h in a process that runs alone (the specs in
 * spec/distributed/ run jobs under mpirun): options are checked,
 * zero options are the defaults, and alone every call is a cheap no-op. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "dlrun/dlrun.h"

int main(void) {
  unsetenv("DLRUN_DISTRIBUTED_TIMEOUT");
  unsetenv("OMPI_COMM_WORLD_SIZE");
  unsetenv("PMI_SIZE");
  unsetenv("PMI_RANK");
  TEST("bad options are ValueErrors naming what was wrong") {
    dlrun_distributed_options o = {.mode = (dlrun_distributed_mode)9};
    CHECK(dlrun_distributed_init(&o) == DLRUN_ERR_VALUE, "mode 9 accepted");
    CHECK(strcmp(dlrun_last_error(), "dlrun_distributed_init: unknown mode 9") == 0, "%s",
          dlrun_last_error());
    o = (dlrun_distributed_options){.timeout_s = -1};
    CHECK(dlrun_distributed_init(&o) == DLRUN_ERR_VALUE, "timeout -1 accepted");
    CHECK(strcmp(dlrun_last_error(),
                 "dlrun_distributed_init: timeout_s must be positive (0: the default)") == 0,
          "%s", dlrun_last_error());
    setenv("DLRUN_DISTRIBUTED_TIMEOUT", "soon", 1);
    CHECK(dlrun_distributed_init(NULL) == DLRUN_ERR_VALUE, "timeout 'soon' accepted");
    CHECK(strcmp(dlrun_last_error(), "DLRUN_DISTRIBUTED_TIMEOUT=\"soon\" is not a positive "
                                     "number of seconds") == 0,
          "%s", dlrun_last_error());
    unsetenv("DLRUN_DISTRIBUTED_TIMEOUT");
    o = (dlrun_distributed_options){.message_bytes = 100};
    CHECK(dlrun_distributed_init(&o) == DLRUN_ERR_VALUE, "message_bytes 100 accepted");
    CHECK(strcmp(dlrun_last_error(), "dlrun_distributed_init: message_bytes must be from 4096 "
                                     "to 1073741824 (0: the default)") == 0,
          "%s", dlrun_last_error());
  }
  TEST("not launched, the defaults run alone: index 0 of 1, no transport") {
    CHECK(dlrun_distributed_init(NULL) == DLRUN_OK, "%s", dlrun_last_error());
    CHECK(!dlrun_distributed_joined(), "joined");
    CHECK(dlrun_process_index() == 0 && dlrun_process_count() == 1, "%d of %d",
          dlrun_process_index(), dlrun_process_count());
    CHECK(dlrun_distributed_transport() == NULL, "transport %s", dlrun_distributed_transport());
    CHECK(dlrun_distributed_timeout() == 300.0, "timeout %g", dlrun_distributed_timeout());
    CHECK(dlrun_sync_global("alone") == DLRUN_OK, "%s", dlrun_last_error());
    CHECK(dlrun_sync_global(NULL) == DLRUN_OK, "%s", dlrun_last_error());
    CHECK(dlrun_sync_global_n("a\0b", 3) == DLRUN_OK, "%s", dlrun_last_error());
  }
  TEST("alone, joining an agreement returns this process's own check, with its message") {
    CHECK(dlrun_distributed_agree("export", "the strategy", "host", DLRUN_OK, NULL) == DLRUN_OK,
          "%s", dlrun_last_error());
    CHECK(dlrun_distributed_agree("export", NULL, NULL, DLRUN_ERR_TYPE, "export: bad") ==
              DLRUN_ERR_TYPE, "not the TypeError passed");
    CHECK(strcmp(dlrun_last_error(), "export: bad") == 0, "%s", dlrun_last_error());
    /* A status out of range is a RuntimeError. */
    CHECK(dlrun_distributed_agree(NULL, NULL, NULL, (dlrun_status)99, NULL) ==
              DLRUN_ERR_RUNTIME, "status 99 kept");
    CHECK(strcmp(dlrun_last_error(), "") == 0, "%s", dlrun_last_error());
  }
  TEST("a timeout given, or from the environment, bounds the waits") {
    dlrun_distributed_options o = {.mode = DLRUN_DISTRIBUTED_OFF, .timeout_s = 2.5};
    CHECK(dlrun_distributed_init(&o) == DLRUN_OK, "%s", dlrun_last_error());
    CHECK(dlrun_distributed_timeout() == 2.5, "timeout %g", dlrun_distributed_timeout());
    setenv("DLRUN_DISTRIBUTED_TIMEOUT", "12", 1);
    CHECK(dlrun_distributed_init(NULL) == DLRUN_OK, "%s", dlrun_last_error());
    CHECK(dlrun_distributed_timeout() == 12.0, "timeout %g", dlrun_distributed_timeout());
    dlrun_distributed_shutdown(); /* never joined: nothing to leave */
    CHECK(dlrun_process_count() == 1, "count %d", dlrun_process_count());
  }
  TEST("alone, the collectives work as a job of one and own what they return") {
    dlrun_config cfg = {.devices = "sim:2"};
    dlrun_runtime *rt = NULL;
    CHECK(dlrun_runtime_create(&cfg, &rt) == DLRUN_OK, "%s", dlrun_last_error());
    dlrun_device *host = dlrun_host_device(rt);
    CHECK(dlrun_process_host_device(rt, 0) == host, "process 0's host device");
    CHECK(dlrun_process_host_device(rt, 1) == NULL, "a process 1 alone");
    dlrun_sharding *s = NULL;
    dlrun_array *x = NULL, *out = NULL;
    int64_t dims[1] = {3};
    int32_t values[3] = {4, 5, 6}, got[3] = {0};
    CHECK(dlrun_single_device_sharding_create(dlrun_device_get(rt, "sim", 1), DLRUN_MEM_DEVICE,
                                              &s) == DLRUN_OK, "%s", dlrun_last_error());
    CHECK(dlrun_array_from_host(s, DLRUN_INT32, 1, dims, values, sizeof values, &x) == DLRUN_OK,
          "%s", dlrun_last_error());
    /* Stacked: [1, 3]; tiled: [3]; both on the host device. */
    for (int tiled = 0; tiled < 2; tiled++) {
      CHECK(dlrun_process_allgather(x, tiled, &out) == DLRUN_OK, "%s", dlrun_last_error());
      CHECK(dlrun_array_ndim(out) == 2 - tiled && dlrun_array_shape(out)[0] == (tiled ? 3 : 1),
            "tiled %d: ndim %d", tiled, dlrun_array_ndim(out));
      CHECK(dlrun_array_device(out) == host, "not on the host device");
      CHECK(dlrun_array_read(out, 0, sizeof got, got) == DLRUN_OK && got[2] == 6, "values");
      dlrun_array_release(out);
    }
    CHECK(dlrun_broadcast_one_to_all(x, -1, &out) == DLRUN_OK, "%s", dlrun_last_error());
    CHECK(dlrun_array_read(out, 0, sizeof got, got) == DLRUN_OK && got[0] == 4, "values");
    dlrun_array_release(out);
    CHECK(dlrun_broadcast_one_to_all(x, 0, &out) == DLRUN_ERR_RUNTIME && out == NULL,
          "no source accepted");
    CHECK(strcmp(dlrun_last_error(), "broadcast_one_to_all: no process passed is_source=true; "
                                     "exactly one must") == 0, "%s", dlrun_last_error());
    CHECK(dlrun_broadcast_one_to_all(x, 7, &out) == DLRUN_ERR_VALUE, "is_source 7 accepted");
    CHECK(dlrun_assert_equal(x, "alone") == DLRUN_OK, "%s", dlrun_last_error());
    CHECK(dlrun_assert_equal(NULL, NULL) == DLRUN_ERR_VALUE, "NULL accepted");
    CHECK(strcmp(dlrun_last_error(), "assert_equal needs an array") == 0, "%s",
          dlrun_last_error());
    dlrun_array_delete(x);
    CHECK(dlrun_process_allgather(x, false, &out) == DLRUN_ERR_RUNTIME && out == NULL,
          "a deleted array gathered");
    dlrun_array_release(x);
    dlrun_sharding_release(s);
    dlrun_runtime_release(rt);
  }
  TEST("alone, make_array_from_process_local_data lays the whole array out; local stays the "
       "caller's") {
    dlrun_config cfg = {.devices = "sim:2"};
    dlrun_runtime *rt = NULL;
    CHECK(dlrun_runtime_create(&cfg, &rt) == DLRUN_OK, "%s", dlrun_last_error());
    dlrun_device *devs[2] = {dlrun_device_get(rt, "sim", 0), dlrun_device_get(rt, "sim", 1)};
    const char *names[1] = {"x"};
    int64_t sizes[1] = {2}, dims[2] = {4, 2}, big[2] = {8, 2};
    dlrun_mesh *mesh = NULL;
    dlrun_sharding *rows = NULL, *host = NULL;
    dlrun_partition_spec spec = {.nentries = 1, .entries = {{.naxes = 1, .axes = {"x"}}}};
    CHECK(dlrun_mesh_create(devs, 2, 1, names, sizes, &mesh) == DLRUN_OK, "%s",
          dlrun_last_error());
    CHECK(dlrun_named_sharding_create(mesh, &spec, DLRUN_MEM_DEVICE, &rows) == DLRUN_OK, "%s",
          dlrun_last_error());
    CHECK(dlrun_single_device_sharding_create(dlrun_host_device(rt), DLRUN_MEM_DEVICE, &host) ==
              DLRUN_OK, "%s", dlrun_last_error());
    int32_t values[8] = {0, 1, 2, 3, 4, 5, 6, 7}, got[4] = {0};
    dlrun_array *local = NULL, *out = NULL, *shard = NULL;
    CHECK(dlrun_array_from_host(host, DLRUN_INT32, 2, dims, values, sizeof values, &local) ==
              DLRUN_OK, "%s", dlrun_last_error());
    for (int given = 0; given < 2; given++) {
      CHECK(dlrun_array_from_process_local_data(rows, local, 2, given ? dims : NULL, &out) ==
                DLRUN_OK, "%s", dlrun_last_error());
      CHECK(dlrun_array_ndim(out) == 2 && dlrun_array_shape(out)[0] == 4 &&
                dlrun_array_shape(out)[1] == 2, "the global shape");
      CHECK(dlrun_array_shard_data(out, 1, &shard) == DLRUN_OK, "%s", dlrun_last_error());
      CHECK(dlrun_array_read(shard, 0, sizeof got, got) == DLRUN_OK && got[0] == 4 && got[3] == 7,
            "shard 1 holds %d..%d", got[0], got[3]);
      dlrun_array_release(shard);
      dlrun_array_release(out);
    }
    CHECK(dlrun_array_from_process_local_data(rows, local, 2, big, &out) == DLRUN_ERR_VALUE &&
              out == NULL, "a slab of the wrong shape accepted");
    const char *want = "make_array_from_process_local_data: local_data has shape (4, 2), but this "
                       "process's shards of the global shape (8, 2) under NamedSharding(";
    CHECK(strncmp(dlrun_last_error(), want, strlen(want)) == 0, "%s", dlrun_last_error());
    CHECK(strstr(dlrun_last_error(), "cover a slab of shape (8, 2) at (0, 0)"), "%s",
          dlrun_last_error());
    CHECK(dlrun_array_from_process_local_data(rows, NULL, 0, NULL, &out) == DLRUN_ERR_VALUE &&
              out == NULL, "NULL local_data accepted");
    /* The result holds copies: releasing local leaves it whole. */
    CHECK(dlrun_array_from_process_local_data(rows, local, 0, NULL, &out) == DLRUN_OK, "%s",
          dlrun_last_error());
    dlrun_array_release(local);
    CHECK(dlrun_array_shard_data(out, 0, &shard) == DLRUN_OK, "%s", dlrun_last_error());
    CHECK(dlrun_array_read(shard, 0, sizeof got, got) == DLRUN_OK && got[0] == 0 && got[3] == 3,
          "shard 0 holds %d..%d", got[0], got[3]);
    dlrun_array_release(shard);
    dlrun_array_release(out);
    CHECK(dlrun_distributed_finish(NULL) == DLRUN_OK, "%s", dlrun_last_error());
    dlrun_sharding_release(host);
    dlrun_sharding_release(rows);
    dlrun_mesh_release(mesh);
    dlrun_runtime_release(rt);
  }
  return check_summary("distributed");
}
