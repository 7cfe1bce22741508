#!/usr/bin/env bash
# Bytes per key the cluster's keys-per-slot index costs (issue 19: at most 8 over standalone):
# used_memory (INFO memory) of a cluster-enabled node owning every slot against a standalone
# server, both after DEBUG POPULATE of the same keys, at each key count given.
#   tools/cluster_slot_memory.sh [--server BIN] [--port P] COUNT...
# Prints, per count: standalone and cluster used_memory, the difference per key, and that
# difference less the one of the two empty servers (the fixed part: the slot table, the
# cluster's node state), which is what each further key costs.
set -euo pipefail
BIN=target/ci/ferrodis-server
PORT=15100
while [[ $# -gt 0 && $1 == --* ]]; do
  case $1 in
    --server) BIN=$2; shift 2 ;;
    --port) PORT=$2; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
[[ $# -gt 0 ]] || set -- 100000 1000000 3000000
[[ $BIN == /* ]] || BIN=$PWD/$BIN
DIR=$(mktemp -d)
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$DIR"; }
trap cleanup EXIT

start() { # port extra-args...
  local port=$1; shift
  mkdir -p "$DIR/$port"
  (cd "$DIR/$port" && exec "$BIN" --port "$port" --save "" --appendonly no --enable-debug-command yes "$@" >/dev/null 2>&1) &
  PIDS+=($!)
  for _ in $(seq 100); do redis-cli -p "$port" ping >/dev/null 2>&1 && return; sleep 0.1; done
  echo "server on $port did not start" >&2; exit 1
}
used() { redis-cli -p "$1" info memory | tr -d '\r' | awk -F: '$1=="used_memory"{print $2}'; }

SA=$PORT CL=$((PORT + 1))
start "$SA"
start "$CL" --cluster-enabled yes --cluster-config-file "$DIR/nodes.conf"
redis-cli -p "$CL" cluster addslotsrange 0 16383 >/dev/null
redis-cli -p "$CL" cluster countkeysinslot 0 >/dev/null   # the index exists from here
sleep 0.5
sa0=$(used "$SA") cl0=$(used "$CL")
echo "empty: standalone $sa0 cluster $cl0 (fixed part $((cl0 - sa0)) B)"
for n in "$@"; do
  for p in "$SA" "$CL"; do
    # DEBUG POPULATE skips existing names, so each count adds only the keys beyond the last.
    redis-cli -p "$p" debug populate "$n" key 8 >/dev/null
  done
  sleep 0.5
  sa=$(used "$SA") cl=$(used "$CL")
  keys=$(redis-cli -p "$CL" dbsize)
  awk -v n="$keys" -v sa="$sa" -v cl="$cl" -v f=$((cl0 - sa0)) 'BEGIN {
    printf "keys %d: standalone %d cluster %d  B/key %.2f  less fixed part %.2f\n", n, sa, cl, (cl-sa)/n, (cl-sa-f)/n }'
done
