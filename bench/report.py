"""Turns the raw benchmark outputs into the table and bench/results.json.

Usage (from bench/run.sh): python3 bench/report.py TMPDIR RESULTS [--quick]

TMPDIR holds c.json, lua.json, numpy.json (the outputs of bench.c,
export_overhead.lua, numpy_ref.py) and c.rc, lua.rc, numpy.rc (their exit
statuses); mpiN.json and mpiN.rc (bench_mpi on N = 2 and 4 processes), or
mpiN.skip saying why it did not run; opencl.json and opencl.rc (bench.c's
part 9 in a run of its own). Prints one line per benchmark:

  name, dlrun's median, the reference's median, the ratio, the target, status

The ratio is reference time / dlrun time (higher is better) except where the
issue defines it the other way: export overhead and the import net of its
ctypes calls (dlrun cost / reference cost) and scale (t(4096) / t(8); index
map as % of t(4096)), where lower is better; the target column says which. Status: ok, MISSED (a speed target not
met), FAILED (a correctness check failed), ERROR (a part did not run),
info (no target: reported only), skipped (MPI or OpenCL missing: the
reason is printed). Exits 1 on FAILED or ERROR.
"""

import json
import os
import platform
import sys
import time


def load(tmp, name):
    rc_path, js_path = os.path.join(tmp, name + ".rc"), os.path.join(tmp, name + ".json")
    rc = int(open(rc_path).read().strip() or 1) if os.path.exists(rc_path) else 1
    data, err = None, None
    try:
        with open(js_path) as f:
            text = f.read().strip()
        data = json.loads(text) if text else None
        if data is None:
            err = "no output"
    except (OSError, ValueError) as e:
        err = str(e)
    return rc, data, err


