#!/usr/bin/env python3
"""Merge the outputs of scripts/cpu-bench.sh into the markdown report (printed to stdout).

Usage: cpu-bench-report.py OUTDIR > docs/perf/cpu-allreduce.md

Reads from OUTDIR (all written by cpu-bench.sh):
  mpi-np{2,4}-bw.txt, mpi-np{2,4}-lat.txt   nccl-tests-style tables from bench/mpi_allreduce
  memcpy-t{1,2}.txt                          bench/memcpy_bw tables
  ours-np{2,4}.txt / .csv                    bin/allreduce-perf output, when it ran
  ours-np{2,4}-reg.txt                       the same with -R 1 (shared, "registered" buffers)
  <knob>-np2-{bw,lat}.txt                    OpenMPI knob runs
  *.cmd, load-*.txt                          the exact commands and the load average
Standard library only (the project's machines have python3 but no PyPI).
"""
import csv
import datetime
import os
import platform
import subprocess
import sys

MB = 1 << 20
KNOB_NOTES = {
    "default": "OpenMPI defaults: pml ob1, btl vader (shared memory) + self, CMA single copy, coll tuned fixed decisions; 2 ranks on 2 cores: bound to cores, busy-poll (mpi_yield_when_idle false)",
    "knob-no-cma": "vader without single-copy (two copies through the shared segment instead of process_vm_readv)",
    "knob-ring": "coll tuned forced to ring allreduce",
    "knob-recdbl": "coll tuned forced to recursive doubling",
    "knob-segring": "coll tuned forced to segmented ring",
    "knob-bind-core": "ranks bound to cores explicitly",
    "knob-yield": "ranks yield the core while waiting (the default only when mpirun sees more ranks than cores, e.g. 4 ranks here)",
}


