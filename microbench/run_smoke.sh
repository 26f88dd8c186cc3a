#!/bin/sh
# run_smoke.sh COMMAND...: runs a microbenchmark with --csv, shows what it
# printed, and passes only if it exited 0 and printed the CSV header and a
# row that ends in a number (microseconds per operation).  Never a timing.
output=$("$@")
status=$?
printf '%s\n' "$output"
if [ "$status" -ne 0 ]; then
  echo "run_smoke: exit status $status" >&2
  exit "$status"
fi
printf '%s\n' "$output" | grep -qx 'benchmark,case,nprocs,substrate,notify,us_per_op' ||
  { echo "run_smoke: no CSV header" >&2; exit 1; }
printf '%s\n' "$output" | grep -Eq '^[a-z]+,[a-z0-9-]+,[0-9]+,[a-z]+,[a-z]+,[0-9]+\.[0-9]+$' ||
  { echo "run_smoke: no row with a time" >&2; exit 1; }
