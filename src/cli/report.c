#include "report.h"

#include <pthread.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "dlrun/dlrun.h"
#include "dlrun/trace.h"

#include <lauxlib.h>
#include <lualib.h>

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

/* One row per device that was used; with many devices, idle ones are
 * summarised in one line. */
void cli_print_stats(FILE *out) {
  dlrun_runtime *rt = dlrun_default_runtime_if_started();
  if (!rt) {
    fprintf(out, "dlrun stats: no device was used\n");
    return;
  }
  fprintf(out, "dlrun stats (%s)\n", dlrun_runtime_spec(rt));
  fprintf(out, "%-18s %12s %12s %12s %12s %14s\n", "device", "in use", "peak", "moved in",
          "moved out", "exports alive");
  const char *platforms[] = {"sim", "cpu"};
  size_t idle = 0;
  for (size_t p = 0; p < 2; p++) {
    size_t n = dlrun_device_count(rt, platforms[p]);
    for (size_t i = 0; i < n; i++) {
      dlrun_device *d = dlrun_device_get(rt, platforms[p], i);
      dlrun_memory_stats m;
      dlrun_device_stats s;
      dlrun_device_memory_stats(d, DLRUN_MEM_DEVICE, &m);
      dlrun_device_stats_get(d, &s);
      bool used = m.peak_bytes_in_use || s.bytes_in || s.bytes_out || s.live_exports;
      if (!used && n > 16) {
        idle++;
        continue;
      }
      char a[32], b[32], c[32], e[32];
      fprintf(out, "%-18s %12s %12s %12s %12s %14lld\n", dlrun_device_name(d),
              human(m.bytes_in_use, a, sizeof a), human(m.peak_bytes_in_use, b, sizeof b),
              human(s.bytes_in, c, sizeof c), human(s.bytes_out, e, sizeof e),
              (long long)s.live_exports);
    }
  }
  if (idle) fprintf(out, "(%zu more devices were not used)\n", idle);
  dlrun_runtime_release(rt);
}

/* ---- progress ---- */

static pthread_t progress_thread;
static bool progress_running;
static pthread_mutex_t progress_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t progress_cv = PTHREAD_COND_INITIALIZER;
static bool progress_stop;
/* Shared with the writers below, under progress_mu: */
static bool shown;            /* the progress line is on the terminal */
static int writers;           /* writes to the terminal under way */
static bool line_start = true; /* the terminal's cursor is at the start of a line */

static void erase_locked(void) {
  if (shown) fputs("\r\033[K", stderr);
  shown = false;
}

/* Poll every 200 ms; show a line once data has been in flight for a second,
 * and clear it when the transfers are done. The line is drawn only at the
 * start of a terminal line, so it never overwrites what a script wrote. */
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
    dlrun_runtime *rt = dlrun_default_runtime_if_started();
    if (!rt) continue;
    uint64_t queued, done;
    dlrun_transfer_progress(rt, &queued, &done);
    dlrun_runtime_release(rt);
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    double t = (double)now.tv_sec + (double)now.tv_nsec / 1e9;
    if (done >= queued) {
      erase_locked();
      pending_since = -1;
      base = done;
      continue;
    }
    if (pending_since < 0) pending_since = t;
    if (t - pending_since < 1.0 || writers || !line_start) continue;
    char a[32], b[32];
    uint64_t total = queued - base, moved = done - base;
    fprintf(stderr, "\rdlrun: moving data: %s of %s (%d%%)\033[K", human(moved, a, sizeof a),
            human(total, b, sizeof b), total ? (int)(100.0 * (double)moved / (double)total) : 0);
    shown = true;
  }
  erase_locked();
  pthread_mutex_unlock(&progress_mu);
  return NULL;
}

