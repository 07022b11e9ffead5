/* Agreeing on a collective call before it runs (distributed/distributed_impl.h): every
 * process's record of the call, compared whole on every process, so that a
 * misuse or a failure on one process is an error on all, never a hang. */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "core/alloc.h"
#include "core/status_impl.h"
#include "distributed/distributed_impl.h"

/* Collective calls made so far by this process (every one agrees on it). */
static _Atomic uint64_t collectives;

/* The values of a record (the call's name, then its fields) travel in its
 * fixed part up to this many bytes in all; longer ones are compared in a
 * second exchange of the whole text. */
#define INLINE_BYTES 512
#define MAX_PARTS (1 + DLRUN_DISTRIBUTED_MAX_FIELDS)
/* Records on the stack for jobs up to this size: an agreement that one
 * process cannot make for want of memory would leave its peers waiting. */
#define STACK_RECORDS 32

/* What one process says of a call before it runs. Values are compared
 * whole, byte for byte: their lengths and first bytes here, the rest, when
 * they are longer, in the second exchange. */
typedef struct call_record {
  uint64_t seq;            /* its collective calls so far */
  int32_t status;          /* DLRUN_OK, or how its own checks failed */
  uint32_t len[MAX_PARTS]; /* the bytes of the call's name and of each field */
  char error[200];         /* the message of its failure */
  char text[INLINE_BYTES]; /* the parts one after another, as far as they fit */
} call_record;

/* One value of a call: its bytes (any, NUL included). */
typedef struct part {
  const char *text;
  size_t len;
} part;

/* Bytes of a value a message quotes. */
#define QUOTED_BYTES 95

/* `v` quoted for a message, its first QUOTED_BYTES, with NUL, backslash and
 * control characters escaped ('a\0b'), "..." when cut. */
static const char *quoted(part v, char *buf, size_t n) {
  size_t k = 0, shown = 0;
  buf[k++] = '\'';
  for (; shown < v.len && shown < QUOTED_BYTES && k + 8 < n; shown++) {
    unsigned char c = (unsigned char)v.text[shown];
    if (c == '\0') k += (size_t)snprintf(buf + k, n - k, "\\0");
    else if (c == '\\') k += (size_t)snprintf(buf + k, n - k, "\\\\");
    else if (c == '\n') k += (size_t)snprintf(buf + k, n - k, "\\n");
    else if (c < 0x20 || c == 0x7f) k += (size_t)snprintf(buf + k, n - k, "\\x%02x", c);
    else buf[k++] = (char)c;
  }
  if (shown < v.len && k + 4 < n) k += (size_t)snprintf(buf + k, n - k, "...");
  snprintf(buf + k, n - k, "'");
  return buf;
}

/* Where parts a and b of records whose values are la and lb bytes long
 * first differ: a byte index, -2 when they differ beyond the bytes at hand
 * (a and b are cut), -1 when they are equal. */
static ptrdiff_t first_difference(part a, size_t la, part b, size_t lb) {
  size_t n = a.len < b.len ? a.len : b.len;
  for (size_t i = 0; i < n; i++)
    if (a.text[i] != b.text[i]) return (ptrdiff_t)i;
  if (la == lb && a.len == b.len) return la == a.len ? -1 : -2;
  if (a.len == la || b.len == lb) return (ptrdiff_t)n; /* one ends there */
  return la == lb ? -1 : -2;
}

/* Part p of a record whose text starts at `text` (its inline text, or its
 * whole text), cut to the `avail` bytes at hand. */
static part part_of(const call_record *r, const char *text, size_t avail, size_t p) {
  size_t off = 0;
  for (size_t i = 0; i < p; i++) off += r->len[i];
  size_t len = r->len[p];
  if (off >= avail) len = 0;
  else if (off + len > avail) len = avail - off;
  return (part){text + off, len};
}

/* How a disagreement reads. `label` names the call in a timeout's message
 * ("sync_global_devices('a')"); with `what`, a field that differs reads
 * "<what> mismatch: process 0 has '...', process 1 '...'", as a ValueError
 * when value_error, for calls of one field. */
typedef struct agreement_style {
  const char *label, *what;
  bool value_error;
} agreement_style;

/* The message of parts that differ (index p, 0 the call's name) between
 * this process (me, with `a`) and process r (with `b`); `at` where they
 * first differ (-2: unknown), named when the quoted starts look alike. */
static dlrun_status mismatch(const char *call, size_t p, const dlrun_distributed_field *fields,
                             agreement_style style, part a, int r, part b, ptrdiff_t at) {
  char qa[400], qb[400], where[64] = "";
  int me = dlrun_process_index();
  quoted(a, qa, sizeof qa);
  quoted(b, qb, sizeof qb);
  if (!strcmp(qa, qb) && at >= 0)
    snprintf(where, sizeof where, " (they differ from byte %td on)", at);
  if (p == 0)
    return dlrun_fail(DLRUN_ERR_RUNTIME,
                      "%s mismatch: process %d called %s, process %d %s%s (every process must "
                      "make the same collective calls in the same order)",
                      call, me, qa, r, qb, where);
  if (style.what)
    return dlrun_fail(style.value_error ? DLRUN_ERR_VALUE : DLRUN_ERR_RUNTIME,
                      "%s mismatch: process %d has %s, process %d %s%s", style.what, me, qa, r,
                      qb, where);
  return dlrun_fail(DLRUN_ERR_RUNTIME,
                    "%s mismatch: %s differs: process %d has %s, process %d %s%s", call,
                    fields ? fields[p - 1].name : "an argument", me, qa, r, qb, where);
}

