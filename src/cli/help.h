/* The dlrun command's help: the one list of its options and environment
 * variables. The README's usage block is this text and the man page's
 * OPTIONS and ENVIRONMENT sections are made from it at build time
 * (scripts/man-from-help.awk); spec/docs/help_spec.lua checks both. */
#ifndef DLRUN_CLI_HELP_H
#define DLRUN_CLI_HELP_H

#include <stdio.h>

/* Print the usage, the options and the environment variables to `out`. */
void cli_print_help(FILE *out);

#endif
