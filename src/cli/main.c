/* dlrun: the Lua 5.4 standalone interpreter with the dlrun module built in.
 *
 *   dlrun [options] [script [args...]]
 *
 * Scripts, `arg`, `...`, -e, -l, -E, -W, -i, "-", a script piped in on stdin
 * and the prompt on a terminal (prompt.c) behave as in `lua5.4`. The dlrun
 * options (--devices, --device-memory) configure the process-wide default
 * runtime before any Lua code runs; they,
 * DLRUN_DEVICES, DLRUN_DEVICE_MEMORY and the --trace file are checked first.
 * The C half of the module ("dlrun.core") is linked into this executable and
 * registered in package.preload; the Lua half is found through package.path,
 * which gets the dlrun Lua directory prepended (see `push_lua_dir`). */
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>

#include "dlrun/dlrun.h"
#include "help.h"
#include "platforms.h"
#include "prompt.h"
#include "report.h"

#define PROGNAME "dlrun"

/* Chunk name of -e code, as in lua.c, so messages read "(command line):1:". */
#define COMMAND_LINE_CHUNK "=(command line)"

/* Defined by the Lua binding objects linked into this executable. */
int luaopen_dlrun_core(lua_State *L);

/* One -e, -l or -W request; all run in command-line order. */
typedef struct cli_action {
  char kind;        /* 'e', 'l' or 'W' */
  const char *text; /* the code or the module spec; NULL for 'W' */
} cli_action;

/* The parsed command line. argv is borrowed from main. */
typedef struct cli_options {
  int argc;
  char **argv;
  int script;             /* argv index of the script; argc when none */
  int script_is_stdin;    /* the script is "-" (not after "--") */
  int implicit_stdin;     /* no script, no -e, no -v: stdin, when not a terminal */
  int interactive;        /* -i, or no script, no -e, no -v and stdin a terminal: the prompt */
  int ignore_env;         /* -E */
  int show_version;       /* -v */
  cli_action *actions;    /* argc entries allocated, nactions used */
  int nactions;
  int has_code;           /* any -e or -l */
  int has_e;              /* any -e */
  const char *devices;    /* --devices; NULL when not given */
  dlrun_config memory;    /* --device-memory and the other memory options; 0: not given */
  const char *trace;      /* --trace FILE; NULL when not given */
  int stats;              /* --stats */
  int allow_binary;       /* --allow-binary-chunks */
  const char *distributed; /* --distributed MODE; NULL when not given */
} cli_options;

/* "dlrun", or "dlrun[p]" on process p of a job of several: the name that
 * starts every message. */
static char progname[32] = PROGNAME;

/* ---- messages ---------------------------------------------------------- */

static void print_version(void) {
  printf(PROGNAME " " DLRUN_VERSION_STRING " (" LUA_RELEASE ")\n");
  fflush(stdout);
}

/* A command-line mistake: the message, a hint, and the exit status 1. */
static int usage_error(const char *fmt, const char *what) {
  fprintf(stderr, PROGNAME ": ");
  fprintf(stderr, fmt, what);
  fprintf(stderr, "\nTry '" PROGNAME " --help' for more information.\n");
  return EXIT_FAILURE;
}

/* A failed dlrun call: "dlrun: ValueError: <message>", exit status 1. */
static int status_error(dlrun_status status) {
  fprintf(stderr, "%s: %s: %s\n", progname, dlrun_status_name(status), dlrun_last_error());
  return EXIT_FAILURE;
}

/* ---- option parsing ---------------------------------------------------- */

/* "off", "mpi" or "auto". */
static int parse_mode(const char *text, dlrun_distributed_mode *mode) {
  static const char *const names[] = {"auto", "off", "mpi"};
  static const dlrun_distributed_mode modes[] = {DLRUN_DISTRIBUTED_AUTO, DLRUN_DISTRIBUTED_OFF,
                                                 DLRUN_DISTRIBUTED_MPI};
  for (size_t k = 0; k < 3; k++)
    if (strcmp(text, names[k]) == 0) {
      *mode = modes[k];
      return 1;
    }
  return 0;
}

