/* Tests of platform modules (src/device/modules.c) and of finding a module
 * (src/core/module.c). Modules load once per process, so each case runs in
 * a child process with its own environment. The module loaded is
 * spec/c/modules/platform_module.c, built beside this test. */
#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "core/module.h"
#include "device/modules.h"
#include "dlrun/platform.h"
#include "dlrun/status.h"

/* Until the device layer provides the services, the cases that load a
 * module are skipped (modules.c loads none without them). */
#pragma weak dlrun_platform_services_get

#define NO_FILE ": cannot open shared object file: No such file or directory"

static char test_module[1100]; /* libdlrun_test_platform.so beside this test */
static char here[1024];             /* this test's folder */

/* Run fn in a child; whether all its checks passed. */
static int in_child(void (*fn)(void)) {
  fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    fn();
    fflush(stdout);
    _exit(check_current_failed ? 1 : 0);
  }
  int status;
  return check_child_passed(pid, &status);
}

static dlrun_platform_status listing[16];
static size_t nlisted;

static const dlrun_platform_status *listed(const char *name) {
  nlisted = dlrun_platforms_list(listing, 16);
  for (size_t i = 0; i < nlisted && i < 16; i++)
    if (strcmp(listing[i].name, name) == 0) return &listing[i];
  return NULL;
}

static int ends_with(const char *s, const char *tail) {
  size_t a = strlen(s), b = strlen(tail);
  return a >= b && strcmp(s + a - b, tail) == 0;
}

/* ---- finding a module ---- */

static void test_find(void) {
  char tried[2048];
  unsetenv("DLRUN_NONE_MODULE");
  CHECK(!dlrun_module_find("libdlrun_none.so", "DLRUN_NONE_MODULE", RTLD_NOW, tried,
                           sizeof tried),
        "found");
  /* Beside this test and in ../lib, twice (the code, named as it was run,
   * and the executable, by its full path: one file here), then the
   * loader's search. */
  int places = 1;
  for (const char *p = tried; (p = strstr(p, "; ")); p += 2) places++;
  CHECK(places == 5, "%d places: %s", places, tried);
  char want[2400];
  snprintf(want, sizeof want, "%s/libdlrun_none.so" NO_FILE "; %s/../lib/libdlrun_none.so" NO_FILE,
           here, here);
  CHECK(strstr(tried, want) != NULL, "tried: %s", tried);
  CHECK(ends_with(tried, "; libdlrun_none.so" NO_FILE), "tried: %s", tried);
  setenv("DLRUN_NONE_MODULE", "/nonexistent/libdlrun_none.so", 1);
  CHECK(!dlrun_module_find("libdlrun_none.so", "DLRUN_NONE_MODULE", RTLD_NOW, tried,
                           sizeof tried),
        "found");
  CHECK(strcmp(tried, "DLRUN_NONE_MODULE: /nonexistent/libdlrun_none.so" NO_FILE) == 0,
        "tried: %s", tried);
  unsetenv("DLRUN_NONE_MODULE");
  /* Beside the executable, with no variable set. */
  void *h = dlrun_module_find("libdlrun_test_platform.so", "DLRUN_NONE_MODULE",
                              RTLD_NOW | RTLD_LOCAL, tried, sizeof tried);
  CHECK(h && dlsym(h, "dlrun_platform_module_open"), "not found beside the test: %s", tried);
  if (h) dlclose(h);
}

/* ---- modules that do not load: always, with the loader's reason ---- */

