#!/usr/bin/env bash
# test.sh — sets everything up (scripts/setup.sh) and runs the whole test
# suite with ctest.  Extra arguments go to ctest (e.g. -R substrate).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
"$root/scripts/setup.sh"
cd "${BUILD_DIR:-$root/build}"
ctest --output-on-failure -j "$(nproc)" "$@"
