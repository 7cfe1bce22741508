#!/usr/bin/env bash
# Issue 19, acceptance 4: a ferrodis node in a cluster of real redis-server 7.0 nodes.
# Forms a cluster of 6 redis-server nodes (3 masters, 3 replicas, tools/cluster_create.sh),
# starts tools/cluster_load.py on it (every key type, half with TTLs, reads checked against
# its model) and while that runs:
#   1. starts one ferrodis node and joins it with redis-cli --cluster add-node
#   2. redis-cli --cluster reshard: 1000 slots from a redis master to it (MIGRATE redis -> ferrodis)
#   3. reshards them back (MIGRATE ferrodis -> redis), then CLUSTER REPLICATE makes it a replica
#      of another redis master (PSYNC from redis)
#   4. CLUSTER FAILOVER on it: it is promoted, the redis master becomes its replica (and so
#      does that master's other redis replica: PSYNC from ferrodis)
#   5. redis-cli --cluster check run from the ferrodis node and from a redis node: both clean
# then stops the client, which reads every key back.
#
#   tools/cluster_mixed.sh [--server PATH] [--redis PATH] [--base PORT] [--keys N] [--dir DIR]
#
# Defaults: target/ci/ferrodis-server, /usr/bin/redis-server, ports 16920..16926 (bus +10000),
# 10000 keys, /tmp/ferrodis-mixed. Exit status 0 when every step held. Every node is killed at the
# end (logs stay in DIR).
set -uo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
server=$HERE/target/ci/ferrodis-server
redis=/usr/bin/redis-server
base=16920 keys=10000 dir=/tmp/ferrodis-mixed
while [ $# -gt 0 ]; do
  case "$1" in
    --server) server=$2; shift 2 ;;
    --redis) redis=$2; shift 2 ;;
    --base) base=$2; shift 2 ;;
    --keys) keys=$2; shift 2 ;;
    --dir) dir=$2; shift 2 ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
