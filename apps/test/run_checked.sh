#!/bin/sh
# run_checked.sh COMMAND...: runs an application, shows what it printed, and
# passes only if it exited 0 and process 0 reported "check: passed".
output=$("$@")
status=$?
printf '%s\n' "$output"
if [ "$status" -ne 0 ]; then
  echo "run_checked: exit status $status" >&2
  exit "$status"
fi
printf '%s\n' "$output" | grep -q "check: passed" || { echo "run_checked: no 'check: passed'" >&2; exit 1; }
