#!/usr/bin/env bash
# usage: 2026-12-02-drain-ab.sh BROKER_BIN PARTS PREFILL MAXSECS [explain]
# One group drain (queen-bench drain --spread) on a private PostgreSQL and a fresh broker;
# SQL_OVERRIDE=<file> is applied with psql -f after boot (A/B of sql/functions/*.sql
# without a rebuild); "explain" then logs auto_explain plans of queen.pop_candidates
# to /tmp/drain-exp/pg.log. Run under flock /tmp/bench.lock; it stops what it starts.
set -euo pipefail
BENCH_DIR=$(cd "$(dirname "$0")/.." && pwd)
source "$BENCH_DIR/lib.sh"
WORKERS=2; POOL=8
TMP=$(mktemp -d /tmp/queen-drainexp.XXXXXX); chmod 755 "$TMP"
trap bench_cleanup EXIT
pg_start
broker_start "$1"
[ -n "${SQL_OVERRIDE:-}" ] && "${PSQL[@]}" -d queen -f "$SQL_OVERRIDE"
checkpoint
{ /tmp/target-bench/release/queen-bench drain --consumer-group scale --prefill "$3" --spread --batch 100 --conns 10 --max-secs "$4" --partitions "$2" --url "$URL" --pid "$BROKER_PID" --pg-pid "$PGPID" --json || true; } | python3 -c 'import json,sys
for l in sys.stdin:
  if l.startswith("{"):
    r=json.loads(l); print("RESULT", r.get("params",{}).get("partitions"), round(r.get("msg_per_s") or 0), "errors", r.get("errors"), "verify", r.get("verify"))'
if [ "${5:-}" = explain ]; then
  "${PSQL[@]}" -d queen -c "select count(*) from queen.messages" 
  "${PSQL[@]}" -d queen -c "\timing on" -c "select count(*) from queen.pop_candidates((select array_agg(id) from queen.queues where name like '%drain%'), null, 'scale', now(), 12)" -c "select count(*) from queen.pop_candidates((select array_agg(id) from queen.queues where name like '%drain%'), null, 'scale', now(), 12)" -c "select count(*) from queen.pop_candidates((select array_agg(id) from queen.queues where name like '%drain%'), null, 'scale', now(), 12)"
fi
if [ "${5:-}" = explain ]; then
  "${PSQL[@]}" -d queen -c "LOAD 'auto_explain'" -c "SET auto_explain.log_min_duration=0" -c "SET auto_explain.log_nested_statements=on" -c "SET auto_explain.log_analyze=on" -c "select count(*) from queen.pop_candidates((select array_agg(id) from queen.queues where name like '%drain%'), null, 'scale', now(), 12)" -c "select count(*) from queen.pop_candidates((select array_agg(id) from queen.queues where name like '%drain%'), null, 'scale', now(), 12)" >/dev/null
  mkdir -p /tmp/drain-exp && cp "$TMP/pg.log" /tmp/drain-exp/pg.log
fi