static void missing(void) {
  setenv("DLRUN_OPENCL_MODULE", "/nonexistent/libdlrun_opencl.so", 1);
  unsetenv("DLRUN_CUDA_MODULE");
  CHECK(dlrun_platform_modules_load() == DLRUN_OK, "load");
  const dlrun_platform_status *s = listed("opencl");
  CHECK(s && !s->available && s->ndevices == 0 && s->is_accelerator &&
            strcmp(s->class_name, "OpenclDevice") == 0,
        "opencl entry");
  if (s)
    CHECK(strcmp(s->why, "DLRUN_OPENCL_MODULE: /nonexistent/libdlrun_opencl.so" NO_FILE) == 0,
          "why: %s", s->why);
  s = listed("cuda");
  CHECK(s && !s->available && strcmp(s->class_name, "CudaDevice") == 0, "cuda entry");
  if (s) CHECK(strcmp(s->why, "libdlrun_cuda.so" NO_FILE) == 0, "why: %s", s->why);
  /* The failed modules come after the registry's platforms, in the order
   * "auto" would prefer them: cuda, then opencl. */
  CHECK(nlisted >= 2 && strcmp(listing[nlisted - 1].name, "opencl") == 0 &&
            strcmp(listing[nlisted - 2].name, "cuda") == 0,
        "order (%zu listed)", nlisted);
  /* Only as many as asked are written; the count is all of them. */
  dlrun_platform_status one[1];
  CHECK(dlrun_platforms_list(one, 1) == nlisted, "count");
}

/* A file that is there but does not load: its reason, not the search's. */
static void broken_file(void) {
  char path[1100];
  snprintf(path, sizeof path, "%s/libdlrun_cuda.so", here);
  FILE *f = fopen(path, "w");
  CHECK(f != NULL, "cannot write %s", path);
  if (!f) return;
  fputs("not a shared object, but long enough to read a header from it............\n", f);
  fclose(f);
  unsetenv("DLRUN_CUDA_MODULE");
  const dlrun_platform_status *s = listed("cuda");
  unlink(path);
  CHECK(s && !s->available, "cuda entry");
  if (s)
    CHECK(ends_with(s->why, "/libdlrun_cuda.so: invalid ELF header") && !strchr(s->why, ';'),
          "why: %s", s->why);
}

static void no_entry_point(void) {
  setenv("DLRUN_OPENCL_MODULE", "libm.so.6", 1);
  const dlrun_platform_status *s = listed("opencl");
  CHECK(s && !s->available, "opencl entry");
  if (s)
    CHECK(s->why[0] == '/' && ends_with(s->why, "/libm.so.6 has no dlrun_platform_module_open"),
          "why: %s", s->why);
}

/* ---- modules that load (need the device layer's services) ---- */

static int opens(void) {
  void *h = dlopen(test_module, RTLD_NOW | RTLD_NOLOAD);
  int *n = h ? dlsym(h, "dlrun_test_platform_opens") : NULL;
  int v = n ? *n : -1;
  if (h) dlclose(h);
  return v;
}

static void *load_in_thread(void *arg) {
  (void)arg;
  dlrun_platform_modules_load();
  return NULL;
}

static void loads(void) {
  setenv("DLRUN_OPENCL_MODULE", test_module, 1);
  setenv("DLRUN_TEST_PLATFORM_DEVICES", "3", 1);
  pthread_t t[8];
  for (int i = 0; i < 8; i++) pthread_create(&t[i], NULL, load_in_thread, NULL);
  for (int i = 0; i < 8; i++) pthread_join(t[i], NULL);
  CHECK(opens() == 1, "opened %d times by 8 threads", opens());
  const dlrun_platform_status *s = listed("opencl");
  CHECK(s == &listing[0], "a module's platform comes first (ahead of the built-in ones)");
  CHECK(s && s->available && s->ndevices == 3 && strcmp(s->class_name, "TestDevice") == 0 &&
            s->is_accelerator,
        "opencl entry");
  listed("opencl");
  CHECK(opens() == 1, "listing again opened it again");
  /* Registered under its name: "--devices opencl:N" finds it. */
  s = listed("cuda");
  CHECK(s && !s->available && nlisted >= 4 && s == &listing[nlisted - 1], "cuda last");
}

