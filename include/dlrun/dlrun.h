/* dlrun: the C API for host applications. Include this one header.
 *
 * Conventions: every fallible function returns a dlrun_status (DLRUN_OK is 0)
 * and on failure leaves a message for dlrun_last_error(). Outputs go through
 * `out` pointers, set to NULL on failure. Each header states who owns what. */
#ifndef DLRUN_DLRUN_H
#define DLRUN_DLRUN_H

#include "array.h"
#include "debug.h"
#include "dlpack.h"
#include "device.h"
#include "distributed.h"
#include "dtype.h"
#include "multihost.h"
#include "partitioned.h"
#include "runtime.h"
#include "shape.h"
#include "stats.h"
#include "status.h"
#include "trace.h"

/* The one place the version is written: the Makefile reads it from here for
 * the soname, dlrun.pc and the man page, `dlrun --version` prints it, and the
 * rockspec's name must match it (spec/install_spec.lua checks them all). */
#define DLRUN_VERSION_STRING "0.1.0"

#endif
