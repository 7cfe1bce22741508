#!/bin/bash
# Replication speed, one server binary at a time (issue 18 acceptance 5); run it for ferrodis and
# for /usr/bin/redis-server alternately, several times, and compare the ratios.
#
#   tools/repl_speed.sh sync BIN PORT [diskless|disk]   full sync of tools/mixed_keys.py's 1M keys:
#       master on PORT, replica on PORT+1 (repl-diskless-sync-delay 0; replica loads from disk);
#       prints the time from REPLICAOF to link up with every key, and each process's CPU meanwhile.
#   tools/repl_speed.sh lag BIN PORT [N]   master on PORT with replicas on PORT+1, PORT+2;
#       redis-benchmark -P 16 -c 50 SETs (N, default 2M): the replicas' lag behind the master each
#       second (KiB, replica offset read first), the master's CPU per request, the catch-up time.
#
# Data: $DATA (default /tmp/repl-speed-data.resp, made by tools/mixed_keys.py when missing).
set -u
MODE=$1; BIN=$2; P=$3; ARG=${4:-}
TOOLS=$(cd "$(dirname "$0")" && pwd)
DATA=${DATA:-/tmp/repl-speed-data.resp}
D=/tmp/repl-speed-$P; rm -rf "$D"; mkdir -p "$D"
cpu() { awk '{print $14+$15}' /proc/$1/stat; }
offset() { redis-cli -p $1 info replication | tr -d '\r' | grep -m1 "^$2:" | cut -d: -f2; }
start() { mkdir -p "$D/$1"; (cd "$D/$1" && exec "$BIN" --port $2 --save "" --appendonly no --logfile "$D/$1.log" "${@:3}") & }
up() { until redis-cli -p $1 info replication 2>/dev/null | grep -q master_link_status:up; do sleep 0.02; done; }
name=$(basename "$BIN")
case $MODE in
sync)
  [[ -f $DATA ]] || python3 "$TOOLS/mixed_keys.py" > "$DATA"
  dl=yes; [[ $ARG == disk ]] && dl=no
  start m $P --repl-diskless-sync $dl --repl-diskless-sync-delay 0; MP=$!
  start r $((P+1)); RP=$!
  sleep 1
  redis-cli -p $P --pipe < "$DATA" > /dev/null
  n=$(redis-cli -p $P dbsize); cm=$(cpu $MP); cr=$(cpu $RP); t0=$(date +%s.%N)
  redis-cli -p $((P+1)) replicaof 127.0.0.1 $P > /dev/null
  up $((P+1)); until [[ $(redis-cli -p $((P+1)) dbsize) == "$n" ]]; do sleep 0.02; done
  t1=$(date +%s.%N)
  echo "$name sync ${ARG:-diskless} keys=$n secs=$(echo "$t1 - $t0" | bc) master_cpu_cs=$(( $(cpu $MP) - cm )) replica_cpu_cs=$(( $(cpu $RP) - cr ))"
  kill $MP $RP ;;
lag)
  n=${ARG:-2000000}
  start m $P; MP=$!; start r1 $((P+1)); R1=$!; start r2 $((P+2)); R2=$!
  sleep 1
  for r in 1 2; do redis-cli -p $((P+r)) replicaof 127.0.0.1 $P > /dev/null; up $((P+r)); done
  c0=$(cpu $MP)
  redis-benchmark -p $P -t set -P 16 -n $n -r 1000000 -d 16 -c 50 -q > "$D/bench.txt" 2>&1 & BP=$!
  lag=""
  while kill -0 $BP 2>/dev/null; do
    o1=$(offset $((P+1)) slave_repl_offset); o2=$(offset $((P+2)) slave_repl_offset); mo=$(offset $P master_repl_offset)
    lag="$lag $(( (mo-o1)/1024 ))/$(( (mo-o2)/1024 ))"
    sleep 1
  done
  c1=$(cpu $MP); t0=$(date +%s.%N); mo=$(offset $P master_repl_offset)
  until (( $(offset $((P+1)) slave_repl_offset) >= mo && $(offset $((P+2)) slave_repl_offset) >= mo )); do sleep 0.05; done
  t1=$(date +%s.%N)
  rps=$(tr '\r' '\n' < "$D/bench.txt" | grep 'requests per second' | tail -1 | awk '{print $2}')
  echo "$name lag rps=$rps master_cpu_us_per_req=$(echo "scale=3; ($c1-$c0)*10000/$n" | bc) lag_KiB=[$lag ] catchup_s=$(echo "$t1 - $t0" | bc)"
  kill $MP $R1 $R2 ;;
*) sed -n '2,13p' "$0"; exit 2 ;;
esac
wait 2>/dev/null
