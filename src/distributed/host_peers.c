/* Which processes of the job copy straight out of each other's memory
 * (distributed_impl.h: the one-copy path between processes on one host).
 *
 * At the join, every process on a host with others (the transport's host,
 * MPI's shared-memory communicator) shares a one-page probe file holding
 * a token; every process tries to map each peer's on its host and read the
 * token back; the results travel to all, so that every process holds the
 * same table: receiver r may read sender s's memory. Only then are new
 * memory regions made shareable. A process that cannot map a peer (another
 * kernel namespace, /proc hidden, no memfd) leaves that pair on the
 * transport: the choice is automatic and the same on every process. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/alloc.h"
#include "core/status_impl.h"
#include "distributed/distributed_impl.h"
#include "mem/shared_file.h"

/* What each process says of itself in the probe. */
typedef struct probe_record {
  int32_t pid, host, wanted, pad;
  int64_t fd; /* its probe file; -1: none */
  uint64_t token;
} probe_record;

#define PROBE_BYTES 4096

static int nproc;
static int host_processes; /* the job's processes on this process's host */
static unsigned char *readable; /* [receiver * nproc + sender] */
static int *pids;
static bool any_pair;
static _Atomic bool enabled = true;

static uint64_t make_token(int rank) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return ((uint64_t)t.tv_nsec << 20) ^ (uint64_t)t.tv_sec ^ ((uint64_t)getpid() << 32) ^
         (uint64_t)rank;
}

/* Whether this process reads peer r's probe and finds its token. */
static bool can_map(const probe_record *r) {
  const void *mapping;
  if (r->fd < 0 || dlrun_shared_file_map(r->pid, r->fd, PROBE_BYTES, &mapping)) return false;
  uint64_t seen;
  memcpy(&seen, mapping, sizeof seen);
  dlrun_shared_file_unmap(mapping, PROBE_BYTES);
  return seen == r->token;
}

/* This process's probe: a shared file holding the token (mine->fd -1 when
 * none can be made). */
static void make_probe(probe_record *mine) {
  void *p;
  mine->fd = dlrun_shared_file_create(PROBE_BYTES, &p);
  if (mine->fd < 0) return;
  memcpy(p, &mine->token, sizeof mine->token);
  dlrun_shared_file_unmap(p, PROBE_BYTES);
}

/* Free what a probe made; the table stays unset (no pair). */
static void forget(void) {
  dlrun_free(readable);
  dlrun_free(pids);
  readable = NULL;
  pids = NULL;
  any_pair = false;
  host_processes = 0;
}

dlrun_status dlrun_distributed_probe_peers(bool wanted) {
  const dlrun_transport *t = dlrun_distributed_job_transport();
  forget();
  if (!t) return DLRUN_OK;
  int n = t->size, me = t->rank;
  probe_record mine = {.pid = (int32_t)getpid(), .host = t->host, .wanted = wanted, .fd = -1,
                       .token = make_token(me)};
  if (wanted) make_probe(&mine);
  probe_record *all = dlrun_calloc((size_t)n, sizeof *all);
  unsigned char *row = dlrun_calloc((size_t)n, 1);
  readable = dlrun_calloc((size_t)n * (size_t)n, 1);
  pids = dlrun_calloc((size_t)n, sizeof *pids);
  dlrun_status st = all && row && readable && pids
                        ? DLRUN_OK : dlrun_fail_oom_host((size_t)n * (size_t)n + 64 * (size_t)n);
  /* Every process learns whether every other could prepare its probe. */
  st = dlrun_distributed_agree_call("joining the job (memory between processes)", st, 0, NULL);
  char err[320] = "";
  if (!st &&
      dlrun_distributed_allgather(&mine, sizeof mine, all, err, sizeof err) != DLRUN_TRANSPORT_OK)
    st = dlrun_fail(DLRUN_ERR_RUNTIME, "joining the job: %s", err);
  for (int s = 0; s < n && !st; s++)
    row[s] = s != me && mine.wanted && all[s].wanted && all[s].host == mine.host &&
             can_map(&all[s]);
  if (!st &&
      dlrun_distributed_allgather(row, (size_t)n, readable, err, sizeof err) != DLRUN_TRANSPORT_OK)
    st = dlrun_fail(DLRUN_ERR_RUNTIME, "joining the job: %s", err);
  if (mine.fd >= 0) close((int)mine.fd); /* every peer is done with it */
  for (int r = 0; r < n && !st; r++) pids[r] = all[r].pid;
  for (int r = 0; r < n && !st; r++) host_processes += all[r].host == mine.host;
  for (int i = 0; i < n * n && !st; i++) any_pair |= readable[i] != 0;
  dlrun_free(all);
  dlrun_free(row);
  if (st) forget();
  nproc = n;
  dlrun_shared_files_set_wanted(any_pair);
  return st;
}

bool dlrun_distributed_any_peers(void) { return any_pair; }

int dlrun_distributed_host_processes(void) { return host_processes > 1 ? host_processes : 1; }

bool dlrun_distributed_peer_readable(int receiver, int sender) {
  return any_pair && receiver >= 0 && sender >= 0 && receiver < nproc && sender < nproc &&
         readable[receiver * nproc + sender];
}

int dlrun_distributed_peer_pid(int process) { return pids && process < nproc ? pids[process] : 0; }

void dlrun_distributed_set_one_copy(bool on) { enabled = on; }
bool dlrun_distributed_one_copy(void) { return enabled; }

void dlrun_distributed_peers_end(void) {
  dlrun_shared_files_set_wanted(false);
  forget();
}
