#!/usr/bin/env bash
# A Sentinel failover end to end, on loopback: three Debian redis-sentinel (7.0) watch one master
# and two replicas of the server under test. While redis-benchmark writes to the master, the master
# is killed with SIGKILL; the script then checks, printing each step with the seconds it took:
#
#   1. the sentinels promote one replica (get-master-addr-by-name names it, its ROLE is master);
#   2. the other replica follows the new master (master_port, master_link_status:up);
#   3. a key written to the new master reaches the other replica;
#   4. the old master, restarted as a plain master, is turned into a replica of the new one by the
#      sentinels and catches up (its link up, the key there).
#
#   tools/sentinel_failover.sh [--server BIN] [--redis] [--port BASE] [--keep]
#
# --server: the binary under test (default target/release/ferrodis-server); --redis: Debian's
# redis-server instead (the baseline); --port: servers at BASE..BASE+2, sentinels at BASE+10..+12
# (default: a free range picked at random in 40000-59000); --keep: keep the scratch directory (every instance's log is there).
# Exit status 0 when every step passed, 1 otherwise; every server and sentinel started is killed.
set -u
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SERVER=$HERE/target/release/ferrodis-server
BASE="" KEEP=0
while [[ $# -gt 0 ]]; do
  case $1 in
    --server) SERVER=$2; shift 2 ;;
    --redis) SERVER=$(command -v redis-server); shift ;;
    --port) BASE=$2; shift 2 ;;
    --keep) KEEP=1; shift ;;
    -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
    *) echo "sentinel_failover: unknown argument $1" >&2; exit 2 ;;
  esac
done
for t in redis-sentinel redis-cli redis-benchmark; do
  command -v $t >/dev/null || { echo "sentinel_failover: $t missing (apt-get install redis-sentinel redis-tools)" >&2; exit 2; }
done
[[ -x $SERVER ]] || { echo "sentinel_failover: no executable at $SERVER (build first)" >&2; exit 2; }
# A port is free when nothing accepts a connection on it (other test runs share this machine).
port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
range_free() { local p; for p in $1 $(($1 + 1)) $(($1 + 2)) $(($1 + 10)) $(($1 + 11)) $(($1 + 12)); do port_free $p || return 1; done; }
if [[ -z $BASE ]]; then
  # Below the kernel's ephemeral range (32768 and up): a port there may be the local end of some
  # outgoing connection, which accepts nothing yet makes bind fail.
  for _ in 1 2 3 4 5 6 7 8 9 10; do BASE=$((20000 + RANDOM % 12700)); range_free $BASE && break; done
fi
range_free "$BASE" || { echo "sentinel_failover: ports $BASE..$((BASE + 12)) are taken" >&2; exit 2; }

DIR=$(mktemp -d "${TMPDIR:-/tmp}/sentinel-failover-XXXXXX")
SERVERS=($BASE $((BASE + 1)) $((BASE + 2)))
SENTINELS=($((BASE + 10)) $((BASE + 11)) $((BASE + 12)))
declare -A PID
BENCH=""
T0=$SECONDS
FAILED=0

