#include "report.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "dlrun/dlrun.h"
#include "dlrun/stats.h"

static const char *human(unsigned long long bytes, char *buf, size_t n) {
  static const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = (double)bytes;
  int u = 0;
  while (v >= 1024.0 && u < 4) {
    v /= 1024.0;
    u++;
  }
  if (u == 0) snprintf(buf, n, "%lluB", bytes);
  else snprintf(buf, n, "%.2f%s", v, units[u]);
  return buf;
}

/* ---- --stats ----
 *
 * The table is printed at the end of the script, while its globals still
 * hold what they hold; the rows are kept, with a reference to the runtime,
 * so that what closing the Lua state released can be told after. */

static dlrun_runtime *stats_rt;       /* kept from the table until after the close */
static dlrun_device_report *at_end;   /* the table's rows */
static size_t at_end_rows;
static bool table_printed;

/* The rows of rt's devices of this process once their queued work is done
 * (frees and copies included), malloc'd; *count rows. NULL when none. */
static dlrun_device_report *read_rows(dlrun_runtime *rt, size_t *count) {
  size_t n = dlrun_runtime_report(rt, NULL, 0);
  dlrun_device_report *rows = n ? malloc(n * sizeof *rows) : NULL;
  *count = rows ? n : 0;
  if (!rows) return NULL;
  dlrun_runtime_report(rt, rows, n);
  for (size_t i = 0; i < n; i++) dlrun_device_synchronize(rows[i].device);
  dlrun_runtime_report(rt, rows, n);
  return rows;
}

/* One row per device of this process that was used (another process's
 * figures are its own to print); with many devices, idle ones are
 * summarised in one line. */
void cli_stats_at_end(lua_State *L, FILE *out) {
  if (table_printed) return;
  table_printed = true;
  if (L) lua_gc(L, LUA_GCCOLLECT, 0); /* what is alive is what is still reachable */
  stats_rt = dlrun_default_runtime_if_started();
  if (!stats_rt) {
    fprintf(out, "dlrun stats: no device was used\n");
    return;
  }
  at_end = read_rows(stats_rt, &at_end_rows);
  fprintf(out, "dlrun stats (%s)", dlrun_runtime_spec(stats_rt));
  if (dlrun_process_count() > 1)
    fprintf(out, ", process %d of %d: this process's devices", dlrun_process_index(),
            dlrun_process_count());
  const char *workers;
  dlrun_runtime_workers(stats_rt, &workers);
  fprintf(out, "\n%s\n", workers);
  fprintf(out, "%-18s %12s %12s %12s %12s %13s %6s %14s\n", "device", "in use", "peak",
          "moved in", "moved out", "largest free", "frag", "exports alive");
  size_t idle = 0;
  for (size_t i = 0; i < at_end_rows; i++) {
    const dlrun_memory_stats *m = &at_end[i].memory;
    const dlrun_device_stats *s = &at_end[i].traffic;
    bool used = m->peak_bytes_in_use || s->bytes_in || s->bytes_out || s->live_exports;
    if (!used && at_end_rows > 16) {
      idle++;
      continue;
    }
    char a[32], b[32], c[32], e[32], f[32];
    fprintf(out, "%-18s %12s %12s %12s %12s %13s %5.1f%% %14lld\n",
            dlrun_device_name(at_end[i].device), human(m->bytes_in_use, a, sizeof a),
            human(m->peak_bytes_in_use, b, sizeof b), human(s->bytes_in, c, sizeof c),
            human(s->bytes_out, e, sizeof e), human(m->largest_free_block_bytes, f, sizeof f),
            100 * m->fragmentation, (long long)s->live_exports);
  }
  if (idle) fprintf(out, "(%zu more devices were not used)\n", idle);
  fflush(out);
}

/* "released when the state closed: 4.00KiB on SimDevice(id=0), 512B on
 * SimDevice(id=1); 1 export", when closing released anything. */
void cli_stats_after_close(FILE *out) {
  if (!stats_rt) return;
  size_t n;
  dlrun_device_report *now = read_rows(stats_rt, &n);
  long long exports = 0;
  bool any = false;
  for (size_t i = 0; now && i < n && i < at_end_rows; i++) {
    uint64_t before = at_end[i].memory.bytes_in_use, after = now[i].memory.bytes_in_use;
    exports += (long long)(at_end[i].traffic.live_exports - now[i].traffic.live_exports);
    if (before <= after) continue;
    char a[32];
    fprintf(out, "%s%s on %s", any ? ", " : "dlrun stats: released when the state closed: ",
            human(before - after, a, sizeof a), dlrun_device_name(now[i].device));
    any = true;
  }
  if (exports > 0)
    fprintf(out, "%s%lld export%s", any ? "; " : "dlrun stats: released when the state closed: ",
            exports, exports == 1 ? "" : "s");
  if (any || exports > 0) fputc('\n', out);
  fflush(out);
  free(now);
  free(at_end);
  at_end = NULL;
  dlrun_runtime_release(stats_rt);
  stats_rt = NULL;
}

