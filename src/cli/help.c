/* The text of `dlrun --help`: a header, then each option and environment
 * variable with its description, wrapped at a fixed column so that the man
 * page's sections can be made from it (help.h). */
#include "help.h"

#include <string.h>

#include <lua.h>

typedef struct help_entry {
  const char *name; /* "-e STAT", "DLRUN_DEVICES": never two spaces in a row */
  const char *text; /* one paragraph; wrapped when printed */
} help_entry;

static const help_entry options[] = {
    {"-e STAT", "execute string STAT (repeatable; -e, -l and -W take effect in command-line "
                "order, before the script)"},
    {"-l MOD", "require MOD into global MOD, the name cut at its first '-' (-l G=MOD: into "
               "global G)"},
    {"-i", "enter the prompt after running the script and the -e chunks, with dl = require "
           "\"dlrun\" already loaded"},
    {"-E", "ignore LUA_INIT, LUA_PATH and LUA_CPATH"},
    {"-W", "turn warnings on"},
    {"-v", "print the version, then go on"},
    {"--allow-binary-chunks",
     "also run precompiled (luac) chunks as the script, -e code and LUA_INIT; by default "
     "they are text only. Risk: Lua does not check bytecode, so a corrupt or crafted chunk "
     "can crash the process or corrupt its memory; allow only chunks you trust"},
    {"--devices SPEC", "devices of the default runtime: sim:8, cpu:4, sim:8,cpu:2 or auto (real "
                       "accelerators when present, else sim:8); there is always a host cpu "
                       "device. Default: DLRUN_DEVICES, else auto"},
    {"--device-memory SIZE",
     "memory of each simulated device, e.g. 2GiB: bytes, or a number with a unit KiB, MiB, "
     "GiB, TiB (or K, M, G, T; powers of 1024), kB, MB, GB, TB (powers of 1000) or B; at "
     "least 4KiB, rounded down to a multiple of 256 bytes. Or N%: the simulated devices "
     "share N% of host RAM. Default: the memories of all devices together fit in host RAM "
     "(half of it for the simulated devices); a size that makes them add up to more is "
     "noted on stderr"},
    {"--pinned-host-memory SIZE", "pinned_host memory of each simulated device, as "
                                  "--device-memory"},
    {"--host-memory SIZE",
     "memory of the host device (each cpu device), where device_get and DLPack imports of "
     "host data land, as --device-memory (N%: the cpu devices share N% of host RAM). "
     "Default: the host RAM that no other device memory is promised"},
    {"--device-preallocate BOOL",
     "true: reserve and commit each simulated device's memory when the runtime starts, so "
     "that a shortage of host RAM shows then, as an error; false (default): grow on demand"},
    {"--pinned-host-preallocate BOOL", "the same for pinned_host memory"},
    {"--trace FILE",
     "write a Chrome trace (Perfetto, chrome://tracing) of allocations, frees, fills, "
     "copies, exports, imports and deleter calls, with a counter of the bytes in use per "
     "device memory; FILE is created before the script runs (the script itself is refused) "
     "and events are streamed to it; it is complete at exit, os.exit too. On a job of "
     "several processes, process p writes FILE with .p before its extension (t.json: "
     "t.1.json; t: t.1)"},
    {"--stats", "at the end of the script, print per device the memory in use and its "
                "peak, the bytes moved in and out, the largest free block and the "
                "fragmentation of its memory, and the DLPack exports still alive, to stderr "
                "(on a job, of this process's devices); then what closing the state released, "
                "if anything. dl.stats() gives the same as a table"},
    {"--distributed MODE",
     "auto (default): join the job when launched by mpirun (Open MPI or MPICH), else run "
     "alone; mpi: join (a job of one when not launched); off: run alone. Joining loads the "
     "MPI transport module. On a job, messages start with dlrun[p] on process p, and an "
     "uncaught error on one process ends the whole job; the end of the script is a point "
     "every process meets"},
    {"--list-devices", "list the platforms dlrun knows (sim, cpu, modules such as opencl) "
                       "with their devices, or why they are not available, and exit"},
    {"--version", "print the version and exit"},
    {"-h, --help", "print this help and exit"},
    {"--", "stop handling options"},
    {"-", "read the script from stdin"},
};

/* Every variable dlrun reads, the test-only DLRUN_FAIL_* too (the man page
 * lists them all). */
