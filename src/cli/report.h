/* The dlrun command's reports: --stats at exit, transfer progress on a
 * terminal, and where a script raised. */
#ifndef DLRUN_CLI_REPORT_H
#define DLRUN_CLI_REPORT_H

#include <stdio.h>

#include <lua.h>

/* --stats, at the end of the script (before the Lua state closes; L, when
 * not NULL, is collected first, so that alive means reachable): a
 * per-device table of memory in use, peak, bytes moved in and out, and
 * DLPack exports still alive, for this process's devices of the default
 * runtime (if it started); in a job the title names the process. Once. */
void cli_stats_at_end(lua_State *L, FILE *out);
/* After the Lua state closed: one line saying what closing it released
 * (memory per device, exports), when it released anything; nothing before
 * cli_stats_at_end. Once. */
void cli_stats_after_close(FILE *out);

/* While running, report transfers that take longer than a second on stderr,
 * only when stderr is a terminal. Starting replaces stdout (when a terminal)
 * and stderr by streams that erase the progress line before each write, so
 * call it before the Lua state opens its libraries. Stopping erases the line. */
void cli_progress_start(void);
void cli_progress_stop(void);

/* Push "<chunk>:<line>" of the innermost frame of L's call stack that runs
 * a script rather than dlrun itself (C functions and dlrun's own Lua files
 * under `lua_dir` are skipped), or nothing when there is none. Returns
 * whether it pushed. */
int cli_push_script_position(lua_State *L, const char *lua_dir);

#endif
