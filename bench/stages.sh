#!/usr/bin/env bash
# bench/stages.sh: where a message's time goes on the push -> wake -> pop path
# (issue 18: "trace one message ... and remove the waits").
#
# Runs the compare's latency scenario (1,000 msg/s offered, pushes of 10,
# 4 producers + 4 long-polling consumers over 10 partitions) against a fresh
# broker on a private PostgreSQL, then reads the broker's own per-stage
# histograms (`queen_stage_duration_seconds`, src/metrics/stages.rs) and
# prints, per stage, the count, the mean and the p50/p90 read off the buckets
# (linear within a bucket), beside the load generator's e2e and request
# figures.
#
#   BROKER_BIN=target/release/queen bench/stages.sh [RATE] [BATCH]
#
# Environment: NUM_WORKERS (2), DB_POOL_SIZE (8), DUR (10), WARM (2), PRODUCERS and
# CONSUMERS (4 each; 10,000 msg/s of b10 needs ~16 producers), QB
# (queen-bench, built by run.sh into BENCH_TARGET_DIR), EXTRA_ENV (more VAR=value for the broker), STATEMENTS=1
# (also PostgreSQL's own time per top-level statement, from pg_stat_statements:
# a stage's round trip minus its statement is commit, protocol and waiting).
# WAITS=1 (also samples pg_stat_activity every 10 ms for 6 s during the load:
# what PostgreSQL's client backends were doing, by statement). Quiet box only.
set -euo pipefail

BENCH_DIR=$(cd "$(dirname "$0")" && pwd)
REPO=$(dirname "$BENCH_DIR")
source "$BENCH_DIR/lib.sh"
WORKERS=${NUM_WORKERS:-2}
POOL=${DB_POOL_SIZE:-8}
DUR=${DUR:-10}
WARM=${WARM:-2}
RATE=${1:-1000}
BATCH=${2:-10}
BROKER_BIN=${BROKER_BIN:-$REPO/target/release/queen}
QB=${QB:-${BENCH_TARGET_DIR:-/tmp/target-bench}/release/queen-bench}
# shellcheck disable=SC2086
[ -n "${EXTRA_ENV:-}" ] && export ${EXTRA_ENV?}

TMP=$(mktemp -d /tmp/queen-stages.XXXXXX)
chmod 755 "$TMP"
trap bench_cleanup EXIT
[ "${STATEMENTS:-0}" = 1 ] &&
    PG_EXTRA_OPTS="-c shared_preload_libraries=pg_stat_statements -c pg_stat_statements.track=top -c track_wal_io_timing=on"
pg_start
broker_start "$BROKER_BIN"
if [ "${STATEMENTS:-0}" = 1 ]; then
    "${PSQL[@]}" -d queen -c "CREATE EXTENSION IF NOT EXISTS pg_stat_statements" >/dev/null
fi
if [ "${WAITS:-0}" = 1 ]; then
    (sleep "$WARM"; "${PSQL[@]}" -d queen -At >"$TMP/waits.txt" 2>/dev/null <<'SQL'
CREATE TEMP TABLE s(w text);
DO $$ BEGIN FOR i IN 1..600 LOOP
  PERFORM pg_stat_clear_snapshot();
  INSERT INTO s SELECT coalesce(wait_event_type, 'CPU') || ':' || coalesce(wait_event, '-') || ' ' ||
         CASE WHEN query LIKE '%ack_typed%' THEN 'ack' WHEN query LIKE '%push_typed%' THEN 'push'
              WHEN query LIKE '%pop_compact%' THEN 'pop' ELSE 'other' END
    FROM pg_stat_activity
   WHERE state = 'active' AND pid <> pg_backend_pid() AND backend_type = 'client backend';
  PERFORM pg_sleep(0.01);
END LOOP; END $$;
SELECT count(*) || ' ' || w FROM s GROUP BY w ORDER BY count(*) DESC;
SQL
    ) &
    WAITS_PID=$!
fi
"$QB" --url "$URL" --pid "$BROKER_PID" --pg-pid "$PGPID" --json latency --rate "$RATE" \
    --batch "$BATCH" --producers "${PRODUCERS:-4}" --consumers "${CONSUMERS:-4}" --partitions 10 --duration "$DUR" --warmup "$WARM" \
    >"$TMP/latency.json"
curl -sf "$URL/metrics/prometheus" >"$TMP/metrics.txt"
python3 - "$TMP/latency.json" "$TMP/metrics.txt" <<'PY'
import json, re, sys
rep = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
def g(k):
    v = rep
    for p in k.split('.'):
        v = (v or {}).get(p)
    return v
print(f"loadgen: {g('msg_per_s'):.0f} msg/s, req p50 {g('req_latency.p50_ms')} ms, "
      f"e2e p50 {g('e2e_latency.p50_ms')} ms, e2e p99 {g('e2e_latency.p99_ms')} ms")
h = {}
for line in open(sys.argv[2]):
    m = re.match(r'queen_stage_duration_seconds_(bucket|sum|count)\{stage="(\w+)"(?:,le="([^"]+)")?\} (\S+)', line)
    if not m:
        continue
    kind, st, le, v = m.groups()
    d = h.setdefault(st, {"b": []})
    if kind == "bucket":
        d["b"].append((float("inf") if le == "+Inf" else float(le), float(v)))
    else:
        d[kind] = float(v)
def q(b, n, f):
    want, lo, prev = n * f, 0.0, 0.0
    for le, c in b:
        if c >= want:
            if le == float("inf"):
                return lo
            return lo + (le - lo) * ((want - prev) / max(c - prev, 1e-9))
        lo, prev = le, c
    return lo
print("| stage | count | mean ms | p50 ms | p90 ms |")
print("|---|---|---|---|---|")
for st, d in h.items():
    n = d.get("count", 0)
    if not n:
        continue
    print(f"| {st} | {n:.0f} | {1e3 * d['sum'] / n:.3f} | {1e3 * q(d['b'], n, .5):.3f} | {1e3 * q(d['b'], n, .9):.3f} |")
PY
if [ "${STATEMENTS:-0}" = 1 ]; then
    echo "PostgreSQL, top-level statements by total time (mean and max ms per call):"
    "${PSQL[@]}" -d queen -F ' | ' -Atc "
    SELECT calls, round(mean_exec_time::numeric, 3), round(max_exec_time::numeric, 2),
           regexp_replace(left(query, 90), '\s+', ' ', 'g')
      FROM pg_stat_statements ORDER BY total_exec_time DESC LIMIT 8"
    echo "WAL: flushes, mean flush ms, writes (the whole run):"
    "${PSQL[@]}" -d queen -F ' | ' -Atc "
    SELECT wal_sync, round((wal_sync_time / greatest(wal_sync, 1))::numeric, 3), wal_write
      FROM pg_stat_wal"
fi
if [ "${WAITS:-0}" = 1 ]; then
    wait "$WAITS_PID"
    echo "PostgreSQL client backends, samples by wait event and statement:"
    grep -vE '^(CREATE|DO)' "$TMP/waits.txt" || true
fi