def loadavg():
    try:
        with open("/proc/loadavg") as f:
            return float(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def fmt_time(t):
    if t is None:
        return "-"
    if t < 1e-6:
        return "%.0f ns" % (t * 1e9)
    if t < 1e-3:
        return "%.2f us" % (t * 1e6)
    if t < 1:
        return "%.2f ms" % (t * 1e3)
    return "%.3f s" % t


def get(d, *path):
    for k in path:
        if not isinstance(d, dict) or k not in d:
            return None
        d = d[k]
    return d


ROWS = []

# Machines with this many cores or fewer report the scale line (6) instead of
# judging it: see bench/README.
SCALE_REPORT_CORES = 2


def row(name, dlrun_s, ref_s, ratio, target_text, met, ratio_def, better, ratio_text=None,
        dlrun_text=None, ref_text=None):
    """met: True, False, None (info), "FAILED", "ERROR" or "skipped"."""
    if met in ("FAILED", "ERROR", "skipped"):
        status = met
    elif met is None:
        status = "info"
    else:
        status = "ok" if met else "MISSED"
    if ratio_text is None:
        ratio_text = "-" if ratio is None else ("%.2f" if abs(ratio) >= 0.1 else "%.2g") % ratio
    ROWS.append({
        "name": name, "dlrun_s": dlrun_s, "ref_s": ref_s, "ratio": ratio,
        "ratio_definition": ratio_def, "better": better, "target": target_text,
        "status": status,
        "_cells": [name, dlrun_text or fmt_time(dlrun_s), ref_text or fmt_time(ref_s), ratio_text,
                   target_text, status],
    })


def ratio_of(a, b):
    return a / b if a is not None and b not in (None, 0) else None


def speed_row(name, dl, ref, minimum, ok_flag=True, ref_name="reference"):
    r = ratio_of(ref, dl)
    if dl is None or ref is None:
        met = "ERROR"
    elif not ok_flag:
        met = "FAILED"
    else:
        met = r >= minimum
    row(name, dl, ref, r, ">= %g" % minimum, met, ref_name + " time / dlrun time", "higher")


def report_row(name, dl, ref, ok_flag, ref_name):
    """A speed line with no target: its ratio, reported."""
    met = None if ok_flag and dl is not None and ref is not None else (
        "FAILED" if not ok_flag else "ERROR")
    row(name, dl, ref, ratio_of(ref, dl), "report", met, ref_name + " time / dlrun time",
        "higher")


def mpi_rows(tmp, n, skips):
    """Benchmark 8 on n processes; returns its data (None when skipped)."""
    skip = os.path.join(tmp, "mpi%d.skip" % n)
    names = [("reshard", "8 reshard %d procs vs MPI p2p" % n, "MPI_Isend/MPI_Irecv"),
             ("allgather", "8 allgather %d procs vs MPI_Allgather" % n, "MPI_Allgather")]
    if os.path.exists(skip):
        why = open(skip).read().strip()
        skips.append("8 on %d processes skipped: %s" % (n, why))
        for key, label, ref in names + [
                ("reshard", "8 reshard %d procs vs MPI strided p2p" % n, "MPI hvector Isend/Irecv")]:
            row(label, None, None, None, "report" if key == "reshard" else ">= 0.9", "skipped",
                ref + " time / dlrun time", "higher")
        row("8 reshard %d procs vs IPC off" % n, None, None, None, "report", "skipped",
            "dlrun time with DLRUN_DISTRIBUTED_IPC=off / dlrun time", "higher")
        row("8 reshard %d procs vs memcpy of its bytes" % n, None, None, None, ">= 0.8", "skipped",
            "memcpy time / dlrun time", "higher")
        row("8 reshard %d procs vs streamed copy of its bytes" % n, None, None, None, "report",
            "skipped", "streaming-store copy time / dlrun time", "higher")
        row("8 reshard %d procs vs box copies of its bytes" % n, None, None, None, "report",
            "skipped", "memcpy per row of each box time / dlrun time", "higher")
        row("8 reshard %d procs vs whole-row copies of its bytes" % n, None, None, None, "report",
            "skipped", "memcpy per run of each whole row time / dlrun time", "higher")
        return None
    rc, m, err = load(tmp, "mpi%d" % n)
    ok = rc == 0 and m is not None and bool(get(m, "checks_ok"))
    for key, label, ref in names:
        if key != "reshard":
            speed_row(label, get(m, key, "dlrun_s"), get(m, key, "mpi_s"), 0.9, ok, ref)
        else:
            # The reshard does more than MPI point-to-point (it also relays out
            # the bytes that stay, README): these lines are reported, and its
            # target is against memcpy of its own bytes (below).
            report_row(label, get(m, key, "dlrun_s"), get(m, key, "mpi_s"), ok, ref)
            # The same messages from the same strided source memory, as a
            # hand-written MPI program would send them (MPI's own datatype cost).
            report_row("8 reshard %d procs vs MPI strided p2p" % n, get(m, key, "dlrun_s"),
                       get(m, key, "mpi_strided_s"), ok, "MPI hvector Isend/Irecv")
            # The same reshard with the one-copy path off (every piece an MPI
            # message): what copying straight between the processes' memories gains.
            dl, off = get(m, key, "dlrun_s"), get(m, key, "dlrun_ipc_off_s")
            row("8 reshard %d procs vs IPC off" % n, dl, off, ratio_of(off, dl), "report",
                None if ok and dl and off else ("FAILED" if not ok else "ERROR"),
                "dlrun time with DLRUN_DISTRIBUTED_IPC=off / dlrun time", "higher")
            # The machine's limit for the reshard's own work: every process
            # memcpy's the bytes of its destination shards, all at once.
            speed_row("8 reshard %d procs vs memcpy of its bytes" % n, dl,
                      get(m, key, "memcpy_s"), 0.8, ok, "memcpy")
            # The same bytes with streaming stores (dlrun's own loop), as the
            # reshard's copies store them where the call streams (README).
            report_row("8 reshard %d procs vs streamed copy of its bytes" % n, dl,
                       get(m, key, "streamed_copy_s"), ok, "streaming-store copy")
            # The same bytes copied box by box as the reshard reads them
            # (runs of a row, rows apart): the access pattern's own limit.
            report_row("8 reshard %d procs vs box copies of its bytes" % n, dl,
                       get(m, key, "box_copy_s"), ok, "memcpy per row of each box")
            # Whole rows read once, each run to its destination: what a
            # reshard pushed by the holders would copy (bench/README).
            report_row("8 reshard %d procs vs whole-row copies of its bytes" % n, dl,
                       get(m, key, "row_copy_s"), ok, "memcpy per run of each whole row")
        sent, recv = get(m, key, "bytes_sent"), get(m, key, "bytes_received")
        rs, rr = get(m, key, "ref_bytes_sent"), get(m, key, "ref_bytes_received")
        same = sent is not None and sent == rs and recv == rr
        one = lambda v: "-" if not v else ("%d B" % v[0] if len(set(v)) == 1 else
                                           "/".join("%d" % x for x in v))
        row("8 %s %d procs bytes = MPI's" % (key, n), None, None, None, "equal",
            "ERROR" if sent is None else (True if same else "FAILED"),
            "bytes_sent / bytes_received per process vs the reference's", "exact",
            ratio_text="-", dlrun_text="%s / %s" % (one(sent), one(recv)),
            ref_text="%s / %s" % (one(rs), one(rr)))
    if rc != 0 or err:
        skips.append("bench_mpi on %d processes: exit status %d%s" % (n, rc, ": " + err if err else ""))
    return m


OPENCL_CASES = (  # key, label, reference, target (None: reported only)
    ("gather", "9 opencl gather to 1 device vs parallel memcpy", "parallel_memcpy_s", 0.8),
    ("to_device", "9 opencl host-to-device vs memcpy", "memcpy_s", 0.8),
    ("to_host", "9 opencl device-to-host vs memcpy", "memcpy_s", 0.8),
    ("full", "9 opencl full(1.5) vs memset", "memset_s", None),
    ("zeros", "9 opencl zeros vs memset", "memset_s", None),
    ("arange", "9 opencl arange vs memset", "memset_s", None),
)
REF_NAMES = {"parallel_memcpy_s": "parallel memcpy (the engine's thread count)",
             "memcpy_s": "memcpy", "memset_s": "memset"}


def opencl_rows(tmp, skips):
    """Benchmark 9 on opencl:4; returns its data."""
    rc, o, err = load(tmp, "opencl")
    part = get(o, "opencl")
    why = get(part, "skipped")
    for key, label, ref_key, target in OPENCL_CASES:
        target_text = "report" if target is None else ">= %g" % target
        ref_name = REF_NAMES[ref_key] + " time / dlrun time"
        dl, ref = get(part, key, "dlrun_s"), get(part, key, ref_key)
        if why is not None:
            met = "skipped"
        elif dl is None or ref is None:
            met = "ERROR"
        elif not get(part, key, "values_ok"):
            met = "FAILED"
        else:
            met = None if target is None else ref / dl >= target
        row(label, dl, ref, ratio_of(ref, dl), target_text, met, ref_name, "higher")
        if key == "gather":
            b = get(part, "gather_bytes") or {}
            moved, local = b.get("bytes_moved"), b.get("local_bytes")
            met = "skipped" if why is not None else (
                "ERROR" if moved is None else (True if b.get("exact") else "FAILED"))
            row("9 opencl gather bytes moved/local = 3/4, 1/4", None, None, None, "exact", met,
                "bytes_moved / local_bytes (dlrun_transfer_stats) vs the shards' bytes", "exact",
                ratio_text="-",
                dlrun_text="-" if moved is None else "%d / %d B" % (moved, local),
                ref_text="-" if moved is None else "%d / %d B" % (
                    b["expected_bytes_moved"], b["expected_local_bytes"]))
    if why is not None:
        skips.append("9 on opencl:4 skipped: %s" % why)
    elif rc != 0 or err:
        skips.append("bench.c part 9 (opencl): exit status %d%s" % (rc, ": " + err if err else ""))
    return o


def main():
    tmp, out_path = sys.argv[1], sys.argv[2]
    quick = "--quick" in sys.argv[3:]
    c_rc, c, c_err = load(tmp, "c")
    l_rc, lua, l_err = load(tmp, "lua")
    n_rc, npy, n_err = load(tmp, "numpy")
    c_ok = c_rc == 0 and c is not None and bool(get(c, "checks_ok"))

    # 1 and 2: gathers.
    for key, label, vs_memcpy in (("gather", "1 gather", 0.9),
                                  ("column_gather", "2 column gather", 0.7)):
        dl = get(c, key, "dlrun_s")
        speed_row(label + " vs memcpy", dl, get(c, key, "memcpy_s"), vs_memcpy, c_ok, "memcpy")
        speed_row(label + " vs parallel memcpy", dl, get(c, key, "parallel_memcpy_s"), vs_memcpy,
                  c_ok, "parallel memcpy (the engine's thread count)")
        speed_row(label + " vs numpy concat", dl, get(npy, key, "numpy_s"), 1.0, c_ok,
                  "numpy concatenate")

    # 3: reshard.
    dl = get(c, "reshard", "dlrun_s")
    speed_row("3 reshard vs memcpy 7/8", dl, get(c, "reshard", "memcpy_s"), 0.9, c_ok, "memcpy")
    moved, want = get(c, "reshard", "bytes_moved"), get(c, "reshard", "expected_bytes_moved")
    if moved is None:
        met = "ERROR"
    else:
        met = True if moved == want else "FAILED"
    row("3 reshard bytes_moved = 7/8", None, None, ratio_of(moved, get(c, "reshard", "bytes")),
        "exactly 7/8", met, "bytes_moved / array bytes", "exact",
        ratio_text="-" if moved is None else "%d/8" % round(8 * moved / get(c, "reshard", "bytes")),
        dlrun_text="-" if moved is None else "%d B" % moved,
        ref_text="-" if want is None else "%d B" % want)

    # 4: export overhead (cost ratio: lower is better).
    e = get(lua, "export_overhead") or {}
    dl, ref = e.get("dlrun_s"), e.get("ref_s")
    cost = ratio_of(dl, ref)
    lua_ok = l_rc == 0 and bool(e.get("checks_ok"))
    met = "ERROR" if cost is None else ("FAILED" if not lua_ok else cost <= 3)
    row("4 export overhead (per call)", dl, ref, cost, "<= 3 (lower better)", met,
        "dlrun time / reference time", "lower")
    copied = e.get("bytes_copied")
    row("4 export copies nothing", None, None, None, "0 B copied",
        "ERROR" if copied is None else (True if copied == 0 else "FAILED"),
        "bytes copied over all exports", "exact",
        dlrun_text="-" if copied is None else "%d B" % copied, ref_text="0 B")

    # 5: pools.
    dl, ref = get(c, "pool", "dlrun_s"), get(c, "pool", "malloc_s")
    speed_row("5 pool alloc/free vs malloc", dl, ref, 1.0, c_ok, "glibc malloc/free")
    frag = get(c, "pool", "peak", "fragmentation")
    row("5 pool fragmentation at peak", None, None, frag, "report", None if frag is not None else "ERROR",
        "1 - largest free block / free bytes", "lower",
        ratio_text="-" if frag is None else "%.4f" % frag,
        dlrun_text="-" if frag is None else "%.0f MiB used" % (get(c, "pool", "peak", "bytes_in_use") / 2**20),
        ref_text="-" if frag is None else "%.0f MiB req" % (get(c, "pool", "peak", "requested_bytes") / 2**20))

    # 6: scale (lower is better).
    ts = get(c, "scale", "dlrun_s")
    counts = get(c, "scale", "devices")
    # On 2 cores t(4096) is bound by the per-device CPU work, not the copy,
    # and the ratio moves with t(8) (bench/README, "Reading the numbers"):
    # there it is reported, as issue 35 allows; with more cores, a target.
    cores = len(os.sched_getaffinity(0))
    few_cores = cores <= SCALE_REPORT_CORES
    scale_target = "report (%d cores)" % cores if few_cores else "<= 1.5 (lower better)"
    if ts and counts:
        r = ts[-1] / ts[0]
        row("6 scale t(%d)/t(%d)" % (counts[-1], counts[0]), ts[-1], ts[0], r,
            scale_target, "FAILED" if not c_ok else None if few_cores else r <= 1.5,
            "t(4096 devices) / t(8 devices)", "lower")
        m = get(c, "scale", "index_map_s")
        pct = 100.0 * m / ts[-1]
        row("6 index map (%d) / t(%d)" % (counts[-1], counts[-1]), m, ts[-1], pct,
            "< 1% (lower better)", pct < 1.0, "index map time / t(4096) in %", "lower",
            ratio_text="%.3f%%" % pct)
    else:
        row("6 scale t(4096)/t(8)", None, None, None, scale_target, "ERROR",
            "t(4096 devices) / t(8 devices)", "lower")

    # 7: import (reported against NumPy's own from_dlpack; no target).
    imp = get(npy, "import") or {}
    for key, label in (("contiguous", "7 import a (wrap)"), ("sliced", "7 import a[:, ::2] (copy)")):
        ent = imp.get(key) or {}
        dl, ref = ent.get("dlrun_s"), ent.get("numpy_s")
        bad = ent.get("dlrun_values_ok") is False
        met = "ERROR" if dl is None or ref is None else ("FAILED" if bad else None)
        row(label + " vs np.from_dlpack", dl, ref, ratio_of(ref, dl), "report", met,
            "numpy from_dlpack time / dlrun import time", "higher")
        if key == "contiguous":
            # dlrun's own share of the wrap: its time less its ctypes calls
            # as timed on functions that do nothing (numpy_ref.py), as a
            # cost against NumPy's own import of the same tensor.
            own = ent.get("dlrun_own_s")
            cost = ratio_of(own, ref)
            met = ("ERROR" if cost is None else "FAILED" if bad else cost <= 2)
            row("7 import a (wrap) net of ctypes vs np.from_dlpack", own, ref, cost,
                "<= 2 (lower better)", met,
                "dlrun import time less its ctypes calls' / numpy from_dlpack time", "lower")

    # 8: between processes, against raw MPI on the same bytes.
    notes, mpi = [], {}
    for n in (2, 4):
        mpi["%d" % n] = mpi_rows(tmp, n, notes)

    # 9: OpenCL devices, against memcpy / memset of the same bytes.
    ocl = opencl_rows(tmp, notes)

    # The table.
    head = ["benchmark", "dlrun", "reference", "ratio", "target", "status"]
    cells = [head] + [r["_cells"] for r in ROWS]
    widths = [max(len(str(x[i])) for x in cells) for i in range(len(head))]
    print("dlrun benchmarks%s: ratio = reference time / dlrun time (higher is better) unless the "
          "target says lower" % (" (quick)" if quick else ""))
    for x in cells:
        print("  ".join(str(v).ljust(w) if i in (0, 4, 5) else str(v).rjust(w)
                        for i, (v, w) in enumerate(zip(x, widths))).rstrip())

    # Details worth a glance.
    if ts and counts:
        print("scale: " + ", ".join("%d devices %s" % (n, fmt_time(t)) for n, t in zip(counts, ts)))
    if frag is not None:
        p = get(c, "pool", "peak")
        print("pool: %d ops, %s/op vs malloc %s/op; at the peak %d blocks, %.0f MiB requested, "
              "largest free block %.0f MiB of %.0f MiB free" % (
                  get(c, "pool", "ops"), fmt_time(get(c, "pool", "dlrun_ns_per_op") * 1e-9),
                  fmt_time(get(c, "pool", "malloc_ns_per_op") * 1e-9), p["live_blocks"],
                  p["requested_bytes"] / 2**20, p["largest_free_block_bytes"] / 2**20,
                  p["free_bytes"] / 2**20))
    for key in ("gather", "column_gather"):
        n, pm = get(c, key, "parallel_threads"), get(c, key, "parallel_memcpy_s")
        if n and pm:
            print("%s: parallel memcpy on %d threads (the engine's count) in %s, %d pieces of %d B; "
                  "one memcpy %s; paired ratios: vs memcpy %.2f, vs parallel %.2f" % (
                      key, n, fmt_time(pm), get(c, key, "parallel_pieces"),
                      get(c, key, "parallel_piece_bytes"), fmt_time(get(c, key, "memcpy_s")),
                      get(c, key, "paired_ratio_median"),
                      get(c, key, "parallel_paired_ratio_median")))
    for key in ("gather", "column_gather"):
        cp, mc = get(npy, key, "numpy_copyto_s"), get(c, key, "memcpy_s")
        if cp and mc and get(npy, key, "numpy_s"):
            a, b = get(npy, key, "numpy_s") / cp, mc / get(c, key, "dlrun_s")
            print("%s: numpy's process copies the same bytes (np.copyto) in %s, bench.c's memcpy in "
                  "%s; numpy concat / its copyto %.2f x memcpy / dlrun %.2f = %.2f, the ratio vs "
                  "numpy corrected for drift between the processes" % (
                      key, fmt_time(cp), fmt_time(mc), a, b, a * b))
    for key in ("contiguous", "sliced"):
        ent = imp.get(key) or {}
        if "dlrun_s" in ent:
            print("import %s: dlrun %s (%s net of %d ctypes calls as timed on no-op functions, "
                  "%s net of %d trivial calls), numpy %s; copied: dlrun %s, numpy %s%s" % (
                      ent["view"], fmt_time(ent["dlrun_s"]),
                      fmt_time(max(ent["dlrun_own_s"], 0)) if "dlrun_own_s" in ent else "-",
                      ent["ctypes_calls_per_import"], fmt_time(max(ent["dlrun_net_s"], 0)),
                      ent["ctypes_calls_per_import"], fmt_time(ent["numpy_s"]),
                      ent["dlrun_copied"], ent["numpy_copied"],
                      "; a numpy copy of the view takes %s" % fmt_time(ent["numpy_copy_s"])
                      if "numpy_copy_s" in ent else ""))
    if imp.get("noop_error"):
        notes.append("7: " + imp["noop_error"])
    for n, m in sorted(mpi.items()):
        for key in ("reshard", "allgather"):
            e = get(m, key)
            if e:
                print("%s on %s processes (%.0f MiB): paired ratio %.2f; bytes sent per process %s, "
                      "received %s%s" % (
                          key, n, e["bytes"] / 2**20, e["paired_ratio_median"],
                          e["bytes_sent"], e["bytes_received"],
                          "; MPI with dlrun's strided send datatypes %s" % fmt_time(e["mpi_strided_s"])
                          if "mpi_strided_s" in e else ""))
    for line in notes:
        print(line)
    for name, rc, err in (("bench.c", c_rc, c_err), ("export_overhead.lua", l_rc, l_err),
                          ("numpy_ref.py", n_rc, n_err)):
        if rc != 0 or err:
            print("%s: exit status %d%s" % (name, rc, ": " + err if err else ""))

    # Other work on the machine skews everything: say so.
    end_load, start_load, cpus = loadavg(), None, os.cpu_count() or 1
    try:
        start_load = float(open(os.path.join(tmp, "load.start")).read().split()[0])
    except (OSError, ValueError, IndexError):
        pass
    busy = max(x for x in (end_load, start_load, 0.0) if x is not None)
    if busy > 0.5 * cpus:
        print("warning: the machine was busy (1-minute load average %.2f on %d CPUs): other work "
              "competes with the benchmarks, and ratios against references run at another time "
              "(the NumPy lines) are the least reliable" % (busy, cpus))

    summary = [{k: v for k, v in r.items() if k != "_cells"} for r in ROWS]
    results = {
        "quick": quick,
        "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "machine": {"system": platform.system(), "release": platform.release(),
                    "machine": platform.machine(), "cpus": os.cpu_count(),
                    "load_average_start": start_load, "load_average_end": end_load},
        "summary": summary,
        "c": c, "lua": lua, "numpy": npy, "mpi": mpi, "opencl": ocl,
        "exit_status": {"bench.c": c_rc, "export_overhead.lua": l_rc, "numpy_ref.py": n_rc},
    }
    with open(out_path, "w") as f:
        json.dump(results, f, indent=1)
        f.write("\n")
    print("results: " + out_path)
    bad = any(r["status"] in ("FAILED", "ERROR") for r in ROWS) or c_rc or l_rc or n_rc
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
