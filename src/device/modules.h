/* Internal: platform modules, platforms built apart from libdlrun
 * (libdlrun_opencl.so) and loaded at run time. */
#ifndef DLRUN_DEVICE_MODULES_H
#define DLRUN_DEVICE_MODULES_H

#include "device_impl.h"
#include "dlrun/status.h"

/* The modules dlrun knows by name (cuda, opencl). */
#define DLRUN_KNOWN_MODULES 2
/* How many platforms dlrun_platforms_list can name: every registered one
 * and each known module that did not load. */
#define DLRUN_MAX_LISTED (DLRUN_MAX_PLATFORMS + DLRUN_KNOWN_MODULES)

/* Load every platform module found, once per process (later calls, from
 * any thread, return at once): open each with the library's services and
 * register its platform ahead of the built-in ones. A module that is
 * missing or fails to load, open or register is remembered with why, for
 * dlrun_platforms_list, never an error: DLRUN_OK always. Called before a
 * device spec is read (a spec may name a module's platform) and by the
 * listing. */
dlrun_status dlrun_platform_modules_load(void);

#endif
