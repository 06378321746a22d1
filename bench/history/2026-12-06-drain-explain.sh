#!/usr/bin/env bash
# bench/history/2026-12-06-drain-explain.sh: one group drain (as scale.sh's:
# pop b100 + ack, 10 conns, --spread over PARTS partitions, pop partitions=CLAIM)
# with PostgreSQL's auto_explain logging, with actual times, the nested
# statements over MINDUR ms (a SAMPLE share of them). The server log is copied
# to OUT (/tmp/drain-explain-pg.log). Session 23 used it to find where a
# 10,000-partition drain's ack time went.
#
#   BIN=target/release/queen PARTS=10000 CLAIM=16 bench/history/2026-12-06-drain-explain.sh
set -euo pipefail
BENCH_DIR=$(cd "$(dirname "$0")/.." && pwd)
source "$BENCH_DIR/lib.sh"
QB=${QB:-/tmp/target-bench/release/queen-bench}
WORKERS=2; POOL=${DB_POOL_SIZE:-8}
TMP=$(mktemp -d /tmp/queen-de.XXXXXX); chmod 755 "$TMP"
trap 'cp $TMP/pg.log "${OUT:-/tmp/drain-explain-pg.log}"; bench_cleanup' EXIT
PG_EXTRA_OPTS="-c shared_preload_libraries=auto_explain -c auto_explain.log_min_duration=${MINDUR:-5}
 -c auto_explain.log_nested_statements=on -c auto_explain.sample_rate=${SAMPLE:-0.05}
 -c auto_explain.log_analyze=on -c auto_explain.log_buffers=on ${PG_MORE:-}"
PG_EXTRA_OPTS=${PG_EXTRA_OPTS//$'\n'/}
pg_start
broker_start ${BIN:-target/release/queen} >/dev/null 2>&1
"$QB" drain --consumer-group scale --prefill "${PREFILL:-200000}" --spread --batch 100 --conns 10 \
    --claim "${CLAIM:-16}" --max-secs 120 --partitions "${PARTS:-10000}" \
    --url "$URL" --pid "$BROKER_PID" --pg-pid "$PGPID" | grep -v '^{' || true