/* Whether `arg` is the long option `name`, alone or as "name=VALUE". Sets
 * *value to the text after '=' or to NULL when there is none. */
static int match_long(const char *arg, const char *name, const char **value) {
  size_t n = strlen(name);
  if (strncmp(arg, name, n) != 0) return 0;
  if (arg[n] == '\0') {
    *value = NULL;
    return 1;
  }
  if (arg[n] == '=') {
    *value = arg + n + 1;
    return 1;
  }
  return 0;
}

/* The value of the option at argv[*i]: `attached` when the option carried
 * it, else the next argument (advancing *i); NULL when there is none. */
static const char *option_value(cli_options *o, int *i, const char *attached) {
  if (attached != NULL) return attached;
  if (*i + 1 >= o->argc) return NULL;
  return o->argv[++*i];
}

/* Sentinel of `parse_long`/`parse_args`: go on; any other value is the exit
 * status to end the process with. */
#define PARSE_CONTINUE (-1)

static int parse_long(cli_options *o, int *i) {
  const char *arg = o->argv[*i];
  const char *value;
  if (strcmp(arg, "--help") == 0) {
    cli_print_help(stdout);
    return EXIT_SUCCESS;
  }
  if (strcmp(arg, "--version") == 0) {
    print_version();
    return EXIT_SUCCESS;
  }
  if (strcmp(arg, "--list-devices") == 0) return dlrun_cli_list_devices(stdout);
  if (match_long(arg, "--devices", &value)) {
    const char *spec = option_value(o, i, value);
    if (spec == NULL) return usage_error("option '%s' needs a value", "--devices");
    dlrun_status st = dlrun_check_device_spec(spec);
    if (st != DLRUN_OK) return status_error(st);
    o->devices = spec;
    return PARSE_CONTINUE;
  }
  if (match_long(arg, "--trace", &value)) {
    o->trace = option_value(o, i, value);
    if (o->trace == NULL) return usage_error("option '%s' needs a value", "--trace");
    return PARSE_CONTINUE;
  }
  if (strcmp(arg, "--stats") == 0) {
    o->stats = 1;
    return PARSE_CONTINUE;
  }
  if (strcmp(arg, "--allow-binary-chunks") == 0) {
    o->allow_binary = 1;
    return PARSE_CONTINUE;
  }
  if (match_long(arg, "--distributed", &value)) {
    o->distributed = option_value(o, i, value);
    if (o->distributed == NULL) return usage_error("option '%s' needs a value", "--distributed");
    dlrun_distributed_mode mode;
    if (!parse_mode(o->distributed, &mode))
      return usage_error("invalid value '%s' for --distributed (expected off, mpi or auto)",
                         o->distributed);
    return PARSE_CONTINUE;
  }
  static const char *const capacity_opts[] = {"--device-memory", "--pinned-host-memory",
                                               "--host-memory"};
  uint64_t *bytes[] = {&o->memory.device_memory, &o->memory.pinned_host_memory,
                       &o->memory.host_memory};
  double *fractions[] = {&o->memory.device_memory_fraction,
                         &o->memory.pinned_host_memory_fraction,
                         &o->memory.host_memory_fraction};
  for (int k = 0; k < 3; k++) {
    if (match_long(arg, capacity_opts[k], &value)) {
      const char *text = option_value(o, i, value);
      if (text == NULL) return usage_error("option '%s' needs a value", capacity_opts[k]);
      dlrun_status st = dlrun_parse_capacity(text, bytes[k], fractions[k]);
      if (st != DLRUN_OK) return status_error(st); /* also refuses 0 */
      return PARSE_CONTINUE;
    }
  }
  static const char *const prealloc_opts[] = {"--device-preallocate",
                                              "--pinned-host-preallocate"};
  for (int k = 0; k < 2; k++) {
    if (match_long(arg, prealloc_opts[k], &value)) {
      const char *text = option_value(o, i, value);
      if (text == NULL) return usage_error("option '%s' needs a value", prealloc_opts[k]);
      dlrun_status st = dlrun_parse_preallocate(text, k ? &o->memory.pinned_host_preallocate
                                                        : &o->memory.device_preallocate);
      if (st != DLRUN_OK) return status_error(st);
      return PARSE_CONTINUE;
    }
  }
  return usage_error("unknown option '%s'", arg);
}

