/* The library's services for the built-in platforms (sim, cpu) and their
 * host execution: handed to their open functions as a module's open is
 * handed them, so that no platform file reaches back into the library. */
#ifndef DLRUN_HOST_HOST_SERVICES_H
#define DLRUN_HOST_HOST_SERVICES_H

#include "dlrun/platform.h"

/* Set once, by the first built-in platform's open, before any device is
 * made (the registry opens them under its once). */
void dlrun_host_services_set(const dlrun_platform_services *svc);
const dlrun_platform_services *dlrun_host_services(void);

#endif
