/* Joining a job (dlrun/distributed.h): finds the launch and the settings,
 * enters the job (job.c) and agrees on it, and leaves it. */
#include <errno.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/status_impl.h"
#include "distributed/distributed_impl.h"
#include "distributed/transport.h"
#include "dlrun/distributed.h"

#define DEFAULT_TIMEOUT_S DLRUN_DISTRIBUTED_DEFAULT_TIMEOUT_S
#define DEFAULT_MESSAGE_BYTES DLRUN_DISTRIBUTED_DEFAULT_MESSAGE_BYTES
#define MIN_MESSAGE_BYTES ((uint64_t)4096)

/* What runs when this process leaves the job (dlrun_distributed_at_leave). */
#define MAX_LEAVE_HOOKS 4
static void (*leave_hooks[MAX_LEAVE_HOOKS])(void);
static _Atomic int nleave_hooks;

/* Whether an MPI launcher started this process: Open MPI's or MPICH's
 * (Hydra's) environment. */
static bool launched(void) {
  return getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMI_SIZE") || getenv("PMI_RANK");
}

/* $DLRUN_DISTRIBUTED_TIMEOUT, checked: a positive number of seconds. */
static dlrun_status env_timeout(double *out) {
  const char *text = getenv("DLRUN_DISTRIBUTED_TIMEOUT");
  *out = DEFAULT_TIMEOUT_S;
  if (!text || !*text) return DLRUN_OK;
  char *end;
  errno = 0;
  double v = strtod(text, &end);
  if (errno || end == text || *end || !(v > 0) || v > 1e9)
    return dlrun_fail(DLRUN_ERR_VALUE,
                      "DLRUN_DISTRIBUTED_TIMEOUT=\"%s\" is not a positive number of seconds",
                      text);
  *out = v;
  return DLRUN_OK;
}

/* $DLRUN_DISTRIBUTED_MESSAGE_BYTES, checked: whole bytes, 4 KiB to 1 GiB. */
static dlrun_status env_message_bytes(uint64_t *out) {
  const char *text = getenv("DLRUN_DISTRIBUTED_MESSAGE_BYTES");
  *out = DEFAULT_MESSAGE_BYTES;
  if (!text || !*text) return DLRUN_OK;
  char *end;
  errno = 0;
  unsigned long long v = strtoull(text, &end, 10);
  if (errno || end == text || *end || *text == '-' || v < MIN_MESSAGE_BYTES ||
      v > DEFAULT_MESSAGE_BYTES)
    return dlrun_fail(DLRUN_ERR_VALUE,
                      "DLRUN_DISTRIBUTED_MESSAGE_BYTES=\"%s\" is not a number of bytes from "
                      "4096 to 1073741824",
                      text);
  *out = v;
  return DLRUN_OK;
}

/* $DLRUN_DISTRIBUTED_DEVICE_MEMORY, checked: auto, direct or staged. */
static dlrun_status env_device_memory(dlrun_distributed_device_memory *out) {
  static const char *const names[] = {"auto", "direct", "staged"};
  const char *text = getenv("DLRUN_DISTRIBUTED_DEVICE_MEMORY");
  *out = DLRUN_DISTRIBUTED_DEVICE_MEMORY_AUTO;
  if (!text || !*text) return DLRUN_OK;
  for (int i = 0; i < 3; i++)
    if (!strcmp(text, names[i])) {
      *out = (dlrun_distributed_device_memory)i;
      return DLRUN_OK;
    }
  return dlrun_fail(DLRUN_ERR_VALUE,
                    "DLRUN_DISTRIBUTED_DEVICE_MEMORY=\"%s\" is not one of auto, direct, staged",
                    text);
}

/* $DLRUN_DISTRIBUTED_IPC, checked: auto (processes on one host copy
 * straight out of each other's memory where they can) or off. */
