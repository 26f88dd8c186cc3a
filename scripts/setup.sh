#!/usr/bin/env bash
# setup.sh — installs what tmk needs on a Debian 12 machine (only what is
# missing), then configures and builds into build/ at the repository root.
#   scripts/setup.sh [extra cmake arguments]
# BUILD_DIR and CMAKE_BUILD_TYPE may be set in the environment.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir=${BUILD_DIR:-$root/build}
build_type=${CMAKE_BUILD_TYPE:-RelWithDebInfo}

packages=(cmake g++ make pkg-config libucx-dev ucx-utils libsigsegv-dev libopenmpi-dev
          openmpi-bin libgtest-dev libbenchmark-dev python3-matplotlib iproute2 procps
          util-linux clang libclang-rt-14-dev)
missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" ||
    missing+=("$package")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  sudo_cmd=()
  [[ $(id -u) -ne 0 ]] && sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -q
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -q "${missing[@]}"
fi

cmake -S "$root" -B "$build_dir" -DCMAKE_BUILD_TYPE="$build_type" "$@" >/dev/null
cmake --build "$build_dir" -j "$(nproc)"
echo "setup: built into $build_dir"
