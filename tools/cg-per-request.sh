#!/bin/bash
# Instructions per request of a server under redis-benchmark, counted by callgrind: repeatable
# on a loaded machine, where timings are not. Runs SERVER_BIN (ours or /usr/bin/redis-server)
# under valgrind on PORT, warms it up, zeroes the counters, runs N requests of TEST with
# CLIENTS connections and PIPELINE depth, dumps, and prints the server's instructions per
# request (all threads, and each). What runs on a timer (the cron) is counted too, and its
# share per request grows with the run's length: compare runs made under the same load.
#
# usage: tools/cg-per-request.sh SERVER_BIN PORT TEST CLIENTS PIPELINE [N [server args...]]
# e.g.   tools/cg-per-request.sh target/release/ferrodis-server 23001 get 50 1 20000
# Environment: R=KEYSPACE passes -r KEYSPACE to redis-benchmark (random keys, so inserts and
# the cluster's per-slot key index are exercised); CLUSTER=1 starts the server with
# cluster-enabled yes as a one-node cluster that owns all 16384 slots (plain redis-benchmark
# then hits it directly), waiting for cluster_state:ok before the warm-up; PRELOAD=N runs N
# SETs (with the same -r) before the warm-up, so that GETs hit; SLOTINDEX=1 (with CLUSTER=1)
# sends CLUSTER COUNTKEYSINSLOT first, which builds our per-slot key index (kept up to date on
# every insert and delete from then on; Redis keeps its own always).
# The dumps stay in the directory printed; per-function costs: callgrind_annotate on
# cg.out.PID.1-NN (the dump after the run).
set -u
BIN=$1; PORT=$2; T=$3; C=$4; P=$5; N=${6:-20000}; shift 5; [ $# -gt 0 ] && shift
D=$(mktemp -d /tmp/cg-per-request.XXXX)
R=${R:-}; CLUSTER=${CLUSTER:-}
RARG=(); [ -n "$R" ] && RARG=(-r "$R")
CARG=(); [ -n "$CLUSTER" ] && CARG=(--cluster-enabled yes --cluster-config-file "$D/nodes.conf")
valgrind --tool=callgrind --separate-threads=yes --dump-instr=no --compress-strings=no --compress-pos=no \
  --callgrind-out-file=$D/cg.out.%p "$BIN" --port "$PORT" --save '' --appendonly no --dir "$D" "${CARG[@]}" "$@" >$D/server.log 2>&1 &
VP=$!
for _ in $(seq 1 600); do redis-cli -p "$PORT" ping >/dev/null 2>&1 && break; sleep 0.2; done
if [ -n "$CLUSTER" ]; then
  redis-cli -p "$PORT" cluster addslotsrange 0 16383 >/dev/null
  for _ in $(seq 1 600); do
    redis-cli -p "$PORT" cluster info 2>/dev/null | grep -q 'cluster_state:ok' && break; sleep 0.2
  done
  [ -n "${SLOTINDEX:-}" ] && redis-cli -p "$PORT" cluster countkeysinslot 0 >/dev/null
fi
[ -n "${PRELOAD:-}" ] && redis-benchmark -p "$PORT" -t set -n "$PRELOAD" -c 50 -P 16 "${RARG[@]}" -q >/dev/null 2>&1
redis-benchmark -p "$PORT" -t "$T" -n 2000 -c "$C" -P "$P" "${RARG[@]}" -q >/dev/null 2>&1
# vgdb, not callgrind_control: the server rewrites its process title, which callgrind_control
# searches for --tool=callgrind.
vgdb --pid=$VP zero >/dev/null 2>&1
redis-benchmark -p "$PORT" -t "$T" -n "$N" -c "$C" -P "$P" "${RARG[@]}" -q >$D/bench.txt 2>&1
vgdb --pid=$VP dump >/dev/null 2>&1
sleep 0.5
kill -TERM $VP
wait $VP 2>/dev/null
tot=0; out=""
for f in $(ls $D/ | grep -E '^cg\.out\.[0-9]+\.1(-[0-9]+)?$'); do
  ir=$(grep -E '^summary:' $D/$f | awk '{print $2}')
  out="$out th${f##*-}=$((ir / N))"
  tot=$((tot + ir))
done
echo "$(basename "$BIN")${CLUSTER:+ cluster}${SLOTINDEX:+ +index}${R:+ r=$R} $T c=$C P=$P: $((tot / N)) instructions/request |$out | $D"
