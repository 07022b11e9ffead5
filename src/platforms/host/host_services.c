/* The services of the built-in platforms (host_services.h). */
#include "host_services.h"

static const dlrun_platform_services *services;

void dlrun_host_services_set(const dlrun_platform_services *svc) { services = svc; }

const dlrun_platform_services *dlrun_host_services(void) { return services; }
