#!/bin/bash
# mpirun_test.sh MPIEXEC WORKER — the substrate under mpirun on this one
# host: every process maps the lines they share, so service threads are
# woken by doorbells; scenarios that hand the request channel between the
# threads and forward requests pass on 3 processes; with TMK_DOORBELL=off
# they pass with UCX's wake-up; and no shared memory object is left behind
# by a process that is gone.
# An object a job whose process 0 died left there is removed by the next
# job's process 0; one whose maker lives is not.
set -u
mpiexec=$1
worker=$2
failed=0
fail() { echo "FAILED: $*"; failed=1; }
# The objects there before, by name: one another job removes meanwhile
# cannot hide one these runs leave.
before=$(ls /dev/shm | grep '^tmk-' || true)
sleep 0 & dead=$!
wait $dead
stale=/dev/shm/tmk-$dead-0123456789abcdef0123456789abcdef
alive=/dev/shm/tmk-$$-0123456789abcdef0123456789abcdef
: >"$stale"
: >"$alive"
for doorbell in on off; do
  for scenario in all-pairs forward hand-back; do
    output=$(TMK_DOORBELL=$doorbell timeout 120 "$mpiexec" -np 3 --allow-run-as-root --oversubscribe \
             -x TMK_DOORBELL "$worker" --scenario "$scenario" 2>&1)
    status=$?
    [ $status -eq 0 ] || fail "$scenario, TMK_DOORBELL=$doorbell: exit $status: $output"
    grep -q "$scenario: passed on 3 processes" <<<"$output" ||
      fail "$scenario, TMK_DOORBELL=$doorbell: no pass: $output"
    if [ $doorbell = on ]; then
      grep -q "(ucx/am, doorbells," <<<"$output" || fail "$scenario: no doorbells under mpirun: $output"
    else
      grep -q "doorbells" <<<"$output" && fail "$scenario: doorbells with TMK_DOORBELL=off: $output"
    fi
  done
done
# A process that never reaches start-up (rank 2 sleeps far past it): the
# others stop after TMK_CONNECT_TIMEOUT + 5 s, saying so, and mpirun ends
# the job; before, they waited inside MPI for ever.
started=$SECONDS
output=$(TMK_CONNECT_TIMEOUT=1 timeout 60 "$mpiexec" -np 3 --allow-run-as-root --oversubscribe \
         -x TMK_CONNECT_TIMEOUT sh -c '[ "$OMPI_COMM_WORLD_RANK" = 2 ] && sleep 50; exec "$0" "$@"' \
         "$worker" --scenario all-pairs 2>&1)
status=$?
[ $status -ne 0 ] && [ $status -ne 124 ] || fail "a late process: exit $status: $output"
[ $((SECONDS - started)) -lt 30 ] || fail "a late process: the job took $((SECONDS - started)) s"
# Each process that gave up says which it is (mpirun's rank, known before MPI_Init).
grep -qE "tmk\[[01]\]: start-up under mpirun \(a process never reached it; TMK_CONNECT_TIMEOUT\) did not end within 6 s" <<<"$output" ||
  fail "a late process: not named: $output"
grep -q "tmk\[?\]" <<<"$output" && fail "a late process: a message without its process: $output"
[ -e "$stale" ] && fail "$stale, left by a process that is gone, was not removed"
[ -e "$alive" ] || fail "$alive, of a process alive, was removed"
rm -f "$stale" "$alive"
# New objects whose maker is gone: these runs' makers all are, and another
# job running meanwhile (ctest -j) keeps its own until it ends.
left=
for name in $(comm -13 <(sort <<<"$before") <(ls /dev/shm | grep '^tmk-' | sort)); do
  maker=${name#tmk-}
  maker=${maker%%-*}
  kill -0 "$maker" 2>/dev/null || left="$left $name"
done
[ -z "$left" ] || fail "shared memory objects left in /dev/shm: $left"
[ $failed -eq 0 ] && echo "mpirun: passed"
exit $failed
