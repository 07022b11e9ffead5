/* The dlrun command's interactive prompt, as lua5.4's: lines are read
 * (with line editing and history when a readline library can be loaded),
 * run, and what they return is printed, until end of file. */
#ifndef DLRUN_CLI_PROMPT_H
#define DLRUN_CLI_PROMPT_H

#include <lua.h>

/* What the prompt takes from the command: how it runs a function (with the
 * command's message handler and Ctrl-C handling; returns the lua_pcall
 * status, the error text on top on failure) and how it turns an error value
 * into text (pushes it and returns it; use_meta: through __tostring). */
typedef struct cli_prompt_hooks {
  int (*call)(lua_State *L, int nargs, int nresults);
  const char *(*push_error_text)(lua_State *L, int idx, int use_meta);
} cli_prompt_hooks;

/* Print the banner, set the global `dl` to require "dlrun" (unless the
 * script already set one), then prompt with "> " (">> " for the lines that
 * continue a statement; _PROMPT and _PROMPT2 override them) until end of
 * file. A line that is an expression prints its values; an error prints its
 * text and the prompt goes on. Leaves the stack as it found it. */
void cli_prompt(lua_State *L, const cli_prompt_hooks *hooks);

#endif
