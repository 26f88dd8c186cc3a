#!/usr/bin/python3
"""bench_micro.py — the FAST/GM paper's evaluation (section 3) redone for tmk:
UCX against kernel sockets.

Runs, in ROUNDS rounds, every TreadMarks microbenchmark (barrier on several
process counts, lock direct and indirect, page, diff small and large; page
and diff also with TMK_PREFETCH_PAGES=1, one fault per page as in
TreadMarks) on both substrates (TMK_SUBSTRATE=ucx, sockets) and both
notification modes (TMK_NOTIFY=interrupt, poll), every variant once per
round one after the other, and takes the median over the rounds; then
the floor a page fault leaves of the factors (microbench/platform's fault
cases beside the round trip of each substrate); then diff_bench (diff
creation and application beside memcpy); then the
applications at the paper's sizes on 1 to 8 processes over both substrates,
through scripts/run_apps.py.  Writes a section of BENCHMARKS.md between
<!-- micro:begin --> and <!-- micro:end --> (inserted or replaced), and the
paper's Figures 3, 4 and 5 redone as PNGs in docs/figures/.

    scripts/bench_micro.py [--quick] [--rounds 5] [--skip-micro] [--skip-gbench]
                           [--skip-apps] [--apps sor,jacobi,tsp,fft] [--nprocs 1,2,4,8]
                           [--app-rounds 3] [--build build] [--output BENCHMARKS.md]
                           [--figures docs/figures] [--no-write]

--quick: one round, short runs, barriers on 2 and 4 processes, each
application at its two smallest sizes on 1 and 2 processes: a minute or two.
Every figure is skewed by other work on the machine: run it idle (the
section records the load average before and after).
"""
import argparse
import datetime
import json
import os
import shlex
import statistics
import subprocess
import sys
import time

from bench_substrate import pingpong
from benchmarks_md import machine_description, write_section

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

SUBSTRATES = ["ucx", "sockets"]
NOTIFY_MODES = ["interrupt", "poll"]
VARIANTS = [(substrate, notify) for substrate in SUBSTRATES for notify in NOTIFY_MODES]
SUBSTRATE_COLOURS = {"ucx": "#1f5fa8", "sockets": "#c0392b"}

# The FAST/GM paper's factors of improvement over UDP/GM (section 3.2):
# UDP/GM time / FAST/GM time.
PAPER_FACTORS = {"barrier": 1.5, "lock direct": 3.36, "lock indirect": 3.85, "page": 6.0,
                 "diff": 3.8}

# The paper's application sizes (Table 1), as each program's options; the
# second element is the label.  The default size of Figure 4 is marked.
APP_SIZES = {
    "sor": [("-m 2000 -n %d" % z, "2000x%d" % z) for z in (1000, 2000, 3000, 4000)],
    "jacobi": [("-s %d" % z, "%dx%d" % (z, z)) for z in (500, 1000, 1500, 2000)],
    "tsp": [("-f %s" % os.path.join(ROOT, "apps", "tsp-cities", "cities-%d.txt" % z),
             "%d cities" % z) for z in (16, 17, 18)],
    "fft": [("-n %d" % z, "%dx%dx%d" % (z, z, z)) for z in (8, 16, 32, 64)],
}
# Figure 4's size: the paper's defaults (SOR 2000x1000, TSP 18 cities,
# Jacobi 1022x1022 -> 1000x1000, FFT 32x32x32).
APP_DEFAULT = {"sor": 0, "jacobi": 1, "tsp": 2, "fft": 2}
APP_NAMES = {"sor": "SOR", "jacobi": "Jacobi", "tsp": "TSP", "fft": "3D FFT"}


def log(text):
    print(text, file=sys.stderr)
    sys.stderr.flush()


def median(values):
    values = [value for value in values if value == value]
    return statistics.median(values) if values else float("nan")


# ---------------------------------------------------------------- microbenchmarks