/* ---- progress ----
 *
 * The line is drawn on the terminal by a thread, straight to the file
 * descriptor. While it runs, stdout (when a terminal) and stderr are
 * replaced by streams that erase the line before anything reaches the
 * terminal, so whatever the script (print, io.write, file:write, warnings)
 * or dlrun itself writes starts on a clean line. The line is drawn only
 * while the cursor is at the start of a line, so it never overwrites a
 * partial line either. */

static pthread_t progress_thread;
static bool progress_running;
static pthread_mutex_t progress_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t progress_cv = PTHREAD_COND_INITIALIZER;
static bool progress_stop;
/* Under progress_mu: */
static bool shown;             /* the progress line is on the terminal */
static bool line_start = true; /* the cursor is at the start of a line */

static void put_all(int fd, const char *buf, size_t n) {
  while (n > 0) {
    ssize_t w = write(fd, buf, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return;
    buf += w;
    n -= (size_t)w;
  }
}

static void erase_locked(void) {
  if (shown) put_all(STDERR_FILENO, "\r\033[K", 4);
  shown = false;
}

static void draw_locked(uint64_t moved, uint64_t total) {
  char a[32], b[32], line[128];
  int n = snprintf(line, sizeof line, "\rdlrun: moving data: %s of %s (%d%%)\033[K",
                   human(moved, a, sizeof a), human(total, b, sizeof b),
                   total ? (int)(100.0 * (double)moved / (double)total) : 0);
  if (n > 0) put_all(STDERR_FILENO, line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1);
  shown = true;
}

/* Poll every 200 ms; show a line once data has been in flight for a second,
 * and erase it when the transfers are done. */
static void *progress_main(void *arg) {
  (void)arg;
  double pending_since = -1;
  uint64_t base = 0;
  pthread_mutex_lock(&progress_mu);
  while (!progress_stop) {
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_nsec += 200000000;
    if (until.tv_nsec >= 1000000000) {
      until.tv_sec++;
      until.tv_nsec -= 1000000000;
    }
    pthread_cond_timedwait(&progress_cv, &progress_mu, &until);
    if (progress_stop) break;
    pthread_mutex_unlock(&progress_mu); /* writers need not wait for the poll */
    uint64_t queued = 0, done = 0;
    dlrun_runtime *rt = dlrun_default_runtime_if_started();
    if (rt) dlrun_transfer_progress(rt, &queued, &done);
    dlrun_runtime_release(rt);
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    double t = (double)now.tv_sec + (double)now.tv_nsec / 1e9;
    pthread_mutex_lock(&progress_mu);
    if (done >= queued) {
      erase_locked();
      pending_since = -1;
      base = done;
      continue;
    }
    if (pending_since < 0) pending_since = t;
    if (t - pending_since >= 1.0 && line_start) draw_locked(done - base, queued - base);
  }
  erase_locked();
  pthread_mutex_unlock(&progress_mu);
  return NULL;
}

/* The write function of the replacement streams: erase the line, then write
 * to the descriptor given as the cookie. */
static ssize_t terminal_write(void *cookie, const char *buf, size_t n) {
  if (n == 0) return 0;
  pthread_mutex_lock(&progress_mu);
  erase_locked();
  put_all((int)(intptr_t)cookie, buf, n);
  line_start = buf[n - 1] == '\n';
  pthread_mutex_unlock(&progress_mu);
  return (ssize_t)n;
}

/* A stream writing to `fd` through terminal_write, buffered as `mode`; the
 * old stream is flushed first. `old` when none can be made. */
static FILE *terminal_stream(FILE *old, int fd, int mode) {
  cookie_io_functions_t io = {.write = terminal_write};
  FILE *f = fopencookie((void *)(intptr_t)fd, "w", io);
  if (!f) return old;
  fflush(old);
  setvbuf(f, NULL, mode, mode == _IONBF ? 0 : BUFSIZ);
  return f;
}

void cli_progress_start(void) {
  if (!isatty(STDERR_FILENO)) return;
  progress_stop = false;
  progress_running = pthread_create(&progress_thread, NULL, progress_main, NULL) == 0;
  if (!progress_running) return;
  /* Before Lua opens its io library, which keeps these streams. They stay
   * for good: exit flushes them. */
  if (isatty(STDOUT_FILENO)) stdout = terminal_stream(stdout, STDOUT_FILENO, _IOLBF);
  stderr = terminal_stream(stderr, STDERR_FILENO, _IONBF);
}

void cli_progress_stop(void) {
  if (!progress_running) return;
  pthread_mutex_lock(&progress_mu);
  progress_stop = true;
  pthread_cond_signal(&progress_cv);
  pthread_mutex_unlock(&progress_mu);
  pthread_join(progress_thread, NULL);
  progress_running = false;
}

/* ---- where a script raised ---- */

int cli_push_script_position(lua_State *L, const char *lua_dir) {
  lua_Debug ar;
  size_t dir_len = lua_dir ? strlen(lua_dir) : 0;
  for (int level = 1; lua_getstack(L, level, &ar); level++) {
    if (!lua_getinfo(L, "Sl", &ar) || ar.currentline <= 0) continue;
    const char *src = ar.source;
    if (src[0] == '@' && dir_len && strncmp(src + 1, lua_dir, dir_len) == 0) continue;
    lua_pushfstring(L, "%s:%d", ar.short_src, ar.currentline);
    return 1;
  }
  return 0;
}
