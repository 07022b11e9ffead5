/* The command's listing of platforms (--list-devices). */
#ifndef DLRUN_CLI_PLATFORMS_H
#define DLRUN_CLI_PLATFORMS_H

#include <stdio.h>

/* Print one line per platform dlrun knows, in the order "auto" prefers
 * them: "NAME  available: N devices", "NAME  available: any number of
 * devices" (sim, cpu: as many as asked) or "NAME  not available: WHY".
 * Returns the exit status (0). */
int dlrun_cli_list_devices(FILE *out);

#endif