/* Parse the options before the script name. Sets o->script to the index of
 * the script (argc when there is none). */
static int parse_args(cli_options *o) {
  int i = 1;
  int after_dashdash = 0;
  for (; i < o->argc; i++) {
    const char *arg = o->argv[i];
    if (arg[0] != '-' || arg[1] == '\0') break; /* a script name or "-" */
    if (strcmp(arg, "--") == 0) {
      after_dashdash = 1;
      i++;
      break;
    }
    if (arg[1] == '-') {
      int rc = parse_long(o, &i);
      if (rc != PARSE_CONTINUE) return rc;
      continue;
    }
    switch (arg[1]) {
    case 'e':
    case 'l': {
      /* "-e code" or "-ecode", likewise for -l */
      const char *text = option_value(o, &i, arg[2] != '\0' ? arg + 2 : NULL);
      if (text == NULL) {
        char opt[3] = {'-', arg[1], '\0'};
        return usage_error("option '%s' needs an argument", opt);
      }
      o->actions[o->nactions++] = (cli_action){arg[1], text};
      o->has_code = 1;
      o->has_e |= arg[1] == 'e';
      continue;
    }
    case 'E':
    case 'W':
    case 'v':
    case 'h':
    case 'i':
      if (arg[2] != '\0') break;
      if (arg[1] == 'i') o->interactive = 1;
      if (arg[1] == 'E') o->ignore_env = 1;
      if (arg[1] == 'W') o->actions[o->nactions++] = (cli_action){'W', NULL};
      if (arg[1] == 'v') o->show_version = 1;
      if (arg[1] == 'h') {
        cli_print_help(stdout);
        return EXIT_SUCCESS;
      }
      continue;
    default:
      break;
    }
    return usage_error("unknown option '%s'", arg);
  }
  o->script = i;
  o->script_is_stdin =
      i < o->argc && !after_dashdash && strcmp(o->argv[i], "-") == 0;
  return PARSE_CONTINUE;
}

/* ---- running Lua code -------------------------------------------------- */

/* The state running a chunk, for the SIGINT handler. */
static lua_State *running_state = NULL;

static void interrupt_hook(lua_State *L, lua_Debug *ar) {
  (void)ar;
  lua_sethook(L, NULL, 0, 0);
  luaL_error(L, "interrupted!");
}

static void set_sigint(void (*handler)(int)) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = handler;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, NULL);
}

/* Ctrl-C while Lua runs: raise "interrupted!" at the next hook, so __close
 * and __gc still run. A second Ctrl-C kills the process. */
static void on_sigint(int sig) {
  (void)sig;
  set_sigint(SIG_DFL);
  lua_sethook(running_state, interrupt_hook,
              LUA_MASKCALL | LUA_MASKRET | LUA_MASKCOUNT, 1);
}

/* Push the text of the error value at `idx`: strings (and numbers) as they
 * are; a value with a __tostring metamethod (when `use_meta`) through it;
 * anything else as "(error object is a T value)". Returns the text. */
static const char *push_error_text(lua_State *L, int idx, int use_meta) {
  idx = lua_absindex(L, idx);
  if (lua_type(L, idx) == LUA_TSTRING || lua_type(L, idx) == LUA_TNUMBER) {
    lua_pushvalue(L, idx);
    return lua_tostring(L, -1);
  }
  if (use_meta && luaL_callmeta(L, idx, "__tostring")) {
    if (lua_type(L, -1) == LUA_TSTRING) return lua_tostring(L, -1);
    lua_pop(L, 1);
  }
  return lua_pushfstring(L, "(error object is a %s value)",
                         luaL_typename(L, idx));
}

