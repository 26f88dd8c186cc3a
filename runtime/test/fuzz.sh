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
# A crash prints the final stats too: the fuzzer's exit status is the
# verdict, and a crashing input is kept in $out (not the working directory).
status=0
"$out/fuzz_messages" -max_total_time="$seconds" -print_final_stats=1 -artifact_prefix="$out/" \
  "$out/corpus" >"$out/fuzz.log" 2>&1 || status=$?
tail -5 "$out/fuzz.log"
if ((status != 0)); then
  grep -m1 -A12 -E "^==[0-9]+==ERROR|runtime error|deadly signal" "$out/fuzz.log" || true
  echo "fuzz.sh: the fuzzer failed (exit status $status); inputs kept in $out/crash-*" >&2
  exit "$status"
fi
grep -q "^Done [0-9]* runs" "$out/fuzz.log" || { echo "fuzz.sh: the fuzzer did not finish its runs" >&2; exit 1; }
