/* Trace events streamed to a file as Chrome trace-event JSON.
 *
 * Each event is written as it happens through one stdio buffer of fixed size,
 * so a long traced run takes no more memory than a short one. Track names
 * are kept (they are few: one per device queue and host thread) and their
 * metadata events are written when a track is first used; the JSON array is
 * closed on stop. */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "alloc.h"
#include "status_impl.h"
#include "trace_impl.h"

#define MAX_TRACKS 8192
#define FILE_BUFFER (64u << 10)

atomic_bool dlrun_tracing;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static FILE *out;          /* the trace file while tracing, else NULL */
static char *out_path;     /* its name, for messages */
static bool ever_started;  /* tracing was started once in this process */
static int write_errno;    /* first write error seen, 0 when none */
static char *track_names[MAX_TRACKS]; /* tid -> name; devices first come first */
static int ntracks;
static atomic_uint_fast64_t origin;
static _Thread_local int thread_tid; /* 0: not yet assigned */
static atomic_int host_threads;

static uint64_t monotonic_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000000u + (uint64_t)t.tv_nsec / 1000u;
}

uint64_t dlrun_trace_now(void) { return monotonic_us() - atomic_load(&origin); }

/* Device queues under one process ("devices"), host threads under another. */
static int pid_of(const char *track) { return strncmp(track, "host thread", 11) == 0 ? 2 : 1; }

static void note_write_error(void) {
  if (!write_errno && ferror(out)) write_errno = errno ? errno : EIO;
}

/* The tid of a named track, made (and announced in the file) on first use.
 * Called with mu held. Tracks past MAX_TRACKS share the last tid. */
static int track_id(const char *name) {
  for (int i = 0; i < ntracks; i++)
    if (strcmp(track_names[i], name) == 0) return i + 1;
  if (ntracks == MAX_TRACKS) return MAX_TRACKS;
  char *copy = dlrun_strdup(name);
  if (!copy) return MAX_TRACKS;
  track_names[ntracks++] = copy;
  fprintf(out,
          ",\n  {\"ph\": \"M\", \"name\": \"thread_name\", \"pid\": %d, \"tid\": %d, "
          "\"args\": {\"name\": \"%s\"}}",
          pid_of(name), ntracks, name);
  return ntracks;
}

static void clear_tracks(void) {
  for (int i = 0; i < ntracks; i++) dlrun_free(track_names[i]);
  ntracks = 0;
}

static dlrun_status fail_write(const char *path, int err) {
  return dlrun_fail(DLRUN_ERR_RUNTIME, "cannot write the trace file \"%s\": %s", path,
                    strerror(err));
}

/* A trace still on at exit is finished then, whoever started it (a host,
 * dl.trace_start, DLRUN_TRACE): the file is whole however the process ends
 * through exit(). A write error can only be told on stderr by then. In a
 * module unloaded earlier (dlclose), this runs at the unload. */
static void finish_at_exit(void) {
  if (dlrun_trace_is_on() && dlrun_trace_stop() != DLRUN_OK) {
    fprintf(stderr, "dlrun: RuntimeError: %s\n", dlrun_last_error());
    fflush(stderr);
  }
}

dlrun_status dlrun_trace_start(const char *path) {
  if (!path) return dlrun_fail(DLRUN_ERR_VALUE, "dlrun_trace_start: path is NULL");
  pthread_mutex_lock(&mu);
  dlrun_status st = DLRUN_OK;
  FILE *f = NULL;
  char *copy = NULL;
  if (out) {
    st = dlrun_fail(DLRUN_ERR_RUNTIME, "tracing is already on (writing \"%s\")", out_path);
  } else if (!(f = fopen(path, "we"))) { /* "e": not inherited by child processes */
    st = fail_write(path, errno);
  } else if (!(copy = dlrun_strdup(path))) {
    fclose(f);
    st = dlrun_fail_oom_host(strlen(path) + 1);
  } else {
    setvbuf(f, NULL, _IOFBF, FILE_BUFFER);
    fputs("{\"displayTimeUnit\": \"ms\", \"traceEvents\": [\n"
          "  {\"ph\": \"M\", \"name\": \"process_name\", \"pid\": 1, \"args\": {\"name\": "
          "\"devices\"}},\n"
          "  {\"ph\": \"M\", \"name\": \"process_name\", \"pid\": 2, \"args\": {\"name\": "
          "\"host threads\"}}",
          f);
    out = f;
    out_path = copy;
    write_errno = 0;
    atomic_store(&origin, monotonic_us());
    atomic_store(&dlrun_tracing, true);
    if (!ever_started) atexit(finish_at_exit);
    ever_started = true;
  }
  pthread_mutex_unlock(&mu);
  return st;
}

