"""DLPack round trips on a CUDA device, for scripts/gpu-check.sh.

Usage: python3 scripts/gpu-dlpack-check.py path/to/libdlrun.so

Needs NumPy (the ctypes helpers of spec/interop/dlrun_ctypes.py). On
CudaDevice(id=0) (the driver DLRUN_CUDA_LIBRARY names, else libcuda.so.1):
  dlrun: a float32 array exported as a kDLCUDA capsule (shared, no copy)
         and imported back into dlrun: wrapped, values identical.
  torch or cupy (a CUDA build, the first found): dlrun -> from_dlpack on
         the consumer's GPU, values checked there, computed on (x * 2 + 1)
         and handed back (to_dlpack / toDlpack -> dlrun_import): wrapped,
         the values read by dlrun; dlrun's deleter runs when the consumer
         lets go. Skipped, with why, when neither has CUDA.
Prints "ok - ..." / "not ok - ..." / "skip - ..." lines and a final
"gpu dlpack: N passed, N failed"; exits 1 if a check failed.
"""

import ctypes as C
import gc
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "spec",
                                "interop"))
import numpy as np  # noqa: E402

from dlrun_ctypes import (CAPSULE_NAME, DLRUN_MEM_DEVICE, IMPORT_WRAPPED, USED_NAME, P,  # noqa: E402
                          PyCapsule_GetPointer, PyCapsule_SetName, Producer, check,
                          dlrun_array_import_outcome, dlrun_array_release, dlrun_config,
                          dlrun_device_get, dlrun_import, dlrun_live_exports,
                          dlrun_runtime_create, dlrun_runtime_release,
                          dlrun_sharding_release, dlrun_single_device_sharding_create,
                          export_legacy, expect_equal, from_host, read_all, report, run_case,
                          summary, DLManagedTensor)

KDLCUDA = 2
VALUES = (np.arange(4096, dtype=np.float32) * np.float32(0.5)).reshape(64, 64)


class CudaProducer(Producer):
    """A shared kDLCUDA export of a dlrun array on CUDA device 0."""

    def __dlpack__(self, stream=None, **newer):  # max_version, ...: a legacy capsule
        return super().__dlpack__(stream)

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
    managed = export_legacy(x, share=True)
    t = managed.contents.dl_tensor
    expect_equal(name + ": the capsule's device", (t.device.device_type, t.device.device_id),
                 (KDLCUDA, 0))
    capsule = CudaProducer(managed).__dlpack__()
    y, how = import_capsule(rt, capsule)
    expect_equal(name + ": dlrun took it", how, IMPORT_WRAPPED)
    report(name + ": values", np.array_equal(values_of(y), VALUES))
    dlrun_array_release(y)


def consumer():
    """(name, from_dlpack, to_capsule, to_numpy, sync) of a CUDA build of
    torch or cupy, or (None, why)."""
    why = []
    try:
        import torch
        import torch.utils.dlpack
        if torch.cuda.is_available():
            return ("torch %s" % torch.__version__, torch.from_dlpack, torch.utils.dlpack.to_dlpack,
                    lambda t: t.cpu().numpy(), torch.cuda.synchronize)
        why.append("torch %s has no CUDA (torch.cuda.is_available() is False)" % torch.__version__)
    except ImportError as e:
        why.append("no torch (%s)" % e)
    try:
        import cupy
        if cupy.cuda.runtime.getDeviceCount() > 0:
            return ("cupy %s" % cupy.__version__, cupy.from_dlpack, lambda a: a.toDlpack(),
                    cupy.asnumpy, cupy.cuda.Device(0).synchronize)
        why.append("cupy sees no CUDA device")
    except Exception as e:  # noqa: BLE001 - ImportError, or cupy's CUDA errors
        why.append("no cupy (%s: %s)" % (type(e).__name__, e))
    return None, "; ".join(why)


def consumer_round_trip(name, rt, x, lib):
    cname, from_dlpack, to_capsule, to_numpy, sync = lib
    before = dlrun_live_exports(rt)
    t = from_dlpack(CudaProducer(export_legacy(x, share=True)))
    expect_equal(name + ": %s reads dlrun's values on its GPU" % cname,
                 np.array_equal(to_numpy(t), VALUES), True)
    u = t * 2 + 1
    sync()
    y, how = import_capsule(rt, to_capsule(u))
    expect_equal(name + ": dlrun wraps %s's result" % cname, how, IMPORT_WRAPPED)
    expect_equal(name + ": its outcome", dlrun_array_import_outcome(y), IMPORT_WRAPPED)
    report(name + ": dlrun reads x * 2 + 1", np.array_equal(values_of(y), VALUES * 2 + 1))
    dlrun_array_release(y)
    del t, u
    gc.collect()
    expect_equal(name + ": dlrun's deleter ran", dlrun_live_exports(rt), before)


def main():
    rt = P()
    check(dlrun_runtime_create(C.byref(dlrun_config(devices=b"cuda:1")), C.byref(rt)),
          "dlrun_runtime_create(cuda:1)")
    sharding = P()
    check(dlrun_single_device_sharding_create(dlrun_device_get(rt, b"cuda", 0), DLRUN_MEM_DEVICE,
                                              C.byref(sharding)), "sharding")
    x = from_host(sharding, "float32", VALUES)
    run_case("dlrun -> kDLCUDA capsule -> dlrun", dlrun_round_trip, rt, x)
    lib = consumer()
    if lib[0] is None:
        print("skip - dlrun <-> torch/cupy: " + lib[1])
    else:
        run_case("dlrun <-> " + lib[0].split()[0], consumer_round_trip, rt, x, lib)
    dlrun_array_release(x)
    dlrun_sharding_release(sharding)
    dlrun_runtime_release(rt)
    return summary("gpu dlpack")


sys.exit(main())
