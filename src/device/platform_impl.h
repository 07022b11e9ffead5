/* Internal to src/device: the built-in platforms, sim and cpu
 * (src/platforms/sim, src/platforms/cpu, linked into libdlrun). Each
 * fills its vtable from the library's services and returns it; the
 * registry opens them once, before its first use. */
#ifndef DLRUN_PLATFORM_IMPL_H
#define DLRUN_PLATFORM_IMPL_H

#include "device_impl.h"

const dlrun_platform *dlrun_sim_platform_open(const dlrun_platform_services *svc);
const dlrun_platform *dlrun_cpu_platform_open(const dlrun_platform_services *svc);

#endif
