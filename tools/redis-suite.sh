#!/usr/bin/env bash
# Runs units of Redis 7.0.15's own test suite (../shared/redis-tests/run.sh) against ferrodis, or
# with --redis against Debian's redis-server (the baseline), one runtest per unit, and prints a
# per-unit table: ok, err, and whether the unit finished (a unit that hangs is stopped by the
# per-test timeout and shows as "timeout").
#
#   tools/redis-suite.sh [--redis] [--server BIN] [--tls] [--jobs N] [--timeout S] [--out DIR] [--whole] [UNIT...]
#
# --tls runs the units over TLS (run.sh --tls: test certificates made with openssl, every server
# on a tls-port only, the suite's clients speaking TLS; needs the tcl-tls package).
#
# Units default to tests/redis-suite/units.txt (every unit of ::all_tests that needs no
# replication, cluster or TLS; the file says why each other one is left out) plus
# tests/redis-suite/repl-units.txt (replication units, run whole). In the units.txt ones, tests
# that need the replication stream or REPLICAOF are still skipped by name through
# tests/redis-suite/skip.txt, for ferrodis and the baseline alike, so the two columns compare.
# --whole runs every unit given as the replication units are run: no tag left out, no skip list.
# Exit status: 0 when every unit finished with no [err], 1 otherwise.
set -u
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
RUN=${REDIS_TESTS:-$HERE/../shared/redis-tests}/run.sh
SERVER=$HERE/target/release/ferrodis-server
JOBS=1 TIMEOUT=120 OUT="" WHOLE=0 UNITS=() TLS_FLAG=""
while [[ $# -gt 0 ]]; do
  case $1 in
    --redis) SERVER=redis; shift ;;
    --server) SERVER=$2; shift 2 ;;
    --jobs) JOBS=$2; shift 2 ;;
    --tls) TLS_FLAG=--tls; shift ;;
    --timeout) TIMEOUT=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    --whole) WHOLE=1; shift ;;
    -h|--help) sed -n '2,19p' "$0"; exit 0 ;;
    *) UNITS+=("$1"); shift ;;
  esac
done
[[ -f $RUN ]] || { echo "redis-suite: $RUN not found" >&2; exit 2; }
units_of() { sed -e 's/#.*//' -e 's/[[:space:]]*$//' "$1" | grep -v '^$'; }
if [[ ${#UNITS[@]} -eq 0 ]]; then
  mapfile -t UNITS < <(units_of "$HERE/tests/redis-suite/units.txt"; units_of "$HERE/tests/redis-suite/repl-units.txt")
fi
# Replication units run whole: their `repl` tests too, and no skip list.
REPL_UNITS=" $(units_of "$HERE/tests/redis-suite/repl-units.txt" | tr '\n' ' ') "
[[ $WHOLE == 1 ]] && REPL_UNITS=" ${UNITS[*]} "
export REPL_UNITS
[[ -n $OUT ]] || OUT=$(mktemp -d "${TMPDIR:-/tmp}/redis-suite-XXXXXX")
mkdir -p "$OUT"
SKIP=$HERE/tests/redis-suite/skip.txt
# The binary runs under the name it is installed with as a drop-in, redis-server (the suite reads
# it back from the process title and INFO).
if [[ $SERVER != redis ]]; then
  mkdir -p "$OUT/bin"
  ln -sf "$(realpath "$SERVER")" "$OUT/bin/redis-server"
  SERVER=$OUT/bin/redis-server
fi
# Each run picks its own port range (units are 250 ports apart), so two runs can share a machine.
# Every port stays below 32768, where Linux's ephemeral ports start: an outgoing connection of
# another unit could otherwise hold a server's port, and the suite's retry on a busy port hangs
# when the unit restarts servers in one directory (its "Ready to accept" count starts over).
BASE=$((12000 + (RANDOM % 10) * 1000))
export RUN SERVER TIMEOUT OUT SKIP BASE TLS_FLAG

run_unit() {
  local n=$1 unit=$2 name=${2//\//_}
  local port=$((BASE + (n % 40) * 250)) start=$SECONDS target
  if [[ $SERVER == redis ]]; then target=(--redis); else target=(--server "$SERVER"); fi
  local tags=(--skipfile "$SKIP")
  [[ $REPL_UNITS == *" $unit "* ]] && tags=()
  local attempt rc
  for attempt in 1 2 3; do
    timeout $((TIMEOUT * 10)) bash "$RUN" "${target[@]}" ${TLS_FLAG:+--tls} "$unit" -- --timeout "$TIMEOUT" --baseport "$port" \
      "${tags[@]}" >"$OUT/$name.log" 2>&1
    rc=$?
    # Another program held the suite's ports before any test ran: again, elsewhere.
    grep -q "couldn't open socket: address already in use" "$OUT/$name.log" && ! grep -q '^\[' "$OUT/$name.log" || break
    port=$((10000 + (port + 7919 * attempt) % 21000))
  done
  local plain
  plain=$(sed 's/\x1b\[[0-9;]*m//g' "$OUT/$name.log")
  local ok err state=done
  ok=$(grep -c '^\[ok\]' <<<"$plain")
  err=$(grep -c '^\[err\]' <<<"$plain")
  grep -q '^\[TIMEOUT\]' <<<"$plain" && state=timeout
  grep -q '^\[exception\]' <<<"$plain" && state=exception
  [[ $rc -ne 0 && $state == done && $err -eq 0 ]] && state="rc=$rc"
  printf '%s\t%s\t%s\t%s\t%ss\n' "$unit" "$ok" "$err" "$state" $((SECONDS - start)) >"$OUT/$name.result"
}
export -f run_unit

i=0
for u in "${UNITS[@]}"; do i=$((i + 1)); echo "$i $u"; done | xargs -P "$JOBS" -L1 bash -c 'run_unit "$0" "$1"'

status=0 total_ok=0 total_err=0
printf '%-45s %6s %6s  %s\n' unit ok err finished
for u in "${UNITS[@]}"; do
  f=$OUT/${u//\//_}.result
  if [[ ! -f $f ]]; then printf '%-45s %6s %6s  %s\n' "$u" - - missing; status=1; continue; fi
  IFS=$'\t' read -r unit ok err state secs <"$f"
  printf '%-45s %6s %6s  %s %s\n' "$unit" "$ok" "$err" "$state" "$secs"
  total_ok=$((total_ok + ok)) total_err=$((total_err + err))
  [[ $err -eq 0 && $state == done ]] || status=1
done
echo "logs: $OUT"
echo "redis-suite: $total_ok ok, $total_err err"
exit $status
