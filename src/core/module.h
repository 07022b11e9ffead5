/* Internal: finding a module, a shared library dlrun loads at run time
 * (the MPI transport libdlrun_mpi.so, platforms such as libdlrun_opencl.so),
 * where an installation puts it. */
#ifndef DLRUN_CORE_MODULE_H
#define DLRUN_CORE_MODULE_H

#include <stdbool.h>
#include <stddef.h>

/* Whether this program is linked statically (it has no dynamic loader). Such
 * a program loads no module: a module needs the shared C library, which would
 * then run beside the program's own copy (the OpenCL module crashes there),
 * so the two functions below refuse, saying why (README, "Static linking"). */
bool dlrun_program_is_static(void);

/* dlopen(path, flags); NULL with the loader's reason in `why`. */
void *dlrun_module_open(const char *path, int flags, char *why, size_t n);

/* The module `file_name`: at $env_var when that is set (there only); else
 * beside the code running this (libdlrun.so, or an executable linking it
 * statically) and beside the executable, each in its folder and in ../lib
 * from there; then on the loader's search path. NULL when none opens, with
 * what was tried in `tried`: "<env_var>: <reason>", or each place's reason
 * in that order, "; "-separated. */
void *dlrun_module_find(const char *file_name, const char *env_var, int flags, char *tried,
                        size_t n);

#endif
