/* Trace events in memory, written as Chrome trace-event JSON on stop. */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "alloc.h"
#include "status_impl.h"
#include "trace_impl.h"

#define MAX_EVENTS (1u << 20) /* beyond this, events are counted as dropped */
#define MAX_TRACKS 8192

atomic_bool dlrun_tracing;

typedef struct event {
  int tid;
  uint64_t ts, dur;
  char category[12];
  char name[24];
  char args[160];
} event;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static event *events;
static size_t nevents, capacity, dropped;
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

/* The tid of a named track, made on first use. Called with mu held. */
static int track_id(const char *name) {
  for (int i = 0; i < ntracks; i++)
    if (strcmp(track_names[i], name) == 0) return i + 1;
  if (ntracks == MAX_TRACKS) return MAX_TRACKS;
  char *copy = dlrun_strdup(name);
  if (!copy) return MAX_TRACKS;
  track_names[ntracks++] = copy;
  return ntracks;
}

static void clear_locked(void) {
  dlrun_free(events);
  events = NULL;
  nevents = capacity = dropped = 0;
  for (int i = 0; i < ntracks; i++) dlrun_free(track_names[i]);
  ntracks = 0;
}

void dlrun_trace_start(void) {
  pthread_mutex_lock(&mu);
  clear_locked();
  atomic_store(&origin, monotonic_us());
  pthread_mutex_unlock(&mu);
  atomic_store(&dlrun_tracing, true);
}

void dlrun_trace_event(const char *track, const char *category, const char *name,
                       uint64_t start, const char *args_fmt, ...) {
  if (!dlrun_trace_enabled()) return;
  uint64_t end = dlrun_trace_now();
  event e = {.ts = start, .dur = end > start ? end - start : 0};
  snprintf(e.category, sizeof e.category, "%s", category);
  snprintf(e.name, sizeof e.name, "%s", name);
  if (args_fmt) {
    va_list ap;
    va_start(ap, args_fmt);
    vsnprintf(e.args, sizeof e.args, args_fmt, ap);
    va_end(ap);
  }
  char host_name[32];
  if (!track) {
    if (!thread_tid) thread_tid = atomic_fetch_add(&host_threads, 1) + 1;
    snprintf(host_name, sizeof host_name, "host thread %d", thread_tid);
    track = host_name;
  }
  pthread_mutex_lock(&mu);
  e.tid = track_id(track);
  if (nevents == capacity && capacity < MAX_EVENTS) {
    size_t grown = capacity ? capacity * 2 : 1024;
    event *more = dlrun_malloc(grown * sizeof *more);
    if (more) {
      if (nevents) memcpy(more, events, nevents * sizeof *more);
      dlrun_free(events);
      events = more;
      capacity = grown;
    }
  }
  if (nevents < capacity) events[nevents++] = e;
  else dropped++;
  pthread_mutex_unlock(&mu);
}

/* Device streams under one process ("devices"), host threads under another. */
static int pid_of(const char *track) { return strncmp(track, "host thread", 11) == 0 ? 2 : 1; }

static void write_json(FILE *f) {
  fprintf(f, "{\"displayTimeUnit\": \"ms\", \"otherData\": {\"dropped_events\": %zu},\n"
             " \"traceEvents\": [\n",
          dropped);
  fprintf(f, "  {\"ph\": \"M\", \"name\": \"process_name\", \"pid\": 1, \"args\": {\"name\": \"devices\"}},\n");
  fprintf(f, "  {\"ph\": \"M\", \"name\": \"process_name\", \"pid\": 2, \"args\": {\"name\": \"host threads\"}}");
  for (int i = 0; i < ntracks; i++)
    fprintf(f, ",\n  {\"ph\": \"M\", \"name\": \"thread_name\", \"pid\": %d, \"tid\": %d, "
               "\"args\": {\"name\": \"%s\"}}",
            pid_of(track_names[i]), i + 1, track_names[i]);
  for (size_t i = 0; i < nevents; i++) {
    const event *e = &events[i];
    const char *track = e->tid <= ntracks ? track_names[e->tid - 1] : "other";
    fprintf(f, ",\n  {\"ph\": \"X\", \"cat\": \"%s\", \"name\": \"%s\", \"pid\": %d, \"tid\": %d, "
               "\"ts\": %llu, \"dur\": %llu, \"args\": {%s}}",
            e->category, e->name, pid_of(track), e->tid, (unsigned long long)e->ts,
            (unsigned long long)e->dur, e->args);
  }
  fprintf(f, "\n]}\n");
}

dlrun_status dlrun_trace_stop(const char *path) {
  if (!path) {
    atomic_store(&dlrun_tracing, false);
    return dlrun_fail(DLRUN_ERR_VALUE, "dlrun_trace_stop: path is NULL");
  }
  atomic_store(&dlrun_tracing, false);
  pthread_mutex_lock(&mu);
  dlrun_status st = DLRUN_OK;
  FILE *f = path ? fopen(path, "w") : NULL;
  if (!f) {
    st = dlrun_fail(DLRUN_ERR_RUNTIME, "cannot write the trace file \"%s\"", path ? path : "");
  } else {
    write_json(f);
    if (fclose(f) != 0)
      st = dlrun_fail(DLRUN_ERR_RUNTIME, "cannot write the trace file \"%s\"", path);
  }
  clear_locked();
  pthread_mutex_unlock(&mu);
  return st;
}
