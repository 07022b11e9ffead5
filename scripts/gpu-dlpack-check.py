"""DLPack round trips on a CUDA device, for scripts/gpu-check.sh.

Usage: python3 scripts/gpu-dlpack-check.py path/to/libdlrun.so

Needs NumPy (the ctypes helpers of spec/interop/dlrun_ctypes.py). On
CudaDevice(id=0) (the driver DLRUN_CUDA_LIBRARY names, else libcuda.so.1),
every side passing its own stream as the DLPack stream protocol says:
  dlrun: a float32 array exported as a kDLCUDA capsule (shared, no copy)
         for dlrun's own consumer stream (dlrun_dlpack_consumer_stream) and
         imported back: wrapped, values identical.
  each CUDA consumer present (PyTorch, CuPy, JAX), both ways:
         dlrun -> consumer: its from_dlpack calls dlrun's __dlpack__ with
           its stream (torch, cupy: a stream of their own made current,
           whose handle must be the one passed; JAX: its own, any value the
           protocol allows); dlrun makes that stream wait for the array; the
           values are checked there and x * 2 + 1 computed on that stream.
         consumer -> dlrun: the result's __dlpack__(stream=dlrun's stream)
           imported by dlrun: wrapped, the values read by dlrun with no
           synchronisation but the protocol's; dlrun's deleter runs once the
           consumer lets go of what it imported.
         A consumer not installed, or without CUDA, is a "skip" line with
         why; so is each one on the driver double (GPU_DLPACK_DOUBLE set:
         its "device memory" is host memory that no consumer can read).
  float8 with PyTorch, both ways, for float8_e4m3fn and float8_e5m2 (DLPack
         1.1's codes 10 and 12; the export says legacy_knows_1_1, since
         torch's from_dlpack is handed a legacy capsule): all 256 bit
         patterns of each, torch's tensor of torch.float8_e4m3fn /
         torch.float8_e5m2 holding dlrun's bytes, and dlrun importing torch's
         tensor as the same dtype with the same bytes. A "skip" line with why
         when torch lacks these dtypes, or its DLPack does not carry them (a
         "#" line when torch cannot run at all: its own skip says why).
Prints "ok - ..." / "not ok - ..." / "skip - ..." lines and a final
"gpu dlpack: N passed, N failed"; exits 1 if a check failed.
"""

import contextlib
import ctypes as C
import gc
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "spec",
                                "interop"))
import numpy as np  # noqa: E402

from dlrun_ctypes import (CAPSULE_NAME, DLRUN_MEM_DEVICE, IMPORT_WRAPPED, LEGACY_SHARE, P,  # noqa: E402
                          USED_NAME, PyCapsule_GetPointer, PyCapsule_SetName, Producer, check,
                          declare, dlrun_array_dtype, dlrun_array_import_outcome,
                          dlrun_array_release, dlrun_config, dlrun_dtype,
                          dlrun_device_get, dlrun_export, dlrun_export_options, dlrun_exported,
                          dlrun_import, dlrun_live_exports, dlrun_runtime_create,
                          dlrun_runtime_release, dlrun_sharding_release,
                          dlrun_single_device_sharding_create, expect_equal, from_host, read_all,
                          report, run_case, summary, DLManagedTensor)

KDLCUDA = 2
VALUES = (np.arange(4096, dtype=np.float32) * np.float32(0.5)).reshape(64, 64)

dlrun_dlpack_consumer_stream = declare("dlrun_dlpack_consumer_stream", C.c_bool, P, C.c_int32,
                                       C.c_int32, C.POINTER(C.c_int64))


def consumer_stream(rt):
    """The stream dlrun, as a consumer, passes for CUDA device 0 (None: none)."""
    s = C.c_int64()
    return s.value if dlrun_dlpack_consumer_stream(rt, KDLCUDA, 0, C.byref(s)) else None


def stream_allowed(s):
    """Whether `s` is a stream value the protocol allows for CUDA."""
    return s is None or s in (-1, 1, 2) or (isinstance(s, int) and s >= 4096)


class CudaProducer:
    """dlrun's side of __dlpack__ for an array on CUDA device 0: a shared
    legacy export made when asked, for the stream the consumer passes
    (recorded in .streams), so that dlrun makes that stream wait for it."""

    def __init__(self, arr, knows_1_1=False):
        self.arr = arr
        self.knows_1_1 = knows_1_1  # the consumer reads DLPack 1.1's codes (float8)
        self.streams = []
        self.inner = None  # the Producer that owns the capsule

    def __dlpack__(self, stream=None, **newer):  # max_version, dl_device, copy: a legacy capsule
        self.streams.append(stream)
        opts = dlrun_export_options(legacy_sharing=LEGACY_SHARE, has_stream=stream is not None,
                                    stream=0 if stream is None else stream,
                                    legacy_knows_1_1=self.knows_1_1)
        ex = dlrun_exported()
        check(dlrun_export(self.arr, C.byref(opts), C.byref(ex)), "dlrun_export(stream=%r)" % stream)
        self.inner = Producer(ex.legacy)
        return self.inner.__dlpack__()

    def __dlpack_device__(self):
        return (KDLCUDA, 0)


