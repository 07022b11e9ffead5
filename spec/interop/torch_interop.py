"""DLPack interop between dlrun (libdlrun.so, through ctypes) and PyTorch.

Usage: python3 spec/interop/torch_interop.py [path/to/libdlrun.so]
(the library as for numpy_interop.py).

PyTorch 1.13 (Debian's python3-torch) is the consumer and producer on the
other side: it speaks only legacy `dltensor` capsules, cannot export or
import bool, and writes into what it imports (it has no read-only tensors).

  export: a dlrun array exported as a legacy DLManagedTensor is read by
          torch.from_dlpack: values identical, dlrun's deleter run exactly
          once after torch lets go. By default the export is a copy, so a
          torch write never reaches dlrun's arrays; with legacy_sharing =
          share it is zero-copy (and a write does reach them, as with JAX).
  import: torch.utils.dlpack.to_dlpack(t) handed to dlrun_import: wrapped
          when compact (transposes too), copied when strided, values
          identical, the capsule renamed only when dlrun took the tensor.
  float8: torch 1.13 has none of the float8 family: dlrun's legacy export
          refuses them (BufferError naming the dtype); forced through, torch
          raises its own error ("Unsupported code 10").
  sub-byte: int4 ... float6_e3m2fn, packed as DLPack 1.1 sets: dlrun's
          legacy export refuses them (BufferError naming dtype, code and
          bits); forced through, torch raises its own error.
  known:  torch never calls the deleter of an empty tensor whose data is
          NULL: such an export stays alive (docs/dlpack.md).

Prints "ok - NAME" / "not ok - NAME: DETAIL" lines and a final
"torch interop: N passed, N failed"; exits 1 if any check failed.
"""

import ctypes as C
import gc

import torch
import torch.utils.dlpack as tdl

import dlrun_ctypes
from dlrun_ctypes import *  # noqa: F401,F403 - the shared declarations

# dlrun dtype name -> torch dtype, for what torch 1.13 reads over DLPack.
TORCH = {"int8": torch.int8, "int16": torch.int16, "int32": torch.int32,
         "int64": torch.int64, "uint8": torch.uint8, "float16": torch.float16,
         "bfloat16": torch.bfloat16, "float32": torch.float32, "float64": torch.float64,
         "complex64": torch.complex64, "complex128": torch.complex128}
SIZE = {"int8": 1, "int16": 2, "int32": 4, "int64": 8, "uint8": 1, "float16": 2,
        "bfloat16": 2, "float32": 4, "float64": 8, "complex64": 8, "complex128": 16}


def random_bytes(dtname, shape):
    """Random bit patterns as uint8 (bfloat16 has no NumPy dtype)."""
    n = 1
    for d in shape:
        n *= d
    return RNG.integers(0, 256, size=n * SIZE[dtname], dtype=np.uint8)


def torch_bytes(x):
    """The bytes of a tensor, in logical row-major order."""
    x = x.contiguous()
    n = x.numel() * x.element_size()
    return C.string_at(x.data_ptr(), n) if n else b""


def from_host_bytes(sharding, dtname, raw, shape):
    dims = (C.c_int64 * max(1, len(shape)))(*shape)
    out = P()
    check(dlrun_array_from_host(sharding, dlrun_dtype(dtname), len(shape), dims,
                                raw.ctypes.data_as(C.c_void_p), raw.nbytes, C.byref(out)),
          "dlrun_array_from_host")
    return out


# ---------------------------------------------------------------- export direction


def export_case(name, rt, sharding, dtname, shape, share):
    raw = random_bytes(dtname, shape)
    arr = from_host_bytes(sharding, dtname, raw, shape)
    base = dlrun_live_exports(rt)
    managed, copied = export_legacy(arr, share=share, with_copied=True)
    t = managed.contents.dl_tensor
    empty = raw.size == 0
    expect_equal(name + " copied", copied, not share and not empty)
    x = torch.from_dlpack(Producer(managed))
    gc.collect()
    ok = x.dtype == TORCH[dtname] and tuple(x.shape) == shape
    report(name + " dtype and shape", ok, "got %s%r" % (x.dtype, tuple(x.shape)))
    expect_equal(name + " values", torch_bytes(x), raw.tobytes())
    if not empty:
        expect_equal(name + " torch reads the exported memory", x.data_ptr(), t.data)
    expect_equal(name + " deleter not run while torch holds it", dlrun_live_exports(rt) - base, 1)
    if not empty:
        # What a torch user may do: write. Only a shared export reaches dlrun.
        x.view(-1)[0:1].zero_()
        changed = read_all(arr)[:SIZE[dtname]] != raw.tobytes()[:SIZE[dtname]]
        wrote = any(raw.tobytes()[:SIZE[dtname]])
        if wrote:
            expect_equal(name + " a torch write reaches the array", changed, share)
    del x
    gc.collect()
    dlrun_array_release(arr)
    expect_equal(name + " deleter ran once after torch let go", dlrun_live_exports(rt) - base, 0)


