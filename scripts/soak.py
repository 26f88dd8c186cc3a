#!/usr/bin/python3
"""soak.py — runs randomly chosen checked jobs for a while (opt-in; not in CI).

Each run picks a program, a process count (2 to 8: more than the cores
here) and settings: the substrate, doorbells, how long a ring is held
back, how many pages a fault brings, how soon process 0 looks for a
deadlock, a small garbage-collection threshold, for the random programs a
coherence unit of several system pages, and runs it once. The
programs check themselves: the runtime's seeded random programs against
their sequential oracle (api_worker -t stress, -t thread-stress with two
threads a process, -t causal with reads ordered by chains of locks, -t
heap-churn with blocks allocated, freed and reused by every process, -t
queues with producers and consumers waiting on condition variables, and
its lock, barrier, collection and thread scenarios), the four
applications at small sizes against their sequential runs, and the
substrate's scenarios. A run fails when it exits non-zero,
does not report that it passed, outlives --timeout (a hang), or says that
a message sent with a ring waited for it or that UCX got a receive buffer
back late. Every run is printed with the command and settings that repeat
it; the first failure stops the soak with its output unless --keep-going.

    scripts/soak.py [--minutes 30] [--seed N] [--timeout 180] [--keep-going]
                    [--build build]
"""
import argparse
import os
import random
import shlex
import signal
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CITIES = os.path.join(ROOT, "apps", "tsp-cities")
# Words on standard error that make a run fail though it passed: a sleeping
# service thread missed a ring, or a lent receive buffer went back late.
BAD_WORDS = ["waited a second for its doorbell", "was not returned to mpool"]


def pick_program(rng, build):
    """(argv, the line that says it passed, lowest process count, extra env)."""
    api = os.path.join(build, "runtime", "test", "api_worker")
    substrate = os.path.join(build, "substrate", "test", "substrate_worker")
    apps = os.path.join(build, "apps")
    kind = rng.choice(["stress", "stress", "stress", "api", "app", "app", "substrate"])
    if kind == "stress":
        seed = rng.randrange(1, 1 << 20)
        scenario = rng.choice(["stress", "stress", "thread-stress", "causal", "heap-churn", "queues"])
        env = {"TMK_GC_THRESHOLD": "16K"} if scenario != "stress" and rng.random() < 0.5 else {}
        # Coherence units of several system pages: faults, twins, diffs
        # and protections of 2 to 16 pages at once.
        if rng.random() < 0.25:
            env["TMK_PAGE_SIZE"] = rng.choice(["8192", "16384", "65536"])
        return [api, "-t", scenario, "-i", str(rng.choice([100, 200, 400])), "-x", str(seed)], \
            scenario + ": passed", 2, env
    if kind == "api":
        scenario = rng.choice(["release-acquire", "false-sharing", "byte-sharing", "barriers",
                               "conditions", "cond-order", "garbage", "garbage-locks", "copy-order", "free-reuse",
                               "lock-pushes", "lock-again", "many-intervals", "pushes-stop",
                               "merged-diffs", "shrunk-diffs", "threads", "thread-calls",
                               "sealed-twice"])
        env = {}
        argv = [api, "-t", scenario]
        if scenario == "garbage":
            argv += ["-i", "10"]
            env["TMK_GC_THRESHOLD"] = "256K"
        if scenario == "garbage-locks":
            argv += ["-i", "2000"]
            env["TMK_GC_THRESHOLD"] = "16K"
        if scenario == "shrunk-diffs":
            env["TMK_GC_THRESHOLD"] = "4M"
        if scenario in ("thread-calls", "sealed-twice") and rng.random() < 0.5:
            env["TMK_GC_THRESHOLD"] = "16K"  # collections while another thread writes
        lowest = 4 if scenario in ("copy-order", "free-reuse") else 2
        return argv, scenario + ": passed", lowest, env
    if kind == "app":
        app = rng.choice(["sor", "jacobi", "tsp", "fft"])
        if app == "sor":
            args = ["-m", str(rng.randrange(3, 400)), "-n", str(rng.randrange(3, 2100)), "-i", "4"]
        elif app == "jacobi":
            args = ["-m", str(rng.randrange(3, 400)), "-n", str(rng.randrange(3, 1100)), "-i", "6"]
        elif app == "tsp":
            args = ["-f", os.path.join(CITIES, rng.choice(["cities-8.txt", "cities-10.txt",
                                                          "cities-12.txt"]))]
        else:
            args = ["-n", str(rng.choice([4, 8, 16, 32])), "-i", str(rng.randrange(1, 5))]
        return [os.path.join(apps, app)] + args, "check: passed", 2, {}
    scenario = rng.choice(["all-pairs", "forward", "burst", "hand-back", "just-left-wait",
                           "lent", "deferred", "caller-requests", "both-threads", "crossing"])
    return [substrate, "--scenario", scenario], scenario + ": passed", 2, {}