static void probe_false(void) {
  setenv("DLRUN_OPENCL_MODULE", test_module, 1);
  setenv("DLRUN_TEST_PLATFORM_DEVICES", "none", 1);
  const dlrun_platform_status *s = listed("opencl");
  CHECK(s && !s->available && s->ndevices == 0, "opencl entry");
  if (s) CHECK(strcmp(s->why, "no devices here (test)") == 0, "why: %s", s->why);
}

static void open_fails(void) {
  setenv("DLRUN_OPENCL_MODULE", test_module, 1);
  setenv("DLRUN_TEST_PLATFORM_FAIL", "clGetPlatformIDs failed: -1001", 1);
  const dlrun_platform_status *s = listed("opencl");
  CHECK(s && !s->available && strcmp(s->class_name, "OpenclDevice") == 0, "opencl entry");
  if (s) CHECK(strcmp(s->why, "clGetPlatformIDs failed: -1001") == 0, "why: %s", s->why);
}

static void wrong_name(void) {
  setenv("DLRUN_OPENCL_MODULE", test_module, 1);
  setenv("DLRUN_TEST_PLATFORM_NAME", "other", 1);
  const dlrun_platform_status *s = listed("opencl");
  CHECK(s && !s->available, "opencl entry");
  char want[1300];
  snprintf(want, sizeof want, "%s holds platform 'other', not 'opencl'", test_module);
  if (s) CHECK(strcmp(s->why, want) == 0, "why: %s", s->why);
  CHECK(listed("other") == NULL, "registered under another name");
}

/* A platform of the module's name registered first (by a host
 * application) keeps its place; the module is not listed twice. */
static void name_taken(void) {
  setenv("DLRUN_OPENCL_MODULE", test_module, 1);
  void *h = dlopen(test_module, RTLD_NOW | RTLD_LOCAL);
  dlrun_platform_module_open_fn open_fn;
  *(void **)&open_fn = h ? dlsym(h, "dlrun_platform_module_open") : NULL;
  const dlrun_platform *pl = NULL;
  char err[200];
  CHECK(open_fn && open_fn(DLRUN_PLATFORM_ABI, dlrun_platform_services_get(), &pl, err,
                           sizeof err) == 0 &&
            dlrun_platform_register(pl) == DLRUN_OK,
        "register");
  const dlrun_platform_status *s = listed("opencl");
  CHECK(s && s->available && opens() == 2, "opencl entry");
  int seen = 0;
  for (size_t i = 0; i < nlisted; i++) seen += strcmp(listing[i].name, "opencl") == 0;
  CHECK(seen == 1, "opencl listed %d times", seen);
}

int main(void) {
  ssize_t n = readlink("/proc/self/exe", here, sizeof here - 1);
  here[n > 0 ? n : 0] = '\0';
  if (strrchr(here, '/')) *strrchr(here, '/') = '\0';
  snprintf(test_module, sizeof test_module, "%s/libdlrun_test_platform.so", here);
  TEST("a module is found at its variable, beside the executable, or says where it looked")
    test_find();
  TEST("a missing module is listed, not available, with the loader's reason")
    CHECK(in_child(missing), "child failed");
  TEST("a module file that does not load gives its own reason") CHECK(in_child(broken_file), "x");
  TEST("a library without the entry point is named") CHECK(in_child(no_entry_point), "x");
  if (!dlrun_platform_services_get) {
    printf("  skipped: loading modules (this build has no dlrun_platform_services_get)\n");
  } else {
    TEST("a module loads once, from any number of threads, and lists first")
      CHECK(in_child(loads), "child failed");
    TEST("a module's probe says why its hardware is not here") CHECK(in_child(probe_false), "x");
    TEST("a module whose open fails is listed with its reason") CHECK(in_child(open_fails), "x");
    TEST("a module holding another platform is refused") CHECK(in_child(wrong_name), "x");
    TEST("a name registered first keeps its place") CHECK(in_child(name_taken), "x");
  }
  return check_summary("modules");
}