def empty_export_case(name, rt, sharding):
    """PyTorch 1.13 never calls the deleter of an empty tensor whose data is
    NULL (dlrun exports zero-size arrays with data NULL, as DLPack allows)."""
    arr = from_host_bytes(sharding, "float32", random_bytes("float32", (0,)), (0,))
    base = dlrun_live_exports(rt)
    managed = export_legacy(arr)
    x = torch.from_dlpack(Producer(managed))
    expect_equal(name + " empty", tuple(x.shape), (0,))
    del x
    gc.collect()
    left = dlrun_live_exports(rt) - base
    if torch.__version__.startswith("1.13"):
        expect_equal(name + " torch 1.13 leaves the export alive (known bug)", left, 1)
        managed.contents.deleter(managed)  # what torch should have done
    else:
        expect_equal(name + " deleter ran once", left, 0)
    dlrun_array_release(arr)
    expect_equal(name + " released", dlrun_live_exports(rt) - base, 0)


def bool_export_case(name, rt, sharding):
    """torch 1.13 cannot read bool: it raises, and the unconsumed capsule's
    destructor runs the deleter once."""
    arr = from_host_bytes(sharding, "bool", np.array([1, 0, 1], dtype=np.uint8), (3,))
    base = dlrun_live_exports(rt)
    managed = export_legacy(arr)
    dlrun_array_release(arr)
    raised = None
    prod = Producer(managed)
    try:
        torch.from_dlpack(prod)
    except Exception as e:  # noqa: BLE001 - torch's own error type varies
        raised = repr(e)  # not e: its traceback would keep torch's frame and the capsule
    report(name + " refused by torch", raised is not None, "torch read a bool tensor")
    del prod
    gc.collect()
    expect_equal(name + " deleter ran once", dlrun_live_exports(rt) - base, 0)


# ---------------------------------------------------------------- import direction


def import_case(name, rt, x, want):
    cap = tdl.to_dlpack(x)
    ptr = PyCapsule_GetPointer(cap, CAPSULE_NAME)
    out = P()
    how = C.c_int(99)
    st = dlrun_import(rt, C.cast(ptr, C.POINTER(DLManagedTensor)), None, None, C.byref(out),
                      C.byref(how))
    if how.value != IMPORT_REFUSED:
        PyCapsule_SetName(cap, USED_NAME)
    if st != 0:
        report(name + " import", False, dlrun_last_error().decode())
        return
    expect_equal(name + " outcome", how.value, want)
    expect_equal(name + " the array says it", dlrun_array_import_outcome(out), want)
    expect_equal(name + " shape", dlrun_shape(out), tuple(x.shape))
    expect_equal(name + " values", read_all(out), torch_bytes(x))
    dlrun_array_release(out)
    del cap
    gc.collect()


def import_refused_case(name, rt):
    """A bool tensor cannot even be exported by torch 1.13; a version major
    dlrun does not know is what dlrun itself refuses and releases: covered in
    C. Here: a strided tensor with copy never is refused and stays torch's."""
    x = torch.arange(12, dtype=torch.float32).reshape(3, 4)[:, ::2]
    cap = tdl.to_dlpack(x)
    ptr = PyCapsule_GetPointer(cap, CAPSULE_NAME)
    opts = dlrun_import_options(target=None, copy=COPY_NEVER)
    out = P()
    how = C.c_int(99)
    st = dlrun_import(rt, C.cast(ptr, C.POINTER(DLManagedTensor)), None, C.byref(opts),
                      C.byref(out), C.byref(how))
    report(name + " refused", st != 0 and not out.value, "status %d" % st)
    expect_equal(name + " outcome: still torch's", how.value, IMPORT_REFUSED)
    del cap  # torch's capsule destructor releases it
    gc.collect()


def main():
    print("# torch %s, library %s" % (torch.__version__, os.path.basename(library_path())))
    cfg = dlrun_config(devices=b"sim:2", device_memory=0)
    rt = P()
    check(dlrun_runtime_create(C.byref(cfg), C.byref(rt)), "dlrun_runtime_create")
    sharding = P()
    check(dlrun_single_device_sharding_create(dlrun_host_device(rt), DLRUN_MEM_DEVICE,
                                              C.byref(sharding)),
          "dlrun_single_device_sharding_create")

    for dtname in TORCH:
        for shape in [(), (4,), (3, 4), (2, 3, 4)]:  # empty ones: empty_export_case
            for share in (False, True):
                run_case("export %s%s%s" % (dtname, shape_text(shape), " shared" if share else ""),
                         export_case, rt, sharding, dtname, shape, share)
    run_case("export float32[0]", empty_export_case, rt, sharding)
    run_case("export bool[3]", bool_export_case, rt, sharding)
    for dtname in FLOAT8:
        run_case("export %s[3]" % dtname, float8_refused_case, rt, sharding, dtname,
                 torch.from_dlpack)
    for dtname in SUBBYTE:
        run_case("export %s" % dtname, subbyte_refused_case, rt, sharding, dtname,
                 torch.from_dlpack)

    for dtname, dt in TORCH.items():
        x = torch.from_numpy(random_bytes(dtname, (3, 4))).view(dt).reshape(3, 4)
        run_case("import %s contiguous" % dtname, import_case, rt, x, IMPORT_WRAPPED)
        run_case("import %s transposed" % dtname, import_case, rt, x.t(), IMPORT_WRAPPED)
        run_case("import %s[:, ::2]" % dtname, import_case, rt, x[:, ::2], IMPORT_COPIED)
    run_case("import copy never of a strided tensor", import_refused_case, rt)

    gc.collect()
    expect_equal("no export left alive", dlrun_live_exports(rt), 0)
    dlrun_sharding_release(sharding)
    dlrun_runtime_release(rt)
    return dlrun_ctypes.summary("torch interop")


if __name__ == "__main__":
    sys.exit(main())
