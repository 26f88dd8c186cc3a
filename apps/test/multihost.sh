#!/usr/bin/env bash
# multihost.sh BUILD_DIR — the applications across three simulated hosts.
#
# Makes three network namespaces joined by veth pairs to a bridge (traffic
# stays on this machine), starts each application with mpirun on one
# process per namespace (a launch agent enters the namespace, as ssh would
# reach another host), with UCX over TCP between them, and checks that every
# run verifies its result and that the traffic crossed the namespaces;
# then loses a process of a job started by hand across them, killed or cut
# off, and checks that the others name it and stop within seconds.
# Needs root (ip netns).  Everything it made is removed on exit.
set -euo pipefail
build=${1:?usage: multihost.sh BUILD_DIR}
apps=$build/apps
tag=$$
net=10.$((100 + tag % 100)).$((tag / 100 % 250)).
bridge=tmkbr$tag
work=$(mktemp -d)
hosts=()

cleanup() {
  for host in "${hosts[@]}"; do ip netns del "$host" 2>/dev/null || true; done
  ip link del "$bridge" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

ip link add "$bridge" type bridge
ip link set "$bridge" up
ip addr add "${net}254/24" dev "$bridge"
for i in 0 1 2; do
  host=tmk$tag-h$i
  hosts+=("$host")
  ip netns add "$host"
  ip link add "tv$tag-$i" type veth peer name tmk0 netns "$host"
  ip link set "tv$tag-$i" master "$bridge"
  ip link set "tv$tag-$i" up
  ip netns exec "$host" ip addr add "${net}$((i + 1))/24" dev tmk0
  ip netns exec "$host" ip link set tmk0 up
  ip netns exec "$host" ip link set lo up
  echo "$host slots=1" >> "$work/hostfile"
done

# Links take a moment to come up; wait (at most 10 s) until every port of
# the bridge forwards, so that the first launch does not race them.
for attempt in $(seq 1 100); do
  ready=1
  for i in 0 1 2; do
    state=$(cat "/sys/class/net/tv$tag-$i/brport/state" 2>/dev/null || echo 0)
    [ "$state" = 3 ] || ready=0  # 3: forwarding
  done
  [ "$(cat "/sys/class/net/$bridge/operstate")" = up ] || ready=0
  [ $ready = 1 ] && break
  sleep 0.1
done

# The launch agent: what ssh would be to a real cluster.
cat > "$work/agent" <<AGENT
#!/bin/sh
host="\$1"; shift
echo "\$host" >> "$work/launched"
exec ip netns exec "\$host" sh -c "\$*"
AGENT
chmod +x "$work/agent"

bytes_between() {  # bytes received by the bridge from the second host's veth
  ip -s link show "tv$tag-1" | awk '/RX:/ {getline; print $1}'
}

status=0
run() {
  local name=$1; shift
  local before after output code
  before=$(bytes_between)
  # Open MPI's daemons now and then fail to call mpirun back over the fresh
  # veth links; that is the launcher's start-up, not the program: try again.
  for attempt in 1 2 3; do
    rm -f "$work/launched"
    output=$(PMIX_MCA_gds=hash timeout 120 mpirun --allow-run-as-root --hostfile "$work/hostfile" -np 3 \
      --mca plm_rsh_agent "$work/agent" --mca oob_tcp_if_include "${net}0/24" --mca routed direct \
      --mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include "${net}0/24" \
      -x PMIX_MCA_gds=hash -x UCX_TLS=tcp,self -x UCX_NET_DEVICES=tmk0 \
      "$@" 2>&1) && code=0 || code=$?
    grep -q "connection back to mpirun\|does not know how to route" <<<"$output" || break
    echo "multihost: $name: the launcher's daemons did not connect (attempt $attempt)"
  done
  after=$(bytes_between)
  local namespaces
  namespaces=$(sort -u "$work/launched" 2>/dev/null | wc -l)
  # Every process must end well: mpirun's status is the worst of them.
  if [ "$code" -eq 0 ] && grep -q "check: passed" <<<"$output" && [ "$namespaces" -eq 3 ] &&
     [ "$after" -gt "$before" ]; then
    echo "multihost: $name passed on 3 namespaces ($((after - before)) bytes from the second host)"
  else
    echo "multihost: $name FAILED (exit status $code, namespaces $namespaces, bytes $((after - before)))"
    echo "$output" | tail -20
    status=1
  fi
}

run sor "$apps/sor" -m 200 -n 100 -i 3
run jacobi "$apps/jacobi" -s 100 -i 20
run tsp "$apps/tsp" -f "$apps/tsp-cities/cities-10.txt"
run fft "$apps/fft" -n 8 -i 2

# A process lost across hosts.  The job's three processes are started by
# hand (TMK_RANK, TMK_ROOT), one in each namespace, over UCX's TCP
# transport, so that tmk alone, not the launcher, notices the loss.  Once
# all three have started, process 1 is killed, or cut off (its link
# down: it is alive, but nothing it sends arrives).  Processes 0 and 2
# must name process 1 and stop with a non-zero status within seconds
# (TMK_PEER_TIMEOUT=3 and at most 10 s more), and, cut off, process 1
# must stop too.
declare -a lose_pids
lose() {
  local how=$1
  local secret=lose-$how-$tag
  for i in 0 1 2; do
    TMK_RANK=$i TMK_NPROCS=3 TMK_ROOT="${net}1:$((7000 + tag % 1000))" TMK_JOB_SECRET=$secret \
      TMK_PEER_TIMEOUT=3 TMK_LOG_LEVEL=info UCX_TLS=tcp,self UCX_NET_DEVICES=tmk0 \
      ip netns exec "${hosts[$i]}" "$apps/jacobi" -s 200 -i 100000000 > "$work/lose-$how-$i" 2>&1 &
    lose_pids[i]=$!
  done
  local started=0
  for attempt in $(seq 1 300); do
    started=$(cat "$work/lose-$how-0" "$work/lose-$how-1" "$work/lose-$how-2" |
              grep -c "started: process" || true)
    [ "$started" -eq 3 ] && break
    sleep 0.1
  done
  if [ "$started" -ne 3 ]; then
    echo "multihost: losing a process ($how) FAILED: $started of 3 processes started"
    tail -5 "$work/lose-$how-"*
    kill -9 "${lose_pids[@]}" 2>/dev/null || true
    status=1
    return
  fi
  local expected=(0 2)
  case $how in
    kill) kill -9 "${lose_pids[1]}"; wait "${lose_pids[1]}" 2>/dev/null || true ;;
    cut) ip link set "tv$tag-1" down; expected=(0 1 2) ;;
  esac
  local lost_at=$SECONDS ok=1
  for i in "${expected[@]}"; do
    local code=0
    while kill -0 "${lose_pids[i]}" 2>/dev/null && [ $((SECONDS - lost_at)) -le 13 ]; do sleep 0.1; done
    if kill -0 "${lose_pids[i]}" 2>/dev/null; then
      echo "multihost: losing a process ($how) FAILED: process $i still runs $((SECONDS - lost_at)) s on"
      ok=0
      continue
    fi
    wait "${lose_pids[i]}" || code=$?
    local named="lost process 1"
    [ "$i" -eq 1 ] && named="lost process [02]"
    if [ "$code" -eq 0 ] || ! grep -q "$named" "$work/lose-$how-$i"; then
      echo "multihost: losing a process ($how) FAILED: process $i exited with status $code"
      tail -3 "$work/lose-$how-$i"
      ok=0
    fi
  done
  kill -9 "${lose_pids[@]}" 2>/dev/null || true
  wait "${lose_pids[@]}" 2>/dev/null || true
  [ "$how" = cut ] && ip link set "tv$tag-1" up
  if [ $ok = 1 ]; then
    echo "multihost: losing a process ($how) passed: processes ${expected[*]} stopped within" \
         "$((SECONDS - lost_at)) s, naming it"
    grep -h "lost process" "$work/lose-$how-"* | sed 's/^/  /'
  else
    status=1
  fi
}
lose kill
lose cut