def import_capsule(rt, capsule):
    """dlrun_import of a "dltensor" capsule; the capsule is renamed when
    dlrun took the tensor. Returns (array, outcome)."""
    managed = C.cast(PyCapsule_GetPointer(capsule, CAPSULE_NAME), C.POINTER(DLManagedTensor))
    out, how = P(), C.c_int()
    status = dlrun_import(rt, managed, None, None, C.byref(out), C.byref(how))
    if how.value != 0:
        PyCapsule_SetName(capsule, USED_NAME)
    check(status, "dlrun_import")
    return out, how.value


def values_of(arr):
    return np.frombuffer(read_all(arr), np.float32).reshape(VALUES.shape)


def dlrun_round_trip(name, rt, x):
    stream = consumer_stream(rt)
    report(name + ": dlrun's consumer stream for CUDA is a CUstream",
           stream is not None and stream >= 4096, "got %r" % stream)
    producer = CudaProducer(x)
    capsule = producer.__dlpack__(stream=stream)
    t = C.cast(PyCapsule_GetPointer(capsule, CAPSULE_NAME), C.POINTER(DLManagedTensor)).contents.dl_tensor
    expect_equal(name + ": the capsule's device", (t.device.device_type, t.device.device_id),
                 (KDLCUDA, 0))
    y, how = import_capsule(rt, capsule)
    expect_equal(name + ": dlrun took it", how, IMPORT_WRAPPED)
    report(name + ": values", np.array_equal(values_of(y), VALUES))
    dlrun_array_release(y)


class Absent(Exception):
    """A consumer that cannot run here, with why."""


def torch_consumer():
    try:
        import torch
    except ImportError as e:
        raise Absent("no torch (%s)" % e)
    if not torch.cuda.is_available():
        raise Absent("torch %s has no CUDA (torch.cuda.is_available() is False)" % torch.__version__)

    @contextlib.contextmanager
    def on_stream():
        s = torch.cuda.Stream(device=0)
        with torch.cuda.stream(s):
            yield s.cuda_stream

    return {"name": "torch", "version": torch.__version__, "on_stream": on_stream,
            "from_dlpack": torch.from_dlpack, "to_numpy": lambda t: t.cpu().numpy()}


def cupy_consumer():
    try:
        import cupy
        n = cupy.cuda.runtime.getDeviceCount()
    except ImportError as e:
        raise Absent("no cupy (%s)" % e)
    except Exception as e:  # noqa: BLE001 - cupy's CUDA errors: no driver, no device
        raise Absent("cupy sees no CUDA device (%s: %s)" % (type(e).__name__, e))
    if n < 1:
        raise Absent("cupy sees no CUDA device")

    @contextlib.contextmanager
    def on_stream():
        with cupy.cuda.Device(0), cupy.cuda.Stream(non_blocking=True) as s:
            yield s.ptr

    return {"name": "cupy", "version": cupy.__version__, "on_stream": on_stream,
            "from_dlpack": cupy.from_dlpack, "to_numpy": cupy.asnumpy}


def jax_consumer():
    # JAX takes most of the GPU's memory at start unless told not to.
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    try:
        import jax
        import jax.numpy as jnp
    except ImportError as e:
        raise Absent("no jax (%s)" % e)
    try:
        jax.devices("gpu")
    except RuntimeError as e:
        raise Absent("jax %s has no GPU backend (%s)" % (jax.__version__, e))
    from_dlpack = getattr(jnp, "from_dlpack", None) or jax.dlpack.from_dlpack

    @contextlib.contextmanager
    def on_stream():
        yield None  # JAX passes a stream of its own; none can be made current

    return {"name": "jax", "version": jax.__version__, "on_stream": on_stream,
            "from_dlpack": from_dlpack, "to_numpy": np.asarray}


CONSUMERS = [("torch", torch_consumer), ("cupy", cupy_consumer), ("jax", jax_consumer)]


def consumer_round_trip(name, rt, x, lib):
    cname = lib["name"]
    before = dlrun_live_exports(rt)
    producer = CudaProducer(x)
    with lib["on_stream"]() as own:
        t = lib["from_dlpack"](producer)
        passed = producer.streams[0] if producer.streams else "no call"
        if own is None:
            report(name + ": %s passed a stream the protocol allows" % cname,
                   stream_allowed(passed), "got %r" % (passed,))
        else:
            expect_equal(name + ": %s passed its current stream to dlrun's __dlpack__" % cname,
                         passed, own)
        expect_equal(name + ": %s reads dlrun's values on its GPU" % cname,
                     np.array_equal(lib["to_numpy"](t), VALUES), True)
        u = t * 2 + 1
        # dlrun as the consumer: its stream waits for the consumer's work.
        y, how = import_capsule(rt, u.__dlpack__(stream=consumer_stream(rt)))
    expect_equal(name + ": dlrun wraps %s's result" % cname, how, IMPORT_WRAPPED)
    expect_equal(name + ": its outcome", dlrun_array_import_outcome(y), IMPORT_WRAPPED)
    report(name + ": dlrun reads x * 2 + 1", np.array_equal(values_of(y), VALUES * 2 + 1))
    dlrun_array_release(y)
    del t, u, producer
    # A consumer may free what it imported on a thread of its own (JAX).
    deadline = time.monotonic() + 10
    while True:
        gc.collect()
        if dlrun_live_exports(rt) == before or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    expect_equal(name + ": dlrun's deleter ran", dlrun_live_exports(rt), before)


