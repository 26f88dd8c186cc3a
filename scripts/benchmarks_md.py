"""benchmarks_md.py — writes one benchmark script's section of BENCHMARKS.md.

Each script owns the text between its markers <!-- NAME:begin --> and
<!-- NAME:end -->; a file or a section not there yet is created.
"""
import os
import platform
import re
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_PATH = os.path.join(ROOT, "BENCHMARKS.md")


def write_section(name, section, path=DEFAULT_PATH):
    begin, end = "<!-- %s:begin -->" % name, "<!-- %s:end -->" % name
    text = open(path).read() if os.path.exists(path) else "# tmk benchmarks\n\n"
    block = begin + "\n" + section + end
    if begin in text and end in text:
        text = re.sub(re.escape(begin) + ".*?" + re.escape(end), lambda _: block, text,
                      flags=re.S)
    else:
        text = text.rstrip("\n") + "\n\n" + block + "\n"
    with open(path, "w") as handle:
        handle.write(text)
    return path


def machine_description(with_ucx=True):
    """'host (N CPUs, CPU model, Linux release)', and ', UCX version'."""
    cpu = "?"
    try:
        cpu = [line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo")
               if line.startswith("model name")][0]
    except (OSError, IndexError):
        pass
    text = "%s (%d CPUs, %s, Linux %s)" % (platform.node(), os.cpu_count(), cpu,
                                          platform.release())
    if not with_ucx:
        return text
    ucx = "?"
    try:
        found = re.search(r"Version ([0-9.]+)",
                          subprocess.run(["ucx_info", "-v"], capture_output=True,
                                         text=True).stdout)
        if found:
            ucx = found.group(1)
    except OSError:
        pass
    return text + ", UCX " + ucx


def side_by_side(first, second, turn):
    """(first(), second()), run one right after the other, second first on
    odd turns: on a host whose speed changes from one run to the next, a
    pair's ratio compares two runs of one speed, and turning the order
    cancels whichever gains from running first."""
    if turn % 2 == 0:
        result = first()
        return result, second()
    later = second()
    return first(), later
