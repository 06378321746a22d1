#!/usr/bin/env bash
# bench/history/2026-12-06-wide-drain-stalls.sh BROKER_BIN: N (3) group drains of
# 200,000 messages spread over 100,000 partitions (pop b100 partitions=16 + ack, 10
# conns), each by a new group on its own queue, stopped after IDLE (2) seconds without
# progress; after each, the messages its group has not consumed and their partitions'
# consumer rows (none: never claimed, so not lost but unfound by the pops' sweeps).
# Session 23 used it to tell a stalled tail from a lost lease.
set -euo pipefail
BENCH_DIR=$(cd "$(dirname "$0")/.." && pwd)
source "$BENCH_DIR/lib.sh"
WORKERS=2; POOL=8
TMP=$(mktemp -d /tmp/queen-stall.XXXXXX); chmod 755 "$TMP"
trap bench_cleanup EXIT
pg_start
broker_start "$1" >/dev/null 2>&1
for i in $(seq 1 ${N:-3}); do
/tmp/target-bench/release/queen-bench drain --consumer-group "g$i" --prefill 200000 --spread --batch 100 \
    --conns 10 --claim 16 --max-secs 120 --idle-secs ${IDLE:-2} --partitions 100000 --url "$URL" --pid "$BROKER_PID" \
    --pg-pid "$PGPID" | grep -v '^{' | grep "drain\|verify\|stopped" || true
cat >$TMP/p.sql <<SQL
WITH q AS (SELECT pl.queue_id FROM queen.partition_lookup pl
            ORDER BY pl.last_message_created_at DESC NULLS LAST LIMIT 1)
SELECT m.partition_id, m.created_at, pc.lease_expires_at, pc.last_consumed_created_at
  FROM queen.messages m
  JOIN queen.partition_lookup pl ON pl.partition_id = m.partition_id
                                AND pl.queue_id = (SELECT queue_id FROM q)
  LEFT JOIN queen.partition_consumers pc
         ON pc.partition_id = m.partition_id AND pc.consumer_group = 'g$i'
 WHERE pc.last_consumed_created_at IS NULL
    OR (m.created_at, m.id) > (pc.last_consumed_created_at, pc.last_consumed_id)
 LIMIT 20;
SQL
psql -h 127.0.0.1 -p "$PGPORT" -U postgres -X -d queen -f $TMP/p.sql
done
