#!/usr/bin/env bash
# Issue 18 acceptance 1: replication under load between ferrodis and real redis-server 7.0.
#
#   tools/repl_acceptance.sh FERRODIS_BIN [REDIS_BIN] [BASEPORT]
#
# Two scenarios, four servers each (ports BASEPORT+1..+4, default BASEPORT 14100):
#   fmaster: ferrodis master; a redis replica and a ferrodis replica of it; a redis replica of
#            that ferrodis replica (the chain ferrodis -> ferrodis -> redis).
#   rmaster: redis master; a ferrodis replica and a redis replica of it; a redis replica of
#            the ferrodis replica (redis -> ferrodis -> redis).
# While redis-benchmark -P 16 writes every type, a script (tools/repl_load.py) sends expiring
# keys, MULTI/EXEC, EVAL, streams with consumer groups and several databases through
# redis-cli --pipe. After both end: every expiring key has expired on the master (INFO keyspace
# expires=0), the offsets meet, then DEBUG DIGEST must be equal on all four and
# tools/repl_compare.py must find every key equal (type, expiry time, value, DUMP).
# Prints offsets, dbsize, digests and the benchmark's figures; exits 1 on any difference (the
# temp dir with the logs is kept then), 2 on a timeout or a server that would not start.
set -u
F=${1:?usage: $0 FERRODIS_BIN [REDIS_BIN] [BASEPORT]}
R=${2:-/usr/bin/redis-server}
BASE=${3:-14100}
N=${N:-100000}
[[ $F == /* ]] || F=$PWD/$F
[[ $R == /* ]] || R=$PWD/$R
TOOLS=$(cd "$(dirname "$0")" && pwd)
D=$(mktemp -d /tmp/repl-acceptance.XXXXXX)
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null; done
  PIDS=()
}
trap cleanup EXIT
die() { echo "FAIL: $*"; echo "logs kept in $D"; trap - EXIT; cleanup; exit 2; }
cli() { timeout 10 redis-cli -p "$@"; }
field() { cli "$1" info "$2" | tr -d '\r' | grep -m1 "^$3:" | cut -d: -f2; }

start() { # name binary port [master-port]
  mkdir -p "$D/$1"
  local extra=()
  [[ -n ${4:-} ]] && extra=(--replicaof 127.0.0.1 "$4")
  "$2" --port "$3" --dir "$D/$1" --save "" --appendonly no --daemonize no --logfile "$D/$1/log" \
    --enable-debug-command yes "${extra[@]}" &
  PIDS+=($!)
  local i
  for i in $(seq 100); do cli "$3" ping > /dev/null 2>&1 && return; sleep 0.1; done
  die "$1 ($2) did not start on port $3"
}

# Waits (up to $2 seconds) for the command $1 to succeed.
until_ok() {
  local i
  for i in $(seq $(( $2 * 10 ))); do eval "$1" && return 0; sleep 0.1; done
  return 1
}

scenario() { # label master-bin replica-bin (the chain's middle is always ferrodis)
  local label=$1 MB=$2 OB=$3 p1=$((BASE + 1)) p2=$((BASE + 2)) p3=$((BASE + 3)) p4=$((BASE + 4))
  local ports=($p1 $p2 $p3 $p4)
  rm -rf "$D"/n?
  start n1 "$MB" $p1
  start n2 "$OB" $p2 $p1
  start n3 "$F" $p3 $p1
  start n4 "$R" $p4 $p3
  local p
  for p in $p2 $p3 $p4; do
    until_ok "[[ \$(field $p replication master_link_status) == up ]]" 60 || die "$label: replica $p never linked"
  done
  local t0=$SECONDS
  redis-benchmark -p $p1 -P 16 -c 20 -n "$N" -r 50000 -q \
    -t set,incr,lpush,rpush,lpop,rpop,sadd,hset,spop,zadd,zpopmin,lrange_100,mset,xadd \
    > "$D/bench.$label" 2>&1 &
  local bench=$!
  python3 "$TOOLS/repl_load.py" | timeout 600 redis-cli -p $p1 --pipe > "$D/pipe.$label" 2>&1
  local pipe_rc=$?
  # Only the load's own processes: the servers are children of this shell too.
  wait $bench || die "$label: redis-benchmark failed ($(tail -c 300 "$D/bench.$label"))"
  [[ $pipe_rc == 0 ]] || die "$label: redis-cli --pipe failed ($(cat "$D/pipe.$label"))"
  local load_s=$((SECONDS - t0))
  # Every expiring key of the script lives at most 5 s: wait until the master expired them all
  # (its DELs are in the stream) so that no node can still hold one the others dropped.
  until_ok "! cli $p1 info keyspace | grep -q 'expires=[1-9]'" 60 || die "$label: keys with a TTL never expired"
  local offs
  until_ok "offs=\$(for p in ${ports[*]}; do field \$p replication master_repl_offset; done | tr '\n' ' ');
            [[ \$(echo \$offs | tr ' ' '\n' | sort -u | wc -l) == 1 ]]" 120 || die "$label: offsets never met: $offs"
  local digests sizes
  digests=$(for p in "${ports[@]}"; do cli $p debug digest; done | tr '\n' ' ')
  sizes=$(for p in "${ports[@]}"; do cli $p dbsize; done | tr '\n' ' ')
  echo "== $label (load ${load_s}s): n1 $(basename "$MB") master, n2 $(basename "$OB") and n3 ferrodis replicas of n1, n4 redis replica of n3"
  echo "   offsets: $offs"
  echo "   dbsize (db0): $sizes"
  echo "   digests: $digests"
  echo "   pipe: $(grep -E '^errors' "$D/pipe.$label")"
  echo "   benchmark: $(tr '\r' '\n' < "$D/bench.$label" | grep -E 'requests per second' | sed -E 's/: ([0-9.]+) requests per second.*/=\1/' | tr '\n' ' ')"
  local fail=0
  if [[ $(echo "$digests" | tr ' ' '\n' | grep -v '^$' | sort -u | wc -l) != 1 ]]; then
    echo "   DEBUG DIGEST differs"; fail=1
  fi
  local kinds=()
  kinds+=("$([[ $MB == "$F" ]] && echo F || echo R):$p1" "$([[ $OB == "$F" ]] && echo F || echo R):$p2" "F:$p3" "R:$p4")
  python3 "$TOOLS/repl_compare.py" "${kinds[@]}" | sed 's/^/   /'
  [[ ${PIPESTATUS[0]} == 0 ]] || fail=1
  cleanup
  return $fail
}

rc=0
scenario fmaster "$F" "$R" || rc=1
scenario rmaster "$R" "$F" || rc=1
if [[ $rc == 0 ]]; then
  echo "PASS"; rm -rf "$D"
else
  echo "FAIL: logs kept in $D"
fi
exit $rc
