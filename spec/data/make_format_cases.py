#!/usr/bin/python3
"""Writes format_cases.lua: arrays of every dlrun dtype and the text NumPy
prints for them, in the form dlrun's tostring(Array) uses (JAX's repr:
"Array(" instead of "array(", and the dtype always shown).

Run from the repository root with a Python that has NumPy:
    /usr/bin/python3 spec/data/make_format_cases.py > spec/data/format_cases.lua

Values are stored as their exact bytes (little-endian, hex). NumPy has no
bfloat16: those cases are float32 arrays whose values are exact bfloat16
values and print the same in both types (each value's shortest round-trip
digits agree, and so does the choice of scientific notation); the bytes are
the upper halves of the float32 ones.
"""
import random
import struct
import sys

import numpy as np

LINEWIDTH = 75
PREFIX = "Array("


def jax_repr(a, dtype_name):
    """NumPy's array_repr with JAX's prefix and the dtype always shown."""
    if a.size > 0 or a.shape == (0,):
        body = np.array2string(a, max_line_width=LINEWIDTH, separator=", ",
                               prefix=PREFIX, suffix=",")
    else:
        body = "[], shape=%r" % (a.shape,)
    text = PREFIX + body + ","
    dtype_str = "dtype=%s)" % dtype_name
    last = len(text) - (text.rfind("\n") + 1)
    if last + len(dtype_str) + 1 > LINEWIDTH:
        return text + "\n" + " " * len(PREFIX) + dtype_str
    return text + " " + dtype_str


# ---- bfloat16, modelled on float32 ----

def to_bf16(x):
    """Round a float to the nearest bfloat16 (ties to even), as a float."""
    (bits,) = struct.unpack("<I", struct.pack("<f", np.float32(x)))
    if (bits & 0x7F800000) == 0x7F800000:
        quiet = 0x400000 if bits & 0x7FFFFF else 0  # keep a nan a nan
        return struct.unpack("<f", struct.pack("<I", bits & 0xFFFF0000 | quiet))[0]
    bits += 0x7FFF + ((bits >> 16) & 1)
    return struct.unpack("<f", struct.pack("<I", bits & 0xFFFF0000))[0]


def shortest_bf16(x):
    """Shortest decimal (as %e text) that reads back to x in bfloat16."""
    for p in range(1, 18):
        s = "%.*e" % (p - 1, x)
        if to_bf16(float(s)) == x:
            return s
        m, e = s.split("e")
        digits = m.replace(".", "").lstrip("-")
        up, ue = str(int(digits) + 1), int(e)
        if len(up) > p:
            up, ue = up[:p], ue + 1
        t = "%s.%se%+d" % (up[0], up[1:], ue)
        if to_bf16(float(t)) == x:
            return t
    raise AssertionError(x)


def same_digits(a, b):
    def norm(s):
        m, e = s.split("e")
        return m.rstrip("0").rstrip("."), int(e)
    return norm(a) == norm(b)


def shown(a):
    """The elements NumPy prints (3 at each end of long axes when summarising)."""
    if a.size <= 1000:
        return a
    for axis in range(a.ndim):
        if a.shape[axis] > 6:
            idx = list(range(3)) + list(range(a.shape[axis] - 3, a.shape[axis]))
            a = np.take(a, idx, axis=axis)
    return a


def bf16_agrees(a):
    """Whether the float32 array a (bfloat16 values) prints as bfloat16 would."""
    vals = [float(v) for v in shown(a).ravel()]
    assert all(to_bf16(v) == v or v != v for v in vals), "not bfloat16 values"
    finite = [abs(v) for v in vals if np.isfinite(v) and v != 0]
    for v in finite:
        ref = np.format_float_scientific(np.float32(v), unique=True, trim="k")
        if not same_digits(ref, shortest_bf16(v)):
            return False
    if finite:
        hi, lo = max(finite), min(finite)
        if (to_bf16(hi / lo) > 1000) != (float(np.float32(hi) / np.float32(lo)) > 1000):
            return False
    return True