class Micro:
    """One microbenchmark row: a program, its case, its process count and
    any extra environment; key names it in tables and plots."""

    def __init__(self, key, label, program, args, nprocs, env=None, paper=None):
        self.key, self.label, self.program = key, label, program
        self.args, self.nprocs, self.env, self.paper = args, nprocs, env or {}, paper


def micro_list(options):
    quick = options.quick
    runs = ["-r", "3" if quick else "7"]
    iterations = (lambda full, short: ["-i", str(short if quick else full)])
    rows = []
    for nprocs in options.barrier_nprocs:
        # Fewer barriers where each costs more (more processes than cores).
        count = max(20, (400 if quick else 2000) // nprocs)
        rows.append(Micro("barrier %d" % nprocs, "Barrier (%d)" % nprocs, "barrier",
                          runs + ["-i", str(count)], nprocs, paper=PAPER_FACTORS["barrier"]))
    rows.append(Micro("lock direct", "Lock direct", "lock",
                      runs + iterations(1000, 200) + ["-c", "direct"], 2,
                      paper=PAPER_FACTORS["lock direct"]))
    rows.append(Micro("lock indirect", "Lock indirect", "lock",
                      runs + iterations(1000, 200) + ["-c", "indirect"], 3,
                      paper=PAPER_FACTORS["lock indirect"]))
    one = {"TMK_PREFETCH_PAGES": "1"}
    rows.append(Micro("page", "Page", "page", runs + iterations(1024, 256), 2,
                      paper=PAPER_FACTORS["page"]))
    rows.append(Micro("page one", "Page, a fault per page", "page", runs + iterations(1024, 256),
                      2, env=one, paper=PAPER_FACTORS["page"]))
    # Diff on 3 processes: the third hands the writes on to the reader, so
    # that no synchronisation carries the diffs (microbench/diff.c).
    for case in ("small", "large"):
        rows.append(Micro("diff %s" % case, "Diff %s" % case, "diff",
                          runs + iterations(1024, 256) + ["-c", case], 3,
                          paper=PAPER_FACTORS["diff"]))
        rows.append(Micro("diff %s one" % case, "Diff %s, a fault per page" % case, "diff",
                          runs + iterations(1024, 256) + ["-c", case], 3, env=one,
                          paper=PAPER_FACTORS["diff"]))
    return rows


def run_micro(build, micro, substrate, notify, timeout):
    """One run of one microbenchmark: microseconds per operation, or nan."""
    env = dict(os.environ)
    env.update(micro.env)
    env["TMK_SUBSTRATE"] = substrate
    env["TMK_NOTIFY"] = notify
    command = ([os.path.join(build, "microbench", micro.program), "--csv"] + micro.args +
               ["--", "-n", str(micro.nprocs)])
    try:
        done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=timeout)
    except subprocess.TimeoutExpired:
        log("  %s (%s, %s): timed out after %d s" % (micro.label, substrate, notify, timeout))
        return float("nan")
    if done.returncode != 0:
        log("  %s (%s, %s) failed (exit %d): %s" % (micro.label, substrate, notify,
                                                    done.returncode, done.stderr[-1500:]))
        return float("nan")
    lines = done.stdout.strip().splitlines()
    if len(lines) < 2 or lines[0] != "benchmark,case,nprocs,substrate,notify,us_per_op":
        log("  %s: unexpected output: %s" % (micro.label, done.stdout[-500:]))
        return float("nan")
    if done.stderr.strip():
        log("  %s (%s, %s): %s" % (micro.label, substrate, notify, done.stderr.strip()[-500:]))
    return float(lines[-1].split(",")[-1])


def measure_micro(options):
    rows = micro_list(options)
    samples = {(row.key, variant): [] for row in rows for variant in VARIANTS}
    for round_number in range(options.rounds):
        log("microbenchmarks: round %d of %d" % (round_number + 1, options.rounds))
        for row in rows:
            for variant in VARIANTS:
                value = run_micro(options.build, row, variant[0], variant[1], options.timeout)
                samples[(row.key, variant)].append(value)
    results = {key: median(values) for key, values in samples.items()}
    return rows, results


