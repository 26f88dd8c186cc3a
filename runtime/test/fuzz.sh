#!/usr/bin/env bash
# fuzz.sh BUILD_DIR [SECONDS] — builds the libFuzzer target for message
# decoding and diff application with clang (AddressSanitizer and
# UndefinedBehaviorSanitizer on) and runs it for a bounded time.
set -euo pipefail
build=${1:?usage: fuzz.sh BUILD_DIR [SECONDS]}
seconds=${2:-20}
source=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
out=$build/fuzz
mkdir -p "$out/corpus"
clang++ -std=c++20 -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
  -I"$source/runtime" -I"$source/substrate" \
  "$source/runtime/test/fuzz_messages.cc" "$source/runtime/diff.cc" "$source/runtime/interval.cc" \
  -o "$out/fuzz_messages"
"$out/fuzz_messages" -max_total_time="$seconds" -print_final_stats=1 "$out/corpus" 2>&1 | tail -5