/* The first disagreement of record o (process r) with mine, as the call's
 * error: another call, another point in the order, a failure there, a
 * field that differs; DLRUN_OK when they agree as far as the texts at hand
 * go (text_mine and text_o, at most `avail` bytes of each). */
static dlrun_status compare(const char *call, const dlrun_distributed_field *fields, size_t nparts,
                            agreement_style style, const call_record *mine,
                            const char *text_mine, const call_record *o, const char *text_o,
                            size_t avail, int r) {
  /* Every part a record can hold: a call passed with more fields on one
   * process than on another differs too. */
  for (size_t p = 0; p < MAX_PARTS; p++) {
    part a = part_of(mine, text_mine, avail, p), b = part_of(o, text_o, avail, p);
    ptrdiff_t at = first_difference(a, mine->len[p], b, o->len[p]);
    if (at != -1)
      return mismatch(call, p, p < nparts ? fields : NULL, style, a, r, b, at);
    if (p > 0) continue;
    if (o->seq != mine->seq)
      return dlrun_fail(DLRUN_ERR_RUNTIME,
                        "%s mismatch: process %d is at collective call %llu, process %d at %llu "
                        "(every process must make the same collective calls in the same order)",
                        call, dlrun_process_index(), (unsigned long long)mine->seq, r,
                        (unsigned long long)o->seq);
    if (o->status)
      return dlrun_fail(DLRUN_ERR_RUNTIME, "%s failed on process %d: %s: %s", call, r,
                        dlrun_status_name((dlrun_status)o->status), o->error);
  }
  return DLRUN_OK;
}

/* How many records of `all` (n) name another call than `mine`. */
static size_t elsewhere_count(const call_record *mine, const call_record *all, size_t n) {
  size_t len = mine->len[0] < INLINE_BYTES ? mine->len[0] : INLINE_BYTES, count = 0;
  for (size_t r = 0; r < n; r++)
    count += all[r].len[0] != mine->len[0] || memcmp(all[r].text, mine->text, len) != 0;
  return count;
}

/* Every agreement is one record of one size: any two collective calls that
 * meet, whatever they are, read each other's record. Values longer than
 * the record holds are compared in a second exchange, which every process
 * makes or skips alike (they all read the same records), and for which
 * each made room before the first: its room is part of its status.
 * `elsewhere`, when not NULL, is set to how many processes made another
 * call (0 when the exchange itself failed). */
static dlrun_status agree(const char *call, dlrun_status mine_st, size_t nparts,
                          const part *parts, const dlrun_distributed_field *fields,
                          agreement_style style, size_t *elsewhere) {
  if (elsewhere) *elsewhere = 0;
  if (!dlrun_distributed_job_transport()) return mine_st;
  size_t n = (size_t)dlrun_process_count();
  call_record mine = {.seq = ++collectives, .status = (int32_t)mine_st};
  size_t total = 0;
  for (size_t p = 0; p < nparts; p++) {
    mine.len[p] = (uint32_t)parts[p].len;
    if (total < INLINE_BYTES)
      memcpy(mine.text + total, parts[p].text,
             parts[p].len < INLINE_BYTES - total ? parts[p].len : INLINE_BYTES - total);
    total += parts[p].len;
  }
  /* Room for the second exchange: this process's text whole, and every
   * process's (the same length, or the first exchange already differs). */
  char *whole = NULL, *all_whole = NULL;
  if (total > INLINE_BYTES && !mine_st) {
    whole = dlrun_malloc(total);
    all_whole = whole ? dlrun_malloc(total * n) : NULL;
    if (!all_whole) mine_st = dlrun_fail_oom_host(whole ? total * n : total);
    mine.status = (int32_t)mine_st;
    for (size_t p = 0, off = 0; whole && p < nparts; off += parts[p++].len)
      memcpy(whole + off, parts[p].text, parts[p].len);
  }
  if (mine_st) snprintf(mine.error, sizeof mine.error, "%s", dlrun_last_error());
  call_record stack[STACK_RECORDS];
  call_record *all = n <= STACK_RECORDS ? stack : dlrun_calloc(n, sizeof *all);
  if (!all) {
    dlrun_free(whole);
    dlrun_free(all_whole);
    return mine_st ? mine_st : dlrun_fail_oom_host(n * sizeof *all);
  }
  char err[320] = "";
  int rc = dlrun_distributed_allgather(&mine, sizeof mine, all, err, sizeof err);
  if (elsewhere && rc == DLRUN_TRANSPORT_OK) *elsewhere = elsewhere_count(&mine, all, n);
  const char *label = style.label ? style.label : call;
  dlrun_status st = DLRUN_OK;
  /* The second exchange when every record (not only this one) agrees with
   * this one: every process then decides alike. */
  bool again = rc == DLRUN_TRANSPORT_OK && total > INLINE_BYTES;
  for (size_t r = 0; r < n && again; r++)
    again = all[r].status == DLRUN_OK && all[r].seq == mine.seq &&
            !memcmp(all[r].len, mine.len, sizeof mine.len) &&
            !memcmp(all[r].text, mine.text, INLINE_BYTES);
  if (mine_st) {
    st = dlrun_fail(mine_st, "%s", mine.error); /* this process's own error, as it was */
  } else if (rc != DLRUN_TRANSPORT_OK) {
    st = dlrun_fail(DLRUN_ERR_RUNTIME, "%s: %s", label, err);
  } else if (!again) {
    for (size_t r = 0; r < n && !st; r++)
      st = compare(call, fields, nparts, style, &mine, mine.text, &all[r], all[r].text,
                   INLINE_BYTES, (int)r);
  } else {
    rc = dlrun_distributed_allgather(whole, total, all_whole, err, sizeof err);
    if (rc != DLRUN_TRANSPORT_OK) st = dlrun_fail(DLRUN_ERR_RUNTIME, "%s: %s", label, err);
    for (size_t r = 0; r < n && !st; r++)
      st = compare(call, fields, nparts, style, &mine, whole, &all[r], all_whole + r * total,
                   total, (int)r);
  }
  if (all != stack) dlrun_free(all);
  dlrun_free(whole);
  dlrun_free(all_whole);
  return st;
}