/* The folder of dlrun's own Lua files, to tell script frames from dlrun's. */
static char lua_dir[PATH_MAX];

/* Message handler of every protected call: the error text plus a traceback.
 * An error value (such as dlrun's, raised by the binding without a
 * position) gets a line naming the script line that raised it. */
static int message_handler(lua_State *L) {
  const char *text = push_error_text(L, 1, 1);
  if (lua_type(L, 1) == LUA_TTABLE && cli_push_script_position(L, lua_dir)) {
    lua_pushliteral(L, "\n  at ");
    lua_insert(L, -2);
    lua_concat(L, 3);
    text = lua_tostring(L, -1);
  }
  luaL_traceback(L, L, text, 1);
  return 1;
}

/* Call the function below `nargs` arguments with the message handler and
 * Ctrl-C handling in place. Returns the lua_pcall status. */
static int call_chunk(lua_State *L, int nargs, int nresults) {
  int handler = lua_gettop(L) - nargs;
  lua_pushcfunction(L, message_handler);
  lua_insert(L, handler);
  running_state = L;
  set_sigint(on_sigint);
  int status = lua_pcall(L, nargs, nresults, handler);
  set_sigint(SIG_DFL);
  lua_remove(L, handler);
  return status;
}

/* On failure print "dlrun: <message>" and pop the error value. Returns
 * whether `status` is LUA_OK. */
static int report(lua_State *L, int status, int use_meta) {
  if (status == LUA_OK) return 1;
  const char *text = push_error_text(L, -1, use_meta);
  fprintf(stderr, "%s: %s\n", progname, text);
  fflush(stderr);
  lua_pop(L, 2);
  return 0;
}

/* How scripts, -e chunks and LUA_INIT load: "t" (text only) unless
 * --allow-binary-chunks. Lua does not verify bytecode, so a corrupt
 * precompiled chunk can crash the process; a file must not. */
static const char *chunk_mode = "t";

/* After a load of the chunk `name` met a precompiled one in text mode,
 * replace Lua's bare "attempt to load a binary chunk" with what happened
 * and how to run it anyway. Returns status. */
static int explain_binary(lua_State *L, int status, const char *name) {
  if (status != LUA_ERRSYNTAX) return status;
  const char *msg = lua_tostring(L, -1);
  if (msg == NULL || strstr(msg, "attempt to load a binary chunk") == NULL) return status;
  lua_pushfstring(L,
                  "%s is a precompiled (binary) Lua chunk, which dlrun does not run by default: "
                  "Lua does not check bytecode, and a corrupt chunk can crash the process; "
                  "run it with --allow-binary-chunks if you trust it",
                  name);
  lua_replace(L, -2);
  return status;
}

/* Load a chunk from `text` and run it without arguments. */
static int run_string(lua_State *L, const char *text, const char *chunkname) {
  int status = luaL_loadbufferx(L, text, strlen(text), chunkname, chunk_mode);
  status = explain_binary(L, status, chunkname + 1);
  if (status == LUA_OK) status = call_chunk(L, 0, 0);
  return report(L, status, 1);
}

/* -l SPEC: "mod" loads module mod into global mod (the name cut at its
 * first '-', as lua does); "g=mod" loads module mod into global g. */
static int run_require(lua_State *L, const char *spec) {
  const char *eq = strchr(spec, '=');
  const char *module = eq != NULL ? eq + 1 : spec;
  size_t global_len = eq != NULL ? (size_t)(eq - spec) : strcspn(spec, "-");
  const char *global = lua_pushlstring(L, spec, global_len);
  lua_getglobal(L, "require");
  lua_pushstring(L, module);
  int status = call_chunk(L, 1, 1);
  if (status == LUA_OK) lua_setglobal(L, global);
  int ok = report(L, status, 1);
  lua_pop(L, 1); /* the global name */
  return ok;
}