static dlrun_status env_ipc(bool *out) {
  const char *text = getenv("DLRUN_DISTRIBUTED_IPC");
  *out = !text || !*text || !strcmp(text, "auto");
  if (*out || !strcmp(text, "off")) return DLRUN_OK;
  return dlrun_fail(DLRUN_ERR_VALUE, "DLRUN_DISTRIBUTED_IPC=\"%s\" is not one of auto, off", text);
}

dlrun_status dlrun_distributed_init(const dlrun_distributed_options *options) {
  dlrun_distributed_options o = options ? *options : (dlrun_distributed_options){0};
  if ((int)o.mode < DLRUN_DISTRIBUTED_AUTO || o.mode > DLRUN_DISTRIBUTED_MPI)
    return dlrun_fail(DLRUN_ERR_VALUE, "dlrun_distributed_init: unknown mode %d", (int)o.mode);
  if (o.timeout_s < 0 || o.timeout_s != o.timeout_s)
    return dlrun_fail(DLRUN_ERR_VALUE,
                      "dlrun_distributed_init: timeout_s must be positive (0: the default)");
  if (o.message_bytes &&
      (o.message_bytes < MIN_MESSAGE_BYTES || o.message_bytes > DEFAULT_MESSAGE_BYTES))
    return dlrun_fail(DLRUN_ERR_VALUE,
                      "dlrun_distributed_init: message_bytes must be from 4096 to 1073741824 "
                      "(0: the default)");
  double timeout = o.timeout_s;
  uint64_t msg = o.message_bytes;
  dlrun_status st = timeout > 0 ? DLRUN_OK : env_timeout(&timeout);
  if (!st && !msg) st = env_message_bytes(&msg);
  dlrun_distributed_device_memory reach = DLRUN_DISTRIBUTED_DEVICE_MEMORY_AUTO;
  if (!st) st = env_device_memory(&reach);
  bool ipc = true;
  if (!st) st = env_ipc(&ipc);
  if (st) return st;
  bool connect =
      o.mode == DLRUN_DISTRIBUTED_MPI || (o.mode == DLRUN_DISTRIBUTED_AUTO && launched());
  if ((st = dlrun_distributed_job_enter(connect, o.module, timeout, msg, reach))) return st;
  /* Both ends of a device_put cut its messages by this size: a process
   * that cut them otherwise would read a message into the wrong place. */
  char text[24];
  snprintf(text, sizeof text, "%llu", (unsigned long long)msg);
  st = dlrun_distributed_agree_one("joining the job", NULL, "DLRUN_DISTRIBUTED_MESSAGE_BYTES", text,
                                   true);
  return st ? st : dlrun_distributed_probe_peers(ipc);
}

/* Every process at its end leaves on its own: an abort there races their
 * leaving (mpirun can then wait forever for processes already gone). */
void dlrun_distributed_abort(int code) {
  fflush(NULL);
  if (dlrun_distributed_joined() && dlrun_distributed_all_at_end()) dlrun_distributed_shutdown();
  else dlrun_distributed_job_abort(code);
  exit(code);
}

void dlrun_distributed_at_leave(void (*fn)(void)) {
  int n = atomic_load(&nleave_hooks);
  for (int i = 0; i < n; i++)
    if (leave_hooks[i] == fn) return;
  if (n < MAX_LEAVE_HOOKS) {
    leave_hooks[n] = fn;
    atomic_store(&nleave_hooks, n + 1);
  }
}

void dlrun_distributed_shutdown(void) {
  int n = atomic_load(&nleave_hooks);
  for (int i = 0; i < n; i++) leave_hooks[i]();
  dlrun_distributed_peers_end();
  dlrun_distributed_job_leave();
}

dlrun_status dlrun_distributed_agree(const char *call, const char *what, const char *value,
                                     dlrun_status mine, const char *message) {
  if (mine < DLRUN_OK || mine >= DLRUN_STATUS_COUNT) mine = DLRUN_ERR_RUNTIME;
  if (mine) dlrun_fail(mine, "%s", message ? message : "");
  dlrun_distributed_field field = {what, value ? value : ""};
  return dlrun_distributed_agree_call(call ? call : "", mine, what ? 1 : 0, &field);
}