/* The parts of a call: its name, then its fields' values. */
static size_t parts_of(const char *call, size_t nfields, const dlrun_distributed_field *fields,
                       part *parts) {
  if (nfields > DLRUN_DISTRIBUTED_MAX_FIELDS) nfields = DLRUN_DISTRIBUTED_MAX_FIELDS;
  parts[0] = (part){call, strlen(call)};
  for (size_t f = 0; f < nfields; f++) {
    const char *v = fields[f].value ? fields[f].value : "";
    parts[f + 1] = (part){v, strlen(v)};
  }
  return nfields + 1;
}

dlrun_status dlrun_distributed_agree_call(const char *call, dlrun_status mine_st, size_t nfields,
                                          const dlrun_distributed_field *fields) {
  part parts[MAX_PARTS];
  size_t nparts = parts_of(call, nfields, fields, parts);
  return agree(call, mine_st, nparts, parts, fields, (agreement_style){0}, NULL);
}

dlrun_status dlrun_distributed_agree_one(const char *call, const char *label, const char *what,
                                         const char *value, bool as_value_error) {
  dlrun_distributed_field field = {what, value};
  part parts[MAX_PARTS];
  size_t nparts = parts_of(call, 1, &field, parts);
  agreement_style style = {.label = label, .what = what, .value_error = as_value_error};
  return agree(call, DLRUN_OK, nparts, parts, &field, style, NULL);
}

dlrun_status dlrun_sync_global_n(const char *name, size_t len) {
  if (!name) name = "", len = 0;
  char label[400], q[400];
  snprintf(label, sizeof label, "sync_global_devices(%s)", quoted((part){name, len}, q, sizeof q));
  const char *what = "sync_global_devices name";
  dlrun_distributed_field field = {what, name}; /* its name, for messages */
  part parts[] = {{"sync_global_devices", strlen("sync_global_devices")}, {name, len}};
  agreement_style style = {.label = label, .what = what};
  return agree(parts[0].text, DLRUN_OK, 2, parts, &field, style, NULL);
}

dlrun_status dlrun_sync_global(const char *name) {
  return dlrun_sync_global_n(name, name ? strlen(name) : 0);
}

static double monotonic_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* Whether the last finish met every process at its end. */
static bool all_at_end;

bool dlrun_distributed_all_at_end(void) { return all_at_end; }

/* Met at another call, a process fails there and goes on; this one waits at
 * its end, meeting again until every process is at its end, so that ending
 * the job cannot cut short their errors. Bounded: each meeting by the
 * timeout, and no new one starts after the timeout has passed. The error
 * returned is the first meeting's. */
dlrun_status dlrun_distributed_finish(const char *what) {
  part call = {what ? what : "dlrun_distributed_finish", 0};
  call.len = strlen(call.text);
  size_t elsewhere;
  dlrun_status st = agree(call.text, DLRUN_OK, 1, &call, NULL, (agreement_style){0}, &elsewhere);
  all_at_end = st == DLRUN_OK;
  if (!st || !elsewhere) return st;
  char first[1024];
  snprintf(first, sizeof first, "%s", dlrun_last_error());
  double deadline = monotonic_s() + dlrun_distributed_timeout();
  while (elsewhere && monotonic_s() < deadline)
    all_at_end = !agree(call.text, DLRUN_OK, 1, &call, NULL, (agreement_style){0}, &elsewhere);
  return dlrun_fail(st, "%s", first);
}

dlrun_status dlrun_distributed_agree_config(const char *what, const char *value) {
  return dlrun_distributed_agree_one(what, NULL, what, value, true);
}

