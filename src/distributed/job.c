/* The job this process is in (distributed_impl.h): the transport it joined
 * through and the settings it joined with, read by every exchange; entered
 * and left by distributed.c. */
#include <dlfcn.h>
#include <pthread.h>

#include "core/module.h"
#include "core/status_impl.h"
#include "distributed/distributed_impl.h"
#include "distributed/transport.h"
#include "dlrun/distributed.h"

#define MODULE_NAME "libdlrun_mpi.so"

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static dlrun_transport transport; /* .name set once joined */
static bool joined, left;
static double timeout_s = DLRUN_DISTRIBUTED_DEFAULT_TIMEOUT_S;
static uint64_t message_bytes = DLRUN_DISTRIBUTED_DEFAULT_MESSAGE_BYTES;
static dlrun_distributed_device_memory device_memory = DLRUN_DISTRIBUTED_DEVICE_MEMORY_AUTO;

/* The module the caller names, or the one found where an installation puts
 * it (distributed.h). RTLD_GLOBAL: MPI libraries load plugins of their own
 * that need its symbols. */
static void *find_module(const char *given, char *tried, size_t n) {
  if (given) return dlrun_module_open(given, RTLD_NOW | RTLD_GLOBAL, tried, n);
  return dlrun_module_find(MODULE_NAME, "DLRUN_MPI_MODULE", RTLD_NOW | RTLD_GLOBAL, tried, n);
}

static dlrun_status join(const char *module) {
  char tried[1024];
  void *h = find_module(module, tried, sizeof tried);
  if (!h && dlrun_program_is_static())
    return dlrun_fail(DLRUN_ERR_RUNTIME, "cannot join the job: %s; or run with --distributed off",
                      tried);
  if (!h)
    return dlrun_fail(DLRUN_ERR_RUNTIME,
                      "cannot join the job: the MPI transport module could not be loaded (%s). "
                      "Build it with MPI installed (libopenmpi-dev) or run with "
                      "--distributed off",
                      tried);
  dlrun_transport_open_fn open_fn;
  *(void **)&open_fn = dlsym(h, DLRUN_TRANSPORT_OPEN_SYMBOL);
  if (!open_fn) {
    dlclose(h);
    return dlrun_fail(DLRUN_ERR_RUNTIME, "cannot join the job: the transport module has no %s",
                      DLRUN_TRANSPORT_OPEN_SYMBOL);
  }
  char err[256] = "";
  dlrun_transport t;
  if (open_fn(DLRUN_TRANSPORT_ABI, &t, err, sizeof err) != DLRUN_TRANSPORT_OK) {
    dlclose(h);
    return dlrun_fail(DLRUN_ERR_RUNTIME, "cannot join the job: %s", err);
  }
  transport = t; /* the module stays loaded for the life of the process */
  joined = true;
  return DLRUN_OK;
}

dlrun_status dlrun_distributed_job_enter(bool connect, const char *module, double timeout,
                                         uint64_t msg, dlrun_distributed_device_memory reach) {
  dlrun_status st = DLRUN_OK;
  pthread_mutex_lock(&mu);
  if (joined || left)
    st = dlrun_fail(DLRUN_ERR_RUNTIME, "this process has already %s the job",
                    left ? "left" : "joined");
  else if (connect)
    st = join(module);
  if (!st) {
    timeout_s = timeout;
    message_bytes = msg;
    device_memory = reach;
  }
  pthread_mutex_unlock(&mu);
  return st;
}

void dlrun_distributed_job_leave(void) {
  pthread_mutex_lock(&mu);
  if (joined && !left) transport.finalize();
  left = joined || left;
  joined = false;
  pthread_mutex_unlock(&mu);
}

void dlrun_distributed_job_abort(int code) {
  if (joined) transport.abort(code);
}

bool dlrun_distributed_joined(void) { return joined; }
int dlrun_process_index(void) { return joined ? transport.rank : 0; }
int dlrun_process_count(void) { return joined ? transport.size : 1; }
const char *dlrun_distributed_transport(void) { return joined ? transport.name : NULL; }
double dlrun_distributed_timeout(void) { return timeout_s; }

const dlrun_transport *dlrun_distributed_job_transport(void) {
  return joined && transport.size > 1 ? &transport : NULL;
}

uint64_t dlrun_distributed_message_bytes(void) { return message_bytes; }
dlrun_distributed_device_memory dlrun_distributed_device_memory_mode(void) { return device_memory; }
int dlrun_distributed_device_aware(void) { return joined ? transport.device_memory : 0; }
