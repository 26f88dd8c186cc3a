#!/usr/bin/python3
"""run_apps.py — runs the applications on several process counts, verified,
and prints a table: application, processes, seconds (median of --repeat
runs, taken in rounds over each application's configurations), speed-up
over 1 process, check, messages and kilobytes sent (every process's, from
TMK_STATS).

    scripts/run_apps.py [--apps sor,tsp,jacobi,fft] [--nprocs 1,2,4]
                        [--repeat 1] [--substrate ucx] [--csv] [--mpi]
                        [--args 'sor=-m 2000 -n 2000'] [--build build]

With --csv the rows come under the header
app,nprocs,substrate,seconds,speedup,verified,messages,kbytes.
With --mpi the MPI versions run too (substrate column "mpi").
Exits non-zero if any run fails its check.
"""
import argparse
import json
import os
import re
import shlex
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
APPS = ["sor", "tsp", "jacobi", "fft"]


def run_once(build, app, nprocs, substrate, extra, timeout):
    """One run: (seconds, verified, messages, kbytes, output)."""
    env = dict(os.environ)
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as stats:
        stats_path = stats.name
    if substrate == "mpi":
        command = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", str(nprocs),
                   os.path.join(build, "apps", app + "_mpi")] + extra
    else:
        env["TMK_SUBSTRATE"] = substrate
        env["TMK_STATS"] = stats_path
        command = [os.path.join(build, "apps", app)] + extra + ["--", "-n", str(nprocs)]
    try:
        done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=timeout)
        output = done.stdout + done.stderr
        code = done.returncode
    except subprocess.TimeoutExpired as expired:
        output = "timed out after %d s\n%s" % (timeout, expired.stdout or "")
        code = -1
    seconds = float("nan")
    match = re.search(r"^time: ([0-9.]+) s", output, re.M)
    if match:
        seconds = float(match.group(1))
    verified = code == 0 and "check: passed" in output
    messages = kbytes = 0.0
    if substrate == "mpi":
        traffic = re.search(r"^traffic: (\d+) messages, ([0-9.]+) kB", output, re.M)
        if traffic:
            messages, kbytes = float(traffic.group(1)), float(traffic.group(2))
    else:
        try:
            with open(stats_path) as handle:
                processes = json.load(handle)["processes"]
            messages = sum(p["messages"] for p in processes if p)
            kbytes = sum(p["bytes"] for p in processes if p) / 1000.0
        except (OSError, ValueError, KeyError, TypeError):
            pass
    os.unlink(stats_path)
    return seconds, verified, messages, kbytes, output


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--apps", default=",".join(APPS))
    parser.add_argument("--nprocs", default="1,2,4")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--substrate", default="ucx", help="ucx, sockets, or a comma list")
    parser.add_argument("--mpi", action="store_true", help="also run the MPI versions")
    parser.add_argument("--csv", action="store_true")
    parser.add_argument("--args", action="append", default=[],
                        help="APP=OPTIONS, e.g. 'sor=-m 2000 -n 2000'")
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--timeout", type=int, default=600)
    options = parser.parse_args()

    extra = {app: [] for app in APPS}
    for item in options.args:
        app, _, words = item.partition("=")
        extra[app] = shlex.split(words)
    apps = options.apps.split(",")
    counts = [int(word) for word in options.nprocs.split(",")]
    substrates = options.substrate.split(",") + (["mpi"] if options.mpi else [])

    if options.csv:
        print("app,nprocs,substrate,seconds,speedup,verified,messages,kbytes")
    else:
        print("%-7s %-8s %6s %10s %9s %-7s %10s %12s" % (
            "app", "substrate", "procs", "seconds", "speed-up", "check", "messages", "kB sent"))
    failed = False
    for app in apps:
        # The repeats go round every configuration of the application in
        # turn, so that each median samples the same stretch of the
        # machine's time: here a sequential run takes 12 ms or 20 ms from
        # one run to the next, in spells, for MPI's programs as for tmk's.
        configurations = [(substrate, nprocs) for substrate in substrates for nprocs in counts]
        all_runs = {configuration: [] for configuration in configurations}
        for _ in range(options.repeat):
            for substrate, nprocs in configurations:
                all_runs[(substrate, nprocs)].append(
                    run_once(options.build, app, nprocs, substrate, extra.get(app, []),
                             options.timeout))
        for substrate in substrates:
            base = None
            for nprocs in counts:
                runs = all_runs[(substrate, nprocs)]
                seconds = statistics.median(run[0] for run in runs)
                verified = all(run[1] for run in runs)
                messages = statistics.median(run[2] for run in runs)
                kbytes = statistics.median(run[3] for run in runs)
                if not verified:
                    failed = True
                    bad = [run for run in runs if not run[1]][0]
                    sys.stderr.write("%s on %d processes (%s) failed:\n%s\n" % (
                        app, nprocs, substrate, bad[4][-2000:]))
                if nprocs == 1:
                    base = seconds
                speedup = base / seconds if base and seconds == seconds and seconds > 0 else float("nan")
                if options.csv:
                    print("%s,%d,%s,%.6f,%.3f,%s,%d,%.1f" % (
                        app, nprocs, substrate, seconds, speedup, "yes" if verified else "no",
                        messages, kbytes))
                else:
                    print("%-7s %-8s %6d %10.4f %9.2f %-7s %10d %12.1f" % (
                        app, substrate, nprocs, seconds, speedup,
                        "passed" if verified else "FAILED", messages, kbytes))
                sys.stdout.flush()
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
