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
#include "exchange.h"
#include "multihost.h"
#include "partitioned.h"
#include "runtime.h"
#include "shape.h"
#include "stats.h"
#include "status.h"
#include "trace.h"

/* The one place the release version is written: the Makefile reads it from
 * here for the library's file name, dlrun.pc and the man page, `dlrun
 * --version` prints it, and `make rock` names the rock after it
 * (spec/project/install_spec.lua checks them all). */
#define DLRUN_VERSION_STRING "0.5.0"

/* The ABI number, the N of the soname libdlrun.so.N, apart from the release
 * version (which stays 0.x while the API settles): raised whenever a binary
 * built against the previous headers can no longer run on the library (a
 * struct's layout, a function's arguments or a removed function; README,
 * "ABI"). `make test` compares the library with abi/libdlrun.abi
 * (scripts/check-abi.sh). 1: issue 15's new dlrun_config,
 * dlrun_export_options, dlrun_exported, dlrun_transfer_stats and
 * dlrun_import. 2: issue 36's dtypes (DLRUN_DTYPE_COUNT changed value) and
 * dlrun_export_options.legacy_knows_1_1. 3: issue 35's streaming hint for
 * platforms (dlrun_copy_op.stream, host_copy_box's `stream`: platform ABI 2).
 * 4: issue 35's copies of shared sources taken together (the platform
 * slot copy_boxes: platform ABI 3). */
#define DLRUN_ABI_VERSION 4

#endif