# What the kernel leaves of the paper's factors: a fault per page costs, with
# no message at all, what build/microbench/platform's fault cases measure,
# whatever carries the message.  Against the sockets times measured, a UCX
# side that cost only that floor and the round trip of its reply gives the
# most any work on the UCX side can show.  Per row of the table above: the
# platform case and the reply's size in bytes (a whole page; a diff of one
# word and its header; a diff of every word).
FLOORS = [("page one", "fault-fetch", 4096), ("diff small one", "fault-update", 64),
          ("diff large one", "fault-update", 4096)]


def measure_floors(options):
    """Medians over the rounds: {platform case: us} and {(substrate, size): round trip us}."""
    runs, count = ("3", "500") if options.quick else ("7", "2000")
    sizes = sorted({size for _, _, size in FLOORS})
    faults = {case: [] for _, case, _ in FLOORS}
    trips = {(substrate, size): [] for substrate in SUBSTRATES for size in sizes}
    for round_number in range(options.rounds):
        log("fault floors: round %d of %d" % (round_number + 1, options.rounds))
        for case in faults:
            done = subprocess.run([os.path.join(options.build, "microbench", "platform"), "--csv",
                                   "-c", case, "-r", runs, "-i", count],
                                  capture_output=True, text=True, timeout=options.timeout)
            lines = done.stdout.strip().splitlines()
            if done.returncode != 0 or len(lines) < 2:
                log("  platform -c %s failed (exit %d): %s" % (case, done.returncode,
                                                            done.stderr[-500:]))
                faults[case].append(float("nan"))
                continue
            faults[case].append(float(lines[-1].split(",")[-1]))
        for substrate in SUBSTRATES:
            try:
                rows = pingpong(options.build, sizes,
                                {"TMK_SUBSTRATE": substrate, "TMK_NOTIFY": "interrupt"},
                                iterations=int(count), stream=0, repeat=int(runs),
                                timeout=options.timeout)
            except (RuntimeError, subprocess.TimeoutExpired) as failed:
                log("  pingpong (%s) failed: %s" % (substrate, str(failed)[-500:]))
                rows = {}
            for size in sizes:
                trips[(substrate, size)].append(rows[size][0] if size in rows else float("nan"))
    return ({case: median(values) for case, values in faults.items()},
            {key: median(values) for key, values in trips.items()})