/* LUA_INIT_5_4, else LUA_INIT: code, or "@file" to run a file. */
static int run_lua_init(lua_State *L) {
  const char *chunkname = "=LUA_INIT_" LUA_VERSION_MAJOR "_" LUA_VERSION_MINOR;
  const char *init = getenv(chunkname + 1);
  if (init == NULL) {
    chunkname = "=LUA_INIT";
    init = getenv(chunkname + 1);
  }
  if (init == NULL) return 1;
  if (init[0] != '@') return run_string(L, init, chunkname);
  int status = explain_binary(L, luaL_loadfilex(L, init + 1, chunk_mode), init + 1);
  if (status == LUA_OK) status = call_chunk(L, 0, 0);
  return report(L, status, 1);
}

/* Run the script with its arguments as `...`. */
static int run_script(lua_State *L, const cli_options *o) {
  int from_stdin = o->script_is_stdin || o->implicit_stdin;
  const char *path = from_stdin ? NULL : o->argv[o->script];
  /* skips a first "#" line */
  int status = explain_binary(L, luaL_loadfilex(L, path, chunk_mode), path ? path : "stdin");
  if (status == LUA_OK) {
    int nargs = o->script < o->argc ? o->argc - o->script - 1 : 0;
    luaL_checkstack(L, nargs + 3, "too many arguments to script");
    for (int i = o->script + 1; i < o->argc; i++) lua_pushstring(L, o->argv[i]);
    status = call_chunk(L, nargs, 0);
  }
  return report(L, status, 1);
}

/* ---- setting up the state ---------------------------------------------- */

/* `arg`: arg[0] is the script (argv[0] when there is none), arg[1..] its
 * arguments, the interpreter and the options at negative indices. */
static void make_arg_table(lua_State *L, const cli_options *o) {
  int zero = o->script < o->argc ? o->script : 0;
  lua_createtable(L, o->argc - zero - 1, zero + 1);
  for (int i = 0; i < o->argc; i++) {
    lua_pushstring(L, o->argv[i]);
    lua_rawseti(L, -2, i - zero);
  }
  lua_setglobal(L, "arg");
}

/* Where an installed prefix keeps Lua files, as plain lua5.4 looks there. */
#define INSTALLED_LUA_DIR "/share/lua/" LUA_VERSION_MAJOR "." LUA_VERSION_MINOR

/* Push prefix..sub and return 1 when that folder holds dlrun/init.lua; else
 * push nothing and return 0. */
static int push_if_holds_dlrun(lua_State *L, const char *prefix, const char *sub) {
  const char *dir = lua_pushfstring(L, "%s%s", prefix, sub);
  lua_pushfstring(L, "%s/dlrun/init.lua", dir);
  int holds = access(lua_tostring(L, -1), R_OK) == 0;
  lua_pop(L, holds ? 1 : 2);
  return holds;
}

/* Push the directory of dlrun's Lua files, in order:
 *   1. $DLRUN_LUA_DIR when set and not empty;
 *   2. <exe dir>/../share/lua/5.4 when it holds dlrun/init.lua (an installed
 *      prefix, wherever it was moved: bin/dlrun beside share/lua/5.4/dlrun/);
 *   3. <exe dir>/../lua when it holds dlrun/init.lua (the source tree:
 *      build/dlrun beside lua/dlrun/);
 *   4. else the installed place of 2, so that a failing require names it.
 * The installed place comes first so that an installed dlrun never takes
 * other files for its own. The executable is /proc/self/exe, already free of
 * symbolic links, so "<exe dir>/.." is written as the parent directory
 * itself. Returns 0, having pushed nothing, when the executable cannot be
 * found. */
static int push_lua_dir(lua_State *L) {
  const char *env = getenv("DLRUN_LUA_DIR");
  if (env != NULL && env[0] != '\0') {
    lua_pushstring(L, env);
    return 1;
  }
  char exe[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe);
  if (n <= 0 || (size_t)n >= sizeof exe) return 0;
  exe[n] = '\0';
  char *slash = strrchr(exe, '/'); /* end of the executable's directory */
  if (slash == NULL) return 0;
  *slash = '\0';
  slash = strrchr(exe, '/'); /* end of its parent: "" for the root */
  if (slash != NULL) *slash = '\0';
  else exe[0] = '\0';

  if (push_if_holds_dlrun(L, exe, INSTALLED_LUA_DIR) || push_if_holds_dlrun(L, exe, "/lua"))
    return 1;
  lua_pushfstring(L, "%s" INSTALLED_LUA_DIR, exe);
  return 1;
}

