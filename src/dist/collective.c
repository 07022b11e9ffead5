/* Collectives of a joined job (dist/dist.h): agreeing on a call before it
 * runs, and the exchanges under it. Every wait is the transport's, bounded
 * by the job's timeout. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/status_impl.h"
#include "dist/dist.h"
#include "dist/transport.h"

/* Collective calls made so far by this process (every one agrees on it). */
static _Atomic uint64_t collectives;

int dlrun_dist_allgatherv(const void *send, void *recv, const size_t *counts,
                          const size_t *displs, char *err, size_t errlen) {
  const dlrun_transport *t = dlrun_dist_transport();
  return t->allgatherv(send, recv, counts, displs, dlrun_distributed_timeout(), err, errlen);
}

int dlrun_dist_allgather(const void *send, size_t nbytes, void *recv, char *err, size_t errlen) {
  size_t n = (size_t)dlrun_process_count();
  size_t *counts = malloc(2 * n * sizeof *counts);
  if (!counts) {
    snprintf(err, errlen, "not enough memory");
    return DLRUN_TRANSPORT_FAILED;
  }
  for (size_t r = 0; r < n; r++) {
    counts[r] = nbytes;
    counts[n + r] = r * nbytes;
  }
  int rc = dlrun_dist_allgatherv(send, recv, counts, counts + n, err, errlen);
  free(counts);
  return rc;
}

int dlrun_dist_exchange(const dlrun_transport_piece *sends, size_t nsends,
                        const dlrun_transport_piece *recvs, size_t nrecvs, char *err,
                        size_t errlen) {
  const dlrun_transport *t = dlrun_dist_transport();
  return t->exchange(sends, nsends, recvs, nrecvs, dlrun_distributed_timeout(), err, errlen);
}

/* A value as one record holds it: its hash and length, and its start for
 * the message. */
typedef struct value_record {
  uint32_t hash, len;
  char text[96];
} value_record;

static uint32_t fnv1a(const char *s) {
  uint32_t h = 2166136261u;
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 16777619u;
  return h;
}

static value_record record_of(const char *value) {
  value_record v = {.hash = fnv1a(value), .len = (uint32_t)strlen(value)};
  snprintf(v.text, sizeof v.text, "%s", value);
  return v;
}

static bool same_value(const value_record *a, const value_record *b) {
  return a->hash == b->hash && a->len == b->len;
}

/* '<text>' or '<text>...' when cut. */
static const char *quoted(const value_record *v, char *buf, size_t n) {
  snprintf(buf, n, "'%.*s%s'", (int)sizeof v->text - 1, v->text,
           v->len >= sizeof v->text ? "..." : "");
  return buf;
}

/* What one process says of a call before it runs. */
typedef struct call_record {
  uint64_t seq;           /* its collective calls so far */
  int32_t status;         /* DLRUN_OK, or how its own checks failed */
  char error[200];        /* their message */
  value_record call;
  value_record fields[DLRUN_DIST_MAX_FIELDS];
} call_record;

/* How a disagreement reads. `label` names the call in a timeout's message
 * ("sync_global_devices('a')"); with `what`, a field that differs reads
 * "<what> mismatch: process 0 has '...', process 1 '...'", as a ValueError
 * when value_error, for calls of one field. */
typedef struct agreement_style {
  const char *label, *what;
  bool value_error;
} agreement_style;

/* Every agreement is one record of one size: any two collective calls that
 * meet, whatever they are, read each other's record. */
