#!/usr/bin/env bash
# Runs Redis 7.0.15's cluster suite (tests/cluster, runtest-cluster: what
# ../shared/redis-tests/run.sh --cluster runs) in one go against ferrodis, or with --redis
# against Debian's redis-server (the baseline), on ports a caller chooses, and prints a per-unit
# table: ok, err, and whether the unit finished.
#
#   tools/cluster-suite.sh [--redis] [--server BIN] [--base PORT] [--count N] [--timeout S]
#                          [--out DIR] [--keep] [TEST...]      e.g. TEST = 04-resharding
#
# Why not run.sh --cluster itself: the suite's instances take client ports from 30000 and cluster
# bus ports at +10000 (up to 41023), in the kernel's ephemeral range (32768-60999), where an
# outgoing connection can already hold the port; and its base port is fixed in instances.tcl.
# This makes the same scratch copy run.sh makes (the binary under test behind src/redis-server)
# with the base port and the number of ports set (defaults 15000 and 900: client ports
# 15000-15899, bus ports 25000-25899), so that two runs (ours and --redis) can share a machine
# with different --base. The whole run is stopped after --timeout seconds (default 3600); a unit
# that was running then shows as "timeout". TESTs given run only those units (--single each).
# The full log is OUT/run.log; with --keep the scratch tree (every instance's log) is kept too.
# Exit status: 0 when every unit ran to its end with no FAILED, 1 otherwise.
set -u
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SUITE=${REDIS_TESTS:-$HERE/../shared/redis-tests}/7.0.15
BIN=$HERE/target/ci/ferrodis-server
BASE=15000 COUNT=900 TIMEOUT=3600 OUT="" KEEP=0 TESTS=()
while [[ $# -gt 0 ]]; do
  case $1 in
    --redis) BIN=/usr/bin/redis-server; shift ;;
    --server) BIN=$2; shift 2 ;;
    --base) BASE=$2; shift 2 ;;
    --count) COUNT=$2; shift 2 ;;
    --timeout) TIMEOUT=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    --keep) KEEP=1; shift ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    *) TESTS+=("$1"); shift ;;
  esac
done
[[ -d $SUITE/tests/cluster ]] || { echo "cluster-suite: $SUITE/tests/cluster not found" >&2; exit 2; }
command -v tclsh >/dev/null || { echo "cluster-suite: tclsh missing (apt-get install tcl)" >&2; exit 2; }
[[ $BIN == /* ]] || BIN=$PWD/$BIN
[[ -x $BIN ]] || { echo "cluster-suite: no executable at $BIN (build first)" >&2; exit 2; }
if (( BASE < 1024 || BASE + COUNT + 10000 > 32768 )); then
  echo "cluster-suite: ports $BASE..$((BASE + COUNT - 1)) and their bus ports (+10000) must lie in 1024..32767" >&2
  exit 2
fi
[[ -n $OUT ]] || OUT=$(mktemp -d "${TMPDIR:-/tmp}/cluster-suite-XXXXXX")
mkdir -p "$OUT"

WORK=$(mktemp -d "${TMPDIR:-/tmp}/cluster-suite-tree-XXXXXX")
cp -r "$SUITE"/. "$WORK"/
mkdir -p "$WORK/src" "$WORK/tests/tmp"
printf '#!/bin/sh\nexec "%s" "$@"\n' "$BIN" >"$WORK/src/redis-server"
chmod +x "$WORK/src/redis-server"
for t in redis-cli redis-benchmark redis-check-aof redis-check-rdb; do
  ln -s "$(command -v $t)" "$WORK/src/$t"
done
# The only change to the suite: where its instances' ports start and how many it may try.
sed -i -e "s/^set ::redis_base_port .*/set ::redis_base_port $BASE/" \
       -e "s/^set ::redis_port_count .*/set ::redis_port_count $COUNT/" "$WORK/tests/instances.tcl"
grep -q "^set ::redis_base_port $BASE\$" "$WORK/tests/instances.tcl" ||
  { echo "cluster-suite: could not set the base port in instances.tcl" >&2; exit 2; }

args=()
for t in "${TESTS[@]}"; do args+=(--single "${t%.tcl}"); done
echo "cluster-suite: runtest-cluster ${args[*]} (binary: $BIN; ports $BASE+$COUNT; tree: $WORK; out: $OUT)"
# timeout puts itself in its own process group and, on expiry, kills the whole group: the suite
# and every instance it started (they run in the foreground group, not daemonized).
(cd "$WORK" && exec timeout -k 10 "$TIMEOUT" ./runtest-cluster "${args[@]}") 2>&1 | tee "$OUT/run.log"
rc=${PIPESTATUS[0]}
# Belt and braces: any process still running inside this scratch tree (the instances run in its
# tests/cluster/tmp) is one this run started; kill those by pid.
for p in /proc/[0-9]*; do
  [[ $(readlink "$p/cwd" 2>/dev/null) == "$WORK"/* ]] && kill -9 "${p#/proc/}" 2>/dev/null
done

# Per-unit table from the log ("Testing unit: X", then "HH:MM:SS> name: OK | FAILED: ...").
sed 's/\x1b\[[0-9;]*m//g' "$OUT/run.log" | awk -v rc="$rc" '
  /^Testing unit: / { if (u != "") done[u] = 1; u = $3; order[++n] = u; ok[u] = 0; err[u] = 0; next }
  /^[0-9:]+> .*: FAILED/ { err[u]++; pending = 0; next }
  # The result ends the test line, after any progress the test prints ("WWW...OK")...
  /^[0-9:]+> .*OK$/ { ok[u]++; pending = 0; next }
  /^[0-9:]+> / { pending = 1; next }
  # ...or a later line, after lines a tool or the runner printed in between.
  pending && /^FAILED/ { err[u]++; pending = 0; next }
  pending && /OK$/ { ok[u]++; pending = 0; next }
  /^FAILED: caught an error/ { err[u]++; next }
  /^Cleaning up|^GOOD! No errors|^WARNING [0-9]+ test\(s\) failed/ { if (u != "") done[u] = 1 }
  END {
    printf "%-36s %5s %5s  %s\n", "unit", "ok", "err", "finished"
    for (i = 1; i <= n; i++) {
      v = order[i]; tok += ok[v]; terr += err[v]
      printf "%-36s %5d %5d  %s\n", v, ok[v], err[v], (v in done) ? "yes" : ((rc == 124 || rc == 137) ? "timeout" : "no")
    }
    printf "total: %d ok, %d err, %d units\n", tok, terr, n
    bad = (rc != 0 || terr > 0)
    for (i = 1; i <= n; i++) if (!(order[i] in done)) bad = 1
    exit bad
  }' >"$OUT/table.txt"
bad=$?
cat "$OUT/table.txt"
if [[ $KEEP == 1 ]]; then echo "cluster-suite: kept $WORK"; else rm -rf "$WORK"; fi
exit "$bad"
