#!/usr/bin/env bash
# bench/history/2026-12-06-latency10k-ab.sh: builds (or one build under other
# environments) side by side on compare.sh's 10,000 msg/s latency scenario
# (16 producers of b10, 4 long-polling consumers, 10 partitions), one private
# PostgreSQL, a fresh database and broker per run, rounds interleaved (the
# order flips each round). Prints per run e2e and request latency, broker and
# PostgreSQL CPU, and PostgreSQL's WAL counters; raw JSON beside OUTF.
#
#   CONFIGS="base=/tmp/queen-a head=/tmp/queen-b" ROUNDS=3 bench/history/2026-12-06-latency10k-ab.sh
#   CONFIGS="p2=/tmp/q:SOME_VAR=2 p1=/tmp/q:SOME_VAR=1" ...   (VAR=value pairs for the broker)
#
# Environment: DB_POOL_SIZE (20), RATE (10000), PRODUCERS (16), DUR (10),
# OUTF (/tmp/latency10k-ab.out), QB (queen-bench); PG_EXTRA_OPTS="-c track_wal_io_timing=on"
# fills the WAL sync and write times. Session 22 (issue 18) used it
# for the prepared statements, the typed ack and the small-queue pop.
set -euo pipefail
BENCH_DIR=$(cd "$(dirname "$0")/.." && pwd)
REPO=$(dirname "$BENCH_DIR")
source "$BENCH_DIR/lib.sh"
QB=${QB:-/tmp/target-bench/release/queen-bench}
WORKERS=2; POOL=${DB_POOL_SIZE:-20}
TMP=$(mktemp -d /tmp/queen-ab.XXXXXX); chmod 755 "$TMP"
trap bench_cleanup EXIT
pg_start
OUTF=${OUTF:-/tmp/latency10k-ab.out}; : > $OUTF
for r in $(seq 1 ${ROUNDS:-3}); do
  cfgs=($CONFIGS); [ $((r % 2)) = 0 ] && cfgs=($(printf '%s\n' "${cfgs[@]}" | tac))
  for c in "${cfgs[@]}"; do
    name=${c%%=*}; rest=${c#*=}; bin=${rest%%:*}; envs=""; [ "$rest" != "$bin" ] && envs=${rest#*:}
    fresh_db
    IFS=, read -ra kvs <<< "$envs"; for kv in "${kvs[@]}"; do export "$kv"; done
    broker_start "$bin" >/dev/null 2>&1 || exit 1
    for kv in "${kvs[@]}"; do unset "${kv%%=*}"; done
    "${PSQL[@]}" -d queen -c "SELECT pg_stat_reset_shared('wal')" >/dev/null
    "$QB" --url "$URL" --pid "$BROKER_PID" --pg-pid "$PGPID" --json --label "$name" latency --rate ${RATE:-10000} --batch 10 --producers ${PRODUCERS:-16} --consumers 4 --partitions 10 --duration ${DUR:-10} --warmup 2 >"$TMP/lat.json" 2>"$TMP/lat.err" || { cat $TMP/lat.err; }
    "${PSQL[@]}" -d queen -F ' ' -Atc "SELECT 'wal: records', wal_records, 'fpi', wal_fpi, 'MB', round(wal_bytes/1e6), 'syncs', wal_sync, 'sync_ms', round((wal_sync_time/greatest(wal_sync,1))::numeric,3), 'writes', wal_write, 'write_ms', round((wal_write_time/greatest(wal_write,1))::numeric,3) FROM pg_stat_wal" | tee -a $OUTF
    cat $TMP/lat.json >> ${OUTF%.out}.jsonl
    python3 -c "
import json,sys
d=[json.loads(l) for l in open('$TMP/lat.json') if l.startswith('{')][-1]
e=d['e2e_latency']; q=d['req_latency']; a=d.get('ack_latency') or {}
print('%-8s'%'$name', 'r$r', 'e2e p50 %5.1f p99 %5.1f | push p50 %4.1f p99 %4.1f | ack p50 %4.1f | acks %d | broker %3.0f%% pg %3.0f%% | lost %d err %s' % (e['p50_ms'],e['p99_ms'],q['p50_ms'],q['p99_ms'],a.get('p50_ms',0),a.get('count',0),d['proc']['broker_cpu_pct'],d['proc']['pg_cpu_pct'] or 0,d['verify']['lost'],sum(v for k,v in d['errors'].items() if k!='samples')))
" | tee -a $OUTF
    broker_stop
  done
done