cleanup() {
  [[ -n $BENCH ]] && kill "$BENCH" 2>/dev/null
  { for p in "${PID[@]}"; do kill -9 "$p"; done; wait; } 2>/dev/null
  if [[ $FAILED == 1 ]]; then
    # The scratch directory dies with the machine under CI: show the end of every log here.
    local log
    for log in "$DIR"/*/*.log; do echo "--- $log (last 40 lines)"; tail -n 40 "$log"; done
  fi
  if [[ $KEEP == 1 || $FAILED == 1 ]]; then echo "logs: $DIR"; else rm -rf "$DIR"; fi
}
trap cleanup EXIT

say() { printf '[%3ss] %s\n' $((SECONDS - T0)) "$*"; }
fail() { say "FAIL: $*"; FAILED=1; exit 1; }
cli() { local port=$1; shift; timeout 5 redis-cli -p "$port" "$@" 2>/dev/null; }
field() { cli "$1" INFO "$2" | tr -d '\r' | sed -n "s/^$3://p"; }
# wait_for SECONDS WHAT COMMAND...: polls COMMAND every 100 ms until it succeeds.
wait_for() {
  local limit=$1 what=$2 end=$((SECONDS + $1)); shift 2
  until "$@"; do
    ((SECONDS < end)) || fail "$what: not after ${limit}s"
    sleep 0.1
  done
  say "$what"
}

start_server() { # PORT [ARGS...]
  local port=$1; shift
  mkdir -p "$DIR/$port"
  "$SERVER" --port "$port" --dir "$DIR/$port" --logfile "$DIR/$port/server.log" --save "" \
    --repl-diskless-sync-delay 0 "$@" &
  PID[$port]=$!
  wait_for 10 "server :$port up" is_up "$port"
}
# is_up PORT: the process started on PORT answers there (and not some other program).
is_up() {
  kill -0 "${PID[$1]}" 2>/dev/null || fail "the process for :$1 exited (log: $DIR/$1)"
  [[ $(field "$1" server process_id) == "${PID[$1]}" ]]
}

start_sentinel() {
  local port=$1
  mkdir -p "$DIR/$port"
  cat >"$DIR/$port/sentinel.conf" <<EOF
port $port
dir $DIR/$port
logfile $DIR/$port/sentinel.log
sentinel monitor mymaster 127.0.0.1 $BASE 2
sentinel down-after-milliseconds mymaster 2000
sentinel failover-timeout mymaster 10000
sentinel parallel-syncs mymaster 2
EOF
  redis-sentinel "$DIR/$port/sentinel.conf" &
  PID[$port]=$!
  wait_for 10 "sentinel :$port up" is_up "$port"
}

master_addr() { cli "$1" SENTINEL get-master-addr-by-name mymaster | tr '\n' ' '; }
sentinel_sees() { # PORT: every sentinel knows the two replicas and the two other sentinels
  local s info
  for s in "${SENTINELS[@]}"; do
    info=$(cli "$s" SENTINEL master mymaster | tr '\n' ' ')
    [[ $info == *"num-slaves 2 "* && $info == *"num-other-sentinels 2 "* ]] || return 1
  done
}
# settled_master: prints the master's port once every sentinel names the same one and none is in
# the middle of a failover. A sentinel starved of CPU for down-after-milliseconds may judge a new
# master down and fail over once more; that is Sentinel's decision, and the checks that follow use
# the master the sentinels settled on.
settled_master() {
  local s p port=""
  for s in "${SENTINELS[@]}"; do
    [[ $(cli "$s" SENTINEL master mymaster | tr '\n' ' ') == *failover_in_progress* ]] && return 1
    p=$(master_addr "$s" | cut -d' ' -f2)
    [[ -n $p && ( -z $port || $p == "$port" ) ]] || return 1
    port=$p
  done
  echo "$port"
}
is_settled() { settled_master >/dev/null; }
replica_of() { # PORT MASTER: PORT replicates MASTER with its link up
  [[ $(field "$1" replication role) == slave && $(field "$1" replication master_port) == "$2" &&
     $(field "$1" replication master_link_status) == up ]]
}
has_key() { [[ $(cli "$1" GET failover:probe) == "$2" ]]; }

say "server: $SERVER; scratch: $DIR"
start_server "${SERVERS[0]}"
start_server "${SERVERS[1]}" --replicaof 127.0.0.1 "$BASE"
start_server "${SERVERS[2]}" --replicaof 127.0.0.1 "$BASE"
wait_for 20 "both replicas linked to :$BASE" eval "replica_of ${SERVERS[1]} $BASE && replica_of ${SERVERS[2]} $BASE"
for s in "${SENTINELS[@]}"; do start_sentinel "$s"; done
wait_for 30 "sentinels found both replicas and each other" sentinel_sees

redis-benchmark -p "$BASE" -t set,incr,lpush -r 100000 -n 100000000 -c 20 -q >"$DIR/benchmark.log" 2>&1 &
BENCH=$!
sleep 2
say "master :$BASE has $(cli "$BASE" DBSIZE) keys, offset $(field "$BASE" replication master_repl_offset); kill -9 it"
{ kill -9 "${PID[$BASE]}"; wait "${PID[$BASE]}"; } 2>/dev/null
unset "PID[$BASE]"
FAIL_AT=$SECONDS

wait_for 60 "sentinel :${SENTINELS[0]} names a new master" eval '[[ $(master_addr ${SENTINELS[0]}) != "127.0.0.1 $BASE " && -n $(master_addr ${SENTINELS[0]}) ]]'
NEW=$(master_addr "${SENTINELS[0]}" | cut -d' ' -f2)
say "new master :$NEW ($((SECONDS - FAIL_AT))s after the kill)"
[[ $NEW == "${SERVERS[1]}" || $NEW == "${SERVERS[2]}" ]] || fail "new master :$NEW is not one of the replicas"
wait_for 30 "every sentinel names one master and none is failing over" is_settled
SETTLED=$(settled_master)
if [[ $SETTLED != "$NEW" ]]; then
  say "the sentinels failed over once more, to :$SETTLED"
  NEW=$SETTLED
fi
OTHER=${SERVERS[1]}; [[ $NEW == "$OTHER" ]] && OTHER=${SERVERS[2]}
wait_for 30 ":$NEW has ROLE master" eval '[[ $(cli $NEW ROLE | head -1) == master ]]'
wait_for 60 ":$OTHER replicates :$NEW" replica_of "$OTHER" "$NEW"
kill "$BENCH" 2>/dev/null; wait "$BENCH" 2>/dev/null; BENCH=""
cli "$NEW" SET failover:probe after-failover >/dev/null
wait_for 30 "a write to :$NEW reaches :$OTHER" has_key "$OTHER" after-failover

say "restart the old master :$BASE (as a master)"
start_server "$BASE"
rejoined() { local m; m=$(settled_master) && replica_of "$BASE" "$m"; }
wait_for 60 "old master :$BASE rejoins as a replica of the sentinels' master" rejoined
SETTLED=$(settled_master)
[[ $SETTLED == "$NEW" ]] || say "the sentinels failed over once more, to :$SETTLED"
NEW=$SETTLED
wait_for 30 "the write reaches :$BASE" has_key "$BASE" after-failover
wait_for 30 "sentinels list :$BASE among the replicas" eval \
  "cli ${SENTINELS[0]} SENTINEL replicas mymaster | grep -qx 127.0.0.1:$BASE"
say "PASS: failover to :$NEW in $((SECONDS - T0))s"
