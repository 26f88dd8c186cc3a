#!/usr/bin/python3
"""bench_substrate.py — the substrate ping-pong beside ucx_perftest, in one run.

Runs, alternately and ROUNDS times each, ucx_perftest (ucp_am_lat, tag_lat,
ucp_am_bw, and ucp_am_lat in sleep/wakeup mode) and tmk's pingpong (UCX
active messages and preposted tags, both notification modes, back to back
and with requests spaced so that the service thread sleeps, and the kernel
sockets backend), takes the median of each figure over the rounds; then
PAIRS pairs of ucp_am_lat and tmk's pingpong at 8 B and 4 KiB, one right
after the other, for the median of the pairs' ratios; and writes the
comparison into BENCHMARKS.md between its markers.

    scripts/bench_substrate.py [--rounds 5] [--pairs 11] [--build build] [--no-write]
"""
import argparse
import datetime
import os
import socket
import statistics
import struct
import subprocess
import sys
import time

from benchmarks_md import machine_description, side_by_side, write_section

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


# Both processes of a run on the first CPU: a wake-up is then a switch on
# that CPU, never an idle CPU's (see one_cpu in main).
ONE_CPU = ["taskset", "-c", "0"]


def perftest(test, size, iterations, extra=(), prefix=()):
    """Returns (round trip us, bandwidth MB/s [1e6 bytes]) of one ucx_perftest run."""
    port = str(free_port())
    server = subprocess.Popen([*prefix, "ucx_perftest", "-p", port], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    try:
        for attempt in range(50):
            time.sleep(0.1)
            client = subprocess.run(
                [*prefix, "ucx_perftest", "-p", port, "localhost", "-t", test, "-s", str(size),
                 "-n", str(iterations), *extra],
                capture_output=True, text=True, timeout=120)
            if client.returncode == 0:
                break
        else:
            raise RuntimeError("ucx_perftest %s failed: %s" % (test, client.stderr))
    finally:
        server.wait(timeout=60)
    final = [line for line in client.stdout.splitlines() if line.startswith("Final:")][-1]
    fields = final.split()
    # Final: iterations, latency typical/average/overall (us, one way),
    # bandwidth average/overall (MiB/s), message rate average/overall.
    one_way = float(fields[4])
    bandwidth = float(fields[6]) * 1.048576
    return 2 * one_way, bandwidth


def pingpong(build, sizes, env_overrides, gap_us=0, iterations=5000, stream=2000, prefix=(),
             repeat=5, timeout=600):
    env = dict(os.environ)
    env.update(env_overrides)
    command = [*prefix, os.path.join(build, "microbench", "pingpong"), "--csv", "--sizes",
               ",".join(str(size) for size in sizes), "--repeat", str(repeat), "--iterations",
               str(iterations), "--stream-count", str(stream)]
    if gap_us:
        command += ["--gap-us", str(gap_us)]
    done = subprocess.run(command + ["--", "-n", "2"], capture_output=True, text=True, env=env,
                          timeout=timeout)
    if done.returncode != 0:
        raise RuntimeError("pingpong failed: " + done.stderr)
    rows = {}
    for line in done.stdout.splitlines()[1:]:
        size, rtt, bandwidth = line.split(",")
        rows[int(size)] = (float(rtt), float(bandwidth))
    return rows


def halt_polling():
    """How the guest idles its CPUs, as the kernel reports it."""
    try:
        with open("/sys/module/haltpoll/parameters/guest_halt_poll_ns") as limit:
            ns = int(limit.read())
    except (OSError, ValueError):
        return "the guest's idle driver not reported"
    if ns == 0:
        return "the guest polls for no time before it halts: guest_halt_poll_ns 0"
    return "after the guest's halt-polling window, up to %d ns" % ns


def hold_cpu_latency(us):
    """Asks this host's idle CPUs to wake within us microseconds, as
    TMK_CPU_LATENCY_US does, for as long as the returned file stays open;
    None where the kernel's PM QoS file cannot be written (not root)."""
    try:
        held = open("/dev/cpu_dma_latency", "wb", buffering=0)
        held.write(struct.pack("i", us))
        return held
    except OSError:
        return None


def median(values):
    return statistics.median(values) if values else float("nan")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--gap-us", type=int, default=100)
    parser.add_argument("--pairs", type=int, default=11)
    parser.add_argument("--no-write", action="store_true")
    options = parser.parse_args()
    if options.rounds < 1 or options.pairs < 1:
        parser.error("--rounds and --pairs take a number from 1 up")

    sizes = [8, 64, 256, 1024, 4096, 8192, 16384, 32768]
    variants = {
        "am, interrupt": {"TMK_SUBSTRATE": "ucx", "TMK_UCX_PATH": "am", "TMK_NOTIFY": "interrupt"},
        "am, interrupt, UCX wake-up": {"TMK_SUBSTRATE": "ucx", "TMK_UCX_PATH": "am",
                                       "TMK_NOTIFY": "interrupt", "TMK_DOORBELL": "off"},
        "am, poll": {"TMK_SUBSTRATE": "ucx", "TMK_UCX_PATH": "am", "TMK_NOTIFY": "poll"},
        "tag, interrupt": {"TMK_SUBSTRATE": "ucx", "TMK_UCX_PATH": "tag", "TMK_NOTIFY": "interrupt"},
        "tag, poll": {"TMK_SUBSTRATE": "ucx", "TMK_UCX_PATH": "tag", "TMK_NOTIFY": "poll"},
        "sockets, interrupt": {"TMK_SUBSTRATE": "sockets", "TMK_NOTIFY": "interrupt"},
    }
    raw = {key: [] for key in ("am_lat 8", "am_lat 4096", "am_lat 32768", "tag_lat 8",
                               "tag_lat 4096", "am_bw 32768", "sleep 8")}
    ours = {name: {size: ([], []) for size in sizes} for name in variants}
    gapped = {name: {size: [] for size in (8, 4096)}
              for name in ("am, interrupt", "am, interrupt, UCX wake-up", "tag, interrupt", "am, poll")}
    # The regime of ucx_perftest -E sleep: the server has just gone to sleep
    # (1 us spin, requests 3 us apart), so its CPU has not halted yet.
    just_asleep = []
    just_asleep_armed = []
    # ucx_perftest -E sleep's two processes, left to the scheduler, mostly
    # share a CPU, each wake-up a switch there, as the writer of each
    # message sleeps right after it (seen with sched_switch events).  A
    # doorbell wakes the service thread on its own CPU, idle and halted,
    # while the client spins for the reply on its own.  Both tools with
    # both processes on one CPU compare the wake-ups alone.
    one_cpu = {"sleep": [], "doorbell": [], "UCX wake-up": []}
    # With TMK_CPU_LATENCY_US=0 idle CPUs poll instead of halting, and a
    # sleeping service thread wakes at once; ucx_perftest -E sleep is run
    # with the same request held, beside its runs without.
    polling = {"sleep": [], "just asleep": [], "idle": []}
    probe = hold_cpu_latency(0)
    can_poll = probe is not None
    if probe is not None:
        probe.close()

    for round_number in range(options.rounds):
        print("round %d of %d" % (round_number + 1, options.rounds), file=sys.stderr)
        raw["am_lat 8"].append(perftest("ucp_am_lat", 8, 100000)[0])
        raw["am_lat 4096"].append(perftest("ucp_am_lat", 4096, 100000)[0])
        raw["am_lat 32768"].append(perftest("ucp_am_lat", 32768, 20000)[0])
        raw["tag_lat 8"].append(perftest("tag_lat", 8, 100000)[0])
        raw["tag_lat 4096"].append(perftest("tag_lat", 4096, 100000)[0])
        raw["am_bw 32768"].append(perftest("ucp_am_bw", 32768, 20000)[1])
        raw["sleep 8"].append(perftest("ucp_am_lat", 8, 20000, ["-E", "sleep"])[0])
        for name, env in variants.items():
            rows = pingpong(options.build, sizes, env)
            for size in sizes:
                ours[name][size][0].append(rows[size][0])
                ours[name][size][1].append(rows[size][1])
        for name in gapped:
            rows = pingpong(options.build, [8, 4096], variants[name], gap_us=options.gap_us,
                            iterations=1000, stream=0)
            for size in (8, 4096):
                gapped[name][size].append(rows[size][0])
        short_spin = dict(variants["am, interrupt"], TMK_SERVICE_SPIN_US="1")
        just_asleep.append(pingpong(options.build, [8], short_spin, gap_us=3, iterations=2000,
                                    stream=0)[8][0])
        just_asleep_armed.append(pingpong(options.build, [8], dict(short_spin, TMK_DOORBELL="off"),
                                          gap_us=3, iterations=2000, stream=0)[8][0])
        one_cpu["sleep"].append(perftest("ucp_am_lat", 8, 20000, ["-E", "sleep"], ONE_CPU)[0])
        one_cpu["doorbell"].append(pingpong(options.build, [8], short_spin, gap_us=3,
                                            iterations=2000, stream=0, prefix=ONE_CPU)[8][0])
        one_cpu["UCX wake-up"].append(pingpong(options.build, [8], dict(short_spin, TMK_DOORBELL="off"),
                                               gap_us=3, iterations=2000, stream=0,
                                               prefix=ONE_CPU)[8][0])
        if can_poll:
            held = hold_cpu_latency(0)
            polling["sleep"].append(perftest("ucp_am_lat", 8, 20000, ["-E", "sleep"])[0])
            held.close()
            polling["just asleep"].append(pingpong(options.build, [8], dict(short_spin, TMK_CPU_LATENCY_US="0"),
                                                   gap_us=3, iterations=2000, stream=0)[8][0])
            polling["idle"].append(pingpong(options.build, [8],
                                            dict(variants["am, interrupt"], TMK_CPU_LATENCY_US="0"),
                                            gap_us=options.gap_us, iterations=1000, stream=0)[8][0])

    # The targets' round trips again in pairs, ucx_perftest and tmk's
    # pingpong one right after the other, the order turned each time: the
    # host's speed changes from one run to the next (the 8-byte round trip
    # of either tool 0.2 to 1.7 us within a minute on the machine of
    # BENCHMARKS.md, 2026-12-03), and figures of runs apart compare two
    # speeds.  The median of the pairs' ratios.
    paired = {8: [], 4096: []}
    for pair in range(options.pairs):
        print("pair %d of %d" % (pair + 1, options.pairs), file=sys.stderr)
        for size in paired:
            paired[size].append(side_by_side(
                lambda: perftest("ucp_am_lat", size, 50000)[0],
                lambda: pingpong(options.build, [size], variants["am, interrupt"], iterations=5000,
                                 stream=0)[size][0],
                pair))

    def paired_row(size, label):
        theirs = median([pair[0] for pair in paired[size]])
        ours = median([pair[1] for pair in paired[size]])
        ratio = median([pair[1] / pair[0] for pair in paired[size]])
        return ("| round trip %s, paired (ucp_am_lat; tmk am, interrupt; %d pairs) | %.3f | %.3f | "
                "%.2f | <= 1.10 |" % (label, len(paired[size]), theirs, ours, ratio))

    floor = {key: median(values) for key, values in raw.items()}
    rtt = {name: {size: median(ours[name][size][0]) for size in sizes} for name in variants}
    bandwidth = {name: {size: median(ours[name][size][1]) for size in sizes} for name in variants}
    asleep = {name: {size: median(gapped[name][size]) for size in (8, 4096)} for name in gapped}

    am = rtt["am, interrupt"]
    shared = {name: median(values) for name, values in one_cpu.items()}
    polled = {name: median(values) for name, values in polling.items()}
    today = datetime.date.today().isoformat()
    lines = [
        "## Substrate: ping-pong beside ucx_perftest",
        "",
        "Measured %s on %s, two processes on one host through UCX's shared memory "
        "(posix/sysv, cma: ucx_perftest's default selection, which sends over sysv; tmk's "
        "forked processes open sysv, cma and self alone, and wake a sleeping service thread "
        "by doorbell unless `TMK_DOORBELL=off`, "
        "\"UCX wake-up\" below, which arms UCX's event fd instead). "
        "Command: `scripts/bench_substrate.py --rounds %d --pairs %d` — every figure is the median "
        "of %d rounds; in each round ucx_perftest and tmk's pingpong run one after the other, so "
        "ratios compare runs minutes apart at most; the rows marked paired come after the rounds: "
        "ucp_am_lat and tmk's pingpong one right after the other, the order turned each time, each "
        "tool's median and the median of the pairs' ratios (the host's speed changes from one run "
        "to the next). Round trips in microseconds (ucx_perftest's one-way latency doubled), "
        "bandwidth in MB/s (10^6 bytes)."
        % (today, machine_description(), options.rounds, options.pairs, options.rounds),
        "",
        "| measure | ucx_perftest | tmk | tmk / ucx_perftest | target |",
        "| --- | --- | --- | --- | --- |",
        paired_row(8, "8 B"),
        paired_row(4096, "4 KiB"),
        "| round trip 8 B (ucp_am_lat; tmk am, interrupt) | %.3f | %.3f | %.2f | |"
        % (floor["am_lat 8"], am[8], am[8] / floor["am_lat 8"]),
        "| round trip 4 KiB (ucp_am_lat; tmk am, interrupt) | %.3f | %.3f | %.2f | |"
        % (floor["am_lat 4096"], am[4096], am[4096] / floor["am_lat 4096"]),
        "| round trip 32 KiB (ucp_am_lat; tmk am, interrupt) | %.3f | %.3f | %.2f | |"
        % (floor["am_lat 32768"], am[32768], am[32768] / floor["am_lat 32768"]),
        "| round trip 8 B (tag_lat; tmk tag, interrupt) | %.3f | %.3f | %.2f | |"
        % (floor["tag_lat 8"], rtt["tag, interrupt"][8], rtt["tag, interrupt"][8] / floor["tag_lat 8"]),
        "| round trip 4 KiB (tag_lat; tmk tag, interrupt) | %.3f | %.3f | %.2f | |"
        % (floor["tag_lat 4096"], rtt["tag, interrupt"][4096],
           rtt["tag, interrupt"][4096] / floor["tag_lat 4096"]),
        "| 32 KiB stream (ucp_am_bw; tmk am, interrupt) | %.0f | %.0f | %.2f | >= 0.95 |"
        % (floor["am_bw 32768"], bandwidth["am, interrupt"][32768],
           bandwidth["am, interrupt"][32768] / floor["am_bw 32768"]),
        "| round trip 8 B, server just asleep (ucp_am_lat -E sleep; tmk am, TMK_SERVICE_SPIN_US=1, requests 3 us apart) | %.3f | %.3f | %.2f | <= 1.5 |"
        % (floor["sleep 8"], median(just_asleep), median(just_asleep) / floor["sleep 8"]),
        "| the same with UCX's wake-up (TMK_DOORBELL=off) | %.3f | %.3f | %.2f | |"
        % (floor["sleep 8"], median(just_asleep_armed), median(just_asleep_armed) / floor["sleep 8"]),
        "| the same, both processes on one CPU (`taskset -c 0` for both tools) | %.3f | %.3f | %.2f | |"
        % (shared["sleep"], shared["doorbell"], shared["doorbell"] / shared["sleep"]),
        "| the same on one CPU with UCX's wake-up (TMK_DOORBELL=off) | %.3f | %.3f | %.2f | |"
        % (shared["sleep"], shared["UCX wake-up"], shared["UCX wake-up"] / shared["sleep"]),
        "| round trip 8 B, server asleep on an idle CPU (ucp_am_lat -E sleep; tmk am, default spin, requests %d us apart) | %.3f | %.3f | %.2f | |"
        % (options.gap_us, floor["sleep 8"], asleep["am, interrupt"][8],
           asleep["am, interrupt"][8] / floor["sleep 8"]),
    ]
    if can_poll:
        lines += [
            "| round trip 8 B, server just asleep, idle CPUs polling (ucp_am_lat -E sleep; tmk am, TMK_SERVICE_SPIN_US=1, TMK_CPU_LATENCY_US=0, requests 3 us apart) | %.3f | %.3f | %.2f | <= 1.5 |"
            % (floor["sleep 8"], polled["just asleep"], polled["just asleep"] / floor["sleep 8"]),
            "| the same, ucp_am_lat -E sleep also with idle CPUs polling | %.3f | %.3f | %.2f | |"
            % (polled["sleep"], polled["just asleep"], polled["just asleep"] / polled["sleep"]),
            "| round trip 8 B, server asleep on an idle CPU that polls (ucp_am_lat -E sleep; tmk am, default spin, TMK_CPU_LATENCY_US=0, requests %d us apart) | %.3f | %.3f | %.2f | |"
            % (options.gap_us, floor["sleep 8"], polled["idle"], polled["idle"] / floor["sleep 8"]),
        ]
    else:
        lines.append("| idle CPUs polling (TMK_CPU_LATENCY_US=0) | not measured: /dev/cpu_dma_latency cannot be written here | | | |")
    lines += [
        "",
        "Every size and mode (round trip us / stream MB/s; `pingpong --csv` per variant):",
        "",
        "| size B | " + " | ".join(variants) + " |",
        "| --- |" + " --- |" * len(variants),
    ]
    for size in sizes:
        lines.append("| %d | " % size + " | ".join(
            "%.3f / %.0f" % (rtt[name][size], bandwidth[name][size]) for name in variants) + " |")
    lines += [
        "",
        "Requests spaced %d us apart, longer than the service thread's spin window, so it sleeps "
        "between them and its CPU goes idle (round trip us). On this virtual machine an idle CPU "
        "halts (%s), and a halted CPU takes tens of microseconds to wake; "
        "ucx_perftest -E sleep never lets the CPU idle that long, hence the separate rows above:"
        % (options.gap_us, halt_polling()),
        "",
        "| size B | " + " | ".join(gapped) + " |",
        "| --- |" + " --- |" * len(gapped),
    ]
    for size in (8, 4096):
        lines.append("| %d | " % size + " | ".join("%.3f" % asleep[name][size] for name in gapped) + " |")
    section = "\n".join(lines) + "\n"
    print(section)
    if options.no_write:
        return
    print("wrote", write_section("substrate", section), file=sys.stderr)


if __name__ == "__main__":
    main()