/* package.path = "<luadir>/?.lua;<luadir>/?/init.lua;" .. package.path */
static void prepend_lua_dir(lua_State *L) {
  if (!push_lua_dir(L)) return;
  const char *dir = lua_tostring(L, -1);
  snprintf(lua_dir, sizeof lua_dir, "%s/", dir);
  lua_getglobal(L, "package");
  lua_getfield(L, -1, "path");
  const char *old = lua_tostring(L, -1);
  lua_pushfstring(L, "%s/?.lua;%s/?/init.lua;%s", dir, dir, old != NULL ? old : "");
  lua_setfield(L, -3, "path");
  lua_pop(L, 3);
}

/* require "dlrun.core" finds the linked-in C module before any file. */
static void register_core(lua_State *L) {
  luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_PRELOAD_TABLE);
  lua_pushcfunction(L, luaopen_dlrun_core);
  lua_setfield(L, -2, "dlrun.core");
  lua_pop(L, 1);
}

/* Whether the end of the script was reached: the collective point where
 * every process of a job meets before leaving, so that a process still in
 * a collective raises at once instead of waiting for one that has gone. */
static int end_reached;

/* Meet the other processes at the end of the script, once; alone there is
 * nothing to meet. Returns whether that went well (else says why). */
static int reach_end(void) {
  if (end_reached) return 1;
  end_reached = 1;
  if (dlrun_process_count() < 2 || dlrun_distributed_finish("the end of the script") == DLRUN_OK)
    return 1;
  status_error(DLRUN_ERR_RUNTIME);
  return 0;
}

/* A process of a job of several that fails ends the whole job with
 * `code`: the others would wait for it forever. */
static void end_job_unless(int ok, int code) {
  if (ok || dlrun_process_count() < 2) return;
  end_reached = 1; /* leaving without meeting anyone: exit handlers must not wait */
  cli_progress_stop();
  dlrun_distributed_abort(code);
}

/* os.exit([code [, close]]) is the end of the script too: under --stats,
 * report what is alive (what closing the state releases is told at exit);
 * meet the other processes (a failure there ends the job with the status
 * asked for, 1 when that was success); then exit as asked. Upvalues: the
 * original os.exit and the --stats flag. */
static int exit_at_end(lua_State *L) {
  int valid = 1, code = EXIT_SUCCESS;
  if (lua_isboolean(L, 1)) code = lua_toboolean(L, 1) ? EXIT_SUCCESS : EXIT_FAILURE;
  else if (!lua_isnoneornil(L, 1)) code = (int)lua_tointegerx(L, 1, &valid);
  if (!valid) luaL_checkinteger(L, 1); /* raises os.exit's own error */
  if (lua_toboolean(L, lua_upvalueindex(2))) cli_stats_at_end(L, stderr);
  end_job_unless(reach_end(), code ? code : EXIT_FAILURE);
  lua_pushvalue(L, lua_upvalueindex(1));
  lua_insert(L, 1);
  lua_call(L, lua_gettop(L) - 1, LUA_MULTRET);
  return lua_gettop(L);
}

static void wrap_exit(lua_State *L, int stats) {
  lua_getglobal(L, "os");
  lua_getfield(L, -1, "exit");
  lua_pushboolean(L, stats);
  lua_pushcclosure(L, exit_at_end, 2);
  lua_setfield(L, -2, "exit");
  lua_pop(L, 1);
}

/* The prompt, after the script: errors there are printed and forgotten. */
static void start_prompt(lua_State *L) {
  static const cli_prompt_hooks hooks = {call_chunk, push_error_text};
  cli_prompt(L, &hooks);
}

/* Everything that runs Lua, in protected mode so that even a memory error
 * while opening the libraries is reported. Returns a boolean: success. */