# ---- cases ----

CASES = []


def add(name, values, dtype, shape=None):
    """values: nested lists or an ndarray; dtype: a dlrun dtype name."""
    if dtype == "bfloat16":
        a = np.array(values, dtype=np.float32)
        if shape is not None:
            a = a.reshape(shape)
        a = np.vectorize(to_bf16, otypes=[np.float32])(a) if a.size else a
        assert bf16_agrees(a), name
        raw = np.frombuffer(a.astype("<f4").tobytes(), dtype="<u2")[1::2].tobytes()
    else:
        with np.errstate(over="ignore"):  # values too large for float16
            a = np.array(values, dtype=np.dtype(dtype))
        if shape is not None:
            a = a.reshape(shape)
        raw = a.astype(a.dtype.newbyteorder("<")).tobytes()
        if a.dtype.name not in ("float64", "int64", "bool", "complex128"):
            # NumPy shows these dtypes itself: its own repr must agree
            assert np.array_repr(a) == jax_repr(a, dtype).replace(PREFIX, "array(", 1), name
    CASES.append((name, dtype, a.shape, raw.hex(), jax_repr(a, dtype)))


def bits(fmt, ints):
    """Floats from their bit patterns (fmt: 'e', 'f' or 'd')."""
    size = struct.calcsize("<" + fmt)
    u = {2: "H", 4: "I", 8: "Q"}[size]
    return [struct.unpack("<" + fmt, struct.pack("<" + u, b))[0] for b in ints]


NAN, INF = float("nan"), float("inf")
FLOATS = ["float16", "float32", "float64"]
INTS = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"]


