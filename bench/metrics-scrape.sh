#!/usr/bin/env bash
# bench/metrics-scrape.sh — how long GET /metrics/prometheus takes with many queues
# (issue 7: 10,000 queues under 200 ms). Starts a private cluster and the broker
# (QUEEN_BIN, default target/release/queen), creates NQUEUES queues (default 10000)
# with one partition and 3 messages each (one consumer cursor on half of them), then
# times a cold scrape (DB snapshot refreshed) and warm scrapes (cached snapshot).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BIN=${QUEEN_BIN:-${CARGO_TARGET_DIR:-$ROOT/target}/release/queen}
N=${NQUEUES:-10000}
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'; }
TMP=$(mktemp -d /tmp/queen-mbench.XXXXXX); chmod 755 "$TMP"
PID=""
cleanup() { [[ -n "$PID" ]] && kill -TERM "$PID" 2>/dev/null && wait "$PID" 2>/dev/null; "$ROOT/tools/pg.sh" stop "$TMP/pg" >/dev/null 2>&1 || true; rm -rf "$TMP"; }
trap cleanup EXIT
pgport=$(free_port); port=$(free_port)
"$ROOT/tools/pg.sh" start "$TMP/pg" "$pgport" >/dev/null
PG_HOST=127.0.0.1 PG_PORT=$pgport PG_USER=postgres PG_PASSWORD=postgres PG_DB=postgres PORT=$port \
    QUEEN_BIND_ADDR=127.0.0.1 FILE_BUFFER_DIR="$TMP/spool" "$BIN" >"$TMP/broker.log" 2>&1 </dev/null &
PID=$!
for _ in $(seq 1 120); do python3 -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:$port/health', timeout=2)" 2>/dev/null && break; sleep 0.5; done
PSQL=(runuser -u postgres -- psql -q -h 127.0.0.1 -p "$pgport" -U postgres -d postgres -v ON_ERROR_STOP=1)
[[ $(id -u) -eq 0 ]] || PSQL=("${PSQL[@]:3}")
"${PSQL[@]}" <<SQL
INSERT INTO queen.queues (name) SELECT 'q' || lpad(i::text, 6, '0') FROM generate_series(1, $N) i;
INSERT INTO queen.partitions (queue_id) SELECT id FROM queen.queues;
INSERT INTO queen.messages (id, transaction_id, partition_id, payload, created_at)
  SELECT gen_random_uuid(), 't' || k, p.id, '{}'::jsonb, now() - (k || ' seconds')::interval
    FROM queen.partitions p, generate_series(1, 3) k;
INSERT INTO queen.partition_lookup (partition_id, queue_id, last_message_id, last_message_created_at)
  SELECT p.id, p.queue_id, m.id, m.created_at FROM queen.partitions p
    JOIN LATERAL (SELECT id, created_at FROM queen.messages WHERE partition_id = p.id
                  ORDER BY created_at DESC LIMIT 1) m ON true;
INSERT INTO queen.partition_consumers (partition_id, last_consumed_id, last_consumed_created_at)
  SELECT p.id, m.id, m.created_at FROM queen.partitions p
    JOIN LATERAL (SELECT id, created_at FROM queen.messages WHERE partition_id = p.id
                  ORDER BY created_at LIMIT 1) m ON true
   WHERE p.queue_id IN (SELECT id FROM queen.queues ORDER BY name LIMIT $N / 2);
ANALYZE;
SQL
# The background refresh behind the cache: the SQL function alone, warm.
"${PSQL[@]}" -c "SELECT queen.metrics_snapshot('{}')" >/dev/null
t0=$(date +%s%N); "${PSQL[@]}" -c "SELECT queen.metrics_snapshot('{}')" >/dev/null; t1=$(date +%s%N)
echo "snapshot_sql_ms=$(( (t1 - t0) / 1000000 )) (psql round trip included; runs in the background every 5 s per shard)"
sleep 6 # past CACHE_TTL: the next scrape serves the stale copy and refreshes behind it
python3 - "$port" "$N" <<'PY'
import sys, time, urllib.request
port, n = sys.argv[1], int(sys.argv[2])
def scrape():
    t = time.perf_counter()
    body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics/prometheus", timeout=30).read()
    return (time.perf_counter() - t) * 1000, body
# A snapshot taken before the queues existed is served until a refresh lands.
t0 = time.perf_counter()
while True:
    first, body = scrape()
    if body.count(b'queen_queue_push_messages_per_minute{queue="') == n:
        break
    assert time.perf_counter() - t0 < 30, "the refresh never listed every queue"
    time.sleep(0.2)
warm = sorted(scrape()[0] for _ in range(20))
print(f"queues={n} bytes={len(body)} scrape_ms_median={warm[10]:.1f} scrape_ms_max={warm[-1]:.1f} "
      f"fresh_after_s={time.perf_counter() - t0:.1f}")
PY
