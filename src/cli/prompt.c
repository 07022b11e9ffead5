/* The interactive prompt (prompt.h). Line editing comes from the system's
 * readline, or libedit, loaded when the prompt starts: neither is needed to
 * build or run dlrun. Without them, or on a terminal that cannot draw (TERM
 * unset or "dumb", as in an editor's shell buffer), lines are read with plain
 * stdio and the terminal's own echo. */
#include "prompt.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <lauxlib.h>

#include "dlrun/dlrun.h"

/* The chunk name of lines typed at the prompt, as in lua5.4. */
#define PROMPT_CHUNK "=stdin"

/* What a syntax error says when the chunk stopped short: more lines may
 * complete it. */
#define EOF_MARK "<eof>"

/* readline's two functions, when a library providing them was loaded. */
static char *(*readline_fn)(const char *prompt);
static void (*add_history_fn)(const char *line);

static void load_readline(void) {
  const char *term = getenv("TERM");
  if (!isatty(STDIN_FILENO) || !isatty(STDOUT_FILENO) || !term || !*term ||
      strcmp(term, "dumb") == 0)
    return;
  static const char *const libraries[] = {"libreadline.so.8", "libreadline.so.7", "libedit.so.2"};
  for (size_t i = 0; i < sizeof libraries / sizeof *libraries; i++) {
    void *lib = dlopen(libraries[i], RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL) continue;
    *(void **)&readline_fn = dlsym(lib, "readline");
    *(void **)&add_history_fn = dlsym(lib, "add_history");
    if (readline_fn != NULL && add_history_fn != NULL) {
      const char **name = dlsym(lib, "rl_readline_name"); /* for $if dlrun in inputrc */
      if (name != NULL) *name = "dlrun";
      return; /* loaded for good: the prompt lasts until the process ends */
    }
    readline_fn = NULL;
    add_history_fn = NULL;
    dlclose(lib);
  }
}

/* Read a line into a malloc'd string without its newline; NULL at end of
 * file. */
static char *read_line(const char *prompt) {
  if (readline_fn != NULL) return readline_fn(prompt);
  fputs(prompt, stdout);
  fflush(stdout);
  char *line = NULL;
  size_t room = 0;
  ssize_t n = getline(&line, &room, stdin);
  if (n < 0) {
    free(line);
    return NULL;
  }
  if (n > 0 && line[n - 1] == '\n') line[n - 1] = '\0';
  return line;
}

/* Push the next line typed, after the prompt of a first line or of a
 * continuation line; "=expr" on a first line reads as "return expr", as in
 * lua5.4. Returns 0, pushing nothing, at end of file. */
static int push_line(lua_State *L, int first) {
  lua_getglobal(L, first ? "_PROMPT" : "_PROMPT2");
  const char *prompt = lua_tostring(L, -1);
  char *line = read_line(prompt != NULL ? prompt : first ? "> " : ">> ");
  lua_pop(L, 1);
  if (line == NULL) return 0;
  if (first && line[0] == '=') lua_pushfstring(L, "return %s", line + 1);
  else lua_pushstring(L, line);
  free(line);
  return 1;
}

/* Whether a load failed only because the chunk is not finished yet; then
 * its message is popped. */
static int incomplete(lua_State *L, int status) {
  if (status != LUA_ERRSYNTAX) return 0;
  size_t len;
  const char *msg = lua_tolstring(L, -1, &len);
  size_t mark = sizeof EOF_MARK - 1;
  if (len < mark || strcmp(msg + len - mark, EOF_MARK) != 0) return 0;
  lua_pop(L, 1);
  return 1;
}

/* The line on top as an expression whose values are printed: loads
 * "return <line>;" and pushes the function, or pushes nothing when that is
 * not valid Lua. */
static int load_as_expression(lua_State *L) {
  const char *code = lua_pushfstring(L, "return %s;", lua_tostring(L, -1));
  int status = luaL_loadbuffer(L, code, strlen(code), PROMPT_CHUNK);
  lua_remove(L, -2); /* the code */
  if (status != LUA_OK) lua_pop(L, 1);
  return status == LUA_OK;
}

/* The text on top as statements, reading more lines while the chunk is
 * unfinished: replaces the text with all the lines read and pushes the
 * function, or the error message. Returns the load status. */
static int load_as_statements(lua_State *L) {
  for (;;) {
    size_t len;
    const char *text = lua_tolstring(L, -1, &len);
    int status = luaL_loadbuffer(L, text, len, PROMPT_CHUNK);
    if (!incomplete(L, status)) return status;
    if (!push_line(L, 0)) { /* end of file inside a statement: its error */
      luaL_loadbuffer(L, text, len, PROMPT_CHUNK);
      return status;
    }
    lua_pushliteral(L, "\n");
    lua_insert(L, -2);
    lua_concat(L, 3);
  }
}

/* Read one chunk and push its function (LUA_OK) or the error message;
 * returns -1, pushing nothing, at end of file. */
static int read_chunk(lua_State *L) {
  if (!push_line(L, 1)) return -1;
  int status = load_as_expression(L) ? LUA_OK : load_as_statements(L);
  const char *lines = lua_tostring(L, -2);
  if (add_history_fn != NULL && lines[0] != '\0') add_history_fn(lines);
  lua_remove(L, -2);
  return status;
}

/* Print the error value on top, and pop it. */
static void print_error(lua_State *L, const cli_prompt_hooks *hooks) {
  fprintf(stderr, "%s\n", hooks->push_error_text(L, -1, 1));
  fflush(stderr);
  lua_pop(L, 2);
}

/* Print the values above `base` with the global print, and pop them. */
static void print_values(lua_State *L, int base, const cli_prompt_hooks *hooks) {
  int n = lua_gettop(L) - base;
  if (n == 0) return;
  luaL_checkstack(L, LUA_MINSTACK, "too many results to print");
  lua_getglobal(L, "print");
  lua_insert(L, base + 1);
  if (hooks->call(L, n, 0) != LUA_OK) print_error(L, hooks);
}

/* dl = require "dlrun", unless the global is set already. */
static void load_dl(lua_State *L, const cli_prompt_hooks *hooks) {
  if (lua_getglobal(L, "dl") != LUA_TNIL) {
    lua_pop(L, 1);
    return;
  }
  lua_pop(L, 1);
  lua_getglobal(L, "require");
  lua_pushliteral(L, "dlrun");
  if (hooks->call(L, 1, 1) == LUA_OK) lua_setglobal(L, "dl");
  else print_error(L, hooks);
}

void cli_prompt(lua_State *L, const cli_prompt_hooks *hooks) {
  int base = lua_gettop(L);
  load_readline();
  printf("dlrun " DLRUN_VERSION_STRING " (" LUA_RELEASE "), dl = require \"dlrun\"\n");
  fflush(stdout);
  load_dl(L, hooks);
  int status;
  while ((status = read_chunk(L)) != -1) {
    if (status == LUA_OK) status = hooks->call(L, 0, LUA_MULTRET);
    if (status == LUA_OK) print_values(L, base, hooks);
    else print_error(L, hooks);
  }
  lua_settop(L, base);
  fputs("\n", stdout); /* the line of the last prompt ends */
  fflush(stdout);
}
