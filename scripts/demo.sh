#!/usr/bin/env bash
# demo.sh — the main job: sets everything up, then runs the four
# applications (SOR, TSP, Jacobi, 3D FFT) at their default sizes on 1, 2
# and 4 processes, three runs each, every one verified against a sequential
# run, and prints their median times, speed-ups and traffic.  Arguments go
# to scripts/run_apps.py after --repeat 3 (e.g. --csv, --repeat 5, --nprocs
# 1,2,4,8, --substrate sockets).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
"$root/scripts/setup.sh"
exec /usr/bin/python3 "$root/scripts/run_apps.py" --build "${BUILD_DIR:-$root/build}" --repeat 3 "$@"
