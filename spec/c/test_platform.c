/* C tests of the platform registry and the probe slot: a platform added at
 * run time (as a hardware backend would be) that is absent gives a clear
 * error naming why, "auto" passes it over for sim, and once present "auto"
 * takes all its devices, which then work like any other. The test platform
 * borrows the sim platform's slots for everything but its name and probe. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "platforms/host/hostexec.h"
#include "device/device_impl.h"
#include "dlrun/dlrun.h"

static size_t present; /* devices the probe reports; 0: absent */

/* The built-in sim platform's vtable. */
static const dlrun_platform *sim_platform(void) { return dlrun_platform_find("sim", 3); }

static bool probe_test(bool for_auto, size_t *ndevices, char *why, size_t n) {
  (void)for_auto;
  *ndevices = present;
  if (present == 0) snprintf(why, n, "no probe_test driver is loaded");
  return present > 0;
}

static dlrun_platform test_platform;

static dlrun_runtime *runtime_for(const char *spec) {
  dlrun_config cfg = {.devices = spec, .device_memory = 1 << 20};
  dlrun_runtime *rt = NULL;
  return dlrun_runtime_create(&cfg, &rt) ? NULL : rt;
}

static void test_probe(void) {
  TEST("an absent platform is refused with the probe's reason; auto takes sim") {
    present = 0;
    dlrun_config cfg = {.devices = "probe_test:2", .device_memory = 1 << 20};
    dlrun_runtime *none = NULL;
    CHECK(dlrun_runtime_create(&cfg, &none) == DLRUN_ERR_VALUE, "not a ValueError");
    CHECK(none == NULL, "created");
    CHECK(strcmp(dlrun_last_error(), "platform probe_test in device spec \"probe_test:2\" is "
                                     "not available on this machine: no probe_test driver is "
                                     "loaded") == 0,
          "%s", dlrun_last_error());
    dlrun_runtime *rt = runtime_for("auto");
    CHECK(rt && strcmp(dlrun_runtime_spec(rt), "sim:8,cpu:1") == 0, "%s",
          rt ? dlrun_runtime_spec(rt) : dlrun_last_error());
    dlrun_runtime_release(rt);
  }
  TEST("a present platform: auto takes all its devices, and they work") {
    present = 3;
    dlrun_runtime *rt = runtime_for("auto");
    CHECK(rt != NULL, "%s", dlrun_last_error());
    if (!rt) return;
    CHECK(strcmp(dlrun_runtime_spec(rt), "probe_test:3,cpu:1") == 0, "%s", dlrun_runtime_spec(rt));
    CHECK(strcmp(dlrun_default_backend(rt), "probe_test") == 0, "%s", dlrun_default_backend(rt));
    CHECK(dlrun_device_count(rt, "probe_test") == 3, "count");
    CHECK(dlrun_device_get(rt, "probe_test", 3) == NULL, "a fourth device");
    /* A round trip through two of its devices. */
    dlrun_device *d0 = dlrun_device_get(rt, "probe_test", 0), *d2 = dlrun_device_get(rt, "probe_test", 2);
    CHECK(strcmp(dlrun_device_platform(d2), "probe_test") == 0, "%s", dlrun_device_platform(d2));
    float in[4] = {1, 2, 3, 4}, out[4] = {0};
    int64_t n = 4;
    dlrun_sharding *s0 = NULL, *s2 = NULL;
    dlrun_array *a = NULL, *b = NULL;
    dlrun_status st = dlrun_single_device_sharding_create(d0, DLRUN_MEM_DEVICE, &s0);
    if (!st) st = dlrun_single_device_sharding_create(d2, DLRUN_MEM_DEVICE, &s2);
    if (!st) st = dlrun_array_from_host(s0, DLRUN_FLOAT32, 1, &n, in, sizeof in, &a);
    if (!st) st = dlrun_device_put(a, s2, NULL, &b);
    if (!st) st = dlrun_array_read(b, 0, sizeof out, out);
    CHECK(st == DLRUN_OK, "%s", dlrun_last_error());
    CHECK(memcmp(in, out, sizeof in) == 0, "read %g %g %g %g", out[0], out[1], out[2], out[3]);
    dlrun_array_release(b);
    dlrun_array_release(a);
    dlrun_sharding_release(s2);
    dlrun_sharding_release(s0);
    dlrun_runtime_release(rt);
    present = 0;
  }
}

