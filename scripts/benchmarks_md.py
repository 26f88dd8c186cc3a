"""benchmarks_md.py — writes one benchmark script's section of BENCHMARKS.md.

Each script owns the text between its markers <!-- NAME:begin --> and
<!-- NAME:end -->; a file or a section not there yet is created.
"""
import os
import re

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