# Started by hand across the namespaces without UCX_TLS, UCX takes the
# processes for one host's and picks its shared-memory transports, whose
# wake-ups do not cross namespaces: the first messages never arrive.
# Every process must stop within TMK_CONNECT_TIMEOUT (5 s here) of a
# step of the warm-up, saying so; they spun in their first sends for ever.
unreachable() {
  local warm_up=$1 pids=() i ok=1
  local started_at=$SECONDS
  for i in 0 1; do
    env -u UCX_TLS -u UCX_NET_DEVICES TMK_RANK=$i TMK_NPROCS=2 \
      TMK_ROOT="${net}1:$((7500 + tag % 1000))" TMK_JOB_SECRET=unreachable-$warm_up-$tag \
      TMK_CONNECT_TIMEOUT=5 TMK_WARM_UP=$warm_up \
      timeout 60 ip netns exec "${hosts[$i]}" "$apps/jacobi" -s 100 -i 10 > "$work/unreachable-$i" 2>&1 &
    pids[i]=$!
  done
  for i in 0 1; do
    local code=0
    wait "${pids[i]}" || code=$?
    if [ "$code" -eq 0 ] || [ "$code" -eq 124 ] ||
       ! grep -q "a step of the substrate's warm-up at start-up.*did not end within 5 s" "$work/unreachable-$i"; then
      echo "multihost: an unreachable transport (TMK_WARM_UP=$warm_up) FAILED: process $i exited with status $code"
      tail -3 "$work/unreachable-$i"
      ok=0
    fi
  done
  if [ $ok = 1 ]; then
    echo "multihost: an unreachable transport (TMK_WARM_UP=$warm_up) passed: both processes stopped" \
         "in $((SECONDS - started_at)) s, saying why"
  else
    status=1
  fi
}
unreachable 1M
unreachable 0
exit $status