static void test_registry(void) {
  TEST("a name registers once; the unknown-platform error lists the registry") {
    CHECK(dlrun_platform_register(&test_platform) == DLRUN_ERR_VALUE, "registered twice");
    CHECK(strcmp(dlrun_last_error(), "platform probe_test is already registered") == 0, "%s",
          dlrun_last_error());
    dlrun_platform sim_again = *sim_platform();
    CHECK(dlrun_platform_register(&sim_again) == DLRUN_ERR_VALUE, "sim registered again");
    CHECK(dlrun_check_device_spec("nope:1") == DLRUN_ERR_VALUE, "nope accepted");
    char want[400];
    snprintf(want, sizeof want, "unknown platform \"nope\" in device spec \"nope:1\" "
             "(expected %s)", check_known_platforms());
    CHECK(strstr(check_known_platforms(), "probe_test, ") == check_known_platforms(), "%s",
          check_known_platforms());
    CHECK(strcmp(dlrun_last_error(), want) == 0, "%s", dlrun_last_error());
  }
  TEST("an unregistered platform is unknown again; the built-in ones stay") {
    dlrun_platform_unregister(&test_platform);
    dlrun_platform_unregister(sim_platform()); /* not registered: no effect */
    CHECK(dlrun_check_device_spec("probe_test:1") == DLRUN_ERR_VALUE, "still known");
    char want[400];
    snprintf(want, sizeof want, "unknown platform \"probe_test\" in device spec "
             "\"probe_test:1\" (expected %s)", check_known_platforms());
    CHECK(strstr(check_known_platforms(), "probe_test") == NULL, "%s", check_known_platforms());
    CHECK(strcmp(dlrun_last_error(), want) == 0, "%s", dlrun_last_error());
    CHECK(dlrun_check_device_spec("sim:2,cpu:1") == DLRUN_OK, "%s", dlrun_last_error());
  }
}

/* The registry's bound counts the built-in platforms and loaded modules,
 * and the message says so (it read "8 platforms at most" when a host's
 * fifth registration failed); a device spec naming one group per platform
 * it holds, the host cpu device added, fits the runtime (a spec of six
 * other platforms used to write past its groups). */
static dlrun_platform fakes[DLRUN_MAX_PLATFORMS];
static char fake_names[DLRUN_MAX_PLATFORMS][16];

static void test_full_registry(void) {
  TEST("a full registry names what fills it; a spec of every platform it holds fits") {
    size_t added = 0;
    dlrun_status st = DLRUN_OK;
    while (added < DLRUN_MAX_PLATFORMS && !st) {
      snprintf(fake_names[added], sizeof fake_names[added], "fake%zu", added);
      fakes[added] = *sim_platform();
      fakes[added].name = fake_names[added];
      fakes[added].class_name = "FakeDevice";
      if (!(st = dlrun_platform_register(&fakes[added]))) added++;
    }
    CHECK(st == DLRUN_ERR_RESOURCE_EXHAUSTED, "status %d after %zu", (int)st, added);
    char want[160];
    snprintf(want, sizeof want, "cannot register platform fake%zu: the registry holds 8 "
             "platforms at most, the built-in sim and cpu and the loaded modules included, and "
             "holds 8 (", added);
    CHECK(strncmp(dlrun_last_error(), want, strlen(want)) == 0, "%s", dlrun_last_error());
    CHECK(strstr(dlrun_last_error(), ", sim, cpu); unregister one first") != NULL, "%s",
          dlrun_last_error());
    /* The listing sized by its count names every one (callers used to
     * take 16 at most). */
    size_t nlist = dlrun_platforms_list(NULL, 0);
    dlrun_platform_status *list = calloc(nlist, sizeof *list);
    CHECK(list && dlrun_platforms_list(list, nlist) == nlist && nlist >= added + 2, "%zu listed",
          nlist);
    for (size_t i = 0; list && i < added; i++) {
      bool seen = false;
      for (size_t j = 0; j < nlist; j++) seen |= strcmp(list[j].name, fake_names[i]) == 0;
      CHECK(seen, "%s is not listed", fake_names[i]);
    }
    free(list);
    char spec[256] = "";
    for (size_t i = 0; i < added; i++)
      snprintf(spec + strlen(spec), sizeof spec - strlen(spec), "fake%zu:1,", i);
    strcat(spec, "sim:1"); /* every platform but cpu, which the runtime adds */
    dlrun_runtime *rt = runtime_for(spec);
    CHECK(rt != NULL, "%s: %s", spec, dlrun_last_error());
    if (rt) {
      CHECK(dlrun_device_count(rt, NULL) == 1 && dlrun_device_count(rt, "cpu") == 1 &&
                dlrun_device_count(rt, "sim") == 1,
            "%s", dlrun_runtime_spec(rt));
      dlrun_runtime_release(rt);
    }
    for (size_t i = 0; i < added; i++) dlrun_platform_unregister(&fakes[i]);
    CHECK(dlrun_platform_register(&fakes[0]) == DLRUN_OK, "%s", dlrun_last_error());
    dlrun_platform_unregister(&fakes[0]);
  }
}

