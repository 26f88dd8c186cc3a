#!/bin/sh
# run_refused.sh TEXT COMMAND...: runs an application given bad input and
# passes only if it exits non-zero within 30 s with TEXT in its error output.
text=$1
shift
errors=$(timeout 30 "$@" 2>&1 >/dev/null)
status=$?
printf '%s\n' "$errors"
if [ "$status" -eq 0 ]; then
  echo "run_refused: the bad input was accepted" >&2
  exit 1
fi
if [ "$status" -eq 124 ]; then
  echo "run_refused: no answer within 30 s" >&2
  exit 1
fi
printf '%s\n' "$errors" | grep -qF -- "$text" || { echo "run_refused: no '$text'" >&2; exit 1; }