def read(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return None


def parse_nccl_table(text):
    """Rows of an nccl-tests table: {size: (oop_us, oop_busbw, ip_us, ip_busbw)}."""
    rows = {}
    for line in (text or "").splitlines():
        fields = line.split()
        if not fields or line.lstrip().startswith("#") or len(fields) < 12:
            continue
        try:
            rows[int(fields[0])] = (float(fields[5]), float(fields[7]),
                                    float(fields[9]), float(fields[11]))
        except ValueError:
            continue
    return rows


def round_suffixes(out, name):
    """"", "-r2", "-r3", ...: the rounds of NAME that cpu-bench.sh ran (--rounds)."""
    sfx = [""]
    while os.path.exists(os.path.join(out, f"{name}-r{len(sfx) + 1}.txt")):
        sfx.append(f"-r{len(sfx) + 1}")
    return sfx


def best_of_rounds(out, name):
    """Rows of NAME.txt, NAME-r2.txt, ... (cpu-bench runs each side --rounds times), size by size
    the best round of each placement: (oop_us, oop_busbw, ip_us, ip_busbw)."""
    rounds = [parse_nccl_table(read(os.path.join(out, f"{name}{sfx}.txt"))) for sfx in round_suffixes(out, name)]
    best = {}
    for rows in rounds:
        for size, (ot, ob, it, ib) in rows.items():
            if size not in best:
                best[size] = (ot, ob, it, ib)
                continue
            bot, bob, bit, bib = best[size]
            if ot < bot:
                bot, bob = ot, ob
            if it < bit:
                bit, bib = it, ib
            best[size] = (bot, bob, bit, bib)
    return best


def parse_ours_csv(text):
    """Fallback for our --csv file: first 'size', 'time' and 'busbw' columns (out-of-place)."""
    rows = {}
    if not text:
        return rows
    reader = csv.reader(text.splitlines())
    header = [h.strip().lower() for h in next(reader, [])]

    def first(word):
        return next((i for i, h in enumerate(header) if word in h), None)

    size_col, time_col, bus_col = first("size"), first("time"), first("busbw")
    if None in (size_col, time_col, bus_col):
        return rows
    for rec in reader:
        try:
            t, b = float(rec[time_col]), float(rec[bus_col])
            rows[int(float(rec[size_col]))] = (t, b, t, b)
        except (ValueError, IndexError):
            continue
    return rows


def parse_memcpy(text):
    """{size: (GB/s per thread, GB/s total)} from bench/memcpy_bw."""
    rows = {}
    for line in (text or "").splitlines():
        fields = line.split()
        if len(fields) == 5 and not line.startswith("#"):
            rows[int(fields[0])] = (float(fields[3]), float(fields[4]))
    return rows


BUSY_LOAD = 1.5


def busy(load_text):
    """True when the 1-minute load average in `load_text` says the run shared the cores."""
    try:
        return float(load_text.split()[0]) > BUSY_LOAD
    except (ValueError, IndexError):
        return False


def human(size):
    for unit, scale in (("G", 1 << 30), ("M", MB), ("K", 1 << 10)):
        if size >= scale and size % scale == 0:
            return f"{size // scale}{unit}"
    return str(size)


def fmt(value, digits=2):
    return "pending" if value is None else f"{value:.{digits}f}"


def cmd(out, name):
    text = read(os.path.join(out, name + ".cmd"))
    return text.strip() if text else "(not run)"


def machine():
    cpu = "unknown"
    for line in (read("/proc/cpuinfo") or "").splitlines():
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
    mem = next((l.split(":", 1)[1].strip() for l in (read("/proc/meminfo") or "").splitlines()
                if l.startswith("MemTotal")), "unknown")
    try:
        mpi = subprocess.run(["mpirun", "--version"], capture_output=True, text=True).stdout.splitlines()[0]
    except (OSError, IndexError):
        mpi = "unknown"
    try:
        cc = subprocess.run(["cc", "--version"], capture_output=True, text=True).stdout.splitlines()[0]
    except (OSError, IndexError):
        cc = "unknown"
    return [f"nproc: {os.cpu_count()}", f"CPU: {cpu}", f"memory: {mem}",
            f"kernel: {platform.release()}", f"MPI: {mpi}", f"compiler: {cc}"]


def main():
    out = sys.argv[1]
    memcpy1 = parse_memcpy(read(os.path.join(out, "memcpy-t1.txt")))
    memcpy2 = parse_memcpy(read(os.path.join(out, "memcpy-t2.txt")))
    p = print

    p("# CPU AllReduce: sparkccl against OpenMPI")
    p()
    p("Generated by `scripts/cpu-bench.sh` (issue 2, performance section); rerun it to refresh this file.")
    p("What the numbers mean, OpenMPI's settings and knobs, and a quiet-machine reference:")
    p("[cpu-allreduce-notes.md](cpu-allreduce-notes.md).")
    p("Targets: busbw >= 2x OpenMPI's at every size >= 1 MB; at 2 ranks, 1 KB latency <= OpenMPI's.")
    p()
    p(f"- date: {datetime.datetime.now().astimezone().strftime('%Y-%m-%d %H:%M %Z')}")
    for line in machine():
        p(f"- {line}")
    load0 = (read(os.path.join(out, "load-start.txt")) or "?").strip()
    load1 = (read(os.path.join(out, "load-end.txt")) or "?").strip()
    p(f"- load average (1/5/15 min) at start: {load0}; at end: {load1}. Other work on a 2-core machine")
    p("  skews every number here; compare runs taken under similar load, or use `--wait-idle`.")
    p()
    if busy(load0) or busy(load1):
        p(f"> **Warning: the machine was busy** (1-minute load average above {BUSY_LOAD} on {os.cpu_count()} cores)")
        p("> during this run. OpenMPI busy-polls, so with more runnable processes than cores its ranks")
        p("> wait for each other's time slices and the times below can be 10-1000x too slow, varying")
        p("> from size to size. Treat this table as a record of that run, not as OpenMPI's speed; rerun")
        p("> with `scripts/cpu-bench.sh --wait-idle 1800` on a quiet machine.")
        p()
    p("All numbers: float32 sum, out-of-place (nccl-tests' first column set), GB/s = 1e9 B/s,")
    p("busbw = algbw * 2(n-1)/n, time = slowest rank's average per call. Every run checked its")
    p("results against a float64 reference (random data per rank); a wrong element fails the script.")
    p("memcpy = one thread copying a buffer of that size (GB/s of bytes copied, counted once);")
    p("2T = two threads each copying its own buffer, total. Small sizes sit in cache, so the")
    p("ceiling there is the cache's, not DRAM's.")
    p()

    summary = []
    for np in (2, 4):
        mpi = best_of_rounds(out, f"mpi-np{np}-bw")
        lat = best_of_rounds(out, f"mpi-np{np}-lat")
        ours = best_of_rounds(out, f"ours-np{np}") or parse_ours_csv(read(os.path.join(out, f"ours-np{np}.csv")))
        # Our latency from the run with OpenMPI's latency iteration counts, where it ran.
        ours_lat = best_of_rounds(out, f"ours-np{np}-lat") or ours
        reg = best_of_rounds(out, f"ours-np{np}-reg")
        p(f"## {np} ranks")
        p()
        p("ours = plain buffers; ours -R 1 = buffers from `Communicator.allocateShared` (nccl-tests' -R 1,")
        p("registered buffers: from 64 KB up the all-reduce reads the peers' buffers in place).")
        p()
        p("Out of place, then (\"in place\") both sides' in-place runs of the same table: a training step")
        n_rounds = len(round_suffixes(out, f"mpi-np{np}-bw"))
        p(f"reduces its gradients in place. Each side ran {n_rounds} times (rounds interleaved: OpenMPI, ours,")
        p("ours -R 1, then again); every cell is that side's best round for that size and placement.")
        p()
        p("| size | OpenMPI busbw | ours busbw | ours / OpenMPI | ours -R 1 busbw | -R 1 / OpenMPI"
          " | in place: OpenMPI | in place: ours -R 1 | -R 1 / OpenMPI | memcpy 1T | memcpy 2T total |")
        p("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        met, met_reg, met_reg_ip, total = 0, 0, 0, 0
        for size in sorted(mpi):
            mb = mpi[size][1]
            ob = ours[size][1] if size in ours else None
            ratio = ob / mb if ob is not None and mb > 0 else None
            rb = reg[size][1] if size in reg else None
            rratio = rb / mb if rb is not None and mb > 0 else None
            mb_ip = mpi[size][3]
            rb_ip = reg[size][3] if size in reg else None
            rratio_ip = rb_ip / mb_ip if rb_ip is not None and mb_ip > 0 else None
            if size >= MB:
                total += 1
                met += ratio is not None and ratio >= 2.0
                met_reg += rratio is not None and rratio >= 2.0
                met_reg_ip += rratio_ip is not None and rratio_ip >= 2.0
            m1 = memcpy1.get(size, (None, None))[0]
            m2 = memcpy2.get(size, (None, None))[1]
            p(f"| {human(size)} | {mb:.2f} | {fmt(ob)} | {fmt(ratio)} | {fmt(rb)} | {fmt(rratio)} | {mb_ip:.2f} | {fmt(rb_ip)}"
              f" | {fmt(rratio_ip)} | {fmt(m1)} | {fmt(m2)} |")
        p()
        p(f"Latency (small sizes; OpenMPI{' and ours' if ours_lat is not ours else ''} from a separate run with {LAT_NOTE}):")
        p()
        p("| size | OpenMPI time (us) | ours time (us) | ours / OpenMPI |")
        p("|---:|---:|---:|---:|")
        for size in sorted(lat):
            mt = lat[size][0]
            ot = ours_lat[size][0] if size in ours_lat else None
            p(f"| {human(size)} | {mt:.2f} | {fmt(ot)} | {fmt(ot / mt if ot is not None else None)} |")
        p()
        p("Commands:")
        p()
        sides = (f"mpi-np{np}-bw", f"mpi-np{np}-lat", f"ours-np{np}", f"ours-np{np}-reg", f"ours-np{np}-lat")
        for name in [side + sfx for sfx in round_suffixes(out, f"mpi-np{np}-bw") for side in sides]:
            if read(os.path.join(out, f"{name}.cmd")) is not None:
                p(f"    {cmd(out, name)}")
        p()
        if ours:
            summary.append(f"{np} ranks: busbw >= 2x OpenMPI at {met} of {total} sizes >= 1 MB with plain buffers"
                           + (f", at {met_reg} of {total} with -R 1 (in place: {met_reg_ip} of {total})" if reg else ""))
            if np == 2 and 1024 in ours_lat and 1024 in lat:
                ok = ours_lat[1024][0] <= lat[1024][0]
                summary.append(f"2 ranks, 1 KB latency: ours {ours_lat[1024][0]:.2f} us, OpenMPI "
                               f"{lat[1024][0]:.2f} us: {'met' if ok else 'NOT met'}")
        else:
            summary.append(f"{np} ranks: ours pending (bin/allreduce-perf did not run)")

    p("## Targets")
    p()
    for line in summary:
        p(f"- {line}")
    p()
    probes = read(os.path.join(out, "probe.txt"))
    if probes:
        p("## Distance between the two cores, before each run")
        p()
        p("`bench/cross_core_write.c`: a 1 MB memcpy into a buffer the other core has read since (what")
        p("every copy through shared memory pays). This VM's two cores move: 25-35 us for minutes, then")
        p("120-190 us; cross-core rows of either side slow down with it.")
        p()
        p("| run | memcpy into lines the other core read |")
        p("|---|---|")
        for line in probes.splitlines():
            name, _, rest = line.partition(" ")
            value = rest.split(":", 1)[-1].strip()
            p(f"| {name} | {value} |")
        p()
    p("memcpy commands:")
    p()
    p(f"    {cmd(out, 'memcpy-t1')}")
    p(f"    {cmd(out, 'memcpy-t2')}")
    p()
    p(f"Build: `{(read(os.path.join(out, 'build.cmd')) or '?').strip()}`")
    p()

    knobs = sorted(n[:-len("-np2-bw.txt")] for n in os.listdir(out) if n.endswith("-np2-bw.txt")
                   and not n.startswith("mpi-"))
    if knobs:
        p("## OpenMPI knobs (2 ranks)")
        p()
        p("The defaults above are the fair baseline (what a user gets from `mpirun`). These runs show")
        p("what OpenMPI's own knobs change, taken back to back after the main runs; busbw in GB/s.")
        p()
        sizes = sorted(parse_nccl_table(read(os.path.join(out, "default-np2-bw.txt"))))
        p("| setting | " + " | ".join(human(s) for s in sizes) + " | 1K latency (us) | what it is |")
        p("|---|" + "---:|" * len(sizes) + "---:|---|")
        for name in ["default"] + [k for k in knobs if k != "default"]:
            bw = parse_nccl_table(read(os.path.join(out, f"{name}-np2-bw.txt")))
            lt = parse_nccl_table(read(os.path.join(out, f"{name}-np2-lat.txt")))
            cells = [fmt(bw[s][1]) if s in bw else "-" for s in sizes]
            l1k = fmt(lt[1024][0]) if 1024 in lt else "-"
            p(f"| {name} | " + " | ".join(cells) + f" | {l1k} | {KNOB_NOTES.get(name, '')} |")
        p()
        p("Knob commands:")
        p()
        for name in ["default"] + [k for k in knobs if k != "default"]:
            p(f"    {cmd(out, name + '-np2-bw')}")
        p()


LAT_NOTE = "`-w 1000 -n 20000`"

if __name__ == "__main__":
    main()
