#!/usr/bin/env bash
# bench/history/2026-12-06-auto-explain.sh: one scenario with PostgreSQL's
# auto_explain logging the plans of nested statements (a SAMPLE share of those
# over MINDUR ms; ANALYZE=1 adds actual times and buffers); the server log is
# copied to OUT (/tmp/auto-explain-pg.log).
#   SCENARIO=latency (default): RATE msg/s as pushes of 10 from PRODUCERS, 4
#     consumers, 10 partitions. Session 22 found with it that every ack read the
#     whole of a young queen.messages (a generic plan made while the table was
#     empty): grep -c "Seq Scan on messages" OUT.
#   SCENARIO=drain: scale.sh's group drain (pop b100 + ack, 10 conns, PREFILL
#     messages --spread over PARTS partitions, pop partitions=CLAIM). Session 23
#     found with it (ANALYZE=1 MINDUR=5) that an ack probed its consumer rows by
#     group over 10,000 partitions.
#
#   BIN=target/release/queen RATE=1000 PRODUCERS=4 bench/history/2026-12-06-auto-explain.sh
#   BIN=target/release/queen SCENARIO=drain PARTS=10000 ANALYZE=1 MINDUR=5 bench/history/2026-12-06-auto-explain.sh
set -euo pipefail
BENCH_DIR=$(cd "$(dirname "$0")/.." && pwd)
source "$BENCH_DIR/lib.sh"
QB=${QB:-/tmp/target-bench/release/queen-bench}
WORKERS=2; POOL=${DB_POOL_SIZE:-20}
TMP=$(mktemp -d /tmp/queen-ae.XXXXXX); chmod 755 "$TMP"
trap 'cp $TMP/pg.log "${OUT:-/tmp/auto-explain-pg.log}"; bench_cleanup' EXIT
PG_EXTRA_OPTS="-c shared_preload_libraries=auto_explain -c auto_explain.log_min_duration=${MINDUR:-0.4} -c auto_explain.log_nested_statements=on -c auto_explain.sample_rate=${SAMPLE:-0.05}"
[ "${ANALYZE:-0}" = 1 ] && PG_EXTRA_OPTS+=" -c auto_explain.log_analyze=on -c auto_explain.log_buffers=on"
pg_start
broker_start ${BIN:-target/release/queen} >/dev/null 2>&1
case ${SCENARIO:-latency} in
latency)
    "$QB" --url "$URL" --pid "$BROKER_PID" --pg-pid "$PGPID" latency --rate ${RATE:-1000} --batch 10 \
        --producers ${PRODUCERS:-4} --consumers 4 --partitions 10 --duration 10 --warmup 2 2>&1 | head -3 ;;
drain)
    "$QB" drain --consumer-group scale --prefill "${PREFILL:-200000}" --spread --batch 100 --conns 10 \
        --claim "${CLAIM:-16}" --max-secs 120 --partitions "${PARTS:-10000}" \
        --url "$URL" --pid "$BROKER_PID" --pg-pid "$PGPID" | grep -v '^{' || true ;;
*) bench_log "SCENARIO must be latency or drain"; exit 2 ;;
esac
