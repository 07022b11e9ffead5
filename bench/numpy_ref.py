"""NumPy references for the dlrun benchmarks 1, 2 and 7 (see bench/README.md).

Usage: python3 bench/numpy_ref.py [--quick] [--lib path/to/libdlrun.so]

  gather         1: the 8 row shards of a float32 [R, C] array (8 separate
                 arrays, as on 8 devices) concatenated into a preallocated,
                 pre-touched output: np.concatenate(shards, axis=0, out=out).
  column_gather  2: the same with 8 column shards [R, C/8], axis=1.
  import         7: per call, np.from_dlpack(v) (NumPy consuming its own
                 capsule) against dlrun_import of v.__dlpack__() through
                 ctypes on libdlrun.so (then released), for v a C-contiguous
                 array (dlrun wraps it: no copy) and for v[:, ::2] (a strided
                 slice: dlrun copies it into fresh row-major memory; NumPy
                 takes a view). What each side did is recorded: whether the
                 result shares v's memory. The ctypes calls themselves are
                 timed too: the same code calling functions that do nothing
                 (libctypes_noop.so, built from bench/ctypes_noop.c into the
                 bench build), so that dlrun's own share is what is left.

Shapes as bench.c's: [16384, 4096] (256 MiB) for 1 and 2, [4096, 4096] for 7;
--quick: [4096, 2048] and [1024, 1024]. Each figure is the median of several
runs after one warm-up. The library comes from --lib, else $DLRUN_LIB, else
build-bench/libdlrun.so under the repository root; when it cannot be loaded
the dlrun side of 7 is left out (an "error" field says why). The no-op
library comes from --noop, else bench/libctypes_noop.so beside the library;
without it the ctypes calls' own time is left out ("noop_error" says why).

Prints one JSON object on stdout.
"""

import ctypes as C
import gc
import json
import os
import sys
import time

import numpy as np

QUICK = "--quick" in sys.argv


def arg_value(flag):
    if flag in sys.argv:
        i = sys.argv.index(flag)
        if i + 1 < len(sys.argv):
            return sys.argv[i + 1]
    return None


