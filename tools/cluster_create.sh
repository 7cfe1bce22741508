#!/usr/bin/env bash
# Starts N ferrodis (or redis-server) nodes with cluster-enabled yes and forms a cluster with
# `redis-cli --cluster create ... --cluster-replicas R`, then runs `--cluster check`.
#
#   tools/cluster_create.sh [--server PATH] [--base PORT] [--nodes N] [--replicas R] [--dir DIR]
#                           [--node-timeout MS]
#
# Defaults: target/ci/ferrodis-server, ports 20100.., 6 nodes, 1 replica each, /tmp/ferrodis-cluster,
# cluster-node-timeout 3000.
# The nodes keep running (their pids are in DIR/pids); `tools/cluster_create.sh --stop` kills them.
set -euo pipefail
server=target/ci/ferrodis-server
base=20100
nodes=6
replicas=1
node_timeout=3000
dir=/tmp/ferrodis-cluster
stop=0
while [ $# -gt 0 ]; do
    case "$1" in
        --server) server=$2; shift 2 ;;
        --base) base=$2; shift 2 ;;
        --nodes) nodes=$2; shift 2 ;;
        --replicas) replicas=$2; shift 2 ;;
        --dir) dir=$2; shift 2 ;;
        --node-timeout) node_timeout=$2; shift 2 ;;
        --stop) stop=1; shift ;;
        *) echo "unknown option $1" >&2; exit 2 ;;
    esac
done
if [ -f "$dir/pids" ]; then
    while read -r pid; do kill "$pid" 2>/dev/null || true; done < "$dir/pids"
    rm -f "$dir/pids"
    sleep 0.3
fi
[ "$stop" = 1 ] && exit 0
# Absolute, but not through realpath: Debian's /usr/bin/redis-server is a link to
# redis-check-rdb, which picks its mode from the name it is run under.
case $server in /*) ;; *) server=$PWD/$server ;; esac
mkdir -p "$dir"
addrs=()
for i in $(seq 0 $((nodes - 1))); do
    port=$((base + i))
    mkdir -p "$dir/$port"
    rm -f "$dir/$port/nodes.conf" "$dir/$port/dump.rdb"
    # exec: the pid recorded is the server's, and no shell keeps this script's output open.
    (cd "$dir/$port" && exec "$server" --port "$port" --cluster-enabled yes --cluster-node-timeout "$node_timeout" \
        --repl-diskless-sync-delay 0 --save "" --appendonly no --logfile "$dir/$port/log") >/dev/null 2>&1 &
    echo $! >> "$dir/pids"
    addrs+=("127.0.0.1:$port")
done
for i in $(seq 0 $((nodes - 1))); do
    for _ in $(seq 50); do redis-cli -p $((base + i)) ping >/dev/null 2>&1 && break; sleep 0.1; done
done
redis-cli --cluster create "${addrs[@]}" --cluster-replicas "$replicas" --cluster-yes
# Replicas need their first sync before the check sees them settled.
sleep 1
redis-cli --cluster check "127.0.0.1:$base"
