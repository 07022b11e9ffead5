/* Finding a module where an installation puts it (module.h). */
#include "core/module.h"

#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* dl_iterate_phdr's callback: whether the first object, the program, names an
 * interpreter (the dynamic loader); then stop. */
static int names_interpreter(struct dl_phdr_info *info, size_t size, void *dynamic) {
  (void)size;
  for (size_t i = 0; i < info->dlpi_phnum; i++)
    if (info->dlpi_phdr[i].p_type == PT_INTERP) *(bool *)dynamic = true;
  return 1;
}

static bool program_is_static;

static void find_linkage(void) {
  bool dynamic = false;
  dl_iterate_phdr(names_interpreter, &dynamic);
  program_is_static = !dynamic;
}

/* The program's linkage never changes: walked once. */
bool dlrun_program_is_static(void) {
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, find_linkage);
  return program_is_static;
}

/* Why a static program loads no module `name` (module.h). */
static void *refuse_static(const char *name, char *why, size_t n) {
  snprintf(why, n,
           "%s: not loaded: a statically linked program loads no modules (link with "
           "libdlrun.so: pkg-config --libs dlrun, without --static)",
           name);
  return NULL;
}

/* dlopen, its error into why: the caller has found the program dynamic. */
static void *open_module(const char *path, int flags, char *why, size_t n) {
  void *h = dlopen(path, flags);
  if (!h) snprintf(why, n, "%s", dlerror());
  return h;
}

void *dlrun_module_open(const char *path, int flags, char *why, size_t n) {
  if (dlrun_program_is_static()) return refuse_static(path, why, n);
  return open_module(path, flags, why, n);
}

void *dlrun_module_find(const char *file_name, const char *env_var, int flags, char *tried,
                        size_t n) {
  if (dlrun_program_is_static()) return refuse_static(file_name, tried, n);
  char why[512];
  const char *env = getenv(env_var);
  if (env && *env) {
    void *h = open_module(env, flags, why, sizeof why);
    if (!h) snprintf(tried, n, "%s: %s", env_var, why);
    return h;
  }
  /* The folder of the code running this (libdlrun.so, or an executable
   * linking it statically), and of the executable itself; for the Lua
   * module (.../lib/lua/5.4/dlrun/core.so, build/lua/dlrun/core.so), the
   * library folder its lua/ folder is in. */
  char dirs[3][PATH_MAX] = {"", "", ""};
  Dl_info info;
  if (dladdr((void *)dlrun_module_find, &info) && info.dli_fname && strchr(info.dli_fname, '/'))
    snprintf(dirs[0], sizeof dirs[0], "%s", info.dli_fname);
  ssize_t len_exe = readlink("/proc/self/exe", dirs[1], sizeof dirs[1] - 1);
  dirs[1][len_exe > 0 ? len_exe : 0] = '\0';
  static const char lua_module[] = "/dlrun/core.so";
  size_t len0 = strlen(dirs[0]), tail = sizeof lua_module - 1;
  const char *lua = strstr(dirs[0], "/lua/");
  if (lua && len0 > tail && strcmp(dirs[0] + len0 - tail, lua_module) == 0)
    snprintf(dirs[2], sizeof dirs[2], "%.*s/lua", (int)(lua - dirs[0]), dirs[0]);
  char path[PATH_MAX + 256];
  const char *beside[] = {"%s/%s", "%s/../lib/%s"};
  size_t len = 0;
  tried[0] = '\0';
  for (size_t d = 0; d < 3; d++) {
    char *slash = strrchr(dirs[d], '/');
    if (!slash) continue;
    *slash = '\0';
    for (size_t i = 0; i < (d == 2 ? 1u : 2u); i++) {
      snprintf(path, sizeof path, beside[i], dirs[d], file_name);
      void *h = open_module(path, flags, why, sizeof why);
      if (h) return h;
      len += (size_t)snprintf(tried + len, len < n ? n - len : 0, "%s; ", why);
    }
  }
  void *h = open_module(file_name, flags, why, sizeof why);
  if (!h) snprintf(tried + len, len < n ? n - len : 0, "%s", why);
  return h;
}