def floors_section(rows, micro, floors):
    faults, trips = floors
    labels = {row.key: row.label for row in rows}
    lines = [
        "A fault per page costs, with no message at all, what `build/microbench/platform "
        "-c fault-fetch` measures for a page taken in for the first time (the SIGSEGV, the "
        "page written through the file, the `mprotect` that opens it read-only, the read "
        "again) and `-c fault-update` for a page brought up to date (one word written "
        "through a second mapping instead). A fault over either substrate costs that floor "
        "and the round trip of its reply (`pingpong`, interrupt mode, timed with the floors, "
        "in as many rounds after the microbenchmarks) at least. The column \"UCX at its "
        "floor\" is the measured sockets time over that least UCX time: the ratio tmk would "
        "show if its UCX side cost nothing more, the highest any work on the UCX side can "
        "reach against these sockets figures. The "
        "column \"both at their floors\" is (sockets round trip + floor) / (UCX round "
        "trip + floor): the ratio of two runtimes that each added nothing to the kernel and "
        "the round trip.",
        "",
        "| benchmark | floor, us | reply B | ucx round trip, us | sockets round trip, us | "
        "measured sockets / ucx (interrupt) | UCX at its floor | both at their floors | "
        "paper |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for key, case, size in FLOORS:
        floor = faults[case]
        ucx, sockets = trips[("ucx", size)], trips[("sockets", size)]
        measured_sockets = micro[(key, ("sockets", "interrupt"))]
        lines.append("| %s (`%s`) | %s | %d | %s | %s | %s | %s | %s | %s |" % (
            labels[key], case, fmt(floor), size, fmt(ucx), fmt(sockets),
            fmt(ratio(measured_sockets, micro[(key, ("ucx", "interrupt"))])),
            fmt(ratio(measured_sockets, ucx + floor)), fmt(ratio(sockets + floor, ucx + floor)),
            fmt(PAPER_FACTORS["page" if key.startswith("page") else "diff"])))
    return lines


# ---------------------------------------------------------------- diff_bench

def measure_gbench(options):
    """diff_bench's medians: {name: (ns per page, diff bytes)}."""
    program = os.path.join(options.build, "microbench", "diff_bench")
    if not os.path.exists(program):
        log("diff_bench is not built (Google Benchmark missing?): skipped")
        return None
    repetitions = 3 if options.quick else 9
    min_time = 0.05 if options.quick else 0.2
    log("diff_bench: %d repetitions" % repetitions)
    done = subprocess.run([program, "--benchmark_format=json",
                           "--benchmark_repetitions=%d" % repetitions,
                           "--benchmark_report_aggregates_only=true",
                           "--benchmark_min_time=%g" % min_time],
                          capture_output=True, text=True, timeout=options.timeout)
    if done.returncode != 0:
        log("diff_bench failed: " + done.stderr[-1500:])
        return None
    scale = {"ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9}
    results = {}
    for entry in json.loads(done.stdout)["benchmarks"]:
        if entry.get("aggregate_name") != "median":
            continue
        name = entry["run_name"]
        results[name] = (entry["real_time"] * scale[entry.get("time_unit", "ns")],
                         entry.get("diff_bytes"))
    return results


# ---------------------------------------------------------------- applications

def measure_apps(options):
    """{(app, size index, substrate, nprocs): (seconds, verified)}."""
    results = {}
    samples = {}
    script = os.path.join(ROOT, "scripts", "run_apps.py")
    for round_number in range(options.app_rounds):
        for app in options.apps:
            sizes = APP_SIZES[app]
            indices = range(2) if options.quick else range(len(sizes))
            for index in indices:
                arguments, label = sizes[index]
                log("applications: round %d of %d, %s %s" % (round_number + 1,
                                                            options.app_rounds, app, label))
                # Both substrates in one call, one after the other, so that
                # they are compared minutes apart at most.
                command = [sys.executable, script, "--csv", "--apps", app,
                           "--nprocs", ",".join(str(n) for n in options.nprocs),
                           "--substrate", ",".join(SUBSTRATES), "--repeat", "1",
                           "--build", options.build, "--timeout", str(options.timeout),
                           "--args", "%s=%s" % (app, arguments)]
                done = subprocess.run(command, capture_output=True, text=True)
                if done.returncode != 0:
                    log("  run_apps.py reported a failure:\n" + done.stderr[-2000:])
                for line in done.stdout.splitlines()[1:]:
                    fields = line.split(",")
                    if len(fields) < 6:
                        continue
                    key = (app, index, fields[2], int(fields[1]))
                    samples.setdefault(key, []).append((float(fields[3]), fields[5] == "yes"))
    for key, runs in samples.items():
        results[key] = (median([run[0] for run in runs]), all(run[1] for run in runs))
    return results


# ---------------------------------------------------------------- plots

def plot_micro(rows, results, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = [row.label.replace(", a fault per page", "\n1 fault/page") for row in rows]
    width = 0.2
    colours = {("ucx", "interrupt"): "#1f5fa8", ("ucx", "poll"): "#7fa8d8",
               ("sockets", "interrupt"): "#c0392b", ("sockets", "poll"): "#e8998d"}
    figure, axes = plt.subplots(figsize=(max(10, 0.9 * len(rows) + 2), 5))
    for offset, variant in enumerate(VARIANTS):
        values = [results[(row.key, variant)] for row in rows]
        positions = [i + (offset - 1.5) * width for i in range(len(rows))]
        axes.bar(positions, values, width, label="%s, %s" % variant, color=colours[variant])
    axes.set_xticks(range(len(rows)))
    axes.set_xticklabels(labels, rotation=45, ha="right", fontsize=8)
    axes.set_yscale("log")
    axes.set_ylabel("microseconds per operation (log)")
    axes.set_title("TreadMarks microbenchmarks over tmk: UCX against kernel sockets "
                   "(FAST/GM Figure 3 redone)")
    axes.grid(axis="y", which="both", alpha=0.3)
    axes.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def plot_apps_nprocs(apps, nprocs, results, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(2, len(apps), figsize=(3.6 * len(apps), 6.5), squeeze=False)
    for column, app in enumerate(apps):
        index = APP_DEFAULT[app]
        if not any((app, index, s, n) in results for s in SUBSTRATES for n in nprocs):
            index = 0
        label = APP_SIZES[app][index][1]
        for substrate, style in (("ucx", "o-"), ("sockets", "s--")):
            counts = [n for n in nprocs if (app, index, substrate, n) in results]
            seconds = [results[(app, index, substrate, n)][0] for n in counts]
            axes[0][column].plot(counts, seconds, style, label=substrate,
                                 color=SUBSTRATE_COLOURS[substrate])
            base = results.get((app, index, substrate, 1), (float("nan"),))[0]
            axes[1][column].plot(counts, [base / value if value else float("nan")
                                          for value in seconds], style, label=substrate,
                                 color=SUBSTRATE_COLOURS[substrate])
        axes[0][column].set_title("%s %s" % (APP_NAMES[app], label), fontsize=10)
        axes[0][column].set_ylabel("seconds")
        axes[1][column].set_ylabel("speed-up over 1 process")
        for row in (0, 1):
            axes[row][column].set_xlabel("processes")
            axes[row][column].set_xticks(nprocs)
            axes[row][column].grid(alpha=0.3)
            axes[row][column].legend(fontsize=8)
        axes[1][column].plot(nprocs, [min(n, os.cpu_count() or n) for n in nprocs], ":",
                             color="grey", label="cores")
        axes[1][column].legend(fontsize=8)
    figure.suptitle("Applications against processes, UCX against kernel sockets "
                    "(FAST/GM Figure 4 redone; %d CPUs)" % (os.cpu_count() or 0))
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def plot_apps_size(apps, nprocs, results, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    most = max(nprocs)
    figure, axes = plt.subplots(1, len(apps), figsize=(3.8 * len(apps), 4), squeeze=False)
    for column, app in enumerate(apps):
        axis = axes[0][column]
        sizes = [index for index in range(len(APP_SIZES[app]))
                 if any((app, index, s, n) in results for s in SUBSTRATES for n in nprocs)]
        labels = [APP_SIZES[app][index][1] for index in sizes]
        for substrate in SUBSTRATES:
            colour = SUBSTRATE_COLOURS[substrate]
            for count, style, face in ((1, ":", "none"), (most, "-", colour)):
                values = [results.get((app, index, substrate, count), (float("nan"),))[0]
                          for index in sizes]
                axis.plot(range(len(sizes)), values, style, marker="o", color=colour,
                          markerfacecolor=face, label="%s-%d" % (substrate, count))
        axis.set_xticks(range(len(sizes)))
        axis.set_xticklabels(labels, fontsize=8, rotation=20)
        axis.set_yscale("log")
        axis.set_ylabel("seconds (log)")
        axis.set_title(APP_NAMES[app], fontsize=10)
        axis.grid(alpha=0.3, which="both")
        axis.legend(fontsize=7)
    figure.suptitle("Applications against problem size on 1 and %d processes "
                    "(FAST/GM Figure 5 redone)" % most)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


# ---------------------------------------------------------------- report

def fmt(value, digits=2):
    """digits decimals; two significant digits below 0.1."""
    if value != value:
        return "—"
    return "%.2g" % value if 0 < value < 0.1 else "%.*f" % (digits, value)


def fmt_seconds(value):
    """Four significant digits at most, never fewer than one."""
    if value != value:
        return "—"
    if value >= 1:
        return "%.2f" % value
    return "%.2g" % value if value < 0.001 else "%.4f" % value


def ratio(numerator, denominator):
    if numerator != numerator or denominator != denominator or denominator == 0:
        return float("nan")
    return numerator / denominator


def micro_section(rows, results):
    lines = [
        "Microseconds per operation, each the median over the rounds of each run's median "
        "of its timed runs (`barrier`, `lock`, `page`, `diff` in `microbench/`, "
        "`--csv`). Barrier (n): one `Tmk_barrier` on n processes; Lock: a remote "
        "`Tmk_lock_acquire` of a lock last released by its manager (direct) or by a third "
        "process (indirect); Page: a page read for the first time, fetched whole from "
        "process 0; Diff: a page brought up to date by the diff of one word (small) or of "
        "every word (large), fetched from its writer, on 3 processes (a third hands the writes "
        "on to the reader: a barrier, or a lock grant from the writer, would carry the diffs of "
        "pages the reader fetched lately, and nothing would fault). tmk fetches a faulting page and up to 15 after it in one request "
        "(`TMK_PREFETCH_PAGES`, 16 by default); the rows marked \"a fault per page\" set it to 1, one round "
        "trip per page as in TreadMarks. The paper's factor is UDP/GM time over FAST/GM time "
        "(section 3.2); ours is sockets over UCX.",
        "",
        "| benchmark | ucx, interrupt | ucx, poll | sockets, interrupt | sockets, poll | "
        "sockets / ucx (interrupt) | sockets / ucx (poll) | paper: UDP/GM / FAST/GM |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for row in rows:
        values = [results[(row.key, variant)] for variant in VARIANTS]
        lines.append("| %s | %s | %s | %s | %s | %s | %s | %s |" % (
            row.label, fmt(values[0]), fmt(values[1]), fmt(values[2]), fmt(values[3]),
            fmt(ratio(values[2], values[0])), fmt(ratio(values[3], values[1])),
            fmt(row.paper) if row.paper else ""))
    return lines


def gbench_section(gbench):
    copy = gbench.get("memcpy_page", (float("nan"), None))[0]
    lines = [
        "`diff_bench` (Google Benchmark, median of its repetitions): making the diff of one "
        "4 KiB page against its twin (`tmk::diff_create`) and applying it "
        "(`tmk::diff_apply`), with the changed words spread evenly over the page, beside "
        "`memcpy` of the page (%s ns, %s GB/s), the floor of any whole-page transfer."
        % (fmt(copy, 1), fmt(4096 / copy if copy == copy and copy else float("nan"), 1)),
        "",
        "| words changed | diff bytes | diff_create ns | / memcpy | diff_apply ns | / memcpy |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    cases = [("%d" % words, "page", words) for words in (0, 1, 64, 1024)]
    # Words changed in their low byte only: the runs carry byte masks.
    cases += [("%d, low byte only" % words, "low_bytes", words) for words in (64, 1024)]
    for label, kind, words in cases:
        create = gbench.get("diff_create_%s/changed_words:%d" % (kind, words), (float("nan"), None))
        apply_ = gbench.get("diff_apply_%s/changed_words:%d" % (kind, words), (float("nan"), None))
        size = create[1] if create[1] is not None else apply_[1]
        lines.append("| %s | %s | %s | %s | %s | %s |" % (
            label, "%d" % size if size is not None else "—", fmt(create[0], 1),
            fmt(ratio(create[0], copy)), fmt(apply_[0], 1), fmt(ratio(apply_[0], copy))))
    # One iteration of the fresh-memory cases maps and writes 1 MiB (256
    # pages), or 2 MiB (512 pages) in huge pages.
    faulted = gbench.get("fresh_page_faulted", (float("nan"), None))[0] / 256
    populated = gbench.get("fresh_page_populated", (float("nan"), None))[0] / 256
    huge = gbench.get("fresh_page_huge", (float("nan"), None))[0] / 512
    lines += [
        "",
        "Diffs are kept until a garbage collection, in memory that only grows: a fresh page "
        "faulted in at its first write costs %s us here, a page of a 1 MiB mapping populated "
        "in one call and then written %s us, a page of a 2 MiB mapping populated in huge pages "
        "%s us (`fresh_page_faulted`, `fresh_page_populated`, `fresh_page_huge`), hence "
        "`runtime/populated.h`, where diffs and twins are kept."
        % (fmt(faulted / 1e3, 2), fmt(populated / 1e3, 2), fmt(huge / 1e3, 2)),
    ]
    return lines


def apps_section(apps, nprocs, results):
    lines = [
        "Seconds (median over the rounds; `scripts/run_apps.py`, every run verified against "
        "a sequential computation), UCX / sockets, and sockets over UCX. A failed check is "
        "marked FAILED. The machine has %d CPUs: runs on more processes than CPUs "
        "time-share them." % (os.cpu_count() or 0),
        "",
        "| application | size | " + " | ".join("%d proc%s" % (n, "" if n == 1 else "s")
                                             for n in nprocs) + " |",
        "| --- | --- |" + " --- |" * len(nprocs),
    ]
    for app in apps:
        for index, (_, label) in enumerate(APP_SIZES[app]):
            cells = []
            present = False
            for n in nprocs:
                ucx = results.get((app, index, "ucx", n))
                sockets = results.get((app, index, "sockets", n))
                if ucx is None and sockets is None:
                    cells.append("")
                    continue
                present = True
                ucx = ucx or (float("nan"), False)
                sockets = sockets or (float("nan"), False)
                text = "%s / %s (%s)" % (fmt_seconds(ucx[0]), fmt_seconds(sockets[0]),
                                         fmt(ratio(sockets[0], ucx[0])))
                if not (ucx[1] and sockets[1]):
                    text += " FAILED"
                cells.append(text)
            if present:
                lines.append("| %s | %s | %s |" % (APP_NAMES[app], label, " | ".join(cells)))
    lines += ["", "Speed-up over one process on the same substrate (UCX / sockets):", "",
              "| application | size | " + " | ".join(str(n) for n in nprocs) + " |",
              "| --- | --- |" + " --- |" * len(nprocs)]
    for app in apps:
        for index, (_, label) in enumerate(APP_SIZES[app]):
            if (app, index, "ucx", 1) not in results:
                continue
            cells = []
            for n in nprocs:
                parts = []
                for substrate in SUBSTRATES:
                    base = results.get((app, index, substrate, 1), (float("nan"),))[0]
                    value = results.get((app, index, substrate, n), (float("nan"),))[0]
                    parts.append(fmt(ratio(base, value)))
                cells.append(" / ".join(parts))
            lines.append("| %s | %s | %s |" % (APP_NAMES[app], label, " | ".join(cells)))
    return lines


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help="one round of short runs, a subset of sizes and process counts")
    parser.add_argument("--rounds", type=int, help="microbenchmark rounds (default 5, quick 1)")
    parser.add_argument("--barrier-nprocs", default=None,
                        help="process counts of the barrier (default 2,4,8,16,32; quick 2,4)")
    parser.add_argument("--skip-micro", action="store_true")
    parser.add_argument("--skip-gbench", action="store_true")
    parser.add_argument("--skip-apps", action="store_true")
    parser.add_argument("--apps", default="sor,jacobi,tsp,fft")
    parser.add_argument("--nprocs", default=None,
                        help="process counts of the applications (default 1,2,4,8; quick 1,2)")
    parser.add_argument("--app-rounds", type=int,
                        help="runs of each application configuration, the median is kept "
                             "(default 3, quick 1)")
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--timeout", type=int, default=600, help="seconds allowed one run")
    parser.add_argument("--output", default=os.path.join(ROOT, "BENCHMARKS.md"))
    parser.add_argument("--figures", default=os.path.join(ROOT, "docs", "figures"))
    parser.add_argument("--no-write", action="store_true",
                        help="print the section, write neither it nor the figures")
    options = parser.parse_args()
    options.build = os.path.abspath(options.build)
    if options.rounds is None:
        options.rounds = 1 if options.quick else 5
    if options.app_rounds is None:
        options.app_rounds = 1 if options.quick else 3
    options.barrier_nprocs = [int(word) for word in (
        options.barrier_nprocs or ("2,4" if options.quick else "2,4,8,16,32")).split(",")]
    options.nprocs = [int(word) for word in (
        options.nprocs or ("1,2" if options.quick else "1,2,4,8")).split(",")]
    options.apps = [app for app in options.apps.split(",") if app]
    for app in options.apps:
        if app not in APP_SIZES:
            parser.error("unknown application %s" % app)
    if 1 not in options.nprocs:
        options.nprocs = [1] + options.nprocs

    if not options.no_write:
        # The figures come last: fail now, not after the measurements.
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            parser.error("the figures need matplotlib, which %s cannot import (Debian's "
                         "python3-matplotlib, installed by scripts/setup.sh, is for "
                         "/usr/bin/python3), or pass --no-write" % sys.executable)

    started = time.time()
    load_before = os.getloadavg()[0]
    if load_before > 0.5:
        log("note: the load average is %.2f; other work on the machine skews every figure"
            % load_before)
    command = "scripts/bench_micro.py " + " ".join(shlex.quote(word) for word in sys.argv[1:])
    rows = micro = gbench = apps = None
    floors = None
    if not options.skip_micro:
        rows, micro = measure_micro(options)
        floors = measure_floors(options)
    if not options.skip_gbench:
        gbench = measure_gbench(options)
    if not options.skip_apps:
        apps = measure_apps(options)

    figures = {}
    if not options.no_write:
        os.makedirs(options.figures, exist_ok=True)
        if micro is not None:
            figures["micro"] = os.path.join(options.figures, "micro_benchmarks.png")
            plot_micro(rows, micro, figures["micro"])
        if apps:
            figures["nprocs"] = os.path.join(options.figures, "apps_processes.png")
            plot_apps_nprocs(options.apps, options.nprocs, apps, figures["nprocs"])
            figures["size"] = os.path.join(options.figures, "apps_sizes.png")
            plot_apps_size(options.apps, options.nprocs, apps, figures["size"])
    output_dir = os.path.dirname(os.path.abspath(options.output))

    def figure_link(key, alt):
        return "![%s](%s)" % (alt, os.path.relpath(figures[key], output_dir))

    lines = [
        "## FAST/GM's evaluation redone: microbenchmarks and applications, UCX against sockets",
        "",
        "Measured %s on %s. Command: `%s` (%.1f minutes; %d round%s of microbenchmarks, every "
        "substrate and notification mode run one after the other in each round; %d of each "
        "application configuration; load average %.2f before, %.2f after). The "
        "FAST/GM paper compared TreadMarks over UDP/GM with TreadMarks over its substrate "
        "on Myrinet; here the same microbenchmarks and applications run over kernel sockets "
        "and over UCX (shared memory between processes on one host)."
        % (datetime.date.today().isoformat(), machine_description(), command.strip(),
           (time.time() - started) / 60, options.rounds, "" if options.rounds == 1 else "s",
           options.app_rounds, load_before, os.getloadavg()[0]),
        "",
    ]
    if micro is not None:
        lines += ["### Microbenchmarks (Figure 3)", ""] + micro_section(rows, micro) + [""]
        if "micro" in figures:
            lines += [figure_link("micro", "Microbenchmarks, UCX against sockets"), ""]
        lines += ["### What the kernel leaves of the factors", ""] + floors_section(
            rows, micro, floors) + [""]
    if gbench:
        lines += ["### Diffs against memcpy", ""] + gbench_section(gbench) + [""]
    if apps:
        lines += ["### Applications (Figures 4 and 5)", ""] + apps_section(
            options.apps, options.nprocs, apps) + [""]
        if "nprocs" in figures:
            lines += [figure_link("nprocs", "Application time and speed-up against processes"),
                      "", figure_link("size", "Application time against problem size"), ""]
    section = "\n".join(lines)
    print(section)
    if not options.no_write:
        write_section("micro", section, options.output)
        log("wrote %s and %s" % (options.output, ", ".join(figures.values()) or "no figures"))
    failed = (micro is not None and any(value != value for value in micro.values())) or \
             (apps is not None and any(not verified for _, verified in apps.values()))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