/* A platform with events of its own kind (as a CUDA backend's would be):
 * the handle points at a flag that some other agent sets; callbacks come
 * from a thread of its own. */
static dlrun_platform native_events;
static bool native_query(dlrun_event ev) { return atomic_load((atomic_int *)ev.handle[0]) != 0; }
static dlrun_status native_wait(dlrun_event ev) {
  while (!native_query(ev)) usleep(1000);
  return DLRUN_OK;
}
typedef struct native_callback {
  dlrun_event ev;
  void (*fn)(void *);
  void *ctx;
} native_callback;
static void *call_when_set(void *p) {
  native_callback *c = p;
  native_wait(c->ev);
  c->fn(c->ctx);
  free(c);
  return NULL;
}
static dlrun_status native_then(dlrun_event ev, void (*fn)(void *), void *ctx) {
  native_callback *c = malloc(sizeof *c);
  *c = (native_callback){ev, fn, ctx};
  pthread_t t;
  pthread_create(&t, NULL, call_when_set, c);
  pthread_detach(t);
  return DLRUN_OK;
}
static void *set_later(void *flag) {
  usleep(50 * 1000);
  atomic_store((atomic_int *)flag, 1);
  return NULL;
}
static dlrun_status mark(void *ctx, dlrun_status prior) {
  atomic_store((atomic_int *)ctx, 2);
  return prior;
}

static void test_events(void) {
  TEST("a host work queue waits for another platform's event through that platform") {
    native_events = *sim_platform();
    native_events.name = "native_events";
    native_events.event_query = native_query;
    native_events.event_wait = native_wait;
    native_events.event_then = native_then;
    dlrun_runtime *rt = runtime_for("sim:1");
    CHECK(rt != NULL, "%s", dlrun_last_error());
    if (!rt) return;
    atomic_int flag = 0, ran = 0;
    dlrun_event foreign = {.platform = &native_events, .handle = {(uintptr_t)&flag}};
    CHECK(!dlrun_event_done(foreign), "a pending foreign event reads done");
    dlrun_task node;
    dlrun_event done;
    dlrun_host_queue *q = dlrun_device_get(rt, "sim", 0)->impl;
    CHECK(dlrun_work_queue_submit(&q->work, &node, &foreign, 1, mark, &ran, &done) == DLRUN_OK,
          "%s", dlrun_last_error());
    pthread_t setter;
    pthread_create(&setter, NULL, set_later, &flag);
    CHECK(dlrun_event_wait(done) == DLRUN_OK, "%s", dlrun_last_error());
    CHECK(atomic_load(&flag) == 1 && atomic_load(&ran) == 2, "the task ran before its event");
    CHECK(dlrun_event_done(foreign) && dlrun_event_done(done), "events not done");
    pthread_join(setter, NULL);
    dlrun_event none = {0};
    CHECK(dlrun_event_done(none), "the zero event is pending");
    dlrun_runtime_release(rt);
  }
}

int main(void) {
  test_platform = *sim_platform();
  test_platform.name = "probe_test";
  test_platform.class_name = "ProbeTestDevice";
  test_platform.probe = probe_test;
  TEST("a hardware platform registers ahead of the built-in ones") {
    CHECK(dlrun_platform_register(&test_platform) == DLRUN_OK, "%s", dlrun_last_error());
    CHECK(dlrun_platform_find("probe_test", 10) == &test_platform, "not found");
  }
  test_probe();
  test_registry();
  test_events();
  test_full_registry();
  return check_summary("platform");
}