void cli_progress_start(void) {
  if (!isatty(STDERR_FILENO)) return;
  progress_stop = false;
  progress_running = pthread_create(&progress_thread, NULL, progress_main, NULL) == 0;
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

void cli_progress_write_begin(void) {
  pthread_mutex_lock(&progress_mu);
  erase_locked();
  writers++;
  pthread_mutex_unlock(&progress_mu);
}

void cli_progress_write_end(int ends_line) {
  pthread_mutex_lock(&progress_mu);
  writers--;
  if (ends_line >= 0) line_start = ends_line;
  pthread_mutex_unlock(&progress_mu);
}

/* ---- script output on the terminal ---- */

/* What a guarded function writes to. */
enum { TO_STDOUT, TO_DEFAULT_OUTPUT, TO_SELF };

static bool stdout_tty, stderr_tty;

/* The FILE a guarded call writes to, when it is the terminal; else NULL. */
static FILE *terminal_target(lua_State *L, int target) {
  FILE *f = stdout;
  if (target != TO_STDOUT) {
    if (target == TO_DEFAULT_OUTPUT) /* io.output(); liolib keeps it under this key */
      lua_getfield(L, LUA_REGISTRYINDEX, "_IO_output");
    else
      lua_pushvalue(L, 1);
    luaL_Stream *s = luaL_testudata(L, -1, LUA_FILEHANDLE);
    f = s && s->closef ? s->f : NULL;
    lua_pop(L, 1);
  }
  if (f == stdout && stdout_tty) return f;
  if (f == stderr && stderr_tty) return f;
  return NULL;
}

/* Whether a write of the arguments from `first` on ends a line: 1, 0, or -1
 * when it writes nothing. */
static int ends_line(lua_State *L, int first) {
  for (int i = lua_gettop(L); i >= first; i--) {
    size_t n = 0;
    if (lua_type(L, i) == LUA_TNUMBER) return 0;
    const char *s = lua_type(L, i) == LUA_TSTRING ? lua_tolstring(L, i, &n) : NULL;
    if (n) return s[n - 1] == '\n';
  }
  return -1;
}

/* print, io.write or file:write (upvalue 1) writing to the terminal: erase
 * the progress line first and hold it back until the write is done. */
static int guarded_write(lua_State *L) {
  int target = (int)lua_tointeger(L, lua_upvalueindex(2));
  int n = lua_gettop(L);
  bool guard = terminal_target(L, target) != NULL;
  int end = target == TO_STDOUT ? 1 : ends_line(L, target == TO_SELF ? 2 : 1);
  lua_pushvalue(L, lua_upvalueindex(1));
  lua_insert(L, 1);
  if (!guard) {
    lua_call(L, n, LUA_MULTRET);
    return lua_gettop(L);
  }
  cli_progress_write_begin();
  int status = lua_pcall(L, n, LUA_MULTRET, 0); /* not to leave the line held back */
  cli_progress_write_end(status == LUA_OK ? end : -1);
  if (status != LUA_OK) return lua_error(L);
  return lua_gettop(L);
}

/* Replace t[name] (t at the top of the stack) by its guarded version. */
static void guard_field(lua_State *L, const char *name, int target) {
  lua_getfield(L, -1, name);
  if (!lua_isfunction(L, -1)) {
    lua_pop(L, 1);
    return;
  }
  lua_pushinteger(L, target);
  lua_pushcclosure(L, guarded_write, 2);
  lua_setfield(L, -2, name);
}

void cli_progress_guard_output(lua_State *L) {
  if (!progress_running) return;
  stdout_tty = isatty(STDOUT_FILENO);
  stderr_tty = isatty(STDERR_FILENO);
  lua_pushglobaltable(L);
  guard_field(L, "print", TO_STDOUT);
  lua_pop(L, 1);
  if (lua_getglobal(L, "io") == LUA_TTABLE) guard_field(L, "write", TO_DEFAULT_OUTPUT);
  lua_pop(L, 1);
  if (luaL_getmetatable(L, LUA_FILEHANDLE) == LUA_TTABLE &&
      lua_getfield(L, -1, "__index") == LUA_TTABLE)
    guard_field(L, "write", TO_SELF);
  lua_pop(L, 2);
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
