#!/bin/bash
# BGSAVE under write load, side by side (ARCHITECTURE.md section 7; issue 5 acceptance 4).
# Fills 1M keys of 100 bytes (DEBUG POPULATE), starts redis-benchmark SET on new keys, runs BGSAVE and
# samples the parent RSS plus the child's Private_Dirty until it ends; PINGs every 10 ms meanwhile.
# usage: tools/bgsave_peak.sh <name> <server-binary> <port>    e.g. tools/bgsave_peak.sh redis /usr/bin/redis-server 7301
NAME=$1; BIN=$2; P=$3
TOOLS=$(cd "$(dirname "$0")" && pwd)
D=/tmp/meas-$NAME; rm -rf $D; mkdir -p $D; cd $D
$BIN --port $P --dir $D --save '' --appendonly no --enable-debug-command yes --logfile $D/log --daemonize no > $D/out 2>&1 &
SPID=$!
for i in $(seq 1 50); do redis-cli -p $P ping >/dev/null 2>&1 && break; sleep 0.1; done
redis-cli -p $P debug populate 1000000 key 100 > /dev/null
sleep 1
rss() { awk '/VmRSS/{print $2}' /proc/$1/status 2>/dev/null; }
echo "$NAME rss_before_kb $(rss $SPID)"
# writers
redis-benchmark -p $P -t ${BT:-set} -r 1000000 -d 100 -n 100000000 -c 20 -q > /dev/null 2>&1 &
BPID=$!
python3 "$TOOLS/ping_latency.py" $P 14 > $D/latency.txt 2>&1 &
LPID=$!
(timeout -s INT 14 script -qfc "redis-cli -p $P --latency" $D/rcl.txt >/dev/null 2>&1) &
RPID=$!
sleep 2
c0=$(redis-cli -p $P info stats | tr -d "\r" | awk -F: '/total_commands_processed/{print $2}'); t0=$(date +%s.%N)
redis-cli -p $P bgsave
peak_parent=0; peak_total=0
while true; do
  inprog=$(redis-cli -p $P info persistence | tr -d '\r' | awk -F: '/rdb_bgsave_in_progress/{print $2}')
  r=$(rss $SPID); r=${r:-0}
  c=0
  for ch in $(pgrep -P $SPID); do
    pd=$(awk '/Private_Dirty/{s+=$2} END{print s}' /proc/$ch/smaps_rollup 2>/dev/null); c=$((c + ${pd:-0}))
  done
  [ $r -gt $peak_parent ] && peak_parent=$r
  t=$((r + c)); [ $t -gt $peak_total ] && peak_total=$t
  [ "$inprog" = "0" ] && break
  sleep 0.05
done
c1=$(redis-cli -p $P info stats | tr -d "\r" | awk -F: '/total_commands_processed/{print $2}'); t1=$(date +%s.%N)
echo "$NAME ops_per_sec_during_bgsave $(echo "($c1-$c0)/($t1-$t0)" | bc)"
sleep 1
wait $LPID 2>/dev/null; wait $RPID 2>/dev/null
kill $BPID; wait $BPID 2>/dev/null
echo "$NAME peak_parent_rss_kb $peak_parent peak_parent_plus_child_private_dirty_kb $peak_total"
redis-cli -p $P info stats | tr -d '\r' | grep -E "latest_fork_usec|total_forks"
redis-cli -p $P info persistence | tr -d '\r' | grep -E "rdb_last_cow_size|rdb_last_bgsave_time_sec|rdb_last_bgsave_status"
echo "latency: $(cat $D/latency.txt)"
echo "redis-cli --latency: $(tr '\r' '\n' < $D/rcl.txt | grep -a -o 'min: [^(]*([0-9]* samples)' | tail -1)"
ls -la $D/dump.rdb
grep -E "Background saving|fork|Fork" $D/log $D/out | tail -4
redis-cli -p $P shutdown nosave >/dev/null 2>&1
wait $SPID 2>/dev/null
