#!/usr/bin/env bash
# Issue 19, acceptance 6: redis-benchmark --cluster against a 3-master ferrodis cluster and a
# 3-master redis-server 7.0 cluster on the same machine, side by side. The two clusters run at
# the same time and the benchmark alternates between them (ROUNDS rounds), so that a noisy,
# shared machine weighs on both alike; per run it prints requests/s (redis-benchmark) and the CPU
# the three nodes used per request (utime+stime from /proc, in microseconds), then the medians
# and the ratios ferrodis/redis.
#
#   tools/cluster_bench.sh [--server PATH] [--base PORT] [-n REQUESTS] [-c CLIENTS] [--rounds R]
#                          [--pipeline P]
#
# Defaults: target/ci/ferrodis-server; ferrodis on 16960..16962, redis on base+10..; -n 200000,
# -c 50, 3 rounds, no pipelining. Nodes are killed at the end.
set -uo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
server=$HERE/target/ci/ferrodis-server
base=16960 n=200000 clients=50 rounds=3 pipeline=1
while [ $# -gt 0 ]; do
  case "$1" in
    --server) server=$2; shift 2 ;;
    --base) base=$2; shift 2 ;;
    -n) n=$2; shift 2 ;;
    -c) clients=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --pipeline) pipeline=$2; shift 2 ;;
    -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
case $server in /*) ;; *) server=$PWD/$server ;; esac
fdir=/tmp/ferrodis-bench rdir=/tmp/redis-bench
cleanup() {
  "$HERE/tools/cluster_create.sh" --dir "$fdir" --stop
  "$HERE/tools/cluster_create.sh" --dir "$rdir" --stop
}
trap cleanup EXIT
rm -rf "$fdir" "$rdir"
"$HERE/tools/cluster_create.sh" --server "$server" --base "$base" --nodes 3 --replicas 0 --dir "$fdir" \
  --node-timeout 15000 >/dev/null 2>&1 || { echo "ferrodis cluster: create failed"; exit 1; }
"$HERE/tools/cluster_create.sh" --server /usr/bin/redis-server --base $((base + 10)) --nodes 3 --replicas 0 \
  --dir "$rdir" --node-timeout 15000 >/dev/null 2>&1 || { echo "redis cluster: create failed"; exit 1; }
sleep 2
cpu_ticks() { # summed utime+stime (clock ticks) of the pids in FILE
  local t=0 p
  while read -r p; do
    t=$((t + $(awk '{print $14 + $15}' "/proc/$p/stat")))
  done <"$1"
  echo $t
}
hz=$(getconf CLK_TCK)
echo "machine: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg); -n $n -c $clients -P $pipeline"
printf '%-9s %-5s %-4s %12s %14s\n' server round test "requests/s" "cpu us/request"
for r in $(seq "$rounds"); do
  for kind in ferrodis redis; do
    if [ $kind = ferrodis ]; then port=$base dir=$fdir; else port=$((base + 10)) dir=$rdir; fi
    for t in set get; do
      c0=$(cpu_ticks "$dir/pids")
      out=$(redis-benchmark --cluster -h 127.0.0.1 -p "$port" -t $t -n "$n" -c "$clients" -P "$pipeline" -q 2>&1)
      c1=$(cpu_ticks "$dir/pids")
      rps=$(grep -oE '[0-9.]+ requests per second' <<<"$out" | tail -n 1 | cut -d' ' -f1)
      errs=$(grep -ciE 'error|err ' <<<"$out")
      cpu=$(awk -v d=$((c1 - c0)) -v hz="$hz" -v n="$n" 'BEGIN { printf "%.2f", d / hz * 1e6 / n }')
      printf '%-9s %-5s %-4s %12s %14s%s\n' $kind "$r" $t "${rps:-?}" "$cpu" "$([ "$errs" = 0 ] || echo "  ($errs error lines)")"
      echo "$kind $t ${rps:-0} $cpu" >>"$fdir/results"
    done
  done
done
echo
awk '
  { k = $1 " " $2; rps[k] = rps[k] " " $3; cpu[k] = cpu[k] " " $4 }
  function median(s,   a, n, i, j, t) {
    n = split(s, a, " ")
    for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
    return (n % 2) ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
  }
  END {
    for (t = 1; t <= 2; t++) {
      op = (t == 1) ? "set" : "get"
      fr = median(rps["ferrodis " op]); rr = median(rps["redis " op])
      fc = median(cpu["ferrodis " op]); rc = median(cpu["redis " op])
      printf "%s: median requests/s ferrodis %.0f, redis %.0f (ratio %.2f); cpu us/request ferrodis %.2f, redis %.2f (ratio %.2f)\n",
        op, fr, rr, fr / rr, fc, rc, (rc > 0 ? fc / rc : 0)
    }
  }' "$fdir/results"
