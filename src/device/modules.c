/* Platform modules (modules.h) and the listing of every platform
 * (dlrun_platforms_list, platform.h).
 *
 * A module is known by its platform's name: the table below says which
 * file holds it and which variable overrides where it is looked for. A
 * module is opened with RTLD_LOCAL (its symbols stay its own; it reaches
 * the library through the services it is handed) and, once its open ran,
 * never closed: a driver it initialised may have threads of its own. */
#include "device/modules.h"

#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/module.h"
#include "core/status_impl.h"
#include "device_impl.h"

#define OPEN_SYMBOL "dlrun_platform_module_open"
typedef struct known_module {
  const char *name;       /* the platform's name, as in "--devices NAME:N" */
  const char *class_name; /* its devices' class, for a listing of a module not loaded */
  const char *file;       /* the module, installed beside libdlrun */
  const char *env;        /* where to take it from instead */
} known_module;

/* In the order "auto" prefers them (a CUDA GPU before an OpenCL device). */
static const known_module known[] = {
    {"cuda", "CudaDevice", "libdlrun_cuda.so", "DLRUN_CUDA_MODULE"},
    {"opencl", "OpenclDevice", "libdlrun_opencl.so", "DLRUN_OPENCL_MODULE"},
};
#define NKNOWN (sizeof known / sizeof *known)
_Static_assert(NKNOWN == DLRUN_KNOWN_MODULES, "DLRUN_KNOWN_MODULES counts the known modules");

/* What loading each gave: its platform, registered, or why not. */
static const dlrun_platform *loaded[NKNOWN];
static char why_not[NKNOWN][sizeof(((dlrun_platform_status *)0)->why)];
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void say_why(size_t i, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say_why(size_t i, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(why_not[i], sizeof why_not[i], fmt, ap);
  va_end(ap);
}

/* Whether the loader's `reason` says only that no file `file_name` is
 * there ("<dir>/<file_name>: cannot open shared object file: ..."), not
 * that one is there and failed (a library it needs is missing). */
static bool absent(const char *reason, const char *file_name) {
  const char *at = strstr(reason, ": cannot open shared object file");
  size_t n = strlen(file_name);
  return at && (size_t)(at - reason) >= n && memcmp(at - n, file_name, n) == 0;
}

/* Why module i was not found, from the places tried ("; "-separated):
 * the first failure of a file that is there, else the loader's own
 * search's (the last). */
static void summarise(size_t i, const char *tried) {
  const char *last = tried;
  size_t last_len = strlen(tried);
  for (const char *p = tried; *p;) {
    const char *end = strstr(p, "; ");
    size_t len = end ? (size_t)(end - p) : strlen(p);
    char reason[1024];
    snprintf(reason, sizeof reason, "%.*s", (int)len, p);
    if (!absent(reason, known[i].file)) {
      say_why(i, "%s", reason);
      return;
    }
    last = p;
    last_len = len;
    p = end ? end + 2 : p + len;
  }
  say_why(i, "%.*s", (int)last_len, last);
}

/* The file a module handle was opened from, for messages. */
static const char *module_path(void *h, const char *file_name) {
  struct link_map *lm = NULL;
  return dlinfo(h, RTLD_DI_LINKMAP, &lm) == 0 && lm && lm->l_name[0] ? lm->l_name : file_name;
}

static void load_one(size_t i) {
  const known_module *m = &known[i];
  char tried[2048];
  void *h = dlrun_module_find(m->file, m->env, RTLD_NOW | RTLD_LOCAL, tried, sizeof tried);
  if (!h) {
    const char *env = getenv(m->env);
    if (env && *env) say_why(i, "%s", tried); /* the user's path: its reason */
    else summarise(i, tried);
    return;
  }
  dlrun_platform_module_open_fn open_fn;
  *(void **)&open_fn = dlsym(h, OPEN_SYMBOL);
  if (!open_fn) {
    say_why(i, "%s has no %s", module_path(h, m->file), OPEN_SYMBOL);
    dlclose(h);
    return;
  }
  const dlrun_platform *pl = NULL;
  char err[sizeof why_not[i]] = "";
  if (open_fn(DLRUN_PLATFORM_ABI, dlrun_platform_services_get(), &pl, err, sizeof err) != 0 ||
      !pl) {
    say_why(i, "%s", err[0] ? err : "its open failed and gave no reason");
    return;
  }
  if (!pl->name || strcmp(pl->name, m->name) != 0) {
    say_why(i, "%s holds platform '%s', not '%s'", module_path(h, m->file),
            pl->name ? pl->name : "",
             m->name);
    return;
  }
  if (dlrun_platform_register(pl) != DLRUN_OK) {
    say_why(i, "%s", dlrun_last_error());
    return;
  }
  loaded[i] = pl;
}

static void load_all(void) {
  for (size_t i = 0; i < NKNOWN; i++) load_one(i);
}

dlrun_status dlrun_platform_modules_load(void) {
  pthread_once(&once, load_all);
  return DLRUN_OK;
}

static bool listed(const dlrun_platform *const *pls, size_t n, const char *name) {
  for (size_t i = 0; i < n; i++)
    if (strcmp(pls[i]->name, name) == 0) return true;
  return false;
}

static void status_of(const dlrun_platform *pl, dlrun_platform_status *s) {
  *s = (dlrun_platform_status){.name = pl->name,
                               .class_name = pl->class_name,
                               .is_accelerator = pl->is_accelerator,
                               .available = true};
  if (pl->probe && !(s->available = pl->probe(false, &s->ndevices, s->why, sizeof s->why)))
    s->ndevices = 0;
}

size_t dlrun_platforms_list(dlrun_platform_status *out, size_t max) {
  dlrun_platform_modules_load();
  const dlrun_platform *pls[DLRUN_MAX_PLATFORMS];
  size_t npl = dlrun_platform_list(pls, DLRUN_MAX_PLATFORMS), count = 0;
  for (size_t i = 0; i < npl; i++, count++)
    if (count < max) status_of(pls[i], &out[count]);
  /* Modules that did not load, unless a platform of that name is there. */
  for (size_t i = 0; i < NKNOWN; i++) {
    if (loaded[i] || listed(pls, npl, known[i].name)) continue;
    if (count < max) {
      out[count] = (dlrun_platform_status){.name = known[i].name,
                                           .class_name = known[i].class_name,
                                           .is_accelerator = true};
      memcpy(out[count].why, why_not[i], sizeof out[count].why);
    }
    count++;
  }
  return count;
}