def build():
    # bool
    add("bool 0-d True", True, "bool")
    add("bool 0-d False", False, "bool")
    add("bool all True", [True, True, True], "bool")
    add("bool mixed", [True, False, True], "bool")
    add("bool 2-d", [[True, False], [False, False]], "bool")
    add("bool 3-d", [[[True], [False]], [[False], [True]]], "bool")
    add("bool wrapped row", [i % 3 == 0 for i in range(30)], "bool")
    add("bool empty", [], "bool")

    # integers: extremes, signs, widths, 0-d
    for dt in INTS:
        info = np.iinfo(dt)
        add(dt + " extremes", [info.min, info.max], dt)
        add(dt + " 0-d", 7, dt)
        add(dt + " small", [0, 1, 2, 3], dt)
        add(dt + " 2-d", [[1, 100], [10, int(info.max)]], dt)
        if info.min < 0:
            add(dt + " negatives", [-1, 5, -100], dt)
            add(dt + " 0-d min", info.min, dt)
        add(dt + " wrapped row", [(i * 37) % 120 for i in range(40)], dt)
    add("uint64 above 2^63", [1, 2**63, 2**63 + 1, 2**64 - 1], "uint64")
    add("int64 near limits", [-2**63, -2**63 + 1, 2**63 - 2, 0], "int64")
    add("int32 3-d", np.arange(24).reshape(2, 3, 4), "int32")
    add("int8 4-d", np.arange(16).reshape(2, 2, 2, 2), "int8")
    add("int16 2-d wrapped rows", np.arange(80).reshape(2, 40) * 101, "int16")

    # floats of every width
    for dt in FLOATS + ["bfloat16"]:
        add(dt + " quarters", [0.0, 0.25, 0.5, 0.75], dt)
        add(dt + " 1 and 2.5", [1.0, 2.5], dt)
        add(dt + " integral", [1.0, 2.0, -3.0], dt)
        add(dt + " 0-d", 3.0, dt)
        add(dt + " 0-d half", 0.5, dt)
        add(dt + " 0-d negative", -1.5, dt)
        add(dt + " 0-d zero", 0.0, dt)
        add(dt + " 0-d -0", -0.0, dt)
        add(dt + " -0 and 1", [-0.0, 1.0], dt)
        add(dt + " zeros", [0.0, 0.0], dt)
        add(dt + " nan inf -inf", [NAN, INF, -INF], dt)
        add(dt + " nan and inf", [NAN, INF], dt)
        add(dt + " 0-d nan", NAN, dt)
        add(dt + " 0-d -inf", -INF, dt)
        add(dt + " nan with fractions", [NAN, 0.5, 0.125], dt)
        add(dt + " inf with large", [INF, 1000.0, -2.0], dt)
        add(dt + " -inf and mixed magnitudes", [-INF, 0.0625, 256.0], dt)
        add(dt + " ratio 1000", [1.0, 1000.0], dt)
        add(dt + " ratio 1024", [1.0, 1024.0], dt)
        add(dt + " ratio below 1000", [0.5, 496.0], dt)
        add(dt + " 2-d", [[1.0, -2.5], [0.125, 4.0]], dt)
        add(dt + " 3-d", [[[1.0, 2.0]], [[3.5, -4.0]]], dt)
        add(dt + " wrapped row", [i * 0.5 - 3 for i in range(30)], dt)
        add(dt + " 2-d wrapped rows",
            [[i * 0.25 for i in range(20)], [-i * 0.75 for i in range(20)]], dt)
        add(dt + " empty", [], dt)
    for dt in FLOATS:
        add(dt + " empty 2-d", np.zeros((2, 0)), dt)
        add(dt + " empty leading 0", np.zeros((0, 3)), dt)
        add(dt + " empty 3-d", np.zeros((2, 0, 3)), dt)
        add(dt + " tenths", [0.1, 0.2, 0.3], dt)
        add(dt + " third", [1 / 3, 2 / 3], dt)
        add(dt + " 0-d third", 1 / 3, dt)
        add(dt + " pi e", [np.pi, np.e], dt)
        add(dt + " tiny triggers scientific", [1e-5, 1.0], dt)
        add(dt + " 0-d tiny", 1e-5, dt)
        add(dt + " near 1e-4", [1e-4, 0.5], dt)
        add(dt + " ratio 1001", [1.0, 1001.0], dt)
        add(dt + " mixed magnitudes", [0.001, 2.5, 1500.0], dt)
        add(dt + " sci with nan", [NAN, 1e-5, 3.25], dt)
        add(dt + " sci with -inf", [-INF, 1e-5], dt)
        add(dt + " sci -0", [-0.0, 1.5e-5], dt)
        add(dt + " sci 2-d", [[1e-3, 2.0], [300.0, -4.5e3]], dt)
        add(dt + " max", [float(np.finfo(dt).max)], dt)
        add(dt + " smallest normal", [float(np.finfo(dt).tiny)], dt)
        add(dt + " smallest subnormal", [float(np.finfo(dt).smallest_subnormal), 1.0], dt)
        add(dt + " powers of two", [2.0**k for k in range(-6, 7, 3)], dt)
        add(dt + " large integers", [2048.0, 4100.0, 8192.0], dt)
        add(dt + " wrapped scientific row", [(i + 1) * 1.5e-5 for i in range(16)], dt)
    add("float16 8192 positional", [8192.0], "float16")
    add("float16 8192 scientific", [8192.0, 0.5], "float16")
    add("float16 2^-6 shortest", [0.015625, 3.0], "float16")
    add("float16 2^-6 alone", 0.015625, "float16")
    add("float16 65504 and 1", [65504.0, 1.0], "float16")
    add("float16 subnormals", bits("e", [1, 2, 0x3FF]), "float16")
    add("float16 all bits of a row", bits("e", range(0x3C00, 0x3C00 + 12)), "float16")
    add("float32 above 2^24", [16777216.0, 33554436.0, 99999992.0], "float32")
    add("float32 at 1e8", [1e8, 1.0], "float32")
    add("float32 0.3 extended in scientific", [0.3, 1 / 3, 1e-5], "float32")
    add("float32 1e-4 alone", [1e-4], "float32")
    add("float32 0.001 and 1", [0.001, 1.0], "float32")
    add("float32 0.001 and 1.01", [0.001, 1.01], "float32")
    add("float32 2^-96 shortest", [2.0**-96], "float32")
    add("float32 2^87 shortest", [2.0**87, 1.0], "float32")
    add("float32 8 digits", [1.2345678, 9.8765432], "float32")
    add("float32 large positional", [12345678.0, 99999.5], "float32")
    add("float64 eight places", [0.123456789012, 1.0], "float64")
    add("float64 rounds to 1", [0.999999999, 0.5], "float64")
    add("float64 0.1 + 0.2", [0.1 + 0.2, 0.1], "float64")
    add("float64 12345678 and 1", [12345678.0, 1.0], "float64")
    add("float64 1e8", [1e8], "float64")
    add("float64 99999999", [99999999.0], "float64")
    add("float64 huge and tiny", [1e300, 1e-300], "float64")
    add("float64 three-digit exponents", [1e100, 1e-5, 1.0], "float64")
    add("float64 subnormal", [5e-324, 2.5e-320], "float64")
    add("float64 long mantissas", [1 / 3, 1 / 7, 1e-7], "float64")
    add("float64 2^-1074 and max", [5e-324, 1.7976931348623157e308], "float64")
    add("float64 overflowing ratio", [1e-300, 1e300], "float64")
    add("float64 stays positional", [0.0001, 0.1], "float64")
    add("bfloat16 256 and 0.5", [256.0, 0.5], "bfloat16")
    add("bfloat16 ratio 4096", [-0.125, 512.0, 1.5], "bfloat16")
    add("bfloat16 sci with nan", [NAN, 0.25, 384.0], "bfloat16")
    add("bfloat16 2-d sci", [[0.25, 640.0], [-3.0, 40.0]], "bfloat16")

    # complex
    for dt in ("complex64", "complex128"):
        add(dt + " 0-d", 1.5 - 0.5j, dt)
        add(dt + " 0-d zero", 0j, dt)
        add(dt + " parts", [1 + 2j, 1.5 + 2.25j], dt)
        add(dt + " signs", [complex(-0.0, -0.0), complex(1, -1), complex(-2, 0.5)], dt)
        add(dt + " scientific imaginary", [1 + 2j, complex(3, 1e-5)], dt)
        add(dt + " scientific real", [complex(1e-6, 1), complex(2, 2)], dt)
        add(dt + " nan and inf", [complex(NAN, NAN), complex(INF, -INF), complex(1, 2)], dt)
        add(dt + " nan real", [complex(NAN, 1), complex(0.5, 0.25)], dt)
        add(dt + " 2-d", [[1j, 2], [3 + 0.5j, -4j]], dt)
        add(dt + " wrapped row", [complex(i * 0.5, -i) for i in range(12)], dt)
        add(dt + " empty", [], dt)
        add(dt + " thirds", [complex(1 / 3, 2 / 3), complex(0.1, 0.2)], dt)

    # dtype pushed to its own line, and rows that just fit
    add("float32 dtype on its own line",
        [1.0, 22.5, 333.25, 4444.125, 1.5, 2.5, 3.5, 4.5, 5.5], "float32")
    for n in range(10, 14):
        add("int32 row of %d" % n, [100000 + i for i in range(n)], "int32")
        add("float64 row of %d" % n, [1000.5 + i for i in range(n)], "float64")
    add("int64 2-d last row fills", [[10**9 + i for i in range(6)]] * 2, "int64")
    add("float32 4-d", np.arange(16, dtype=np.float32).reshape(2, 2, 2, 2) / 4, "float32")

    # summarisation: more than 1000 elements, 3 edge items per axis
    add("int16 1-d 1000 (not summarised)", np.arange(1000), "int16")
    add("int16 1-d 1001", np.arange(1001), "int16")
    add("float32 1-d 1001", np.arange(1001) * 0.5, "float32")
    add("float64 1-d 1001 middle ignored",
        np.concatenate([np.full(3, 0.5), np.full(995, 1e9), np.full(3, 2.0)]), "float64")
    add("float16 1-d 1500 scientific", np.linspace(1e-5, 1.0, 1500), "float16")
    add("bool 1-d 1200", np.arange(1200) % 3 == 0, "bool")
    add("uint8 2-d 40x30", (np.arange(1200) % 251).reshape(40, 30), "uint8")
    add("float64 2-d 11x92", (np.arange(1012) / 7).reshape(11, 92), "float64")
    add("int16 2-d 3x400", np.arange(1200).reshape(3, 400) - 600, "int16")
    add("int16 2-d 1001x1", np.arange(1001).reshape(1001, 1), "int16")
    add("float16 2-d 10x100 (not summarised)", (np.arange(1000) * 0.25).reshape(10, 100), "float16")
    add("float16 3-d 11x10x10", (np.arange(1100) % 64 * 0.125).reshape(11, 10, 10), "float16")
    add("int8 3-d 2x3x200", (np.arange(1200) % 100).reshape(2, 3, 200), "int8")
    add("complex64 1-d 1001", np.arange(1001) * (0.5 - 0.25j), "complex64")
    add("bfloat16 1-d 1024", np.arange(1024) * 0.25, "bfloat16")
    add("uint16 4-d 7x7x7x7", np.arange(2401).reshape(7, 7, 7, 7), "uint16")

    # random arrays (fixed seed): values drawn from several scales
    rng = random.Random(20240610)
    for k in range(60):
        dt = rng.choice(FLOATS + ["complex64", "complex128"] + INTS + ["bool"])
        ndim = rng.choice([0, 1, 1, 1, 2, 2, 3])
        shape = tuple(rng.randint(1, 5) for _ in range(ndim))
        n = int(np.prod(shape)) if shape else 1
        if dt in INTS:
            info = np.iinfo(dt)
            lim = rng.choice([10, 1000, int(info.max)])
            lo, hi = max(int(info.min), -lim), min(int(info.max), lim)
            vals = [rng.randint(lo, hi) for _ in range(n)]
        elif dt == "bool":
            vals = [rng.random() < 0.5 for _ in range(n)]
        else:
            scale = 10.0 ** rng.choice([-6, -3, 0, 0, 2, 5, 9])
            def one():
                r = rng.random()
                if r < 0.05:
                    return rng.choice([NAN, INF, -INF, 0.0, -0.0])
                if r < 0.3:
                    return float(rng.randint(-20, 20)) / rng.choice([1, 2, 4, 8])
                return rng.uniform(-1, 1) * scale
            if dt.startswith("complex"):
                vals = [complex(one(), one()) for _ in range(n)]
            else:
                vals = [one() for _ in range(n)]
        nested = np.array(vals, dtype=object).reshape(shape).tolist() if shape else vals[0]
        add("random %d %s %s" % (k, dt, shape), nested, dt)


def lua_string(s):
    out = []
    for ch in s:
        if ch == "\\":
            out.append("\\\\")
        elif ch == '"':
            out.append('\\"')
        elif ch == "\n":
            out.append("\\n")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def main():
    build()
    w = sys.stdout.write
    w("-- Generated by spec/data/make_format_cases.py with NumPy %s; do not edit.\n"
      % np.__version__)
    w("-- Each case: dtype, shape, the elements' bytes (little-endian, hex) and\n")
    w("-- the text NumPy prints, in JAX's form.\n")
    w("return {\n")
    w("  numpy = %s,\n" % lua_string(np.__version__))
    w("  cases = {\n")
    for name, dtype, shape, hexdata, text in CASES:
        dims = ", ".join(str(d) for d in shape)
        w("    { name = %s, dtype = %s, shape = %s,\n" % (
            lua_string(name), lua_string(dtype), "{ %s }" % dims if dims else "{}"))
        w("      hex = %s,\n" % lua_string(hexdata))
        w("      expect = %s },\n" % lua_string(text))
    w("  },\n}\n")


if __name__ == "__main__":
    main()