def median(v):
    s = sorted(v)
    n = len(s)
    return s[n // 2] if n % 2 else 0.5 * (s[n // 2 - 1] + s[n // 2])


def timed_runs(fn, runs, per=1):
    """fn() once to warm up, then `runs` timings of `per` calls, per call."""
    fn()
    out = []
    for _ in range(runs):
        t0 = time.perf_counter()
        for _ in range(per):
            fn()
        out.append((time.perf_counter() - t0) / per)
    return out


def interleaved_runs(fns, runs, per):
    """Each of fns once to warm up, then `runs` rounds timing `per` calls of
    each in turn (drift in the machine's speed slows all alike); per call,
    one list of samples per function."""
    for fn in fns:
        fn()
    out = [[] for _ in fns]
    for _ in range(runs):
        for fn, samples in zip(fns, out):
            t0 = time.perf_counter()
            for _ in range(per):
                fn()
            samples.append((time.perf_counter() - t0) / per)
    return out


def figures(samples):
    return {"s": median(samples), "samples": samples}


# ---------------------------------------------------------------- 1 and 2


def bench_concat(rows, cols, ndev, runs):
    full = np.arange(rows * cols, dtype=np.float32).reshape(rows, cols)
    res = {}
    for name, axis in (("gather", 0), ("column_gather", 1)):
        parts = np.split(full, ndev, axis=axis)
        shards = [np.ascontiguousarray(p) for p in parts]  # one buffer per device
        out = np.empty_like(full)
        out.fill(0)  # pre-touched

        def run():
            np.concatenate(shards, axis=axis, out=out)

        t = timed_runs(run, runs)
        if not np.array_equal(out, full):
            raise SystemExit("numpy_ref: %s: concatenate gave a wrong result" % name)
        r = figures(t)
        res[name] = {"bytes": full.nbytes, "shape": [rows, cols], "devices": ndev,
                     "runs": runs, "numpy_s": r["s"], "numpy_s_samples": r["samples"],
                     "call": "np.concatenate(shards, axis=%d, out=out)" % axis}
        # A memcpy of the same bytes from NumPy (np.copyto of the whole
        # array): this process's own anchor, to compare with bench.c's
        # memcpy when the machine's speed drifts between the processes.
        src = full if axis == 0 else full.copy()
        res[name]["numpy_copyto_s"] = median(timed_runs(lambda: np.copyto(out, src), runs))
        del shards, out, src
    return res


# ---------------------------------------------------------------- 7


def repo_root():
    return os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def library_path():
    return (arg_value("--lib") or os.environ.get("DLRUN_LIB")
            or os.path.join(repo_root(), "build-bench", "libdlrun.so"))


class dlrun_config(C.Structure):
    _fields_ = [("devices", C.c_char_p), ("device_memory", C.c_uint64),
                ("device_memory_fraction", C.c_double), ("pinned_host_memory", C.c_uint64),
                ("pinned_host_memory_fraction", C.c_double),
                ("device_preallocate", C.c_int), ("pinned_host_preallocate", C.c_int),
                ("host_memory", C.c_uint64), ("host_memory_fraction", C.c_double)]


class dlrun_import_options(C.Structure):
    _fields_ = [("target", C.c_void_p), ("copy", C.c_int)]


class Dlrun:
    """The few libdlrun calls benchmark 7 needs."""

    def __init__(self, path):
        lib = C.CDLL(path)
        P = C.c_void_p

        def fn(name, restype, *argtypes):
            f = getattr(lib, name)
            f.restype = restype
            f.argtypes = list(argtypes)
            return f

        self.last_error = fn("dlrun_last_error", C.c_char_p)
        self.runtime_create = fn("dlrun_runtime_create", C.c_int, C.POINTER(dlrun_config),
                                 C.POINTER(P))
        self.runtime_release = fn("dlrun_runtime_release", None, P)
        # The tensor as a plain pointer: no ctypes cast on the timed path.
        self.import_ = fn("dlrun_import", C.c_int, P, C.c_void_p, C.c_void_p,
                          C.POINTER(dlrun_import_options), C.POINTER(P), C.c_void_p)
        self.block = fn("dlrun_array_block_until_ready", C.c_int, P)
        self.nbytes = fn("dlrun_array_nbytes", C.c_uint64, P)
        self.read = fn("dlrun_array_read", C.c_int, P, C.c_uint64, C.c_uint64, C.c_void_p)
        self.release = fn("dlrun_array_release", None, P)
        self.live_exports = fn("dlrun_live_exports", C.c_int64, P)
        cfg = dlrun_config(devices=b"sim:1", device_memory=0)
        self.rt = P()
        self.check(self.runtime_create(C.byref(cfg), C.byref(self.rt)), "dlrun_runtime_create")

    def check(self, st, what):
        if st != 0:
            raise RuntimeError("%s: %s" % (what, self.last_error().decode()))


def noop_path(lib):
    return arg_value("--noop") or os.path.join(os.path.dirname(lib), "bench", "libctypes_noop.so")


class Noop:
    """bench/ctypes_noop.c: functions of the timed calls' signatures that do
    nothing, declared as Dlrun declares the real ones."""

    def __init__(self, path):
        lib = C.CDLL(path)
        P = C.c_void_p
        self.import_ = lib.noop_import
        self.import_.restype = C.c_int
        self.import_.argtypes = [P, C.c_void_p, C.c_void_p, C.POINTER(dlrun_import_options),
                                 C.POINTER(P), C.c_void_p]
        self.block = lib.noop_block
        self.block.restype = C.c_int
        self.block.argtypes = [P]
        self.release = lib.noop_release
        self.release.restype = None
        self.release.argtypes = [P]


GetPointer = C.pythonapi.PyCapsule_GetPointer
GetPointer.restype = C.c_void_p
GetPointer.argtypes = [C.py_object, C.c_char_p]
SetName = C.pythonapi.PyCapsule_SetName
SetName.restype = C.c_int
SetName.argtypes = [C.py_object, C.c_char_p]
# A capsule keeps a pointer to its name: it must outlive every capsule.
USED_NAME = C.create_string_buffer(b"used_dltensor")
USED = C.cast(USED_NAME, C.c_char_p)
NewCapsule = C.pythonapi.PyCapsule_New
NewCapsule.restype = C.py_object
NewCapsule.argtypes = [C.c_void_p, C.c_char_p, C.c_void_p]


def bench_import(n, runs):
    base = np.arange(n * n, dtype=np.float32).reshape(n, n)
    views = {"contiguous": base, "sliced": base[:, ::2]}
    res = {"shape": [n, n], "dtype": "float32", "runs": runs,
           "numpy_version": np.__version__}
    try:
        dl = Dlrun(library_path())
    except (OSError, AttributeError, RuntimeError) as e:
        dl = None
        res["error"] = "dlrun side left out: %s" % e
    opts = dlrun_import_options(target=None, copy=0)  # DLRUN_COPY_IF_NEEDED

    # Per-call overhead of ctypes itself (one trivial library call), so the
    # reader can see how much of dlrun's side is the binding, not dlrun.
    noop = None
    if dl is not None:
        rt = dl.rt
        res["ctypes_call_s"] = median(timed_runs(lambda: dl.live_exports(rt), runs, 20000))
        try:
            noop = Noop(noop_path(library_path()))
        except (OSError, AttributeError) as e:
            res["noop_error"] = "ctypes calls' own time left out: %s" % e

    for name, v in views.items():
        big = not v.flags["C_CONTIGUOUS"]  # the copy case: fewer calls per run
        per = 5 if big else 2000
        entry = {"view": "a" if name == "contiguous" else "a[:, ::2]", "bytes": v.nbytes,
                 "calls_per_run": per}

        def np_import():
            return np.from_dlpack(v)

        got = np_import()
        entry["numpy_copied"] = not np.shares_memory(got, v)
        entry["numpy_result_strides"] = list(got.strides)
        del got
        if dl is None:
            t = timed_runs(np_import, runs, per)
            entry["numpy_s"] = median(t)
            entry["numpy_s_samples"] = t

        if dl is not None:
            out = C.c_void_p()
            out_ref, opts_ref, rt = C.byref(out), C.byref(opts), dl.rt
            imp, block, release = dl.import_, dl.block, dl.release

            # 4 ctypes calls per import (GetPointer, dlrun_import, SetName,
            # dlrun_array_release), 5 with dlrun_array_block_until_ready in
            # the copy case (the copy is made inside dlrun_import today; the
            # wait keeps the figure honest should it become asynchronous).
            def dl_import():
                cap = v.__dlpack__()
                st = imp(rt, GetPointer(cap, b"dltensor"), None, opts_ref, out_ref, None)
                if st != 0:
                    raise RuntimeError("dlrun_import: %s" % dl.last_error().decode())
                SetName(cap, USED)
                if big:
                    block(out)
                release(out)

            # What dlrun did: a wrapped import holds a reference to v (NumPy's
            # manager context) until released; a copy lets go at once.
            before = sys.getrefcount(v)
            cap = v.__dlpack__()
            ptr = GetPointer(cap, b"dltensor")
            dl.check(dl.import_(dl.rt, ptr, None, C.byref(opts), C.byref(out), None),
                     "dlrun_import")
            SetName(cap, USED)
            del cap
            entry["dlrun_copied"] = sys.getrefcount(v) == before
            nb = dl.nbytes(out)
            buf = np.empty(v.shape, dtype=v.dtype)
            dl.check(dl.read(out, 0, nb, buf.ctypes.data_as(C.c_void_p)), "dlrun_array_read")
            dl.release(out)
            entry["dlrun_values_ok"] = bool(np.array_equal(buf, v))
            del buf
            fns = [np_import, dl_import]
            if noop is not None:
                # The same calls, with their arguments, made on functions
                # that do nothing: dl_import's code with the capsule made
                # once, outside (its making is the producer's, as in NumPy's
                # own import), and renamed on another capsule (a consumed
                # one cannot be read again).
                held = v.__dlpack__()
                spent = NewCapsule(GetPointer(held, b"dltensor"), b"dltensor", None)
                n_imp, n_block, n_release = noop.import_, noop.block, noop.release

                def calls_only():
                    cap = held
                    st = n_imp(rt, GetPointer(cap, b"dltensor"), None, opts_ref, out_ref, None)
                    if st != 0:
                        raise RuntimeError("noop_import")
                    SetName(spent, USED)
                    if big:
                        n_block(out)
                    n_release(out)

                fns.append(calls_only)
            # NumPy, dlrun and the calls alone alternate run by run; the wrap
            # (cheap) gets more runs than the others.
            samples = interleaved_runs(fns, runs if big else max(runs, 15), per)
            gc.collect()
            entry["runs"] = len(samples[0])
            entry["numpy_s"] = median(samples[0])
            entry["numpy_s_samples"] = samples[0]
            entry["dlrun_s"] = median(samples[1])
            entry["dlrun_s_samples"] = samples[1]
            entry["ratio"] = entry["numpy_s"] / entry["dlrun_s"]
            entry["ctypes_calls_per_import"] = 5 if big else 4
            # An estimate of dlrun's own share: the ctypes calls taken out.
            entry["dlrun_net_s"] = entry["dlrun_s"] - entry["ctypes_calls_per_import"] * res["ctypes_call_s"]
            entry["numpy_refs_back"] = sys.getrefcount(v) == before
            if noop is not None:
                entry["ctypes_calls_s"] = median(samples[2])
                entry["ctypes_calls_s_samples"] = samples[2]
                # dlrun's own share: what is left of its time (NumPy's capsule
                # and deleter, which np.from_dlpack runs too, included); the
                # paired reading takes the calls out run by run.
                entry["dlrun_own_s"] = entry["dlrun_s"] - entry["ctypes_calls_s"]
                entry["dlrun_own_paired_s"] = median([d - c for d, c in zip(samples[1], samples[2])])
                entry["own_cost_ratio"] = entry["dlrun_own_s"] / entry["numpy_s"]
                del spent, held
        if big:
            # Context: what a NumPy copy of the same view costs.
            t = timed_runs(lambda: np.ascontiguousarray(v), runs, per)
            entry["numpy_copy_s"] = median(t)
        res[name] = entry
    if dl is not None:
        dl.runtime_release(dl.rt)
    return res


def main():
    runs = 5 if QUICK else 9
    rows, cols = (4096, 2048) if QUICK else (16384, 4096)
    res = {"numpy_version": np.__version__, "quick": QUICK}
    res.update(bench_concat(rows, cols, 8, runs))
    res["import"] = bench_import(1024 if QUICK else 4096, runs)
    print(json.dumps(res))


if __name__ == "__main__":
    main()
