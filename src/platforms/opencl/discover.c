/* Which OpenCL platform and devices dlrun uses. Several platforms may be
 * installed (a vendor's GPU driver beside pocl): DLRUN_OPENCL_PLATFORM names
 * one by index or by a part of its name; otherwise the first with a GPU or
 * accelerator is taken, else the first with any device. Devices are ordered
 * GPUs and accelerators first, so that "auto", which counts only those,
 * takes the first devices of the list. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ocl.h"

#define ACCEL_TYPES (CL_DEVICE_TYPE_GPU | CL_DEVICE_TYPE_ACCELERATOR)

static void platform_name(cl_platform_id p, char *buf, size_t n) {
  if (clGetPlatformInfo(p, CL_PLATFORM_NAME, n, buf, NULL) != CL_SUCCESS) snprintf(buf, n, "?");
  buf[n - 1] = '\0';
}

/* The devices of p of `type`, or 0. */
static cl_uint count_devices(cl_platform_id p, cl_device_type type) {
  cl_uint n = 0;
  if (clGetDeviceIDs(p, type, 0, NULL, &n) != CL_SUCCESS) return 0;
  return n;
}

static bool all_digits(const char *s) {
  if (!*s) return false;
  for (; *s; s++)
    if (!isdigit((unsigned char)*s)) return false;
  return true;
}

/* "0: Portable Computing Language, 1: ..." into buf. */
static void list_platforms(const cl_platform_id *ps, cl_uint np, char *buf, size_t n) {
  size_t len = 0;
  buf[0] = '\0';
  for (cl_uint i = 0; i < np && len < n; i++) {
    char name[128];
    platform_name(ps[i], name, sizeof name);
    len += (size_t)snprintf(buf + len, n - len, "%s%u: %s", i ? ", " : "", i, name);
  }
}

/* The index of the platform DLRUN_OPENCL_PLATFORM names, or -1 with why. */
static long pick_by_env(const char *want, const cl_platform_id *ps, cl_uint np, char *why,
                        size_t n) {
  char have[160];
  list_platforms(ps, np, have, sizeof have);
  if (all_digits(want)) {
    unsigned long i = strtoul(want, NULL, 10);
    if (i < np) return (long)i;
    snprintf(why, n, "DLRUN_OPENCL_PLATFORM=%s is not a platform index (have %s)", want, have);
    return -1;
  }
  for (cl_uint i = 0; i < np; i++) {
    char name[128];
    platform_name(ps[i], name, sizeof name);
    if (strcasestr(name, want)) return (long)i;
  }
  snprintf(why, n, "DLRUN_OPENCL_PLATFORM=%s names no OpenCL platform (have %s)", want, have);
  return -1;
}

bool ocl_discover(cl_platform_id *platform, cl_device_id **devs, size_t *ndevs, size_t *naccel,
                  char *why, size_t n) {
  *devs = NULL;
  *ndevs = *naccel = 0;
  cl_uint np = 0;
  cl_int err = clGetPlatformIDs(0, NULL, &np);
  if (err == -1001) {
    snprintf(why, n, "no OpenCL driver (ICD) is installed (clGetPlatformIDs: -1001)");
    return false;
  }
  if (err != CL_SUCCESS) {
    snprintf(why, n, "clGetPlatformIDs failed: %s (%d)", ocl_error_name(err), err);
    return false;
  }
  if (np == 0) {
    snprintf(why, n, "no OpenCL platform is installed");
    return false;
  }
  cl_platform_id ps[16];
  if (np > 16) np = 16;
  if ((err = clGetPlatformIDs(np, ps, NULL)) != CL_SUCCESS) {
    snprintf(why, n, "clGetPlatformIDs failed: %s (%d)", ocl_error_name(err), err);
    return false;
  }
  const char *want = getenv("DLRUN_OPENCL_PLATFORM");
  long pick = -1;
  if (want && *want) {
    if ((pick = pick_by_env(want, ps, np, why, n)) < 0) return false;
  } else {
    for (cl_uint i = 0; i < np && pick < 0; i++)
      if (count_devices(ps[i], ACCEL_TYPES)) pick = i;
    for (cl_uint i = 0; i < np && pick < 0; i++)
      if (count_devices(ps[i], CL_DEVICE_TYPE_ALL)) pick = i;
    if (pick < 0) {
      snprintf(why, n, "no OpenCL platform has a device");
      return false;
    }
  }
  cl_platform_id p = ps[pick];
  cl_uint nacc = count_devices(p, ACCEL_TYPES), nall = count_devices(p, CL_DEVICE_TYPE_ALL);
  if (nall == 0) {
    char name[128];
    platform_name(p, name, sizeof name);
    snprintf(why, n, "the OpenCL platform %s has no device", name);
    return false;
  }
  cl_device_id *all = malloc(nall * sizeof *all), *acc = malloc((nacc + 1) * sizeof *acc);
  if (!all || !acc || clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, nall, all, NULL) != CL_SUCCESS ||
      (nacc && clGetDeviceIDs(p, ACCEL_TYPES, nacc, acc, NULL) != CL_SUCCESS)) {
    free(all);
    free(acc);
    snprintf(why, n, "clGetDeviceIDs failed");
    return false;
  }
  /* GPUs and accelerators first, then the others in the driver's order. */
  size_t k = 0;
  cl_device_id *ordered = malloc(nall * sizeof *ordered);
  if (!ordered) {
    free(all);
    free(acc);
    snprintf(why, n, "out of host memory");
    return false;
  }
  for (cl_uint i = 0; i < nacc; i++) ordered[k++] = acc[i];
  for (cl_uint i = 0; i < nall; i++) {
    bool seen = false;
    for (cl_uint j = 0; j < nacc; j++) seen |= all[i] == acc[j];
    if (!seen) ordered[k++] = all[i];
  }
  free(all);
  free(acc);
  *platform = p;
  *devs = ordered;
  *ndevs = k;
  *naccel = nacc;
  return true;
}