static const help_entry environment[] = {
    {"DLRUN_DEVICES", "default for --devices; checked at start: a bad value ends dlrun with "
                      "status 1 before the script runs"},
    {"DLRUN_DEVICE_MEMORY", "default for --device-memory; checked at start"},
    {"DLRUN_PINNED_HOST_MEMORY", "default for --pinned-host-memory; checked at start"},
    {"DLRUN_HOST_MEMORY", "default for --host-memory; checked at start"},
    {"DLRUN_DEVICE_PREALLOCATE", "default for --device-preallocate: true, false, 1, 0, on, "
                                 "off, yes or no; checked at start"},
    {"DLRUN_PINNED_HOST_PREALLOCATE", "default for --pinned-host-preallocate; checked at "
                                      "start"},
    {"DLRUN_SIM_MEMORY", "private (default: simulated device memory the host cannot read, as "
                         "on a discrete accelerator) or shared (host-readable); any other "
                         "value is a ValueError"},
    {"DLRUN_WORKERS",
     "worker threads that run host copies and fills: auto (default: one per core this "
     "process may use; in a job of several unbound processes on one host, the host's cores "
     "shared evenly among them; at least 1) or a number from 1 to 64; checked at start; "
     "--stats says how many and why"},
    {"DLRUN_STREAM_BYTES",
     "a call that writes at least this much on a process copies with streaming stores, "
     "around the caches: auto (default: 16MiB, or off where the job's processes on this "
     "host outnumber its cores), off, or a size such as 64MiB; checked at start"},
    {"DLRUN_TRACE", "write a Chrome trace to this file, as --trace, from every way in: the "
                    "dlrun command, require \"dlrun\", the C API's default runtime"},
    {"DLRUN_DISTRIBUTED", "default for --distributed; checked at start"},
    {"DLRUN_DISTRIBUTED_TIMEOUT",
     "seconds any wait for other processes may last (default 300); a wait that passes it "
     "raises a RuntimeError naming the processes that did not arrive"},
    {"DLRUN_DISTRIBUTED_MESSAGE_BYTES",
     "the largest message between two processes, in bytes (4096 to 1073741824, the "
     "default); a larger piece of a transfer goes as several. Every process of a job must "
     "set the same: a different value is a ValueError on every process when joining"},
    {"DLRUN_DISTRIBUTED_DEVICE_MEMORY",
     "how device_put between processes reaches device memory: auto (the default: directly "
     "where MPI can, CUDA memory with a CUDA-aware MPI, else staged through host memory), "
     "direct or staged"},
    {"DLRUN_DISTRIBUTED_IPC",
     "auto (the default): processes on one host copy pieces of sim and cpu memory straight "
     "out of each other's memory, one copy each; off: every piece is an MPI message"},
    {"DLRUN_MPI_MODULE", "the MPI transport module to load when joining (default: "
                         "libdlrun_mpi.so beside the library or the executable, then in "
                         "../lib from there)"},
    {"DLRUN_OPENCL_MODULE", "the OpenCL platform module to load (default: libdlrun_opencl.so, "
                            "found as the MPI one); one that is missing or does not load "
                            "leaves its platform out (see --list-devices)"},
    {"DLRUN_CUDA_MODULE", "the same for the CUDA platform module, libdlrun_cuda.so"},
    {"DLRUN_CUDA_LIBRARY", "the CUDA driver the cuda platform loads (default: libcuda.so.1); "
                           "without one, or with the toolkit's stub, cuda is listed as not "
                           "available with the reason"},
    {"DLRUN_OPENCL_PLATFORM",
     "which OpenCL platform the opencl devices run on when several are installed: an index "
     "(0) or a part of the platform's name, in any case (portable, nvidia). Unset: the "
     "first platform with a GPU or accelerator, else the first with any device"},
    {"DLRUN_LUA_DIR", "directory holding dlrun/init.lua, first on package.path; unset or "
                      "empty: DIR/../share/lua/5.4, then DIR/../lua, where DIR is the "
                      "directory of the executable, symbolic links resolved"},
    {"DLRUN_FAIL_HOST_ALLOC, DLRUN_FAIL_POOL_ALLOC",
     "for testing: make the k-th host allocation, or device pool allocation, fail"},
    {"DLRUN_FAIL_IPC_MAP, DLRUN_IPC_DELAY_MS",
     "for testing: make the k-th mapping of another process's memory fail; wait this many "
     "milliseconds before each copy out of another process's memory"},
    {"LUA_INIT_5_4, LUA_INIT", "Lua code, or @file, run before the -e chunks and the script, "
                               "unless -E"},
    {"LUA_PATH_5_4, LUA_PATH, LUA_CPATH_5_4, LUA_CPATH",
     "the package paths, as in lua5.4; ignored under -E"},
};

/* Descriptions start at this column; no line goes past WIDTH characters. */
enum { TEXT_COLUMN = 24, WIDTH = 79 };

static void print_entry(FILE *out, const help_entry *e) {
  int col = fprintf(out, "  %s", e->name);
  col += fprintf(out, "%*s", col + 2 <= TEXT_COLUMN ? TEXT_COLUMN - col : 2, "");
  int line_start = 1;
  for (const char *w = e->text; *w;) {
    size_t len = strcspn(w, " ");
    if (!line_start && col + 1 + (int)len > WIDTH) {
      col = fprintf(out, "\n%*s", TEXT_COLUMN, "") - 1;
      line_start = 1;
    }
    if (!line_start) col += fprintf(out, " ");
    col += fprintf(out, "%.*s", (int)len, w);
    line_start = 0;
    w += len;
    w += strspn(w, " ");
  }
  fputc('\n', out);
}

static void print_list(FILE *out, const char *title, const help_entry *list, size_t n) {
  fprintf(out, "\n%s:\n", title);
  for (size_t i = 0; i < n; i++) print_entry(out, &list[i]);
}

void cli_print_help(FILE *out) {
  fputs("usage: dlrun [options] [script [args...]]\n"
        "Run a Lua " LUA_VERSION_MAJOR "." LUA_VERSION_MINOR
        " script with the dlrun module built in.\n"
        "Options come before the script; everything after the script name\n"
        "goes to the script (in `arg` and `...`). With no script, no -e and no -v,\n"
        "the script is read from stdin when stdin is not a terminal; on a terminal\n"
        "dlrun starts its prompt, as lua" LUA_VERSION_MAJOR "." LUA_VERSION_MINOR " does.\n",
        out);
  print_list(out, "Options", options, sizeof options / sizeof *options);
  print_list(out, "Environment", environment, sizeof environment / sizeof *environment);
}
