#!/usr/bin/env bash
# Runs units of Redis 7.0.15's test suite in external mode (run.sh --external): one server,
# started here with --enable-debug-command yes, serves unit after unit; the suite then skips what
# needs its own servers (external:skip). The server is started afresh only when it died or a
# unit ended in an exception or a timeout (such a unit leaves its CONFIG SET values behind, e.g.
# rdb-key-save-delay 2147483647 from unit/type/set, and the next unit would inherit them).
#
#   tools/redis-suite-external.sh [--redis] [--server BIN] [--port P] [--out DIR] [UNIT...]
#
# Units default to tests/redis-suite/units.txt; skip.txt applies as in tools/redis-suite.sh, and
# tests tagged `repl` / `needs:repl` are still left out here (they were not checked against one
# long-lived server). Prints one line per unit (ok, err, exit status) and exits 1 on any err.
set -u
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
RUN=${REDIS_TESTS:-$HERE/../shared/redis-tests}/run.sh
BIN=$HERE/target/release/ferrodis-server
PORT=$((17000 + RANDOM % 1000)) OUT="" UNITS=()
while [[ $# -gt 0 ]]; do
  case $1 in
    --redis) BIN=/usr/bin/redis-server; shift ;;
    --server) BIN=$(realpath "$2"); shift 2 ;;
    --port) PORT=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
    *) UNITS+=("$1"); shift ;;
  esac
done
if [[ ${#UNITS[@]} -eq 0 ]]; then
  mapfile -t UNITS < <(sed -e 's/#.*//' -e 's/[[:space:]]*$//' "$HERE/tests/redis-suite/units.txt" | grep -v '^$')
fi
[[ -n $OUT ]] || OUT=$(mktemp -d "${TMPDIR:-/tmp}/redis-suite-ext-XXXXXX")
mkdir -p "$OUT/data"
BASE=$((30000 + (RANDOM % 20) * 1000))
start() {
  "$BIN" --port "$PORT" --enable-debug-command yes --save "" --appendonly no --dir "$OUT/data" \
    --daemonize no >>"$OUT/server.log" 2>&1 &
  SPID=$!
  for _ in $(seq 50); do redis-cli -p "$PORT" ping >/dev/null 2>&1 && return; sleep 0.1; done
}
stop() { kill -9 "$SPID" 2>/dev/null; wait "$SPID" 2>/dev/null; }
trap stop EXIT
start
total_ok=0 total_err=0
for unit in "${UNITS[@]}"; do
  kill -0 "$SPID" 2>/dev/null || { echo "server died before $unit"; start; }
  name=${unit//\//_}
  timeout 900 bash "$RUN" --server "$BIN" --external "127.0.0.1:$PORT" "$unit" -- --timeout 120 --baseport "$BASE" \
    --skipfile "$HERE/tests/redis-suite/skip.txt" --tags -needs:repl --tags -repl >"$OUT/$name.log" 2>&1
  rc=$?
  plain=$(sed 's/\x1b\[[0-9;]*m//g' "$OUT/$name.log")
  ok=$(grep -c '^\[ok\]' <<<"$plain") err=$(grep -c '^\[err\]' <<<"$plain")
  state=done
  grep -q '^\[exception\]' <<<"$plain" && state=exception
  grep -q '^\[TIMEOUT\]' <<<"$plain" && state=timeout
  printf '%-48s %5s %5s  %s\n' "$unit" "$ok" "$err" "$state"
  total_ok=$((total_ok + ok)) total_err=$((total_err + err))
  if [[ $rc != 0 || $state != done ]]; then stop; start; fi
done
echo "logs: $OUT"
echo "redis-suite-external: $total_ok ok, $total_err err"
[[ $total_err == 0 ]]