static dlrun_status agree(const char *call, dlrun_status mine_st, size_t nfields,
                          const dlrun_dist_field *fields, agreement_style style) {
  if (!dlrun_dist_transport()) return mine_st;
  if (nfields > DLRUN_DIST_MAX_FIELDS) nfields = DLRUN_DIST_MAX_FIELDS;
  int n = dlrun_process_count(), me = dlrun_process_index();
  call_record mine = {.seq = ++collectives, .status = (int32_t)mine_st, .call = record_of(call)};
  if (mine_st) snprintf(mine.error, sizeof mine.error, "%s", dlrun_last_error());
  for (size_t f = 0; f < nfields; f++) mine.fields[f] = record_of(fields[f].value);
  call_record *all = calloc((size_t)n, sizeof *all);
  if (!all) {
    if (mine_st) return mine_st;
    return dlrun_fail_oom_host((size_t)n * sizeof *all);
  }
  char err[320] = "", a[112], b[112];
  int rc = dlrun_dist_allgather(&mine, sizeof mine, all, err, sizeof err);
  dlrun_status st = DLRUN_OK;
  if (mine_st) { /* this process's own error, as it was */
    st = dlrun_fail(mine_st, "%s", mine.error);
  } else if (rc != DLRUN_TRANSPORT_OK) {
    st = dlrun_fail(DLRUN_ERR_RUNTIME, "%s: %s", style.label ? style.label : call, err);
  } else {
    for (int r = 0; r < n && !st; r++) {
      const call_record *o = &all[r];
      if (!same_value(&o->call, &mine.call))
        st = dlrun_fail(DLRUN_ERR_RUNTIME,
                        "%s mismatch: process %d called %s, process %d %s (every process must "
                        "make the same collective calls in the same order)",
                        call, me, quoted(&mine.call, a, sizeof a), r, quoted(&o->call, b, sizeof b));
      else if (o->seq != mine.seq)
        st = dlrun_fail(DLRUN_ERR_RUNTIME,
                        "%s mismatch: process %d is at collective call %llu, process %d at %llu "
                        "(every process must make the same collective calls in the same order)",
                        call, me, (unsigned long long)mine.seq, r, (unsigned long long)o->seq);
      else if (o->status)
        st = dlrun_fail(DLRUN_ERR_RUNTIME, "%s failed on process %d: %s: %s", call, r,
                        dlrun_status_name((dlrun_status)o->status), o->error);
      for (size_t f = 0; f < nfields && !st; f++)
        if (same_value(&o->fields[f], &mine.fields[f])) continue;
        else if (style.what)
          st = dlrun_fail(style.value_error ? DLRUN_ERR_VALUE : DLRUN_ERR_RUNTIME,
                          "%s mismatch: process %d has %s, process %d %s", style.what, me,
                          quoted(&mine.fields[f], a, sizeof a), r,
                          quoted(&o->fields[f], b, sizeof b));
        else
          st = dlrun_fail(DLRUN_ERR_RUNTIME, "%s mismatch: %s differs: process %d has %s, "
                          "process %d %s",
                          call, fields[f].name, me, quoted(&mine.fields[f], a, sizeof a), r,
                          quoted(&o->fields[f], b, sizeof b));
    }
  }
  free(all);
  return st;
}

dlrun_status dlrun_dist_agree_call(const char *call, dlrun_status mine_st, size_t nfields,
                                   const dlrun_dist_field *fields) {
  return agree(call, mine_st, nfields, fields, (agreement_style){0});
}

dlrun_status dlrun_dist_agree(const char *call, const char *label, const char *what,
                              const char *value, bool as_value_error) {
  dlrun_dist_field field = {what, value};
  agreement_style style = {.label = label, .what = what, .value_error = as_value_error};
  return agree(call, DLRUN_OK, 1, &field, style);
}

dlrun_status dlrun_sync_global(const char *name) {
  if (!name) name = "";
  char label[96];
  snprintf(label, sizeof label, "sync_global_devices('%.60s%s')", name,
           strlen(name) > 60 ? "..." : "");
  return dlrun_dist_agree("sync_global_devices", label, "sync_global_devices name", name, false);
}

dlrun_status dlrun_distributed_finish(const char *what) {
  return dlrun_dist_agree_call(what ? what : "dlrun_distributed_finish", DLRUN_OK, 0, NULL);
}

dlrun_status dlrun_dist_agree_config(const char *what, const char *value) {
  return dlrun_dist_agree(what, NULL, what, value, true);
}

int dlrun_dist_bcast(void *buf, size_t nbytes, int root, char *err, size_t errlen) {
  int n = dlrun_process_count(), me = dlrun_process_index();
  size_t limit = (size_t)dlrun_dist_message_bytes();
  size_t chunks = nbytes ? (nbytes + limit - 1) / limit : 0;
  size_t npieces = me == root ? chunks * (size_t)(n - 1) : chunks;
  dlrun_transport_piece *pieces = calloc(npieces ? npieces : 1, sizeof *pieces);
  if (!pieces) {
    snprintf(err, errlen, "not enough memory");
    return DLRUN_TRANSPORT_FAILED;
  }
  size_t k = 0;
  for (int r = 0; r < n; r++) {
    if (me == root ? r == root : r != root) continue;
    for (size_t c = 0; c < chunks; c++) {
      size_t off = c * limit;
      pieces[k++] = (dlrun_transport_piece){
          .peer = r, .ndim = 1, .base = (unsigned char *)buf + off,
          .count = {(int64_t)(nbytes - off < limit ? nbytes - off : limit)}};
    }
  }
  int rc = me == root ? dlrun_dist_exchange(pieces, k, NULL, 0, err, errlen)
                      : dlrun_dist_exchange(NULL, 0, pieces, k, err, errlen);
  free(pieces);
  return rc;
}
