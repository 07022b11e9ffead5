/* Internal: DLPack's names of its codes, as every message shows them
 * (dlpack_names.c). The same two functions are public in dlrun/dlpack.h,
 * which the core, below that layer, cannot include. */
#ifndef DLRUN_DLPACK_NAMES_H
#define DLRUN_DLPACK_NAMES_H

#include <stddef.h>
#include <stdint.h>

#include "dlrun/export.h"

/* Room for any code's text, "-9223372036854775808 (unknown to DLPack 1.3)". */
#define DLRUN_DL_CODE_TEXT 64

/* "18 (kDLTrn)", or "99 (unknown to DLPack 1.3)" for a device type DLPack
 * does not define, into buf (n bytes; DLRUN_DL_CODE_TEXT is enough). */
DLRUN_API const char *dlrun_dlpack_device_type_text(int64_t type, char *buf, size_t n);
/* "kDLTrn" for 18; NULL for a device type DLPack does not define. Static. */
const char *dlrun_dlpack_device_type_name(int64_t type);
/* The same for a dtype code: "17 (kDLFloat4_e2m1fn)". */
DLRUN_API const char *dlrun_dlpack_type_code_text(int64_t code, char *buf, size_t n);

#endif
