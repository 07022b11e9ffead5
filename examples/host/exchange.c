/* A host application lending dlrun's memory and queues to a library through
 * DLPack 1.3's exchange table (include/dlrun/exchange.h; docs/dlpack.md,
 * "The exchange table for C hosts"). Build: `make examples`
 * (build/examples/exchange).
 *
 * The library below knows DLPack only, as one written against TVM-FFI
 * does: it allocates its output with the host's allocator, asks for the
 * work stream of the output's device, writes after the work ordered there,
 * and hands the tensor back. The host binds its runtime, calls the library,
 * takes the output back as a dlrun array without a copy, moves it to a sim
 * device and prints it. */
#include <stdio.h>

#include <dlrun/dlrun.h>
#include <dlrun/exchange.h>

/* ---- the library: DLPack 1.3 only ---- */

/* Where the library's SetError puts an error (its error_ctx). */
typedef struct library_error {
  char text[512];
} library_error;

static void library_set_error(void *ctx, const char *kind, const char *message) {
  snprintf(((library_error *)ctx)->text, sizeof ((library_error *)ctx)->text, "%s: %s", kind,
           message);
}

/* out[i][j] = (i * cols + j)^2, a float32 tensor of rows x cols on `device`,
 * in memory from the host's allocator. 0, or -1 with err set. */
static int library_squares(const DLPackExchangeAPI *api, DLDevice device, int64_t rows,
                           int64_t cols, DLManagedTensorVersioned **out, library_error *err) {
  int64_t shape[2] = {rows, cols};
  DLTensor prototype = {.device = device, .ndim = 2, .dtype = {kDLFloat, 32, 1}, .shape = shape};
  if (api->managed_tensor_allocator(&prototype, out, err, library_set_error) != 0) return -1;
  void *stream;
  if (api->current_work_stream(device.device_type, device.device_id, &stream) != 0) {
    snprintf(err->text, sizeof err->text, "no work stream for the output's device");
    (*out)->deleter(*out);
    *out = NULL;
    return -1;
  }
  /* A kernel would be launched on `stream`; NULL is host memory, written
   * here and now. */
  if (stream != NULL || device.device_type != kDLCPU) {
    snprintf(err->text, sizeof err->text, "this library writes host memory only");
    (*out)->deleter(*out);
    *out = NULL;
    return -1;
  }
  float *v = (float *)((char *)(*out)->dl_tensor.data + (*out)->dl_tensor.byte_offset);
  for (int64_t i = 0; i < rows * cols; i++) v[i] = (float)(i * i);
  printf("library: float32[%lld, %lld] allocated on kDLCPU:0 by the host, work stream NULL "
         "(host memory), %lld values written\n",
         (long long)rows, (long long)cols, (long long)(rows * cols));
  return 0;
}

/* ---- the host ---- */

static int fail(const char *what, dlrun_status st) {
  fprintf(stderr, "%s: %s: %s\n", what, dlrun_status_name(st), dlrun_last_error());
  return 1;
}

int main(void) {
  dlrun_status st;
  dlrun_config cfg = {.devices = "sim:2,cpu:1", .device_memory = 1u << 20};
  dlrun_runtime *rt;
  if ((st = dlrun_runtime_create(&cfg, &rt))) return fail("runtime", st);
  dlrun_exchange_bind(rt); /* the exchange functions allocate from rt's pools */
  const DLPackExchangeAPI *api = dlrun_exchange_api();

  DLManagedTensorVersioned *m;
  library_error err = {{0}};
  if (library_squares(api, (DLDevice){kDLCPU, 0}, 4, 3, &m, &err) != 0) {
    fprintf(stderr, "library: %s\n", err.text);
    return 1;
  }
  /* The output is dlrun's memory: taken back without a copy. The array now
   * owns the tensor and calls its deleter when it goes. */
  dlrun_array *y, *on_sim;
  dlrun_import_outcome how;
  if ((st = dlrun_import(rt, NULL, m, NULL, &y, &how))) return fail("import", st);
  dlrun_sharding *sim1;
  if ((st = dlrun_single_device_sharding_create(dlrun_device_get(rt, "sim", 1), DLRUN_MEM_DEVICE,
                                                &sim1)))
    return fail("sharding", st);
  if ((st = dlrun_device_put(y, sim1, NULL, &on_sim))) return fail("device_put", st);
  float v[12];
  if ((st = dlrun_array_read(on_sim, 0, sizeof v, v))) return fail("read", st);
  printf("host: imported %s onto %s; moved to %s:", how == DLRUN_IMPORT_WRAPPED ? "without a copy"
                                                                                : "as a copy",
         dlrun_device_name(dlrun_array_device(y)), dlrun_device_name(dlrun_array_device(on_sim)));
  for (int i = 0; i < 12; i++) printf(" %g", v[i]);
  printf("\n");

  /* A device the runtime lacks: the library hears why through SetError. */
  if (library_squares(api, (DLDevice){kDLCUDA, 0}, 4, 3, &m, &err) == 0) return 1;
  printf("library: %s\n", err.text);

  dlrun_array_release(on_sim);
  dlrun_array_release(y); /* the deleter runs: the block goes back to the pool */
  dlrun_sharding_release(sim1);
  dlrun_memory_stats stats;
  dlrun_device_memory_stats(dlrun_host_device(rt), DLRUN_MEM_DEVICE, &stats);
  printf("host: %lld exports alive, %llu bytes in use on %s\n", (long long)dlrun_live_exports(rt),
         (unsigned long long)stats.bytes_in_use, dlrun_device_name(dlrun_host_device(rt)));
  dlrun_exchange_bind(NULL); /* drops the binding's reference */
  dlrun_runtime_release(rt);
  return 0;
}
