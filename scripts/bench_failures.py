#!/usr/bin/python3
"""bench_failures.py — how a job ends when one of its processes is lost.

Runs runtime/test/api_worker's loss scenarios (a process killed while
another waits for the lock it holds, killed while the others wait at a
barrier, killed before the others fetch the pages it wrote, stopped with
SIGSTOP, process 0 killed, and a process killed instead of signalling the
condition another waits on) on both substrates, and records for each:
the processes, what was under way, the fault injected, the time from the
injection to the end of the whole job (every survivor has reported the loss
and exited, no process left behind), and whether any process claimed a
result after the loss (data lost or corrupted).  Writes BENCHMARKS.md
between its markers.

    scripts/bench_failures.py [--rounds 3] [--build build] [--no-write]
"""
import argparse
import datetime
import os
import re
import statistics
import subprocess
import sys
import time

from benchmarks_md import machine_description, write_section

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

SCENARIOS = [
    ("die-holding-lock", 3, "SIGKILL", "process 2 waits in Tmk_lock_acquire for the lock process 1 holds"),
    ("die-in-barrier", 3, "SIGKILL", "processes 0-1 wait at a barrier"),
    ("die-in-barrier", 8, "SIGKILL", "processes 0-6 wait at a barrier"),
    ("die-before-fetch", 3, "SIGKILL", "the others fetch the pages process 1 wrote"),
    ("stop-in-barrier", 3, "SIGSTOP", "processes 0-1 wait at a barrier (TMK_PEER_TIMEOUT=2)"),
    ("die-rank0", 3, "SIGKILL", "processes 1-2 wait at a barrier"),
    ("die-in-cond-wait", 3, "SIGKILL",
     "process 0 waits in Tmk_lock_cond_wait for the signal process 2 would send"),
]


def run_once(build, scenario, nprocs, substrate):
    env = dict(os.environ, TMK_SUBSTRATE=substrate, TMK_PEER_TIMEOUT="2")
    command = [os.path.join(build, "runtime", "test", "api_worker"), "-t", scenario, "--", "-n",
               str(nprocs)]
    job = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           env=env, start_new_session=True)
    out, err = job.communicate(timeout=60)
    # The job has ended when no process of its group is left (process 0 may
    # be the one that went first); this script is their subreaper, so that
    # exited ones do not linger as zombies.
    while True:
        try:
            while os.waitpid(-1, os.WNOHANG)[0] > 0:
                pass
        except ChildProcessError:
            pass
        try:
            os.killpg(job.pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.001)
    ended = time.time()
    done = subprocess.CompletedProcess(command, job.returncode, out, err)
    injected = re.search(r"injecting signal \d+ at ([0-9.]+)", done.stderr)
    detect = ended - float(injected.group(1)) if injected else float("nan")
    reported = len(set(re.findall(r"tmk\[(\d+)\]: lost process", done.stderr)))
    claimed = "went on after the loss" in done.stderr or "passed" in done.stdout
    return detect, reported, done.returncode != 0, claimed


def become_subreaper():
    """Orphaned processes of a job (process 0 killed first) are reparented
    here, not to init, so that their exit is seen at once."""
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    PR_SET_CHILD_SUBREAPER = 36
    libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def main():
    become_subreaper()
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--no-write", action="store_true")
    options = parser.parse_args()

    rows = []
    for scenario, nprocs, signal, doing in SCENARIOS:
        for substrate in ("ucx", "sockets"):
            results = [run_once(options.build, scenario, nprocs, substrate)
                       for _ in range(options.rounds)]
            rows.append((scenario, nprocs, substrate, signal, doing,
                         statistics.median(r[0] for r in results),
                         min(r[1] for r in results), all(r[2] for r in results),
                         any(r[3] for r in results)))
            print(rows[-1], file=sys.stderr)

    lines = [
        "## Failures: a process lost in the middle of a job",
        "",
        "Measured %s on %s. Command: `scripts/bench_failures.py --rounds %d` "
        "(the scenarios of `runtime/test/api_worker`, each run %d times; the time is the median "
        "from the moment the victim sends itself the signal to the end of the whole job: every "
        "survivor has named the lost process and exited non-zero; the tests `api_loss.*` check the "
        "same with a 10 s bound and that no process is left behind)."
        % (datetime.date.today().isoformat(), machine_description(with_ucx=False),
           options.rounds, options.rounds),
        "",
        "| scenario | processes | substrate | fault injected | under way | job ended after (s) | survivors reporting the loss | non-zero exit | result claimed after the loss |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for scenario, nprocs, substrate, signal, doing, detect, reported, failed, claimed in rows:
        lines.append("| %s | %d | %s | %s | %s | %.2f | %d of %d | %s | %s |" % (
            scenario, nprocs, substrate, signal, doing, detect, reported, nprocs - 1,
            "yes" if failed else "NO", "YES" if claimed else "none"))
    section = "\n".join(lines) + "\n"
    print(section)
    if options.no_write:
        return
    print("wrote", write_section("failures", section), file=sys.stderr)


if __name__ == "__main__":
    main()
