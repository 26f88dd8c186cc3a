#!/usr/bin/env bash
# demo.sh — the main job: sets everything up, then runs the substrate
# ping-pong between 2 processes and prints its figures.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
"$root/scripts/setup.sh"
"${BUILD_DIR:-$root/build}/microbench/pingpong" "$@" -- -n 2
