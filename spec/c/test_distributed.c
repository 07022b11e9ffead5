/* C tests of dlrun/distributed.h in a process that runs alone (the specs in
 * spec/distributed_spec.lua run jobs under mpirun): options are checked,
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
  return check_summary("distributed");
}
