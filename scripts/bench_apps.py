#!/usr/bin/python3
"""bench_apps.py — the applications at their default sizes, tmk beside MPI.

Runs scripts/run_apps.py (every run verified) for tmk over UCX and for the
MPI versions, on 1, 2, 4 and 8 processes, the median of --repeat runs each,
and writes into BENCHMARKS.md between its markers: time, speed-up over one
process, the ratio to MPI's time at the same count, and the messages and
kilobytes sent beside MPI's — against the targets of the applications.

    scripts/bench_apps.py [--repeat 5] [--nprocs 1,2,4,8] [--build build] [--no-write]
"""
import argparse
import csv
import datetime
import io
import os
import subprocess
import sys

from benchmarks_md import machine_description, write_section

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SPEEDUP_TARGET = {"jacobi": 1.8, "sor": 1.8, "tsp": 1.7, "fft": 1.5}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--nprocs", default="1,2,4,8")
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--no-write", action="store_true")
    options = parser.parse_args()

    command = [sys.executable, os.path.join(ROOT, "scripts", "run_apps.py"), "--csv", "--mpi",
               "--repeat", str(options.repeat), "--nprocs", options.nprocs, "--build",
               options.build]
    done = subprocess.run(command, capture_output=True, text=True)
    sys.stderr.write(done.stderr)
    rows = list(csv.DictReader(io.StringIO(done.stdout)))
    table = {(r["app"], r["substrate"], int(r["nprocs"])): r for r in rows}
    counts = [int(n) for n in options.nprocs.split(",")]

    lines = [
        "## Applications at their default sizes, tmk beside MPI",
        "",
        "Measured %s on %s. Command: `scripts/bench_apps.py --repeat %d` "
        "(`scripts/run_apps.py --csv --mpi`): SOR 2000x1000 10 iterations, TSP 18 cities, Jacobi "
        "1022x1022 500 iterations, 3D FFT 32^3 6 iterations; seconds of the parallel section, "
        "median of %d runs, every run checked against a sequential run. The runs of an "
        "application go in rounds, each round one run of every process count of tmk and of MPI, "
        "so that a spell of a slow machine weighs on them alike. tmk runs over UCX "
        "(shared memory) with its defaults; the MPI versions under Open MPI's defaults. Messages "
        "and kilobytes are what all processes sent (tmk: TMK_STATS; MPI: counted by the program)."
        % (datetime.date.today().isoformat(), machine_description(with_ucx=False),
           options.repeat, options.repeat),
        "",
        "| app | procs | tmk s | speed-up | MPI s | MPI speed-up | tmk / MPI | tmk messages | tmk kB | MPI messages | MPI kB | checks |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    verdicts = []
    for app in ["sor", "tsp", "jacobi", "fft"]:
        for n in counts:
            t = table.get((app, "ucx", n))
            m = table.get((app, "mpi", n))
            if not t:
                continue
            ts, sp = float(t["seconds"]), float(t["speedup"])
            ms = float(m["seconds"]) if m else float("nan")
            msp = float(m["speedup"]) if m else float("nan")
            lines.append("| %s | %d | %.4f | %.2f | %.4f | %.2f | %.2f | %s | %s | %s | %s | %s |" % (
                app, n, ts, sp, ms, msp, ts / ms if m else float("nan"), t["messages"], t["kbytes"],
                m["messages"] if m else "-", m["kbytes"] if m else "-",
                "passed" if t["verified"] == "yes" and (not m or m["verified"] == "yes") else "FAILED"))
        two = table.get((app, "ucx", 2))
        eight = table.get((app, "ucx", 8))
        if not two:
            continue
        # The MPI target holds at every process count, not only at 2.
        against_mpi = []
        for n in counts:
            t, m = table.get((app, "ucx", n)), table.get((app, "mpi", n))
            if t and m:
                ratio = float(t["seconds"]) / float(m["seconds"])
                against_mpi.append("%d: %.2fx%s" % (n, ratio, "" if ratio <= 1.25 else " (beyond)"))
        speedup = float(two["speedup"])
        verdict = "- %s: speed-up at 2 processes %.2f (target %.1f: %s); time over MPI's at %s (target 1.25)" % (
            app, speedup, SPEEDUP_TARGET[app], "met" if speedup >= SPEEDUP_TARGET[app] else "not met",
            ", ".join(against_mpi) if against_mpi else "no MPI run")
        if eight:
            slowdown = float(eight["seconds"]) / float(two["seconds"])
            verdict += "; 8 processes / 2 processes %.2f (target 1.5: %s)" % (
                slowdown, "met" if slowdown <= 1.5 else "not met")
        verdicts.append(verdict + ".")
    lines += ["", "Against the targets:", ""] + verdicts
    section = "\n".join(lines) + "\n"
    print(section)
    if options.no_write:
        return
    print("wrote", write_section("apps", section), file=sys.stderr)


if __name__ == "__main__":
    main()