def pick_settings(rng, nprocs):
    env = {"TMK_SUBSTRATE": rng.choice(["ucx", "ucx", "ucx", "sockets"])}
    if env["TMK_SUBSTRATE"] == "ucx":
        env["TMK_DOORBELL"] = rng.choice(["on", "on", "off"])
        env["TMK_UCX_PATH"] = rng.choice(["am", "am", "am", "tag"])
    env["TMK_RING_DELAY_US"] = str(rng.choice([0, 3, 3, 3, 50]))
    # Nudges after 1 us reach computing processes in most waits that ring.
    env["TMK_NUDGE_US"] = str(rng.choice([0, 1, 50, 50]))
    env["TMK_PREFETCH_PAGES"] = str(rng.choice([1, 16, 16, 64]))
    # Idle CPUs that poll (where the kernel's PM QoS file may be written)
    # change when a sleeping thread runs, not what it does.
    if rng.random() < 0.25:
        env["TMK_CPU_LATENCY_US"] = "0"
    # Process 0 asking every process what it waits for as often as every
    # millisecond of its waits: a deadlock reported in a job that would
    # have gone on fails the run.
    env["TMK_DEADLOCK_CHECK"] = rng.choice(["1", "1", "0.01", "0.001"])
    # A busy-polling service thread per process only where each has a core.
    if nprocs <= 2 and rng.random() < 0.2:
        env["TMK_NOTIFY"] = "poll"
    return env


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=30)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--timeout", type=float, default=180)
    parser.add_argument("--keep-going", action="store_true")
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    options = parser.parse_args()
    for needed in (os.path.join(options.build, "runtime", "test", "api_worker"),
                   os.path.join(options.build, "apps", "sor")):
        if not os.path.exists(needed):
            sys.exit("soak: %s is missing: build first (scripts/setup.sh)" % needed)
    seed = options.seed if options.seed is not None else int(time.time())
    rng = random.Random(seed)
    print("soak: seed %d, %g minutes, a run may take %g s" % (seed, options.minutes,
                                                                   options.timeout), flush=True)
    end = time.monotonic() + options.minutes * 60
    runs = failures = 0
    while time.monotonic() < end:
        argv, passed_line, lowest, program_env = pick_program(rng, options.build)
        # The runtime's messages divided to fit the smallest largest
        # message allowed (the substrate's scenarios send larger ones).
        # A message carries at least one coherence unit and its diffs.
        if "substrate_worker" not in argv[0] and rng.random() < 0.2:
            program_env["TMK_MAX_MESSAGE"] = "80K" if program_env.get("TMK_PAGE_SIZE") == "65536" else "64K"
        nprocs = rng.choice([n for n in (2, 3, 4, 5, 8) if n >= lowest])
        env = pick_settings(rng, nprocs)
        env.update(program_env)
        command = argv + ["--", "-n", str(nprocs)]
        shown = " ".join("%s=%s" % item for item in sorted(env.items())) + " " + \
            " ".join(shlex.quote(word) for word in command)
        runs += 1
        started = time.monotonic()
        child = subprocess.Popen(command, env=dict(os.environ, **env), stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True, start_new_session=True)
        try:
            out, err = child.communicate(timeout=options.timeout)
            why = []
            if child.returncode != 0:
                why.append("exit %d" % child.returncode)
            if passed_line not in out:
                why.append("no \"%s\"" % passed_line)
            why += ["said \"%s\"" % word for word in BAD_WORDS if word in err]
        except subprocess.TimeoutExpired:
            why = ["still running after %.0f s" % options.timeout]
            # The job's processes are the child's session: all of them go.
            try:
                os.killpg(child.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            out, err = child.communicate()
        took = time.monotonic() - started
        output = out[-3000:] + err[-3000:]
        print("%4d %-6s %6.1f s  %s" % (runs, "FAIL" if why else "ok", took, shown), flush=True)
        if why:
            failures += 1
            print("     FAILED (%s)\n%s" % ("; ".join(why), output), flush=True)
            if not options.keep_going:
                break
    print("soak: %d runs, %d failed (seed %d)" % (runs, failures, seed), flush=True)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
