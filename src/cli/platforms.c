/* --list-devices (platforms.h). */
#include "platforms.h"

#include <stdlib.h>
#include <string.h>

#include "dlrun/platform.h"

int dlrun_cli_list_devices(FILE *out) {
  size_t max = dlrun_platforms_list(NULL, 0);
  dlrun_platform_status *st = calloc(max ? max : 1, sizeof *st);
  if (!st) {
    fprintf(stderr, "dlrun: out of memory listing the platforms\n");
    return EXIT_FAILURE;
  }
  size_t n = dlrun_platforms_list(st, max);
  if (n > max) n = max;
  int width = 0;
  for (size_t i = 0; i < n; i++)
    if ((int)strlen(st[i].name) > width) width = (int)strlen(st[i].name);
  for (size_t i = 0; i < n; i++) {
    fprintf(out, "%-*s  ", width, st[i].name);
    if (!st[i].available)
      fprintf(out, "not available: %s\n", st[i].why);
    else if (st[i].ndevices == 0)
      fprintf(out, "available: any number of devices\n");
    else
      fprintf(out, "available: %zu device%s\n", st[i].ndevices, st[i].ndevices == 1 ? "" : "s");
  }
  free(st);
  fflush(out);
  return EXIT_SUCCESS;
}
