#!/usr/bin/env bash
# test.sh — sets everything up (scripts/setup.sh) and runs the whole test
# suite with ctest: the release build, then the AddressSanitizer and
# UndefinedBehaviorSanitizer build (CMake preset asan, whose filter leaves
# out the tests README's "Layout" names).  Extra arguments go
# to both ctest runs (e.g. -R substrate).  TMK_TEST_SANITIZERS=0 skips the
# sanitizer build.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
"$root/scripts/setup.sh"
cd "${BUILD_DIR:-$root/build}"
ctest --output-on-failure -j "$(nproc)" "$@"
if [ "${TMK_TEST_SANITIZERS:-1}" != 0 ]; then
  cd "$root"
  cmake --preset asan >/dev/null
  cmake --build --preset asan -j "$(nproc)"
  ctest --preset asan -j "$(nproc)" "$@"
fi