case $server in /*) ;; *) server=$PWD/$server ;; esac
rm -rf "$dir"; mkdir -p "$dir"
fail=0
step() { echo; echo "=== $(date -u +%T) $*"; }
check() { # check NAME CMD...: runs it, logs its output, remembers a failure
  local name=$1; shift
  if "$@" >"$dir/$name.out" 2>&1; then echo "$name: ok"; else echo "$name: FAILED (rc $?)"; fail=1; fi
  sed 's/\x1b\[[0-9;]*m//g' "$dir/$name.out" | tail -n 4
}
must() { # must NAME CMD...: as check, but a failure ends the run (the steps after it need it)
  check "$@"
  [ $fail = 0 ] || { echo "RESULT: FAILED at $1"; [ -n "${KEEP:-}" ] && { echo "KEEP: nodes left running"; trap - EXIT; kill "$load_pid"; }; exit 1; }
}
node_id() { redis-cli -p "$1" cluster myid; }
# A clean --cluster check from PORT: every node agrees, no open slot, full coverage, no
# [ERR] or [WARNING] (redis-cli exits 0 on some of those, so read its output).
clean_from() {
  local out
  out=$(redis-cli --cluster check "127.0.0.1:$1" 2>&1 | sed 's/\x1b\[[0-9;]*m//g')
  grep -q 'OK. All nodes agree about slots' <<<"$out" && grep -q 'OK. All 16384 slots covered' <<<"$out" &&
    ! grep -qE '^\[ERR\]|^\[WARNING\]' <<<"$out"
}
agree() { # agree PORT: wait until --cluster check from PORT is clean
  local t0=$SECONDS
  for _ in $(seq 150); do
    clean_from "$1" && { echo "check from $1 clean after $((SECONDS - t0)) s"; return 0; }
    sleep 0.2
  done
  echo "check from $1 still not clean after $((SECONDS - t0)) s:"
  redis-cli --cluster check "127.0.0.1:$1" 2>&1 | sed 's/\x1b\[[0-9;]*m//g' | grep -E 'ERR|WARN|slots:|^[MS]:'
  fail=1; return 1
}
cleanup() {
  [ -n "${load_pid:-}" ] && kill "$load_pid" 2>/dev/null
  "$HERE/tools/cluster_create.sh" --dir "$dir" --stop
}
trap cleanup EXIT

step "create 6 redis-server nodes on $base.."
"$HERE/tools/cluster_create.sh" --server "$redis" --base "$base" --nodes 6 --replicas 1 --dir "$dir" \
  >"$dir/create.out" 2>&1 || { cat "$dir/create.out"; echo "create FAILED"; exit 1; }
r1=$(node_id "$base") r2=$(node_id $((base + 1)))
"$redis" --version

step "load client: $keys keys, then mixed writes and checked reads"
python3 "$HERE/tools/cluster_load.py" --seed "127.0.0.1:$base" --keys "$keys" --ready "$dir/ready" \
  --stop "$dir/stop" --report "$dir/load.json" >"$dir/load.out" 2>&1 &
load_pid=$!
for _ in $(seq 600); do [ -f "$dir/ready" ] && break; kill -0 $load_pid 2>/dev/null || break; sleep 0.5; done
[ -f "$dir/ready" ] || { cat "$dir/load.out"; echo "load client did not get ready"; exit 1; }
head -n 1 "$dir/load.out"

f=$((base + 6))
step "ferrodis node on $f: --cluster add-node"
mkdir -p "$dir/$f"
(cd "$dir/$f" && exec "$server" --port "$f" --cluster-enabled yes --cluster-node-timeout 3000 \
  --repl-diskless-sync-delay 0 --save "" --appendonly no --logfile "$dir/$f/log") >/dev/null 2>&1 &
echo $! >>"$dir/pids"
for _ in $(seq 50); do redis-cli -p $f ping >/dev/null 2>&1 && break; sleep 0.1; done
"$server" --version
fid=$(node_id $f)
must add-node redis-cli --cluster add-node "127.0.0.1:$f" "127.0.0.1:$base"
agree "$base"; agree "$f"
# A master that just joined stays in cluster_state:fail for its first 2 s and until node-timeout
# after it last saw itself in a minority (Redis's CLUSTER_WRITABLE_DELAY and rejoin delay; real
# Redis does the same), and would answer the first MIGRATE with -CLUSTERDOWN: wait for ok.
t0=$SECONDS
for _ in $(seq 100); do
  redis-cli -p $f cluster info | tr -d '\r' | grep -qx cluster_state:ok && break; sleep 0.1
done
echo "new node: $(redis-cli -p $f cluster info | tr -d '\r' | grep cluster_state) after $((SECONDS - t0)) s"

step "reshard 1000 slots redis $r1 -> ferrodis $fid"
must reshard-in redis-cli --cluster reshard "127.0.0.1:$base" --cluster-from "$r1" --cluster-to "$fid" \
  --cluster-slots 1000 --cluster-yes
agree "$base"; agree "$f"
echo "ferrodis node: $(redis-cli -p $f dbsize) keys, slots: $(redis-cli -p $f cluster nodes | grep myself | cut -d' ' -f9-)"

step "reshard them back ferrodis -> redis $r1, then CLUSTER REPLICATE $r2"
must reshard-out redis-cli --cluster reshard "127.0.0.1:$base" --cluster-from "$fid" --cluster-to "$r1" \
  --cluster-slots 1000 --cluster-yes
agree "$base"
echo "ferrodis node: $(redis-cli -p $f dbsize) keys after giving its slots back"
must replicate redis-cli -p $f cluster replicate "$r2"
for _ in $(seq 150); do
  [ "$(redis-cli -p $f info replication | tr -d '\r' | grep master_link_status)" = master_link_status:up ] && break
  sleep 0.2
done
redis-cli -p $f info replication | tr -d '\r' | grep -E 'role|master_port|master_link_status'
# The master accepts the replica's MFSTART only once its own view (from the replica's bus
# pings) has it as its replica, as Redis's clusterProcessPacket: wait for that view.
t0=$SECONDS
for _ in $(seq 100); do
  redis-cli -p $((base + 1)) cluster nodes | grep -q "^$fid .* slave $r2 " && break; sleep 0.1
done
echo "redis master's view: $(redis-cli -p $((base + 1)) cluster nodes | grep "^$fid" | cut -d' ' -f3,4) after $((SECONDS - t0)) s"
echo "replica: $(redis-cli -p $f dbsize) keys, master: $(redis-cli -p $((base + 1)) dbsize) keys"
agree "$base"; agree "$f"

step "CLUSTER FAILOVER on the ferrodis replica"
must failover redis-cli -p $f cluster failover
for _ in $(seq 100); do
  [ "$(redis-cli -p $f role | head -n 1)" = master ] && break
  sleep 0.1
done
echo "ferrodis role: $(redis-cli -p $f role | head -n 1); redis $((base + 1)) role: $(redis-cli -p $((base + 1)) role | head -n 1)"
[ "$(redis-cli -p $f role | head -n 1)" = master ] || { echo "failover: not promoted"; fail=1; }
sleep 1
for _ in $(seq 150); do
  [ "$(redis-cli -p $((base + 1)) info replication | tr -d '\r' | grep master_link_status)" = master_link_status:up ] && break
  sleep 0.2
done
agree "$base"; agree "$f"
redis-cli -p $f cluster nodes | sort -k2 | awk '{print $2, $3, $4 == "-" ? "" : substr($4,1,8), $9, $10}'
for p in $((base + 1)) $((base + 3)) $((base + 4)) $((base + 5)); do
  echo "$p: $(redis-cli -p $p info replication | tr -d '\r' | grep -E '^(role|master_port|master_link_status)' | tr '\n' ' ')"
done

step "stop the client: it reads every key back"
touch "$dir/stop"
wait $load_pid; lrc=$?
load_pid=
grep -E '^ERROR' "$dir/load.out" | head -n 20
tail -n 1 "$dir/load.out"
[ $lrc = 0 ] || { echo "load client: FAILED (rc $lrc)"; fail=1; }
step "--cluster check from ferrodis ($f) and from redis ($base)"
check check-from-ferrodis clean_from "$f"
check check-from-redis clean_from "$base"
redis-cli --cluster check "127.0.0.1:$f" 2>&1 | sed 's/\x1b\[[0-9;]*m//g' | grep -E 'keys \||OK'
[ $fail = 0 ] && echo "RESULT: ok" || echo "RESULT: FAILED"
exit $fail
