#!/usr/bin/python3
"""Writes the city files of the tsp application.

Every file holds the first N cities of one fixed sequence of points with
integer coordinates in a 1000 x 1000 square, drawn from a 64-bit linear
congruential generator, so the files are the same on every machine and
with every Python 3, and each instance contains the smaller ones.

The seed was picked among the first few for an 18-city instance that takes
branch and bound about a second on one core, with 16 and 17 cities an
order of magnitude and a factor of about four easier; uniform random
instances differ by more than a factor of ten in difficulty.

Usage: generate.py [OUTPUT_DIRECTORY]   (default: this script's directory)
"""

import os
import sys

SEED = 9
SIDE = 1000
SIZES = (8, 10, 12, 16, 17, 18)


def points(seed, count):
    """The first count points of the sequence started by seed."""
    state = seed
    result = []
    while len(result) < count:
        coordinates = []
        for _ in range(2):
            state = (state * 6364136223846793005 + 1442695040888963407) % 2**64
            coordinates.append((state >> 33) % SIDE)
        result.append(tuple(coordinates))
    return result


def main():
    directory = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
    cities = points(SEED, max(SIZES))
    for size in SIZES:
        name = os.path.join(directory, "cities-%d.txt" % size)
        with open(name, "w") as out:
            out.write("# %d cities: the first %d points of generate.py's sequence (seed %d)\n"
                      % (size, size, SEED))
            out.write("%d\n" % size)
            for x, y in cities[:size]:
                out.write("%d %d\n" % (x, y))


if __name__ == "__main__":
    main()
