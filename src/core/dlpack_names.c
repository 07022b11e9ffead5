/* DLPack's names of its codes (see dlpack_names.h). The numbers are
 * dlpack.h's, up to 1.3; written out here, not taken from the header, since
 * the system's header (0.6) lacks most of them. */
#include "dlpack_names.h"

#include <stdio.h>

/* DLDeviceType: 0, 5 and 6 are not assigned. */
static const char *const device_types[] = {
    [1] = "kDLCPU",
    [2] = "kDLCUDA",
    [3] = "kDLCUDAHost",
    [4] = "kDLOpenCL",
    [7] = "kDLVulkan",
    [8] = "kDLMetal",
    [9] = "kDLVPI",
    [10] = "kDLROCM",
    [11] = "kDLROCMHost",
    [12] = "kDLExtDev",
    [13] = "kDLCUDAManaged",
    [14] = "kDLOneAPI",
    [15] = "kDLWebGPU",
    [16] = "kDLHexagon",
    [17] = "kDLMAIA",
    [18] = "kDLTrn", /* 1.2 */
};

/* DLDataTypeCode: 7 to 17 came with 1.1. */
static const char *const type_codes[] = {
    [0] = "kDLInt",
    [1] = "kDLUInt",
    [2] = "kDLFloat",
    [3] = "kDLOpaqueHandle",
    [4] = "kDLBfloat",
    [5] = "kDLComplex",
    [6] = "kDLBool",
    [7] = "kDLFloat8_e3m4",
    [8] = "kDLFloat8_e4m3",
    [9] = "kDLFloat8_e4m3b11fnuz",
    [10] = "kDLFloat8_e4m3fn",
    [11] = "kDLFloat8_e4m3fnuz",
    [12] = "kDLFloat8_e5m2",
    [13] = "kDLFloat8_e5m2fnuz",
    [14] = "kDLFloat8_e8m0fnu",
    [15] = "kDLFloat6_e2m3fn",
    [16] = "kDLFloat6_e3m2fn",
    [17] = "kDLFloat4_e2m1fn",
};

#define COUNT(a) ((int64_t)(sizeof a / sizeof a[0]))

static const char *name_of(int64_t code, const char *const *names, int64_t count) {
  return code >= 0 && code < count ? names[code] : NULL;
}

const char *dlrun_dlpack_device_type_name(int64_t type) {
  return name_of(type, device_types, COUNT(device_types));
}

/* "N (name)", or "N (unknown to DLPack 1.3)" past the table or in a gap. */
static const char *code_text(int64_t code, const char *const *names, int64_t count, char *buf,
                             size_t n) {
  const char *name = name_of(code, names, count);
  if (buf && n)
    snprintf(buf, n, "%lld (%s)", (long long)code, name ? name : "unknown to DLPack 1.3");
  return buf;
}

const char *dlrun_dlpack_device_type_text(int64_t type, char *buf, size_t n) {
  return code_text(type, device_types, COUNT(device_types), buf, n);
}

const char *dlrun_dlpack_type_code_text(int64_t code, char *buf, size_t n) {
  return code_text(code, type_codes, COUNT(type_codes), buf, n);
}