FLOAT8_PATTERNS = np.arange(256, dtype=np.uint8)


def float8_round_trip(name, rt, sharding, dtname):
    """dlrun <-> torch for one float8 dtype: every bit pattern, both ways."""
    import torch
    tdt = getattr(torch, dtname)
    arr = from_host(sharding, dtname, FLOAT8_PATTERNS)
    producer = CudaProducer(arr, knows_1_1=True)
    try:
        t = torch.from_dlpack(producer)
    except (RuntimeError, BufferError, TypeError) as e:  # torch's own refusal (dlrun's: DlrunError)
        dlrun_array_release(arr)
        print("skip - %s: torch %s does not read %s through DLPack (%s: %s)"
              % (name, torch.__version__, dtname, type(e).__name__, e))
        return
    expect_equal(name + ": torch's dtype", t.dtype, tdt)
    got = t.view(torch.uint8).cpu().numpy()
    report(name + ": torch holds dlrun's 256 patterns", np.array_equal(got, FLOAT8_PATTERNS),
           "differ at %s" % np.nonzero(got != FLOAT8_PATTERNS)[0][:8])
    u = torch.arange(255, -1, -1, dtype=torch.uint8, device="cuda:0").view(tdt)
    try:
        capsule = u.__dlpack__(stream=consumer_stream(rt))
    except (RuntimeError, BufferError, TypeError) as e:
        print("skip - %s: torch %s does not export %s through DLPack (%s: %s)"
              % (name, torch.__version__, dtname, type(e).__name__, e))
        del t, u, producer
        gc.collect()
        dlrun_array_release(arr)
        return
    y, how = import_capsule(rt, capsule)
    expect_equal(name + ": dlrun wraps torch's tensor", how, IMPORT_WRAPPED)
    expect_equal(name + ": dlrun's dtype", dlrun_array_dtype(y), dlrun_dtype(dtname))
    expect_equal(name + ": dlrun reads torch's bytes", read_all(y), bytes(range(255, -1, -1)))
    dlrun_array_release(y)
    del t, u, producer
    gc.collect()
    dlrun_array_release(arr)


def float8_cases(rt, sharding):
    # Where torch cannot run at all its round trip's skip line says why.
    try:
        lib = torch_consumer()
    except Absent as e:
        print("# dlrun <-> torch float8 not run: %s" % e)
        return
    if os.environ.get("GPU_DLPACK_DOUBLE"):
        print("# dlrun <-> torch float8 not run: the driver double's device memory is host "
              "memory no consumer can read")
        return
    import torch
    for dtname in ("float8_e4m3fn", "float8_e5m2"):
        if not hasattr(torch, dtname):
            print("skip - dlrun <-> torch %s: torch %s has no torch.%s"
                  % (dtname, lib["version"], dtname))
            continue
        run_case("dlrun <-> torch %s %s" % (lib["version"], dtname), float8_round_trip, rt,
                 sharding, dtname)


def main():
    rt = P()
    check(dlrun_runtime_create(C.byref(dlrun_config(devices=b"cuda:1")), C.byref(rt)),
          "dlrun_runtime_create(cuda:1)")
    sharding = P()
    check(dlrun_single_device_sharding_create(dlrun_device_get(rt, b"cuda", 0), DLRUN_MEM_DEVICE,
                                              C.byref(sharding)), "sharding")
    x = from_host(sharding, "float32", VALUES)
    run_case("dlrun -> kDLCUDA capsule -> dlrun", dlrun_round_trip, rt, x)
    for cname, find in CONSUMERS:
        try:
            lib = find()
            if os.environ.get("GPU_DLPACK_DOUBLE"):
                raise Absent("%s %s has CUDA, but this is the driver double: its device memory is "
                             "host memory no consumer can read" % (cname, lib["version"]))
        except Absent as e:
            print("skip - dlrun <-> %s: %s" % (cname, e))
            continue
        run_case("dlrun <-> %s %s" % (cname, lib["version"]), consumer_round_trip, rt, x, lib)
    float8_cases(rt, sharding)
    dlrun_array_release(x)
    dlrun_sharding_release(sharding)
    dlrun_runtime_release(rt)
    return summary("gpu dlpack")


sys.exit(main())
