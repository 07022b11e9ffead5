/* Internal: what the layers above ask of a joined job. Collective calls are
 * made by every process, in the same order; each agrees first
 * (dlrun_distributed_agree_call), so that a misuse is an error on every process,
 * never a hang. Every wait is bounded by dlrun_distributed_timeout(). */
#ifndef DLRUN_DISTRIBUTED_IMPL_H
#define DLRUN_DISTRIBUTED_IMPL_H

#include "distributed/transport.h"
#include "dlrun/distributed.h"

/* The defaults of a wait's bound and of the largest message (also its most). */
#define DLRUN_DISTRIBUTED_DEFAULT_TIMEOUT_S 300.0
#define DLRUN_DISTRIBUTED_DEFAULT_MESSAGE_BYTES ((uint64_t)1 << 30)

/* The transport of a job of more than one process, or NULL (alone, or a
 * job of one): collectives have nothing to exchange then. */
const dlrun_transport *dlrun_distributed_job_transport(void);
/* The largest message between two processes, in bytes. */
uint64_t dlrun_distributed_message_bytes(void);

/* How a device_put between processes reaches device memory
 * ($DLRUN_DISTRIBUTED_DEVICE_MEMORY): auto (directly where the transport
 * can, else staged through host memory), direct (through the platform's
 * transport view, or refused), staged (every memory but host memory). */
typedef enum dlrun_distributed_device_memory {
  DLRUN_DISTRIBUTED_DEVICE_MEMORY_AUTO = 0,
  DLRUN_DISTRIBUTED_DEVICE_MEMORY_DIRECT = 1,
  DLRUN_DISTRIBUTED_DEVICE_MEMORY_STAGED = 2,
} dlrun_distributed_device_memory;
dlrun_distributed_device_memory dlrun_distributed_device_memory_mode(void);
/* Whether the transport reads device addresses (a CUDA-aware MPI): 1, 0,
 * or -1 when it cannot say. */
int dlrun_distributed_device_aware(void);

/* The job (job.c), for joining and leaving it (distributed.c): enter it
 * once, through the transport module (connect; module NULL: the installed
 * one) or alone, with its settings (RuntimeError when this process already
 * joined or left); leave it (the transport finalized once); the transport's
 * abort, when joined. */
dlrun_status dlrun_distributed_job_enter(bool connect, const char *module, double timeout,
                                         uint64_t msg, dlrun_distributed_device_memory reach);
void dlrun_distributed_job_leave(void);
void dlrun_distributed_job_abort(int code);

/* The one-copy path between processes on one host (host_peers.c). Collective,
 * at the join: find which processes may read each other's memory
 * (`wanted`: $DLRUN_DISTRIBUTED_IPC is not off here); every process ends
 * with the same table, and memory made from then on is shareable when any
 * pair may. Fails (every process) only when the job's messages fail. */
dlrun_status dlrun_distributed_probe_peers(bool wanted);
/* The job's processes on this process's host, itself included (the
 * transport's host, learnt at the join); 1 alone or after the job. */
int dlrun_distributed_host_processes(void);
/* Whether any pair of processes may (the same on every process). */
bool dlrun_distributed_any_peers(void);
/* Whether process `receiver` may copy straight out of `sender`'s memory. */
bool dlrun_distributed_peer_readable(int receiver, int sender);
/* A process's id on its host (for mapping its memory). */
int dlrun_distributed_peer_pid(int process);
/* This process's own switch (benchmarks compare both ways in one run): a
 * pair copies directly only when both ends have it on, which every
 * device_put learns from both. On by default. */
void dlrun_distributed_set_one_copy(bool on);
bool dlrun_distributed_one_copy(void);
/* The job ends (after the leave hooks): the table goes. */
void dlrun_distributed_peers_end(void);
/* Call fn() when this process leaves the job (distributed.c: before the
 * transport goes), once however often it is registered; for the layers
 * above (the device layer unmaps its peers' memory). At most 4. */
void dlrun_distributed_at_leave(void (*fn)(void));

/* Whether the last dlrun_distributed_finish met every process at its end
 * (it may still have failed: a peer met at another call first): the job is
 * in step, so that ending it is leaving it, not aborting it. */
bool dlrun_distributed_all_at_end(void);

/* Collective: whether every process passed the same configuration `value`
 * (a device spec). ValueError on every process when not, naming this
 * process's value and another's ("<what> mismatch: process 0 has '...',
 * process 1 '...'"); RuntimeError when the wait passes the timeout. Alone:
 * DLRUN_OK. */
dlrun_status dlrun_distributed_agree_config(const char *what, const char *value);
/* The same for any collective of one argument: "<what> mismatch: ..."
 * (ValueError or RuntimeError), "<label or call>: ... did not arrive ..." on
 * a timeout; another call met instead is dlrun_distributed_agree_call's error. */
dlrun_status dlrun_distributed_agree_one(const char *call, const char *label, const char *what,
                                         const char *value, bool as_value_error);

/* One argument of a collective call, as text that must be equal on every
 * process ("float32[8,4]"), compared whole, byte for byte. */
typedef struct dlrun_distributed_field {
  const char *name; /* for the message: "the source sharding" */
  const char *value;
} dlrun_distributed_field;
#define DLRUN_DISTRIBUTED_MAX_FIELDS 6

/* Collective: agree on a call before running it. `mine` is this process's
 * own check of its arguments (DLRUN_OK, or the status of the error it
 * set). Returns `mine` with its message on this process when it failed;
 * else RuntimeError on every process when another process failed its
 * checks ("<call> failed on process 1: ValueError: ..."), made another
 * call or is at another collective call ("<call> mismatch: ..."), or
 * passed a different field ("<call> mismatch: <name> differs: process 0
 * has '...', process 1 '...'"); a timeout names who did not arrive. Alone:
 * `mine`. Values are compared whole: up to 512 bytes in all travel in the
 * one fixed-size record; beyond that a second exchange carries the whole
 * text. Collectives that cannot fail once agreed on (dlrun_distributed_allgather,
 * dlrun_distributed_bcast) let a caller prepare everything that may fail first and
 * share the outcome here, in `mine`. */
dlrun_status dlrun_distributed_agree_call(const char *call, dlrun_status mine, size_t nfields,
                                          const dlrun_distributed_field *fields);

/* Joined only (dlrun_distributed_job_transport() not NULL). They return
 * DLRUN_TRANSPORT_OK, or a transport code with a message in err (a timeout
 * names who did not arrive). */

/* Process r's counts[r] bytes land at recv + displs[r] on every process
 * (send holds this process's); every process passes the same counts and
 * displs. */
int dlrun_distributed_allgatherv(const void *send, void *recv, const size_t *counts,
                                 const size_t *displs, char *err, size_t errlen);
/* The same with nbytes from every process, in process order. */
int dlrun_distributed_allgather(const void *send, size_t nbytes, void *recv, char *err,
                                size_t errlen);
/* The transport's exchange (transport.h): every message is at most
 * dlrun_distributed_message_bytes(). */
int dlrun_distributed_exchange(const dlrun_transport_message *sends, size_t nsends,
                               const dlrun_transport_message *recvs, size_t nrecvs, char *err,
                               size_t errlen);
/* nbytes at buf on process `root` into buf on every other process. Neither
 * this nor dlrun_distributed_allgather allocates for jobs of up to 64 processes,
 * so that no process agreed on an exchange fails to make it. */
int dlrun_distributed_bcast(void *buf, size_t nbytes, int root, char *err, size_t errlen);

#endif
