#!/usr/bin/env bash
# usage: 2026-12-04-idle-pops.sh BROKER_BIN
# A consumer group drains 20,000 messages spread over 10,000 partitions, then 8 clients
# pop the empty queue without waiting (wait=false, batch 100, partitions 16) for 10 s:
# empty pops answered and PostgreSQL CPU seconds spent, then the deep-sweep counters.
set -euo pipefail
BENCH_DIR=$(cd "$(dirname "$0")/.." && pwd)
source "$BENCH_DIR/lib.sh"
WORKERS=2; POOL=8
TMP=$(mktemp -d /tmp/queen-idle.XXXXXX); chmod 755 "$TMP"
trap bench_cleanup EXIT
pg_start
broker_start "$1"
/tmp/target-bench/release/queen-bench --url "$URL" --pid "$BROKER_PID" drain --consumer-group scale --prefill 20000 --spread --batch 100 --conns 10 --claim 16 --partitions 10000 > $TMP/drain.txt 2>&1; head -1 $TMP/drain.txt
Q=$(curl -s "$URL/api/v1/resources/queues" | python3 -c 'import json,sys; d=json.load(sys.stdin); q=d if isinstance(d,list) else d.get("queues",d); print(q[0]["name"])')
pgcpu() { ps -u postgres -o times= | awk '{s+=$1} END {print s}'; }
c0=$(pgcpu)
pids=()
for w in 1 2 3 4 5 6 7 8; do
  ( end=$((SECONDS+10)); n=0; while [ $SECONDS -lt $end ]; do curl -s -o /dev/null "$URL/api/v1/pop/queue/$Q?batch=100&partitions=16&consumerGroup=scale&wait=false"; n=$((n+1)); done; echo $n ) > "$TMP/n$w" &
  pids+=($!)
done
for p in "${pids[@]}"; do wait "$p"; done
c1=$(pgcpu)
echo "empty pops in 10 s: $(cat $TMP/n* | awk '{s+=$1} END {print s}'), PostgreSQL CPU s: $((c1-c0))"
curl -s "$URL/metrics/prometheus" | grep -E "^queen_shard_pop_deep_sweeps" | awk '{print $1, $2}'