int dlrun_trace_is_on(void) {
  pthread_mutex_lock(&mu);
  int on = out != NULL;
  pthread_mutex_unlock(&mu);
  return on;
}

bool dlrun_trace_was_started(void) {
  pthread_mutex_lock(&mu);
  bool started = ever_started;
  pthread_mutex_unlock(&mu);
  return started;
}

void dlrun_trace_event(const char *track, const char *category, const char *name,
                       uint64_t start, const char *args_fmt, ...) {
  if (!dlrun_trace_enabled()) return;
  uint64_t end = dlrun_trace_now();
  char args[256] = "";
  if (args_fmt) {
    va_list ap;
    va_start(ap, args_fmt);
    vsnprintf(args, sizeof args, args_fmt, ap);
    va_end(ap);
  }
  char host_name[32];
  if (!track) {
    if (!thread_tid) thread_tid = atomic_fetch_add(&host_threads, 1) + 1;
    snprintf(host_name, sizeof host_name, "host thread %d", thread_tid);
    track = host_name;
  }
  pthread_mutex_lock(&mu);
  if (out) { /* tracing may have stopped since the check above */
    int tid = track_id(track);
    fprintf(out,
            ",\n  {\"ph\": \"X\", \"cat\": \"%s\", \"name\": \"%s\", \"pid\": %d, \"tid\": %d, "
            "\"ts\": %llu, \"dur\": %llu, \"args\": {%s}}",
            category, name, pid_of(track), tid, (unsigned long long)start,
            (unsigned long long)(end > start ? end - start : 0), args);
    note_write_error();
  }
  pthread_mutex_unlock(&mu);
}

void dlrun_trace_counter(const char *name, const char *series, uint64_t value) {
  if (!dlrun_trace_enabled()) return;
  pthread_mutex_lock(&mu);
  if (out) {
    fprintf(out,
            ",\n  {\"ph\": \"C\", \"cat\": \"memory\", \"name\": \"%s\", \"pid\": 1, "
            "\"ts\": %llu, \"args\": {\"%s\": %llu}}",
            name, (unsigned long long)dlrun_trace_now(), series, (unsigned long long)value);
    note_write_error();
  }
  pthread_mutex_unlock(&mu);
}

static atomic_int pending_events;

void dlrun_trace_pending(int delta) { atomic_fetch_add(&pending_events, delta); }

/* Wait (bounded: work that never completes must not hold the exit) for the
 * events of work in flight. */
static void wait_pending_events(void) {
  const struct timespec tick = {.tv_nsec = 1000000};
  for (int ms = 0; ms < 5000 && atomic_load(&pending_events) > 0; ms++) nanosleep(&tick, NULL);
}

dlrun_status dlrun_trace_stop(void) {
  if (dlrun_trace_enabled()) wait_pending_events();
  atomic_store(&dlrun_tracing, false);
  pthread_mutex_lock(&mu);
  dlrun_status st = DLRUN_OK;
  if (!out) {
    st = dlrun_fail(DLRUN_ERR_RUNTIME, "tracing is not on");
  } else {
    fputs("\n]}\n", out);
    note_write_error();
    if (fclose(out) != 0 && !write_errno) write_errno = errno ? errno : EIO;
    if (write_errno) st = fail_write(out_path, write_errno);
    out = NULL;
    dlrun_free(out_path);
    out_path = NULL;
    clear_tracks();
  }
  pthread_mutex_unlock(&mu);
  return st;
}
