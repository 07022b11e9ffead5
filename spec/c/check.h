/* A minimal test harness for the C tests: each test binary calls TEST blocks
 * and CHECK assertions, then check_summary() prints one closing line
 * "C <name>: N passed, N failed" and returns the exit code. */
#ifndef DLRUN_CHECK_H
#define DLRUN_CHECK_H

#include <stdio.h>
#include <string.h>

static int check_passed, check_failed, check_current_failed;
static const char *check_current;

#define TEST(name)                                                          \
  for (int check_once_ = (check_begin(name), 1); check_once_;               \
       check_once_ = 0, check_end())

static inline void check_begin(const char *name) {
  check_current = name;
  check_current_failed = 0;
}

static inline void check_end(void) {
  if (check_current_failed) {
    check_failed++;
    printf("not ok - %s\n", check_current);
  } else {
    check_passed++;
    printf("ok - %s\n", check_current);
  }
}

#define CHECK(cond, ...)                                                    \
  do {                                                                      \
    if (!(cond)) {                                                          \
      check_current_failed = 1;                                             \
      printf("  %s:%d: CHECK(%s) failed: ", __FILE__, __LINE__, #cond);     \
      printf(__VA_ARGS__);                                                  \
      printf("\n");                                                         \
    }                                                                       \
  } while (0)

#define CHECK_STR_CONTAINS(hay, needle)                                     \
  CHECK(strstr((hay), (needle)) != NULL, "\"%s\" does not contain \"%s\"", \
        (hay), (needle))

/* The first 64 KiB of a file as text (in a buffer the next call reuses), or
 * NULL when it cannot be read. */
static inline const char *check_slurp(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  static char buf[1 << 16];
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = '\0';
  return buf;
}

/* Wait for the child `pid` (a fork's result); whether it exited with 0,
 * its checks all passed. *status: what waitpid said. */
#include <sys/types.h>
#include <sys/wait.h>
static inline int check_child_passed(pid_t pid, int *status) {
  *status = 0;
  return pid > 0 && waitpid(pid, status, 0) == pid && WIFEXITED(*status) &&
         WEXITSTATUS(*status) == 0;
}

static inline int check_summary(const char *name) {
  printf("C %s: %d passed, %d failed\n", name, check_passed, check_failed);
  return check_failed ? 1 : 0;
}

/* The unknown-platform error's list ("sim, cpu, opencl, cuda, or auto"):
 * it depends on which platform modules this build has and finds. */
#include <string.h>

#include "dlrun/platform.h"
static inline const char *check_known_platforms(void) {
  static char text[256];
  dlrun_platform_status all[16];
  size_t n = dlrun_platforms_list(all, 16);
  text[0] = '\0';
  for (size_t i = 0; i < n && i < 16; i++) {
    strncat(text, all[i].name, sizeof text - strlen(text) - 1);
    strncat(text, ", ", sizeof text - strlen(text) - 1);
  }
  strncat(text, "or auto", sizeof text - strlen(text) - 1);
  return text;
}

/* The CUDA driver double and module beside this test binary
 * (tests/cuda-double/libcuda.so.1, ../libdlrun_cuda.so), into lib and mod:
 * when both are built, DLRUN_CUDA_LIBRARY and DLRUN_CUDA_MODULE name them
 * and it returns 1; else 0 (the caller skips). */
#include <stdlib.h>
#include <unistd.h>
static inline int check_cuda_double(char *lib, size_t nlib, char *mod, size_t nmod) {
  char dir[1024];
  ssize_t len = readlink("/proc/self/exe", dir, sizeof dir - 1);
  dir[len > 0 ? len : 0] = 0;
  if (strrchr(dir, '/')) *strrchr(dir, '/') = 0;
  snprintf(lib, nlib, "%s/cuda-double/libcuda.so.1", dir);
  snprintf(mod, nmod, "%s/../libdlrun_cuda.so", dir);
  if (access(lib, R_OK) != 0 || access(mod, R_OK) != 0) return 0;
  setenv("DLRUN_CUDA_LIBRARY", lib, 1);
  setenv("DLRUN_CUDA_MODULE", mod, 1);
  return 1;
}

#endif
