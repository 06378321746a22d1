#!/usr/bin/env bash
# bench/proxy.sh: the broker direct and through queen-proxy, side by side in one run.
#
# Targets (issue 16): through the proxy, push b100 c50 keeps at least 85% of the
# direct throughput, and a b1 push (c1, so the figure is the round trip) adds
# under 0.3 ms to the p50. Starts a private PostgreSQL and a broker (bench/lib.sh),
# bootstraps a cluster in schema queen_proxy of the same PostgreSQL, issues a key,
# starts the proxy (QUEEN_PROXY_DEFAULT_CLUSTER, plaintext) and runs each scenario
# direct then proxied, RUNS times interleaved. Prints the medians and the two
# verdicts; raw JSON lines go to bench/results/<date>-<commit>-proxy.jsonl.
#
#   bench/proxy.sh            # 3 rounds, 10 s windows (~3 min on 2 cores)
#   bench/proxy.sh --quick    # 1 round, 3 s windows: a smoke test
#   bench/proxy.sh --no-build # use binaries already built
#
# Environment as bench/run.sh: NUM_WORKERS (2, also the proxy's shards),
# DB_POOL_SIZE (8), BROKER_TARGET_DIR (<repo>/target), BENCH_TARGET_DIR.
# Must run as root (PostgreSQL runs as user postgres). Run it on a quiet machine.
set -euo pipefail

QUICK=0
RUNS=3
BUILD=1
while [ $# -gt 0 ]; do
    case "$1" in
        --quick) QUICK=1; RUNS=1 ;;
        --runs) RUNS="$2"; shift ;;
        --no-build) BUILD=0 ;;
        -h|--help) sed -n '2,18p' "$0"; exit 0 ;;
        *) echo "proxy.sh: unknown option $1" >&2; exit 1 ;;
    esac
    shift
done

BENCH_DIR=$(cd "$(dirname "$0")" && pwd)
REPO=$(dirname "$BENCH_DIR")
BENCH_TARGET=${BENCH_TARGET_DIR:-/tmp/target-bench}
BROKER_TARGET=${BROKER_TARGET_DIR:-$REPO/target}
WORKERS=${NUM_WORKERS:-2}
POOL=${DB_POOL_SIZE:-8}
if [ "$QUICK" = 1 ]; then DUR=3; WARM=1; else DUR=10; WARM=2; fi

source "$BENCH_DIR/lib.sh"
log() { bench_log "$@"; }

COMMIT=$(git -C "$REPO" rev-parse --short HEAD 2>/dev/null || echo nocommit)
mkdir -p "$BENCH_DIR/results"
JSONL="$BENCH_DIR/results/$(date +%F)-$COMMIT-proxy$([ "$QUICK" = 1 ] && echo -quick || true).jsonl"
: > "$JSONL"

TMP=$(mktemp -d /tmp/queen-bench.XXXXXX)
chmod 755 "$TMP"
PROXY_PID=""
cleanup() {
    if [ -n "$PROXY_PID" ]; then kill "$PROXY_PID" 2>/dev/null; wait "$PROXY_PID" 2>/dev/null || true; fi
    bench_cleanup
}
trap cleanup EXIT

QB="$BENCH_TARGET/release/queen-bench"
if [ "$BUILD" = 1 ]; then
    (cd "$REPO" && cargo build --release --workspace --bins --quiet)
    (cd "$BENCH_DIR" && CARGO_TARGET_DIR="$BENCH_TARGET" cargo build --release --quiet --bins)
fi
PROXY_BIN="$BROKER_TARGET/release/queen-proxy"

pg_start
broker_start "$BROKER_TARGET/release/queen"
DIRECT=$URL

export PXDB_HOST=127.0.0.1 PXDB_PORT="$PGPORT" PXDB_USER=postgres PXDB_PASSWORD=postgres PXDB_DB=queen
"$PROXY_BIN" admin bootstrap --tenant bench --cluster bench --broker-url "$DIRECT" >/dev/null
KEY=$("$PROXY_BIN" admin issue-key --cluster bench --scopes produce,consume,read,admin \
    | python3 -c 'import json,sys; print(json.load(sys.stdin)["key"])')
PPORT=$(free_port)
QUEEN_PROXY_BIND_ADDR=127.0.0.1 QUEEN_PROXY_PORT="$PPORT" QUEEN_PROXY_NUM_WORKERS="$WORKERS" \
    QUEEN_PROXY_DEFAULT_CLUSTER=bench LOG_LEVEL=warn "$PROXY_BIN" >"$TMP/proxy.log" 2>&1 &
PROXY_PID=$!
# loadgen sends the userinfo of the URL as a bearer token.
PROXIED="http://$KEY@127.0.0.1:$PPORT"
for _ in $(seq 1 100); do
    code=$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $KEY" \
        "http://127.0.0.1:$PPORT/api/v1/resources/queues" || true)
    [ "$code" = 200 ] && break
    sleep 0.1
done
[ "$code" = 200 ] || { tail -20 "$TMP/proxy.log" >&2; exit 1; }

run() { # label url args...
    local label=$1 url=$2; shift 2
    checkpoint
    "$QB" --url "$url" --pid "$BROKER_PID" --pg-pid "$PGPID" --json push --label "$label" \
        --duration "$DUR" --warmup "$WARM" --payload-bytes 100 "$@" >>"$JSONL"
}
for r in $(seq 1 "$RUNS"); do
    log "round $r of $RUNS"
    for via in direct proxied; do
        url=$([ "$via" = direct ] && echo "$DIRECT" || echo "$PROXIED")
        run "$via-b100" "$url" --batch 100 --conns 50 --partitions 1
        run "$via-b1" "$url" --batch 1 --conns 1 --partitions 1
    done
done

python3 - "$JSONL" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
def med(label, f):
    v = [f(r) for r in rows if r.get("label") == label]
    return statistics.median(v) if v else float("nan")
tput = lambda r: r.get("msg_per_s", 0.0)
p50 = lambda r: r.get("req_latency", {}).get("p50_ms", float("nan"))
d100, p100 = med("direct-b100", tput), med("proxied-b100", tput)
d1, p1 = med("direct-b1", p50), med("proxied-b1", p50)
print(f"push b100 c50: direct {d100:,.0f} msg/s, proxied {p100:,.0f} msg/s, ratio {p100 / d100:.1%} (target >= 85%): {'met' if p100 >= 0.85 * d100 else 'NOT met'}")
print(f"push b1 p50: direct {d1:.3f} ms, proxied {p1:.3f} ms, added {p1 - d1:.3f} ms (target < 0.3 ms): {'met' if p1 - d1 < 0.3 else 'NOT met'}")
PY
