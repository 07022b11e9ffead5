/* The dlrun command's reports: --stats at exit, transfer progress on a
 * terminal, and where a script raised. */
#ifndef DLRUN_CLI_REPORT_H
#define DLRUN_CLI_REPORT_H

#include <stdio.h>

#include <lua.h>

/* A per-device table of memory in use, peak, bytes moved in and out, and
 * DLPack exports still alive, for the default runtime (if it started). */
void cli_print_stats(FILE *out);

/* While running, report transfers that take longer than a second on stderr,
 * only when stderr is a terminal. Stopping erases the line. */
void cli_progress_start(void);
void cli_progress_stop(void);

/* Around a write of the command's own to the terminal: begin erases the
 * progress line and holds it back; end lets it back, telling whether the
 * write ended a line (1), did not (0) or is unknown (-1: as before). */
void cli_progress_write_begin(void);
void cli_progress_write_end(int ends_line);

/* When the progress line is on, make print, io.write and file:write erase
 * it before they write to the terminal (see cli_progress_write_begin). */
void cli_progress_guard_output(lua_State *L);

/* Push "<chunk>:<line>" of the innermost frame of L's call stack that runs
 * a script rather than dlrun itself (C functions and dlrun's own Lua files
 * under `lua_dir` are skipped), or nothing when there is none. Returns
 * whether it pushed. */
int cli_push_script_position(lua_State *L, const char *lua_dir);

#endif
