#!/usr/bin/python3
"""bench_runtime.py — the runtime's basic costs beside the substrate's round
trip, measured in the same run.

Each round runs, one after the other: the substrate ping-pong (8 B and
4 KiB round trips, back to back), the fault microbenchmark (a page never
seen; an invalidated page with 1 and with 4 writers), lock acquire (direct
and indirect), barrier on 2 to 8 processes, and a whole job of one barrier
on 2 and 8 processes with and without the substrate's start-up warm-up.  Every figure is the median
over the rounds; the ratios divide by the round trip of the same rounds.
Then PAIRS pairs of the 8-byte round trip and a direct lock acquire, one
right after the other, for the median of the pairs' ratios.  The result
goes into BENCHMARKS.md between its markers.

    scripts/bench_runtime.py [--rounds 5] [--pairs 11] [--build build] [--no-write]
"""
import argparse
import datetime
import os
import statistics
import subprocess
import sys
import time

from benchmarks_md import machine_description, side_by_side, write_section

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run(command, env=None):
    merged = dict(os.environ)
    merged.update(env or {})
    done = subprocess.run(command, capture_output=True, text=True, env=merged, timeout=600)
    if done.returncode != 0:
        raise RuntimeError("%s failed:\n%s" % (" ".join(command), done.stderr[-2000:]))
    return done.stdout


def microbench(build, name, case, nprocs, extra=()):
    command = [os.path.join(build, "microbench", name), "--csv", "-r", "5", *extra]
    if case:
        command += ["-c", case]
    rows = run(command + ["--", "-n", str(nprocs)]).strip().splitlines()
    return float(rows[-1].split(",")[-1])


def round_trip(build):
    rows = run([os.path.join(build, "microbench", "pingpong"), "--csv", "--sizes", "8,4096",
                "--repeat", "5", "--iterations", "5000", "--stream-count", "0", "--", "-n", "2"])
    values = {}
    for line in rows.strip().splitlines()[1:]:
        size, rtt, _ = line.split(",")
        values[int(size)] = float(rtt)
    return values


def job_seconds(build, nprocs, warm_up):
    """Wall-clock seconds of a whole job that starts, passes one barrier and
    exits: what Tmk_startup and Tmk_exit cost, with TMK_WARM_UP=warm_up."""
    command = [os.path.join(build, "microbench", "barrier"), "-i", "1", "-r", "1",
               "--", "-n", str(nprocs)]
    started = time.monotonic()
    run(command, {"TMK_WARM_UP": warm_up})
    return time.monotonic() - started


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--pairs", type=int, default=11)
    parser.add_argument("--no-write", action="store_true")
    options = parser.parse_args()
    if options.rounds < 1 or options.pairs < 1:
        parser.error("--rounds and --pairs take a number from 1 up")

    cases = [
        ("fault, a page never seen (whole from process 0)", "fault", "cold", 2),
        ("fault, invalidated page, 1 writer", "fault", "writers-1", 3),
        ("fault, invalidated page, 4 writers", "fault", "writers-4", 6),
        ("lock acquire, direct (from the manager)", "lock", "direct", 2),
        ("lock acquire, indirect (via the manager)", "lock", "indirect", 3),
    ] + [("barrier, %d processes" % n, "barrier", None, n) for n in (2, 3, 4, 6, 8)]
    figures = {label: [] for label, *_ in cases}
    startups = [(nprocs, warm_up) for nprocs in (2, 8) for warm_up in ("1M", "0")]
    startup_seconds = {key: [] for key in startups}
    rtt8, rtt4k = [], []
    for round_number in range(options.rounds):
        print("round %d of %d" % (round_number + 1, options.rounds), file=sys.stderr)
        trip = round_trip(options.build)
        rtt8.append(trip[8])
        rtt4k.append(trip[4096])
        for label, name, case, nprocs in cases:
            figures[label].append(microbench(options.build, name, case, nprocs))
        for nprocs, warm_up in startups:
            startup_seconds[(nprocs, warm_up)].append(job_seconds(options.build, nprocs, warm_up))

    # Lock direct against the round trip in pairs, one right after the
    # other, the order turned each time: the host's speed changes from one
    # run to the next (BENCHMARKS.md, the substrate's notes of 2026-12-03),
    # and a round's figures, seconds apart, compare two speeds.
    paired = []
    for pair in range(options.pairs):
        print("pair %d of %d" % (pair + 1, options.pairs), file=sys.stderr)
        paired.append(side_by_side(lambda: round_trip(options.build)[8],
                                   lambda: microbench(options.build, "lock", "direct", 2), pair))

    rtt = statistics.median(rtt8)
    lines = [
        "## Runtime: faults, locks and barriers beside the substrate round trip",
        "",
        "Measured %s on %s, UCX active messages, interrupt mode. "
        "Command: `scripts/bench_runtime.py --rounds %d --pairs %d`: each round runs the substrate "
        "ping-pong, then every case below (microbench programs, each the median of 5 runs); the "
        "figures are medians over the rounds, the ratios divide by the round trip of the same "
        "rounds; the paired row comes after the rounds. "
        "With more processes than the %d cores, a waiting process yields its core between looks at its replies for `TMK_WAIT_SPIN_US` before it blocks, and a hop to a process that is not running waits for the scheduler."
        % (datetime.date.today().isoformat(), machine_description(with_ucx=False), options.rounds,
           options.pairs, os.cpu_count()),
        "",
        "Substrate round trip: %.3f us at 8 B, %.3f us at 4 KiB." % (rtt, statistics.median(rtt4k)),
        "",
        "| operation | processes | us | / 8 B round trip |",
        "| --- | --- | --- | --- |",
    ]
    for label, name, case, nprocs in cases:
        value = statistics.median(figures[label])
        lines.append("| %s | %d | %.2f | %.1f |" % (label, nprocs, value, value / rtt))
    lines.append(
        "| lock acquire, direct, paired with the 8 B round trip (%d pairs, each one right after "
        "the other; the lock's median, the median of the pairs' ratios) | 2 | %.2f | %.2f |"
        % (len(paired), statistics.median(acquire for _, acquire in paired),
           statistics.median(acquire / trip for trip, acquire in paired)))
    lines += [
        "",
        "Start-up: wall-clock seconds of a whole job that starts, passes one barrier and exits "
        "(`barrier -i 1 -r 1`), with the substrate's start-up warm-up (`TMK_WARM_UP`, 1M by "
        "default: 16 KiB on every channel between every two processes, 80 messages of 8 KiB "
        "from each channel of every process to each channel of every other to fill UCX's "
        "shared-memory receive segments, and each size of message up to 1 MiB to the next "
        "process and back) and without it (`TMK_WARM_UP=0`), "
        "medians over the rounds.",
        "",
        "| processes | TMK_WARM_UP=1M s | TMK_WARM_UP=0 s | difference s |",
        "| --- | --- | --- | --- |",
    ]
    for nprocs in (2, 8):
        warm = statistics.median(startup_seconds[(nprocs, "1M")])
        cold = statistics.median(startup_seconds[(nprocs, "0")])
        lines.append("| %d | %.3f | %.3f | %.3f |" % (nprocs, warm, cold, warm - cold))
    section = "\n".join(lines) + "\n"
    print(section)
    if options.no_write:
        return
    print("wrote", write_section("runtime", section), file=sys.stderr)


if __name__ == "__main__":
    main()