static int protected_main(lua_State *L) {
  cli_options *o = lua_touserdata(L, 1);
  luaL_checkversion(L);
  if (o->ignore_env) { /* the package library reads this */
    lua_pushboolean(L, 1);
    lua_setfield(L, LUA_REGISTRYINDEX, "LUA_NOENV");
  }
  luaL_openlibs(L);
  if (o->allow_binary) chunk_mode = "bt";
  wrap_exit(L, o->stats);
  register_core(L);
  prepend_lua_dir(L);
  make_arg_table(L, o);
  if (o->show_version) print_version();
  int ok = o->ignore_env || run_lua_init(L);
  for (int i = 0; ok && i < o->nactions; i++) {
    const cli_action *a = &o->actions[i];
    if (a->kind == 'e') ok = run_string(L, a->text, COMMAND_LINE_CHUNK);
    else if (a->kind == 'l') ok = run_require(L, a->text);
    else lua_warning(L, "@on", 0);
  }
  if (ok && (o->script < o->argc || o->implicit_stdin)) ok = run_script(L, o);
  if (ok && o->interactive) start_prompt(L);
  lua_pushboolean(L, ok);
  return 1;
}

/* --stats: reported at exit too, whether main returns or the script calls
 * os.exit (which skips the end of main). */
static int stats;

/* Stop the progress line and finish the trace file (--trace, DLRUN_TRACE or
 * dl.trace_start's); idempotent. Returns whether the trace, if any, was
 * written. */
static int finish(void) {
  cli_progress_stop();
  dlrun_distributed_shutdown();
  if (!dlrun_trace_is_on() || dlrun_trace_stop() == DLRUN_OK) return 1;
  status_error(DLRUN_ERR_RUNTIME);
  return 0;
}

/* At exit: a C exit() from anywhere (os.exit is handled before) that left
 * the end of the script unmet meets it first. */
static void finish_at_exit(void) {
  if (stats) { /* before leaving the job: the title names this process */
    cli_stats_at_end(NULL, stderr);
    cli_stats_after_close(stderr);
  }
  end_job_unless(reach_end(), EXIT_FAILURE);
  if (finish()) return;
  fflush(NULL);
  _exit(EXIT_FAILURE); /* exit() may not be called again from an atexit handler */
}

/* With no script, no -e, no -v and no -i, stdin is the script when it is not
 * a terminal, else the prompt starts (as in lua5.4). */
static void choose_stdin_use(cli_options *o) {
  if (o->script < o->argc || o->has_e || o->show_version || o->interactive) return;
  o->implicit_stdin = !isatty(STDIN_FILENO);
  o->interactive = !o->implicit_stdin;
}

/* Join the job as --distributed, else $DLRUN_DISTRIBUTED, says: before
 * anything else, so that every message after names the process. */
static int join_job(const cli_options *o) {
  dlrun_distributed_options d = {.mode = DLRUN_DISTRIBUTED_AUTO};
  const char *env = getenv("DLRUN_DISTRIBUTED");
  if (o->distributed) {
    parse_mode(o->distributed, &d.mode); /* checked when parsed */
  } else if (env && *env && !parse_mode(env, &d.mode)) {
    fprintf(stderr, PROGNAME ": ValueError: DLRUN_DISTRIBUTED=\"%s\" is not off, mpi or auto\n",
            env);
    return EXIT_FAILURE;
  }
  dlrun_status st = dlrun_distributed_init(&d);
  if (dlrun_process_count() > 1)
    snprintf(progname, sizeof progname, PROGNAME "[%d]", dlrun_process_index());
  if (st) {
    status_error(st);
    /* Joined but refused (the processes disagree): every process is here. */
    dlrun_distributed_shutdown();
    return EXIT_FAILURE;
  }
  return PARSE_CONTINUE;
}

/* Whether the trace file at `trace` is the script's file (the same file,
 * by device and inode: a hard link or another spelling too), which
 * tracing would overwrite. */
