# bench/lib.sh: what run.sh and compare.sh share (sourced, not run).
#
# A private PostgreSQL in a temp dir on a free loopback port, started as user
# postgres (initdb and postgres refuse root), with the settings the yardstick
# used (synchronous_commit=on, shared_buffers=4GB, max_connections=200), and
# a broker process started against it. Callers set TMP (a temp dir) first and
# call bench_cleanup from their EXIT trap.

bench_log() { echo "[${0##*/} $(date +%T)] $*" >&2; }

# A TCP port on 127.0.0.1 nobody listens on.
free_port() {
    local p
    for _ in $(seq 1 200); do
        p=$(( 20000 + RANDOM % 30000 ))
        if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
            echo "$p"
            return 0
        fi
    done
    return 1
}

PGBIN=$(dirname "$(command -v pg_ctl 2>/dev/null || ls -d /usr/lib/postgresql/*/bin/pg_ctl | sort -V | tail -1)")
BROKER_PID=""

# Starts PostgreSQL in $TMP/pgdata and creates database `queen`; PG_EXTRA_OPTS
# (optional) is appended to the server options (e.g. shared_preload_libraries).
# Sets PGDATA, PGPORT, PGPID, PSQL (array), PGVER.
pg_start() {
    PGDATA="$TMP/pgdata"
    PGPORT=$(free_port)
    chown postgres "$TMP"
    bench_log "initdb in $PGDATA, port $PGPORT"
    runuser -u postgres -- "$PGBIN/initdb" -D "$PGDATA" -U postgres --auth=trust -E UTF8 >"$TMP/initdb.log" 2>&1 \
        || { cat "$TMP/initdb.log" >&2; exit 1; }
    runuser -u postgres -- "$PGBIN/pg_ctl" -D "$PGDATA" -l "$TMP/pg.log" -w -t 60 \
        -o "-c port=$PGPORT -c listen_addresses=127.0.0.1 -c unix_socket_directories=$TMP \
            -c shared_buffers=4GB -c synchronous_commit=on -c max_connections=200 ${PG_EXTRA_OPTS:-}" start >/dev/null \
        || { cat "$TMP/pg.log" >&2; exit 1; }
    PGPID=$(head -1 "$PGDATA/postmaster.pid")
    PSQL=(psql -h 127.0.0.1 -p "$PGPORT" -U postgres -qAtX)
    "${PSQL[@]}" -d postgres -c "CREATE DATABASE queen"
    PGVER=$("${PSQL[@]}" -d queen -c "SHOW server_version")
}

# Drops and re-creates the database `queen` (the broker's schema is applied
# again at its next boot), so that a round starts from empty tables.
fresh_db() {
    "${PSQL[@]}" -d postgres -c "DROP DATABASE IF EXISTS queen WITH (FORCE)" -c "CREATE DATABASE queen"
}

# Flushes dirty pages so one scenario's writes do not slow the next.
checkpoint() { "${PSQL[@]}" -d queen -c CHECKPOINT >/dev/null 2>&1 || true; }

# Starts broker binary $1 (NUM_WORKERS=$WORKERS, DB_POOL_SIZE=$POOL) and waits
# until /health answers. Sets BROKER_PID and URL; returns 1 (broker stopped,
# last log lines shown) when it never became healthy.
broker_start() {
    local bin=$1 bport mport attempt
    mkdir -p "$TMP/spool"
    # A port free_port found unbound can still be taken before the broker binds
    # it (a load generator's outgoing connection gets ephemeral ports from the
    # same range): that one failure is retried on other ports.
    for attempt in 1 2 3; do
        bport=$(free_port)
        mport=$(free_port)
        bench_log "starting $bin on 127.0.0.1:$bport (NUM_WORKERS=$WORKERS DB_POOL_SIZE=$POOL)"
        env PG_HOST=127.0.0.1 PG_PORT="$PGPORT" PG_USER=postgres PG_PASSWORD=postgres PG_DB=queen \
            PORT="$bport" QUEEN_BIND_ADDR=127.0.0.1 QUEEN_MESH_PORT="$mport" QUEEN_UDP_NOTIFY_PORT="$mport" \
            NUM_WORKERS="$WORKERS" DB_POOL_SIZE="$POOL" FILE_BUFFER_DIR="$TMP/spool" LOG_LEVEL=warn \
            "$bin" >"$TMP/broker.log" 2>&1 &
        BROKER_PID=$!
        URL="http://127.0.0.1:$bport"
        for _ in $(seq 1 600); do
            curl -sf "$URL/health" >/dev/null 2>&1 && return 0
            kill -0 "$BROKER_PID" 2>/dev/null || break
            sleep 0.1
        done
        if [ "$attempt" -lt 3 ] && grep -q "Address already in use" "$TMP/broker.log"; then
            bench_log "port taken before the broker bound it (attempt $attempt); other ports"
            broker_stop
            continue
        fi
        break
    done
    bench_log "broker did not become healthy; last log lines:"
    tail -20 "$TMP/broker.log" >&2
    broker_stop
    return 1
}

# Stops the broker started by broker_start (SIGTERM, then waits).
broker_stop() {
    if [ -n "$BROKER_PID" ] && kill -0 "$BROKER_PID" 2>/dev/null; then
        kill "$BROKER_PID"
        wait "$BROKER_PID" 2>/dev/null || true
    fi
    BROKER_PID=""
}

# EXIT trap body: broker and PostgreSQL down, temp dir gone.
bench_cleanup() {
    set +e
    broker_stop
    if [ -f "$TMP/pgdata/postmaster.pid" ]; then
        runuser -u postgres -- "$PGBIN/pg_ctl" -D "$TMP/pgdata" -m fast -w stop >/dev/null 2>&1
    fi
    rm -rf "$TMP"
}
