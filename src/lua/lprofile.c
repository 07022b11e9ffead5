/* Lua: what `dlrun --trace` and `--stats` give, for any Lua (plain lua5.4,
 * a host): dl.trace_start(path), dl.trace_stop(), dl.stats(). The trace is
 * process-wide, as JAX's jax.profiler.start_trace: a second start raises. */
#include <limits.h>
#include <string.h>
#include <sys/stat.h>

#include "binding.h"

/* Whether the file a is the one sa describes (by device and inode: another
 * spelling or a hard link too). */
static int same_file(const char *a, const struct stat *sa) {
  struct stat sb;
  return stat(a, &sb) == 0 && sb.st_dev == sa->st_dev && sb.st_ino == sa->st_ino;
}

const char *dlrun_lua_running_script(lua_State *L, const char *path) {
  struct stat sp;
  if (stat(path, &sp) != 0) return NULL; /* not there yet: nobody runs it */
  lua_Debug ar;
  for (int level = 0; lua_getstack(L, level, &ar); level++) {
    if (!lua_getinfo(L, "S", &ar) || ar.source[0] != '@') continue;
    if (same_file(ar.source + 1, &sp)) return ar.source + 1; /* the function keeps it alive */
  }
  const char *script = NULL;
  int top = lua_gettop(L);
  if (lua_getglobal(L, "arg") == LUA_TTABLE && lua_rawgeti(L, -1, 0) == LUA_TSTRING) {
    size_t len;
    const char *s = lua_tolstring(L, -1, &len);
    if (strlen(s) == len && same_file(s, &sp)) {
      script = s;
      lua_setfield(L, LUA_REGISTRYINDEX, "dlrun.running_script"); /* keeps it alive */
    }
  }
  lua_settop(L, top);
  return script;
}

/* RuntimeError when the trace file path is a script this state runs,
 * which tracing would truncate. `fn` starts the message. */
void dlrun_lua_check_trace_path(lua_State *L, const char *fn, const char *path) {
  const char *script = dlrun_lua_running_script(L, path);
  if (script)
    dlrun_lua_raise(L, "RuntimeError",
                    "%s: the trace file \"%s\" is the running script \"%s\"; tracing would "
                    "overwrite it: give another file",
                    fn, path, script);
}

/* dl.trace_start(path): trace to this process's file for path (path itself
 * alone; in a job of several processes, its index before the extension);
 * returns that file's name. Never the running script's file. */
static int l_trace_start(lua_State *L) {
  dlrun_lua_check_nargs(L, "trace_start", 1);
  if (lua_type(L, 1) != LUA_TSTRING)
    return dlrun_lua_type_error(L, "trace_start", 1, "path", "a string");
  char path[PATH_MAX];
  dlrun_lua_check_in(L, "trace_start",
                     dlrun_trace_process_path(dlrun_lua_check_cstring(L, 1, "trace_start", "path"),
                                              path, sizeof path));
  dlrun_lua_check_trace_path(L, "trace_start", path);
  dlrun_lua_check_in(L, "trace_start", dlrun_trace_start(path));
  lua_pushstring(L, path);
  return 1;
}

/* dl.trace_stop(): finish the trace file (a RuntimeError when tracing is
 * not on, as JAX's stop_trace, or when a write failed). */
static int l_trace_stop(lua_State *L) {
  dlrun_lua_check_nargs(L, "trace_stop", 0);
  dlrun_lua_check_in(L, "trace_stop", dlrun_trace_stop());
  return 0;
}

static void set_integer(lua_State *L, const char *key, lua_Integer v) {
  lua_pushinteger(L, v);
  lua_setfield(L, -2, key);
}

/* One device's row (dlrun_runtime_report) as a table. */
static void push_row(lua_State *L, const dlrun_device_report *r) {
  lua_createtable(L, 0, 8);
  dlrun_lua_push_device(L, r->device);
  lua_setfield(L, -2, "device");
  set_integer(L, "bytes_in_use", (lua_Integer)r->memory.bytes_in_use);
  set_integer(L, "peak_bytes_in_use", (lua_Integer)r->memory.peak_bytes_in_use);
  set_integer(L, "bytes_moved_in", (lua_Integer)r->traffic.bytes_in);
  set_integer(L, "bytes_moved_out", (lua_Integer)r->traffic.bytes_out);
  set_integer(L, "largest_free_block_bytes", (lua_Integer)r->memory.largest_free_block_bytes);
  lua_pushnumber(L, r->memory.fragmentation);
  lua_setfield(L, -2, "fragmentation");
  set_integer(L, "live_exports", (lua_Integer)r->traffic.live_exports);
  dlrun_lua_set_printed(L, "record");
}

/* dl.stats(): {spec =, workers =, workers_note =, live_exports =, devices =
 * {row, ...}}, the figures of `dlrun --stats` for this process's devices. */
static int l_stats(lua_State *L) {
  dlrun_lua_check_nargs(L, "stats", 0);
  dlrun_runtime *rt = dlrun_lua_runtime(L);
  size_t n = dlrun_runtime_report(rt, NULL, 0);
  dlrun_device_report *rows = lua_newuserdatauv(L, (n ? n : 1) * sizeof *rows, 0);
  size_t filled = dlrun_runtime_report(rt, rows, n);
  if (filled < n) n = filled;
  lua_createtable(L, 0, 5);
  lua_pushstring(L, dlrun_runtime_spec(rt));
  lua_setfield(L, -2, "spec");
  const char *note;
  set_integer(L, "workers", dlrun_runtime_workers(rt, &note));
  lua_pushstring(L, note);
  lua_setfield(L, -2, "workers_note");
  lua_createtable(L, (int)n, 0);
  lua_Integer exports = 0;
  for (size_t i = 0; i < n; i++) {
    push_row(L, &rows[i]);
    lua_rawseti(L, -2, (lua_Integer)i + 1);
    exports += rows[i].traffic.live_exports;
  }
  dlrun_lua_set_printed(L, "list");
  lua_setfield(L, -2, "devices");
  set_integer(L, "live_exports", exports);
  dlrun_lua_set_printed(L, "record");
  return 1;
}

void dlrun_lua_profile_open(lua_State *L) {
  static const luaL_Reg funcs[] = {
      {"trace_start", l_trace_start},
      {"trace_stop", l_trace_stop},
      {"stats", l_stats},
      {NULL, NULL},
  };
  luaL_setfuncs(L, funcs, 0);
}