static int trace_is_script(const cli_options *o, const char *trace) {
  if (o->script >= o->argc || o->script_is_stdin) return 0;
  struct stat a, b;
  return stat(trace, &a) == 0 && stat(o->argv[o->script], &b) == 0 && a.st_dev == b.st_dev &&
         a.st_ino == b.st_ino;
}

/* This process's trace file for `value` (dlrun_trace_process_path) into
 * path, refusing the script's own file, which tracing would truncate
 * before it is read: `remedy` says what to change. Returns PARSE_CONTINUE
 * or the exit status. */
static int trace_path(const cli_options *o, const char *value, const char *remedy, char *path,
                      size_t n) {
  dlrun_status st = dlrun_trace_process_path(value, path, n);
  if (st) return status_error(st);
  if (!trace_is_script(o, path)) return PARSE_CONTINUE;
  fprintf(stderr, "%s: the trace file \"%s\" is the script itself; %s\n", progname, path,
          remedy);
  return EXIT_FAILURE;
}

/* Start the trace --trace, else DLRUN_TRACE, asks for, if any. */
static int start_trace(const cli_options *o) {
  char path[PATH_MAX];
  const char *env = getenv("DLRUN_TRACE");
  if (o->trace) {
    int rc = trace_path(o, o->trace, "give --trace another file", path, sizeof path);
    if (rc != PARSE_CONTINUE) return rc;
    dlrun_status st = dlrun_trace_start(path);
    return st ? status_error(st) : PARSE_CONTINUE;
  }
  if (env && *env) {
    int rc = trace_path(o, env, "set DLRUN_TRACE to another file", path, sizeof path);
    if (rc != PARSE_CONTINUE) return rc;
  }
  dlrun_status st = dlrun_trace_start_from_env(); /* checked at start too */
  return st ? status_error(st) : PARSE_CONTINUE;
}

/* Check everything that can be checked before Lua runs: the device
 * configuration with its environment fallbacks, then the trace file. */
static int prepare(const cli_options *o) {
  int rc = join_job(o);
  if (rc != PARSE_CONTINUE) return rc;
  dlrun_config cfg = o->memory;
  cfg.devices = o->devices;
  dlrun_status st = dlrun_check_config(&cfg);
  if (st == DLRUN_OK) st = dlrun_default_set_config(&cfg);
  if (st) return status_error(st);
  return start_trace(o);
}

int main(int argc, char **argv) {
  cli_options o = {.argc = argc, .argv = argv, .script = argc};
  o.actions = malloc(sizeof *o.actions * (size_t)(argc > 0 ? argc : 1));
  if (o.actions == NULL) {
    fprintf(stderr, PROGNAME ": not enough memory\n");
    return EXIT_FAILURE;
  }
  int rc = parse_args(&o);
  if (rc == PARSE_CONTINUE) {
    choose_stdin_use(&o);
    rc = prepare(&o);
  }
  if (rc != PARSE_CONTINUE) {
    free(o.actions);
    return rc;
  }

  lua_State *L = luaL_newstate();
  if (L == NULL) {
    fprintf(stderr, PROGNAME ": cannot create the Lua state: not enough memory\n");
    finish();
    free(o.actions);
    return EXIT_FAILURE;
  }
  stats = o.stats;
  atexit(finish_at_exit);
  cli_progress_start();
  lua_pushcfunction(L, protected_main);
  lua_pushlightuserdata(L, &o);
  int status = lua_pcall(L, 1, 1, 0);
  int ok = status == LUA_OK && lua_toboolean(L, -1);
  report(L, status, 0); /* outside protected mode: no metamethods */
  if (o.stats) cli_stats_at_end(L, stderr); /* before leaving the job: it names this process */
  /* A peer still waiting in a collective learns that this process is done. */
  if (ok) ok = reach_end();
  end_job_unless(ok, EXIT_FAILURE);
  lua_close(L); /* runs the pending __gc and __close */
  if (o.stats) cli_stats_after_close(stderr);
  if (!finish()) ok = 0;
  free(o.actions);
  return ok ? EXIT_SUCCESS : EXIT_FAILURE;
}
